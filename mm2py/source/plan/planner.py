"""Driver-side planning of the source connector: which partitions, from where, up to where.

``BatchPlanner`` plans a flow's micro-batches from collaborators, each owning one concept:

- ``TopicCatalogue`` (mm2py.source.plan.catalogue): the mirrored source topics, their remote topics
  made ready on the target, their limits and sizes;
- ``StallBook`` (mm2py.source.plan.stalls): partitions whose last copy stopped short;
- ``BatchSizer`` (mm2py.source.plan.sizing): the byte budget of the next micro-batch;
- ``Offsets`` (mm2py.source.plan.spark_offsets): the Spark offset dict it reads and writes;
- ``RangeMaker`` (mm2py.source.plan.range_maker): the ranges handed to the copy tasks;
- ``share_budget`` (mm2py.source.plan.shares) and ``first_starts`` (mm2py.source.plan.first_starts).

``planner_for`` (mm2py.source.plan.wiring) builds a planner with the real clients; the Spark
adapter (connectors/source.py) calls it on the driver, on first use.
"""

from __future__ import annotations

import time

import structlog

from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError
from mm2py.kafka.admin import Admin
from mm2py.kafka.compacted import ensure_compacted_topic
from mm2py.source.plan.ahead import AheadWork, ahead_delay
from mm2py.source.plan.catalogue import TopicCatalogue
from mm2py.source.plan.first_starts import first_starts
from mm2py.source.plan.listing import OffsetLister
from mm2py.source.plan.range_maker import RangeMaker
from mm2py.source.plan.reset_guard import ResetGuard
from mm2py.source.plan.shares import share_budget
from mm2py.source.plan.sizing import PLANNED_SHARE, BatchSizer, IntervalMeter
from mm2py.source.plan.spark_offsets import Offsets
from mm2py.source.plan.stalls import StallBook
from mm2py.source.provenance import REGISTRY_TOPIC, Provenance, RegistryTail
from mm2py.source.ranges import PartitionRange, tp_key
from mm2py.stores.positions import PositionStore
from mm2py.types import TP

log = structlog.get_logger(__name__)

# Before the first size estimate (or for an empty log) plan as if an offset carried this much.
ASSUMED_BYTES_PER_OFFSET = 512


class BatchPlanner:
    """Plans micro-batches for one flow. Lives in Spark's source runner on the driver.

    Spark calls ``initial_offsets`` (or, with a checkpoint, ``latest_offsets`` straight away),
    ``prepare_available_now`` for a --once run, then per micro-batch ``latest_offsets`` and
    ``ranges`` (sized for the tasks with ``estimated_bytes``). ``store`` is the flow's
    ``PositionStore``: read once per run (``recorded``) and its topic created on ``target`` on
    first use. The constructor does no I/O.

    Invariants:
    - a remote topic exists with at least the source's partition count before a range of it
      is planned: only partitions of the catalogue's topics are planned, after a refresh;
    - ends never pass the source's last stable offset, so only committed data is planned;
    - a partition's first start comes from the position recorded on the target (MM2 format),
      else from ``auto.offset.reset`` (earliest by default, as MM2); either is an exact record
      position (mm2py.source.ranges), never a boundary: no range of this flow copied the batch
      straddling it (an MM2 position, or a log start DeleteRecords moved, can lie inside one);
    - under a byte budget each partition gets a share in proportion to its backlog, at least
      one offset: none starves;
    - a partition whose copy stopped short starts again where it stopped, and one whose recorded
      position lies past Spark's offset (a tailing copy) after that position (mm2py.source.plan.stalls);
    - ``caught_up`` only when the last plan reached every partition's end, or left less than one
      more budget's worth behind (never in a --once run): only then may its copy tasks tail, and
      a tail takes what was left along with what arrives (``idle_ranges`` adds the partitions
      with nothing planned, so every partition of the flow is tailed);
    - a partition gone back (its topic re-created, its log truncated below its start) is planned
      from its new log start, or not at all, by ``source.reset.policy``, once the case is in the
      ledger on the target (mm2py.source.plan.reset_guard);
    - exactly-once: a range starts after its partition's committed position, so a micro-batch
      that Spark runs again (a restarted query) copies nothing a committed transaction holds.
    """

    def __init__(self, flow: FlowConfig, *, catalogue: TopicCatalogue, source: Admin, target: Admin,
                 store: PositionStore, stalls: StallBook, sizer: BatchSizer, registry: RegistryTail | None = None,
                 offsets: OffsetLister | None = None, resets: ResetGuard | None = None):
        self.flow = flow
        self.resets = resets  # partitions gone back (mm2py.source.plan.reset_guard); None: not checked
        self.registry = registry  # the source's provenance registry, for a flow on an identity cycle
        self.catalogue = catalogue
        self.src = source
        self.offsets = offsets or source  # the source's partition offsets (mm2py.source.plan.listing)
        self.dst = target
        self.store = store
        self.stalls = stalls
        self.sizer = sizer
        self._ready = False
        self._stored: dict[TP, int] | None = None
        self._available_now: dict[str, int] | None = None
        self._ahead: AheadWork | None = None  # the refresh beside a tailing micro-batch
        self._refresh_owed = False  # that refresh failed: the next plan refreshes itself
        # the last plan took everything the source had, or all but less than a budget: its tasks may tail
        self.caught_up = False
        self.reached_ends = False  # the last plan reached every partition's end (no budget cut)
        # ... and holds only what arrived since the plan before (below half the budget, or the whole
        # one after a plan that reached every end): fewer tasks may take it and tail (copy.tail)
        self.only_arrivals = False
        # backlog micro-batches are copy intervals (mm2py.source.copy.continuous), set by the reader
        self.continuous = False
        self.intervals = IntervalMeter()
        self._keyed: tuple[dict[str, int], dict[str, TP]] | None = None  # see _keys
        self.maker = RangeMaker(catalogue, stalls, exactly_once=flow.delivery.exactly_once != "off",
                                stopped=lambda: self.resets.stopped() if self.resets is not None else frozenset(),
                                topic_ids=lambda: self.resets.known_ids() if self.resets is not None else {})

    def recorded(self) -> dict[TP, int]:
        """The positions recorded on the target, as read at first need (once per run)."""
        if self._stored is None:
            self._stored = self.store.load()
        return self._stored

    def _prepare(self) -> None:
        """On first use: the positions topic exists on the target before anything is planned."""
        if not self._ready:
            self.store.ensure_topic(self.dst)
            if self.resets is not None:
                self.resets.prepare(self.dst)
            if self.registry is not None:  # the registry this flow's tasks write to
                ensure_compacted_topic(self.dst, REGISTRY_TOPIC, 3)
            self._ready = True

    def prepare_target(self) -> None:
        """Before the first plan (while Spark starts): the positions topic and every missing remote topic.

        Only what the first plan would otherwise wait for; the first refresh then finds them made.
        """
        self._prepare()
        self.catalogue.create_remote_topics()

    # -- Spark's calls ----------------------------------------------------------------

    def initial_offsets(self) -> dict:
        self._prepare()
        self.catalogue.refresh_topics(force=True)
        # the refresh just sized every partition: the log starts it read serve as the earliest offsets
        starts, exact = self._initial_start(self.catalogue.all_partitions(), self.catalogue.take_log_starts())
        return Offsets(starts, frozenset(exact), {}).to_json()

    def prepare_available_now(self) -> None:
        self._prepare()
        self.catalogue.refresh_topics(force=True)
        ends = self.offsets.list_offsets(self.catalogue.all_partitions(), "latest")
        self._available_now = {tp_key(*tp): off for tp, off in ends.items()}

    def latest_offsets(self, start_raw: dict, max_bytes: int | None) -> dict:
        self._settle_ahead()
        failed_ahead, self._refresh_owed = self._refresh_owed, False
        self._prepare()
        start = Offsets.parse(start_raw)
        review = self.stalls.review(start.positions, available_now=self._available_now is not None)
        self.catalogue.refresh_topics(force=review.refresh or failed_ahead)
        # partitions a tailing copy took past Spark's offsets begin after their recorded position
        ahead = {k: (offset, True) for k, offset in review.ahead.items() if k not in review.stopped}
        return self._plan(start, {**ahead, **review.restart}, {**ahead, **review.stopped}, set(review.held),
                          max_bytes, frozenset(ahead))

    def ranges(self, start_raw: dict, end_raw: dict) -> list[PartitionRange]:
        """The ranges of the micro-batch from ``start_raw`` to ``end_raw`` (mm2py.source.plan.range_maker)."""
        return self.maker.ranges(start_raw, end_raw)

    @property
    def once(self) -> bool:
        """A --once run: plans end at what the source had at its start."""
        return self._available_now is not None

    def tailing(self, seconds: float, *, interval: bool = False) -> None:
        """The micro-batch just planned tails for ``seconds``: its duration says nothing of what it planned.

        ``interval``: it is a copy interval of a backlog (mm2py.source.copy.continuous), measured at the
        next plan by what it copied. The topic refresh the next plan would do runs beside the tail
        instead (mm2py.source.plan.ahead).
        """
        self.sizer.unmeasured()
        if interval:
            self.intervals.continuing()
        self._settle_ahead()  # one at a time, should Spark plan the same micro-batch again
        delay = ahead_delay(seconds, self.flow.selection)
        if delay is not None:
            self._ahead = AheadWork(self.catalogue.refresh_topics, delay).start()

    def _settle_ahead(self) -> None:
        """The refresh beside the last tail is over; one that failed leaves the next plan to refresh."""
        ahead, self._ahead = self._ahead, None
        error = ahead.settle() if ahead is not None else None
        if error is not None:
            log.warning("topic refresh beside the tail failed; refreshing before the next plan",
                        flow=self.flow.name, error=str(error))
            self._refresh_owed = True

    def idle_ranges(self, start_raw: dict, end_raw: dict, planned: list[PartitionRange]) -> list[PartitionRange]:
        """Empty ranges of every other partition of the flow, for a micro-batch whose copy tasks tail.

        A tail copies what arrives on the partitions its task holds; without these, a partition
        with nothing new at plan time would wait for the next micro-batch. Each begins where the
        partition's next record is (after its recorded position when a tail took it past Spark's
        offset, and, exactly-once, after its committed position even in a micro-batch Spark runs
        again); held partitions are left out. Call after ``ranges``.
        """
        return self.maker.idle_ranges(start_raw, end_raw, planned)

    def provenance(self) -> Provenance | None:
        """The origins of the source's batches, read to the registry's end now; None without provenance.

        Call after the micro-batch's ends were fixed (``ranges``), so that every batch mm2py wrote
        below them has its producer id here (mm2py.source.provenance).
        """
        if self.registry is None:
            return None
        return self.registry.provenance(self.flow.source.alias, self.flow.target.alias)

    def estimated_bytes(self, r: PartitionRange) -> float:
        """Source bytes of a range, from the partition's measured bytes per offset."""
        return r.size * self._bytes_per_offset(r.key)

    # -- planning ---------------------------------------------------------------------

    def _initial_start(self, tps: list[TP], log_starts: dict[TP, int] | None = None) -> tuple[dict[str, int], set[str]]:
        """First start of partitions new to this run, and those of them that are exact: every one."""
        starts = first_starts(tps, self.recorded(), self.flow.delivery.auto_offset_reset, self.offsets, log_starts)
        return starts, set(starts)

    def _plan(self, start: Offsets, restart: dict[str, tuple[int, bool]], stopped: dict[str, tuple[int, bool]],
              held: set[str], max_bytes: int | None, ahead: frozenset[str] = frozenset()) -> dict:
        """The next micro-batch's end offsets; ``stopped`` partitions begin where their copy stopped.

        An ``ahead`` partition (a tailing copy went past Spark's offset) with nothing new keeps
        Spark's offset: a micro-batch with nothing to copy is not started for it.
        """
        keys = self._keys()
        tps = list(keys.values())
        restart = {k: v for k, v in restart.items() if k in keys}
        known = {k: v for k, v in start.positions.items() if k in keys}
        known.update({k: offset for k, (offset, _) in stopped.items() if k in keys})
        fresh = [keys[k] for k in keys.keys() - start.positions.keys() - start.new.keys()]
        # partitions first seen now: their start rides along in "new" for ranges() to find
        new, new_exact = self._initial_start(fresh) if fresh else ({}, set())
        exact = ((set(start.exact) - set(stopped)) | new_exact
                 | {k for k, (_, ex) in stopped.items() if ex and k in keys})

        try:
            latest = self.offsets.list_offsets(tps, "latest")
        except KafkaError as e:
            if not self.catalogue.deleted_on_source(e.topic):
                raise
            return self._plan(start, restart, stopped, held, max_bytes, ahead)  # planned again without it
        begin = {k: known.get(k, new.get(k, 0)) for k in keys}
        if self.resets is not None:  # partitions gone back (re-created, truncated): mm2py.source.plan.reset_guard
            outcome = self.resets.review({tp: begin[k] for k, tp in keys.items()}, latest)
            for tp, offset in outcome.restart.items():
                k = tp_key(*tp)
                begin[k], restart[k] = offset, (offset, True)
                exact.add(k)
            held = held | {tp_key(*tp) for tp in outcome.stopped}
        if self._available_now is not None:
            latest = {tp: min(off, self._available_now.get(tp_key(*tp), 0)) for tp, off in latest.items()}
        lag = {k: 0 if k in held else max(0, latest[tp] - begin[k]) for k, tp in keys.items()}
        now = time.monotonic()
        if (copied := self.intervals.measure(begin, self._bytes_per_offset)) is not None:
            self.sizer.copied(*copied)
        self.intervals.planned(now, begin)
        budget = min(self.sizer.next_budget(now), max_bytes) if max_bytes else None
        # a copy interval's tasks copy past their ranges: plan a share of what the interval copies
        cap = int(budget * PLANNED_SHARE) if budget is not None and self.continuous else budget
        moved, planned_bytes, total_bytes = share_budget(begin, lag, self._bytes_per_offset, cap)
        nearly = budget is not None and total_bytes <= 2 * budget
        after_ends = self.reached_ends  # the plan before this one reached every end
        self.reached_ends = (all(moved[k] == begin[k] + n for k, n in lag.items() if n)
                             and self._available_now is None)
        self.caught_up = self.reached_ends or (nearly and self._available_now is None)
        self.only_arrivals = self.reached_ends and (
            budget is None or planned_bytes < (budget if after_ends else budget / 2))
        if cap is not None:
            self.sizer.planned(now, planned_bytes, cap)
        planned = moved.keys()  # a partition with a backlog is planned at least one offset
        ends = {**begin, **moved}
        restart = {k: v for k, v in restart.items() if k in planned}
        ends.update({k: start.positions[k] for k in ahead if k not in planned})
        return Offsets(ends, frozenset(k for k in exact if k not in planned), new, restart,
                       start.restart_count + 1 if restart else 0).to_json()

    def _keys(self) -> dict[str, TP]:
        """Spark's key of every partition of the catalogue's topics, made again only when the topics change."""
        topics = self.catalogue.partitions
        if self._keyed is None or self._keyed[0] != topics:
            self._keyed = (dict(topics), {tp_key(*tp): tp for tp in self.catalogue.all_partitions()})
        return self._keyed[1]

    def _bytes_per_offset(self, key: str) -> float:
        return self.catalogue.bytes_per_offset.get(key, ASSUMED_BYTES_PER_OFFSET)
