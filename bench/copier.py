"""mm2py's copy path alone, without Spark: how fast this machine lets any mm2py run go.

``python -m bench.copier CONFIG`` reads the same properties file as a bench run, creates the
remote topics of its one enabled flow, and copies every partition from offset 0 to its end
offset now with ``mm2py.source.copy.task.copy_ranges``, as Spark tasks do, in one process per
core. Nothing else runs: no Spark, no positions or offset syncs, no checkpoints or heartbeats.

The bench runs it as the tool ``copier`` (``--tools mm2,mm2py,copier``). Its row is the
ceiling of the data path on these brokers and cores; the distance from it to the mm2py row
is what Spark's scheduling and the other connectors cost.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

from mm2py import config as mm2config
from mm2py.config.filters import TopicFilter
from mm2py.config.model import FlowConfig
from mm2py.flow_policy import policy_for
from mm2py.kafka.admin import Admin
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.task import CopySpec, TaskRun, copy_ranges
from mm2py.source.ranges import PartitionRange


def plan(flow: FlowConfig) -> list[PartitionRange]:
    """Every partition of the flow's topics, from 0 to its end offset; remote topics created."""
    src, dst = Admin(flow.source), Admin(flow.target)
    policy = policy_for(flow)
    wanted = TopicFilter(flow.selection.topics, flow.selection.topics_exclude)
    topics = {t: n for t, n in src.topics().items() if wanted.should_replicate_topic(t)}
    if not topics:
        raise SystemExit(f"bench.copier: no source topic matches {flow.selection.topics} on {flow.source.alias}")
    existing = dst.topics()
    ranges = []
    for topic, partitions in sorted(topics.items()):
        remote = policy.format_remote_topic(flow.source.alias, topic)
        if remote not in existing:
            dst.create_topic(remote, partitions, 1)
        ends = src.list_offsets([(topic, p) for p in range(partitions)])
        ranges += [PartitionRange(topic, p, 0, ends[(topic, p)], remote) for p in range(partitions)]
    return ranges


def _copy(flow: FlowConfig, ranges: Sequence[PartitionRange], worker: int) -> int:
    results = copy_ranges(CopySpec(flow.source, flow.target, CopySettings()), list(ranges),
                          TaskRun(f"bench-copier-{worker}"))
    short = [r for r in results if r.next_offset < r.end]
    if short:
        raise RuntimeError(f"copier stopped short: {short[0]}")
    return sum(r.records for r in results)


def main(argv: list[str]) -> int:
    flows = mm2config.load(argv[0]).enabled_flows
    if len(flows) != 1:
        raise SystemExit(f"bench.copier: {argv[0]} must enable exactly one flow, not {len(flows)}")
    flow = flows[0]
    ranges = [r for r in plan(flow) if r.end > r.start]
    workers = min(int(os.environ.get("BENCH_COPIER_PROCESSES", 0)) or os.cpu_count() or 1, len(ranges))
    groups = [ranges[i::workers] for i in range(workers)]
    # spawned, not forked: plan() ran librdkafka clients here, and a child forked beside their
    # threads segfaulted in libc now and then (twice in a day); a process pool also raises when
    # a worker dies, where multiprocessing.Pool waited forever for its lost task
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        copied = sum(pool.map(_copy, [flow] * workers, groups, range(workers)))
    print(f"bench.copier: {copied} records in {len(ranges)} partitions, {workers} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
