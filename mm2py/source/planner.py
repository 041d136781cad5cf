"""Driver-side planning of the source connector: which partitions, from where, up to where.

Spark offsets of the source connector are a plain JSON dict::

    {"p": {"orders:0": 1200, ...},     # next source offset to plan, per partition
     "exact": ["orders:0", ...],       # starts that are exact record positions (see ranges.py)
     "new": {"refunds:0": 0},          # start of partitions first seen in this batch
     "r": {"orders:1": [800, true]},   # restarts (offset, exact) of partitions whose last copy
                                       # stopped short (mm2py.source.stalls)
     "rn": 7}                          # a count of restarts, so that a retry with no new data
                                       # still differs from the last offsets and Spark runs it

Invariants:
- a remote topic exists with at least the source's partition count before a range of it
  is planned;
- ends never pass the source's last stable offset, so only committed data is planned;
- a partition's first start comes from the position recorded on the target (MM2 format),
  else from ``auto.offset.reset`` (earliest by default, as MM2).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import structlog

from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError, missing_acl
from mm2py.filters import TopicFilter
from mm2py.kafka.admin import Admin
from mm2py.metadata.sync import MetadataSync
from mm2py.policy import policy_for
from mm2py.source.deletes import orphaned_remote_topics
from mm2py.source.mismatch import Action, on_fewer_partitions
from mm2py.source.positions import PositionStore, PositionTail
from mm2py.source.ranges import PartitionRange, split_key, tp_key
from mm2py.source.sizing import BatchSizer
from mm2py.source.stalls import PlannedRange, short_ranges
from mm2py.types import TP

log = structlog.get_logger(__name__)

# Before the first size estimate (or for an empty log) plan as if an offset carried this much.
ASSUMED_BYTES_PER_OFFSET = 512
# While a partition stays stalled, topics and their limits are re-read this often.
STALL_REFRESH_SECONDS = 30



@dataclass(frozen=True)
class Offsets:
    """The parsed form of the source connector's Spark offset dict."""

    positions: dict[str, int]
    exact: frozenset[str]
    new: dict[str, int]
    restart: dict[str, tuple[int, bool]] = field(default_factory=dict)
    restart_count: int = 0

    @classmethod
    def parse(cls, raw: dict) -> Offsets:
        restart = {k: (int(v[0]), bool(v[1])) for k, v in raw.get("r", {}).items()}
        return cls(dict(raw.get("p", {})), frozenset(raw.get("exact", ())), dict(raw.get("new", {})), restart,
                   int(raw.get("rn", 0)))

    def to_json(self) -> dict:
        out = {"p": self.positions, "exact": sorted(self.exact), "new": self.new}
        if self.restart:  # absent unless needed: offsets without it stay as they always were
            out["r"] = {k: [offset, exact] for k, (offset, exact) in sorted(self.restart.items())}
            out["rn"] = self.restart_count
        return out

    def start_of(self, key: str) -> int | None:
        return self.positions.get(key, self.new.get(key))


class SourcePlanner:
    """Plans micro-batches for one flow. Lives in Spark's source runner on the driver."""

    def __init__(self, flow: FlowConfig):
        self.flow = flow
        self.policy = policy_for(flow)
        self.filter = TopicFilter(flow.topics, flow.topics_exclude)
        self.src = Admin(flow.source, timeout_ms=flow.admin_timeout_ms)
        self.dst = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
        self.store = PositionStore(flow.target, flow.source.alias, timeout_ms=flow.admin_timeout_ms)
        self.store.ensure_topic(self.dst)
        self.metadata = MetadataSync(flow, self.src, self.dst, self.remote_topic, self._mirrored)
        self.partitions: dict[str, int] = {}  # mirrored source topic -> partition count
        # source topic -> partitions of a remote topic someone else made smaller (mm2py.source.mismatch)
        self.rehash: dict[str, int] = {}
        self._created: set[str] = set()  # remote topics this planner created
        self._refreshed_at = 0.0
        self._stored: dict[TP, int] | None = None
        self._available_now: dict[str, int] | None = None
        # per partition: bytes on the source's disk per offset, so micro-batches are sized in
        # bytes (a compressed 100-byte record may take 15 bytes, an uncompressed 1 KiB one 1 KiB)
        self.bytes_per_offset: dict[str, float] = {}
        # ranges of the micro-batch planned last, checked against the recorded positions before
        # the next one is planned (a copy may stop a partition short: mm2py.source.stalls)
        self._planned: dict[str, PlannedRange] = {}
        self._tail: PositionTail | None = None
        self._restarted: dict[str, int] = {}  # partition -> offset last restarted from
        # partition -> (offset, exact, monotonic time) of a partition stalled twice at one offset:
        # not planned until then (mm2py.source.stalls)
        self._held: dict[str, tuple[int, bool, float]] = {}
        self._stall_refresh_at = 0.0
        self.max_batch_bytes: dict[str, int] = {}  # remote topic -> its max.message.bytes
        self._reported_missing: set[str] = set()
        self.sizer = BatchSizer(flow.max_batch_bytes, flow.batch_duration_ms / 1000)

    # -- topics -----------------------------------------------------------------------

    def remote_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.flow.source.alias, topic)

    def refresh_topics(self, *, force: bool = False) -> None:
        """Find source topics to mirror and make their remote topics ready on the target."""
        due = self.flow.refresh_topics_enabled and (
            time.monotonic() - self._refreshed_at >= self.flow.refresh_topics_interval_seconds
        )
        if not (force or due or not self._refreshed_at):
            self._sync_metadata()
            return
        source_topics = self.src.topics()
        self._report_invisible(source_topics)
        wanted = {t: n for t, n in source_topics.items() if self._mirrored(t)}
        target_topics = self.dst.topics()
        rf_cap = None
        configs = self.metadata.new_topic_configs(t for t in wanted if self.remote_topic(t) not in target_topics)
        for topic, count in sorted(wanted.items()):
            remote = self.remote_topic(topic)
            have = target_topics.get(remote)
            if have is None:
                if rf_cap is None:
                    rf_cap = self.dst.broker_count()
                rf = self.flow.replication_factor
                if rf > rf_cap:
                    log.warning("replication.factor capped", flow=self.flow.name, topic=remote,
                                configured=rf, brokers=rf_cap)
                    rf = rf_cap
                self._created.add(remote)
                if self.dst.create_topic(remote, count, rf, configs.get(topic)):
                    log.info("created remote topic", flow=self.flow.name, topic=remote, partitions=count,
                             configs=configs.get(topic))
            elif have < count:
                self._fewer_partitions(topic, remote, have, count)
        if self.flow.sync_topic_deletes_enabled:
            self._delete_orphans(source_topics, target_topics)
        gone = set(self.partitions) - set(wanted)
        for topic in sorted(gone):
            log.warning("source topic no longer mirrored", flow=self.flow.name, topic=topic)
        for topic in sorted(set(wanted) - set(self.partitions)):
            log.info("mirroring topic", flow=self.flow.name, topic=topic, partitions=wanted[topic],
                     remote=self.remote_topic(topic))
        self.partitions = wanted
        self._refreshed_at = time.monotonic()
        self._read_batch_limits()
        self._estimate_sizes()
        self._sync_metadata()

    def _report_invisible(self, listed: dict[str, int]) -> None:
        """Name every topic the config spells out that the source does not list.

        MM2 passes over such topics in silence. A missing DESCRIBE ACL hides a topic from the
        listing: that is an error (logged at each refresh, naming the ACL). The broker answers
        the same for a topic that does not exist, so as not to tell. Where the principal may
        look, a topic that does not exist (yet, or a typo) is a warning, once.
        """
        named = [t for t in self.filter.named_topics() if t not in listed]
        if not named:
            return
        try:
            invisible = self.src.invisible_topics(named)
        except KafkaError as e:
            log.warning("could not describe configured topics", flow=self.flow.name, topics=named, error=str(e))
            return
        for topic, why in sorted(invisible.items()):
            if why == "unauthorized":
                error = missing_acl("DESCRIBE", "TOPIC", topic, cluster=self.flow.source.alias,
                                    principal=self.src.principal, topic=topic)
                log.error("configured topic is not mirrored: the source hides it (or it does not exist): "
                          + str(error), flow=self.flow.name, topic=topic, cluster=self.flow.source.alias)
            elif topic not in self._reported_missing:
                log.warning("configured topic does not exist on the source (yet); it is mirrored once created",
                            flow=self.flow.name, topic=topic, cluster=self.flow.source.alias)
                self._reported_missing.add(topic)

    def _read_batch_limits(self) -> None:
        """Each remote topic's max.message.bytes: the copier stalls a partition at a larger batch."""
        remotes = [self.remote_topic(t) for t in self.partitions if t not in self.rehash]
        try:
            configs = self.dst.topic_configs(remotes)
        except KafkaError as e:
            log.warning("could not read the remote topics' max.message.bytes; the target's refusal will tell",
                        flow=self.flow.name, error=str(e))
            return
        for topic, entries in configs.items():
            value = next((e.value for e in entries if e.name == "max.message.bytes"), None)
            if value is not None:
                self.max_batch_bytes[topic] = int(value)

    def _sync_metadata(self) -> None:
        # hash-written topics are someone else's: their configs and ACLs are left alone
        self.metadata.maybe_run(t for t in self.partitions if t not in self.rehash)

    def _mirrored(self, topic: str) -> bool:
        return self.policy.should_replicate_topic(
            topic, self.flow.target.alias, self.filter, self.flow.heartbeats_replication_enabled)

    def _fewer_partitions(self, topic: str, remote: str, have: int, count: int) -> None:
        if self._stored is None and self.flow.partition_mismatch == "error":
            self._stored = self.store.load()
        mirrored_before = any(t == topic for t, _ in self._stored or ())
        ours = topic not in self.rehash and (
            remote in self._created or topic in self.partitions or mirrored_before)
        if on_fewer_partitions(self.flow, topic, remote, have, count, ours=ours) is Action.GROW:
            self.dst.create_partitions(remote, count)
            log.info("added partitions", flow=self.flow.name, topic=remote, before=have, after=count)
            return
        if self.rehash.get(topic) != have:
            log.warning("remote topic has fewer partitions than its source: writing by key hash, "
                        "without offset syncs (no source offset has one target offset)",
                        flow=self.flow.name, topic=remote, source_partitions=count, target_partitions=have)
        self.rehash[topic] = have

    def _delete_orphans(self, source_topics: dict[str, int], target_topics: dict[str, int]) -> None:
        for remote in orphaned_remote_topics(
            self.policy, self.flow.source.alias, self.flow.target.alias, self.filter, source_topics,
            target_topics, self.flow.heartbeats_replication_enabled,
        ):
            self.dst.delete_topic(remote)
            log.warning("deleted remote topic: its source topic is gone (sync.topic.deletes.enabled)",
                        flow=self.flow.name, topic=remote)

    def _estimate_sizes(self) -> None:
        from mm2py.kafka.wire import RawClient  # the driver-side runner imports it only when needed

        tps = self.all_partitions()
        if not tps:
            return
        try:
            client = RawClient(self.flow.source, client_id=f"mm2py-planner-{self.flow.name}",
                               timeout_ms=self.flow.admin_timeout_ms)
            try:
                sizes = client.log_sizes({t for t, _ in tps})
            finally:
                client.close()
            first = self.src.list_offsets(tps, "earliest")
            last = self.src.list_offsets(tps, "latest")
        except Exception as e:  # noqa: BLE001 - sizing is an optimisation; plan with the default
            log.warning("could not size source partitions; planning with a default", flow=self.flow.name,
                        error=str(e))
            return
        for tp in tps:
            count = last.get(tp, 0) - first.get(tp, 0)
            if count > 0 and sizes.get(tp):
                self.bytes_per_offset[tp_key(*tp)] = max(1.0, sizes[tp] / count)

    def all_partitions(self) -> list[TP]:
        return [(t, p) for t, n in sorted(self.partitions.items()) for p in range(n)]

    # -- offsets ----------------------------------------------------------------------

    def _initial_start(self, tps: list[TP]) -> tuple[dict[str, int], set[str]]:
        """First start of partitions new to this run: recorded position, else the reset policy."""
        if self._stored is None:
            self._stored = self.store.load()
        starts: dict[str, int] = {}
        exact: set[str] = set()
        missing = []
        for tp in tps:
            if tp in self._stored:
                key = tp_key(*tp)
                starts[key] = self._stored[tp] + 1
                exact.add(key)
            else:
                missing.append(tp)
        if missing:
            spec = "latest" if self.flow.auto_offset_reset == "latest" else "earliest"
            for tp, offset in self.src.list_offsets(missing, spec).items():
                starts[tp_key(*tp)] = offset
        return starts, exact

    def initial_offsets(self) -> dict:
        self.refresh_topics(force=True)
        starts, exact = self._initial_start(self.all_partitions())
        return Offsets(starts, frozenset(exact), {}).to_json()

    def prepare_available_now(self) -> None:
        self.refresh_topics(force=True)
        ends = self.src.list_offsets(self.all_partitions(), "latest")
        self._available_now = {tp_key(*tp): off for tp, off in ends.items()}

    def _stopped_short(self) -> dict[str, tuple[int, bool]]:
        """Partitions of the last micro-batch whose copy stopped before the planned end.

        They start again where the copy stopped. In an availableNow run (--once) a partition that
        stops at the same offset twice is left there, so the run ends; its ERROR lines say why.
        """
        planned, self._planned = self._planned, {}
        if not planned:
            return {}
        if self._tail is None:
            self._tail = PositionTail(self.store, self.dst)
        recorded = self._tail.refresh()
        short = short_ranges(planned, {k: recorded.get(split_key(k)) for k in planned})
        restart = {}
        for key, r in short.items():
            again = self._restarted.get(key) == r.begin
            if again and self._available_now is not None:
                log.error("partition left behind in this run: its copy keeps stopping at the same offset",
                          flow=self.flow.name, partition=key, offset=r.begin)
                continue
            if again:
                # the same refusal twice: what would change it (a raised limit, a re-created topic) is
                # seen by the stall refresh, so try again after it rather than at every micro-batch
                self._held[key] = (r.begin, r.exact, time.monotonic() + STALL_REFRESH_SECONDS)
                continue
            self._stall_refresh_at = 0.0  # new: refresh now (a deleted remote topic is re-created)
            log.warning("copy stopped short of the planned end; planning the partition again from there",
                        flow=self.flow.name, partition=key, offset=r.begin, planned_end=r.end)
            self._restarted[key] = r.begin
            restart[key] = (r.begin, r.exact)
        for key in planned.keys() - short.keys():
            self._restarted.pop(key, None)
        return restart

    def latest_offsets(self, start_raw: dict, max_bytes: int | None) -> dict:
        start = Offsets.parse(start_raw)
        restart = self._stopped_short()
        # A remote topic deleted meanwhile stops its partitions short: a refresh re-creates it; one
        # raised max.message.bytes is seen by a refresh too. At once for a new stall, then every 30 s.
        # A partition held after stalling twice is tried again once its hold ends, after a refresh.
        now = time.monotonic()
        retrying = bool(restart) or any(until <= now for _, _, until in self._held.values())
        force = retrying and now - self._stall_refresh_at >= STALL_REFRESH_SECONDS
        if force:
            self._stall_refresh_at = now
        self.refresh_topics(force=force)
        # Spark's offset of a held partition moved to the end planned for it; its copy stopped here
        stopped = {k: (offset, ex) for k, (offset, ex, _) in self._held.items()}
        stopped.update(restart)
        self._held = {k: v for k, v in self._held.items() if v[2] > now}
        return self._plan(start, restart, stopped, set(self._held), max_bytes)

    def _plan(self, start: Offsets, restart: dict[str, tuple[int, bool]], stopped: dict[str, tuple[int, bool]],
              held: set[str], max_bytes: int | None) -> dict:
        """The next micro-batch's end offsets; ``stopped`` partitions begin where their copy stopped."""
        tps = self.all_partitions()
        keys = {tp_key(*tp): tp for tp in tps}
        restart = {k: v for k, v in restart.items() if k in keys}
        known = {k: v for k, v in start.positions.items() if k in keys}
        known.update({k: offset for k, (offset, _) in stopped.items() if k in keys})
        fresh = [tp for k, tp in keys.items() if start.start_of(k) is None]
        # partitions first seen now: their start rides along in "new" for ranges() to find
        new, new_exact = self._initial_start(fresh) if fresh else ({}, set())
        exact = ((set(start.exact) - set(stopped)) | new_exact
                 | {k for k, (_, ex) in stopped.items() if ex and k in keys})

        try:
            latest = self.src.list_offsets(tps, "latest")
        except KafkaError as e:
            if not self._deleted_on_source(e.topic):
                raise
            return self._plan(start, restart, stopped, held, max_bytes)  # planned again without it
        if self._available_now is not None:
            latest = {tp: min(off, self._available_now.get(tp_key(*tp), 0)) for tp, off in latest.items()}
        begin = {k: known.get(k, new.get(k, 0)) for k in keys}
        lag = {k: 0 if k in held else max(0, latest[tp] - begin[k]) for k, tp in keys.items()}
        now = time.monotonic()
        budget = min(self.sizer.next_budget(now), max_bytes) if max_bytes else None
        ends, planned_bytes = self._cap(begin, lag, budget)
        if budget is not None:
            self.sizer.planned(now, planned_bytes, budget)
        planned = {k for k in keys if ends[k] > begin[k]}
        restart = {k: v for k, v in restart.items() if k in planned}
        return Offsets(ends, frozenset(k for k in exact if k not in planned), new, restart,
                       start.restart_count + 1 if restart else 0).to_json()

    def _deleted_on_source(self, topic: str | None) -> bool:
        """After an error about ``topic``: True if it was deleted from the source, now no longer planned.

        A topic deleted between two refreshes fails the offset listing; a fresh refresh drops it
        (and, with sync.topic.deletes.enabled, its remote topic) so the flow goes on.
        """
        if topic is None or topic not in self.partitions:
            return False
        self.refresh_topics(force=True)
        return topic not in self.partitions

    def _cap(self, begin: dict[str, int], lag: dict[str, int], max_bytes: int | None) -> tuple[dict[str, int], float]:
        """End offsets within ``max_bytes`` of estimated source bytes, and the bytes they plan."""
        size = {k: self._bytes_per_offset(k) for k in begin}
        total = sum(lag[k] * size[k] for k in begin)
        if not max_bytes or total <= max_bytes:
            return {k: begin[k] + lag[k] for k in begin}, total
        # share the byte budget in proportion to each partition's backlog, so none starves
        share = max_bytes / total
        ends = {k: begin[k] + (max(1, int(lag[k] * share)) if lag[k] else 0) for k in begin}
        return ends, sum((ends[k] - begin[k]) * size[k] for k in begin)

    def _bytes_per_offset(self, key: str) -> float:
        return self.bytes_per_offset.get(key, ASSUMED_BYTES_PER_OFFSET)

    def estimated_bytes(self, r: PartitionRange) -> float:
        """Source bytes of a range, from the partition's measured bytes per offset."""
        return r.size * self._bytes_per_offset(r.key)

    def ranges(self, start_raw: dict, end_raw: dict) -> list[PartitionRange]:
        start, end = Offsets.parse(start_raw), Offsets.parse(end_raw)
        out = []
        planned = {}
        for key, stop in end.positions.items():
            begin = start.start_of(key)
            if begin is None:
                begin = end.new.get(key, stop)
            exact = key in start.exact
            if key in end.restart:
                begin, exact = end.restart[key]
            if stop > begin:
                topic, partition = split_key(key)
                remote = self.remote_topic(topic)
                out.append(PartitionRange(topic, partition, begin, stop, remote, exact=exact,
                                          target_partitions=self.rehash.get(topic, 0),
                                          max_batch_bytes=self.max_batch_bytes.get(remote, 0)))
                planned[key] = PlannedRange(begin, stop, exact)
        self._planned = planned
        return out
