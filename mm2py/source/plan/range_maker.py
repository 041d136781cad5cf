"""The ranges a planned micro-batch hands to its copy tasks, from Spark's start and end offsets.

``RangeMaker`` holds what ``BatchPlanner.ranges`` and ``BatchPlanner.idle_ranges`` do: the
planned ranges of the partitions whose end moved, then, for a micro-batch whose tasks tail,
an empty range of every other partition of the flow.

Invariants:
- a range starts at Spark's start for its partition, else (first seen in this plan) at the
  exact start the plan carried in "new", else at a restart the plan carried in "r"; under
  exactly-once never before the record after the partition's committed position;
- every partition planned or idle goes to ``StallBook`` (``planned``/``also_planned``), so the
  next review sees where each copy stopped;
- an idle range begins where the partition's next record is: Spark's end, or after its
  recorded position when a tail took it past that (exactly-once: never before the record after
  the committed position, as read by ``ranges``); held partitions, and those stopped by
  ``source.reset.policy = stop``, get none;
- a range carries its topic's id as the reset guard accepted it in this plan's review
  (``topic_ids``): the copy reads that topic, never one re-created under its name since;
- work per micro-batch: the planned partitions, plus one empty range per other partition only
  when the tasks tail. Spark's offset dicts are parsed once per micro-batch (``partitions``
  hands ``ranges`` and ``idle_ranges`` the same two dicts).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mm2py.source.plan.catalogue import TopicCatalogue
from mm2py.source.plan.spark_offsets import Offsets
from mm2py.source.plan.stalls import PlannedRange, StallBook
from mm2py.source.ranges import PartitionRange, split_key
from mm2py.types import TP

# per topic: (remote topic, target partitions to rehash onto, the remote's batch byte limit, source topic id)
Remote = tuple[str, int, int, str]


class RangeMaker:
    """Turns one micro-batch's Spark offsets into ``PartitionRange``s; no I/O but the committed positions."""

    def __init__(self, catalogue: TopicCatalogue, stalls: StallBook, *, exactly_once: bool,
                 stopped: Callable[[], frozenset[TP]], topic_ids: Callable[[], Mapping[str, str]] = dict):
        self.catalogue = catalogue
        self.stalls = stalls
        self.exactly_once = exactly_once
        self.stopped = stopped  # partitions source.reset.policy = stop left where they are
        # the source topic ids the reset guard accepted in this plan's review: each range carries its topic's
        self.topic_ids = topic_ids
        self._parsed: tuple[dict, dict, Offsets, Offsets] | None = None
        self._committed: dict[TP, int] = {}  # exactly-once: the committed positions ``ranges`` read last

    def parse(self, start_raw: dict, end_raw: dict) -> tuple[Offsets, Offsets]:
        """Spark's two offset dicts, parsed; the same two dicts again give the same parse."""
        last = self._parsed
        if last is not None and last[0] is start_raw and last[1] is end_raw:
            return last[2], last[3]
        start, end = Offsets.parse(start_raw), Offsets.parse(end_raw)
        self._parsed = (start_raw, end_raw, start, end)  # the dicts are kept: their ids stay theirs
        return start, end

    def ranges(self, start_raw: dict, end_raw: dict) -> list[PartitionRange]:
        """The ranges of the partitions whose end lies past their start."""
        start, end = self.parse(start_raw, end_raw)
        out = []
        planned = {}
        remotes: dict[str, Remote] = {}
        # exactly-once: Spark re-runs a micro-batch whose tasks may have committed already (a
        # restarted query); start each range after what is committed (read_committed)
        committed = self._committed = self.stalls.tail.refresh() if self.exactly_once else {}
        for key, stop in end.positions.items():
            begin = start.start_of(key)
            if begin is not None and stop <= begin and key not in end.restart:
                continue  # nothing planned (a committed position only moves a start on): an idle partition
            exact = key in start.exact
            if begin is None:  # first seen in this plan: its first start is exact (_initial_start)
                begin, exact = end.new.get(key, stop), True
            if key in end.restart:
                begin, exact = end.restart[key]
            if committed:
                done = committed.get(split_key(key), -1) + 1
                if done > begin:
                    begin, exact = done, True
            if stop > begin:
                out.append(self._range(key, begin, stop, exact, remotes))
                planned[key] = PlannedRange(begin, stop, exact)
        self.stalls.planned(planned)
        return out

    def idle_ranges(self, start_raw: dict, end_raw: dict, planned: list[PartitionRange]) -> list[PartitionRange]:
        """Empty ranges of every other partition of the flow, for a micro-batch whose copy tasks tail."""
        start, end = self.parse(start_raw, end_raw)
        taken = {r.key for r in planned}
        stopped = self.stopped()
        held = self.stalls.held
        next_offset = self.stalls.next_offset
        remotes: dict[str, Remote] = {}
        out = []
        idle = {}
        for key, stop in end.positions.items():
            if key in taken or held(key) or (stopped and split_key(key) in stopped):
                continue
            begin = start.start_of(key)
            begin = next_offset(key, stop if begin is None else max(begin, stop))
            if self._committed:  # exactly-once: after the committed position, in a micro-batch run again too
                begin = max(begin, self._committed.get(split_key(key), -1) + 1)
            out.append(self._range(key, begin, begin, True, remotes))
            idle[key] = PlannedRange(begin, begin, True)
        self.stalls.also_planned(idle)
        return out

    def _range(self, key: str, begin: int, stop: int, exact: bool, remotes: dict[str, Remote]) -> PartitionRange:
        """The range ``[begin, stop)`` of partition ``key``, with its remote topic's partitions and limit.

        ``remotes`` keeps each topic's (remote topic, target partitions, limit, id) across the calls of one
        plan: a topic's ten or more partitions ask the policy and the catalogue once.
        """
        topic, partition = split_key(key)
        if (known := remotes.get(topic)) is None:
            remote = self.catalogue.remote_topic(topic)
            known = remotes[topic] = (remote, self.catalogue.rehash.get(topic, 0),
                                      self.catalogue.max_batch_bytes.get(remote, 0),
                                      self.topic_ids().get(topic, ""))
        return PartitionRange(topic, partition, begin, stop, known[0], exact=exact, target_partitions=known[1],
                              max_batch_bytes=known[2], topic_id=known[3])
