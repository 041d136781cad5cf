"""The source-data connector as a PySpark streaming data source.

Each Spark task copies a group of partition ranges from the source cluster to the target
inside ``read()`` (raw batches, no records cross into the JVM) and yields one row: what it
did for each range (``RangeResult``), packed. The sink (``mm2py.connectors.sink``) hands
those rows to ``mm2py.source.plan.commit``, which records offset syncs and positions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from functools import partial

from mm2py.connectors.options import decode
from pyspark import TaskContext
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxBytes, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from mm2py import worker
from mm2py.flowspec import FlowSpec
from mm2py.source.copy.continuous import fits, interval_ms, may_continue
from mm2py.source.copy.resident_task import resident_lease, settle
from mm2py.source.copy.stop_flag import StopFlag
from mm2py.source.copy.tail import TailWindow, TaskSlots, may_tail, tail_ms, window_for
from mm2py.source.copy.task import CopySpec, TaskRun, copy_ranges
from mm2py.source.provenance import Provenance
from mm2py.source.ranges import PartitionRange, RangeResult, assign

# A micro-batch gets one Spark task per this many source bytes (up to the task limit): below
# it, a second task costs more in Python worker round trips than it saves in copying.
MIN_TASK_BYTES = 16 << 20



class RangeGroup(InputPartition):
    """The ranges one Spark task copies; ``index`` is its place in the micro-batch (its transaction slice)."""

    def __init__(self, ranges: list[PartitionRange], index: int = 0, provenance: Provenance | None = None,
                 tail_ms: int = 0):
        self.ranges = ranges
        self.index = index
        self.provenance = provenance  # the origins of the source's batches (identity cycles)
        self.tail_ms = tail_ms  # copy what arrives after the ranges this long from the task's start


class MirrorSourceDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "mm2py-mirror-source"

    def schema(self) -> str:
        return RangeResult.spark_schema()

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        spec, copy = decode(self.options["spec"]), decode(self.options["copy"])
        assert isinstance(spec, FlowSpec) and isinstance(copy, CopySpec)
        slots = int(self.options.get("tasks", "2"))
        return MirrorSourceStreamReader(spec, copy, TaskSlots(slots, int(self.options.get("tailing", "1"))),
                                        stop=StopFlag(self.options.get("stop")),
                                        one_host=self.options.get("one_host", "false") == "true")


class MirrorSourceStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, spec: FlowSpec, copy: CopySpec, share: TaskSlots, *, stop: StopFlag | None = None,
                 one_host: bool = False):
        self.flow_spec = spec  # the flow, resolved once by the driver (mm2py.flowspec)
        self.flow = flow = spec.flow
        # raised when the run stops: tails end, no new plan (not ``stop``: Spark calls ``stop()``)
        self.stop_flag = stop or StopFlag(None)
        self.share = share  # Spark's task slots; flows of this run whose copy tasks may tail
        # tasks.max as given (above the core count, extra tasks wait for a core); else Spark's parallelism
        self.tasks = flow.copy.tasks_max or share.slots
        self.spec = copy  # the copy path, resolved once by the driver (CopySpec.for_flow)
        self._planner = None  # driver side only; built on first use, never pickled
        # copy.resident.enabled: every copy task takes over from the flow's resident copiers first
        self.resident = resident_lease(self.flow, provenance=spec.provenance, one_host=one_host)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_planner"] = None
        return state

    @property
    def planner(self):  # imported lazily to keep executors light
        if self._planner is None:
            from mm2py.source.plan.wiring import planner_for

            lease = self.resident  # a reset first ends the copiers that outlive their tasks
            self._planner = planner_for(self.flow_spec, None if lease is None else partial(settle, lease))
            # backlog micro-batches are copy intervals when the flow's tasks all fit in the slots
            self._planner.continuous = (may_continue(self.flow, self.flow_spec.provenance)
                                        and fits(self.tasks, self.share))
        return self._planner

    def initialOffset(self) -> dict:
        return self.planner.initial_offsets()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxBytes(self.flow.copy.max_batch_bytes)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if self.stop_flag.raised():
            return start  # the run is stopping: no further micro-batch, the running one commits
        max_bytes = None if isinstance(limit, ReadAllAvailable) else getattr(limit, "max_bytes", None)
        return self.planner.latest_offsets(start, max_bytes)

    def prepareForTriggerAvailableNow(self) -> None:
        self.planner.prepare_available_now()

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        planner = self.planner
        ranges = planner.ranges(start, end)
        provenance = self.flow_spec.provenance
        tasks = self.tasks
        if planner.only_arrivals and may_tail(self.flow, provenance):  # what arrived since the last plan
            tasks = min(tasks, self.share.tasks_to_tail())
        groups = assign(ranges, tasks, planner.estimated_bytes, MIN_TASK_BYTES)
        tail = tail_ms(self.flow, provenance=provenance, caught_up=planner.caught_up, tasks=len(groups),
                       share=self.share)
        backlog = not (planner.caught_up or planner.once)
        interval = 0 if tail else interval_ms(self.flow, provenance=provenance, backlog=backlog, tasks=len(groups),
                                              share=self.share)
        tail = tail or interval  # a copy interval (mm2py.source.copy.continuous) copies as a tail does
        if tail:  # every partition of the flow is tailed, those with nothing planned too
            planner.tailing(tail / 1000, interval=bool(interval))
            for i, idle in enumerate(planner.idle_ranges(start, end, ranges)):
                groups[i % len(groups)].append(idle)
        registry = planner.provenance()  # after the ends were fixed
        return [RangeGroup(group, i, registry, tail) for i, group in enumerate(groups)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        assert isinstance(partition, RangeGroup)
        client_id = f"mm2py-{self.flow.name}-{os.getpid()}"
        context = TaskContext.get()
        retry = context is not None and context.attemptNumber() > 0
        run = TaskRun(client_id, partition.index, retry, partition.provenance, self._tail(partition.tail_ms),
                      self.resident, partition.tail_ms > 0)
        results = copy_ranges(self.spec, partition.ranges, run)
        yield RangeResult.pack(results)
        worker.settle()

    def _tail(self, ms: int) -> TailWindow | None:
        return window_for(self.flow, ms, self.stop_flag)

    def commit(self, end: dict) -> None:
        pass  # positions are recorded from what tasks actually copied: by the sink, or in the tasks' transactions

    def stop(self) -> None:
        pass
