"""Driver CPU of one flow's planning and commit at thousands of partitions, few of them moving.

Starts two single-broker clusters of its own (ports shifted by ``MM2PY_TEST_PORT_OFFSET``, as
the tests' are), creates ``--topics`` x ``--partitions`` source topics, one record in each, and
drives the flow's real planner (``planner_for``) and committer (``committer_for``) the way the
source connector and its sink do, without Spark: per cycle ``--moving`` partitions receive
records, then ``latest_offsets``, ``ranges``, ``idle_ranges`` (a copy interval tails every
partition) and a commit of what a copy of those ranges would report. The copy itself is not
run: what is timed is the driver's own work per micro-batch.

Prints, as JSON: the start-up (``initial_offsets`` and the first plan: the catalogue lists the
topics and creates the remote ones) in process CPU ms and wall s, and the median process CPU ms
per steady cycle, split into plan and commit. Process CPU counts this Python process only (the
brokers are other processes), so figures stay comparable on a shared machine; walls are
indicative. ``--profile FILE`` writes a cProfile of the steady cycles.

    MM2PY_TEST_PORT_OFFSET=-16000 .venv/bin/python -m bench.plan_profile --cycles 20
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from mm2py.config import load_text
from mm2py.dev import cluster as devcluster
from mm2py.flowspec import FlowSpec
from mm2py.source.plan.commit import committer_for
from mm2py.source.plan.wiring import planner_for
from mm2py.source.ranges import PartitionRange, RangeResult

OFFSET = int(os.environ.get("MM2PY_TEST_PORT_OFFSET", "0"))
# the tests' spare ports (tests/conftest.py "crash" and "acl-a"), shifted like theirs
A_PORT, B_PORT = 30692 + OFFSET, 30792 + OFFSET
PREFIX = "pp-"


def properties(a: int, b: int) -> str:
    return "\n".join([
        "clusters = A, B", f"A.bootstrap.servers = 127.0.0.1:{a}", f"B.bootstrap.servers = 127.0.0.1:{b}",
        "A->B.enabled = true", f"A->B.topics = {PREFIX}.*", "replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1", "offset.storage.replication.factor = 1",
        "checkpoints.topic.replication.factor = 1", "heartbeats.topic.replication.factor = 1",
        "sync.topic.acls.enabled = false", "refresh.topics.interval.seconds = 600",
        "admin.timeout.ms = 300000", ""])


def load_source(bootstrap: str, topics: int, partitions: int) -> list[tuple[str, int]]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"{PREFIX}{i:04d}" for i in range(topics)]
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result()
    tps = [(n, p) for n in names for p in range(partitions)]
    produce(bootstrap, tps)
    return tps


def produce(bootstrap: str, tps: list[tuple[str, int]], records: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for topic, partition in tps:
        for _ in range(records):
            producer.produce(topic, b"x" * 100, partition=partition)
    deadline = time.monotonic() + 300
    while producer.flush(10) and time.monotonic() < deadline:
        pass
    if len(producer):
        raise RuntimeError(f"{len(producer)} records not delivered")


def copied(ranges: list[PartitionRange]) -> list[RangeResult]:
    """What a copy of ``ranges`` would report: every planned offset copied, nothing tailed."""
    return [RangeResult(r.topic, r.partition, r.start, r.end, r.end, records=r.end - r.start,
                        bytes=100 * (r.end - r.start), batches=1 if r.end > r.start else 0) for r in ranges]


def cpu_ms() -> float:
    return time.process_time() * 1000


TIMES: dict[str, list[float]] = {}


def timed(call: Callable, name: str) -> Callable:
    """``call``, its process CPU ms of each call kept in ``TIMES[name]``."""
    def wrapper(*args: object, **kwargs: object) -> object:
        c0 = cpu_ms()
        try:
            return call(*args, **kwargs)
        finally:
            TIMES.setdefault(name, []).append(cpu_ms() - c0)
    return wrapper


def run(args: argparse.Namespace, workdir: Path) -> dict:
    a = devcluster.start_cluster("plan-profile-a", A_PORT, workdir=workdir)
    devcluster.start_cluster("plan-profile-b", B_PORT, workdir=workdir)
    tps = load_source(a.bootstrap, args.topics, args.partitions)
    spec = FlowSpec.alone(load_text(properties(A_PORT, B_PORT)).enabled_flows[0])
    planner = planner_for(spec)
    planner.continuous = True  # a flow whose tasks fit the slots: backlog plans are copy intervals
    committer = committer_for(spec)
    committer.open()

    listing = planner.offsets
    listed = timed(listing.list_offsets, "list_offsets")
    listing.list_offsets = listed  # type: ignore[method-assign]

    def cycle(start: dict, batch: int) -> tuple[dict, float, float]:
        c0 = cpu_ms()
        end = planner.latest_offsets(start, 64 << 20)
        c1 = cpu_ms()
        ranges = planner.ranges(start, end)
        c2 = cpu_ms()
        if planner.caught_up:
            ranges += planner.idle_ranges(start, end, ranges)
        c3 = cpu_ms()
        results = copied(ranges)
        c4 = cpu_ms()
        committer.commit(results, batch)
        pieces.append({"latest_offsets": c1 - c0, "ranges": c2 - c1, "idle_ranges": c3 - c2})
        return end, c3 - c0, cpu_ms() - c4

    pieces: list[dict[str, float]] = []
    launched, c0 = time.monotonic(), cpu_ms()
    start = planner.initial_offsets()
    start, _, _ = cycle(start, 0)
    startup = {"cpu_ms": round(cpu_ms() - c0), "wall_s": round(time.monotonic() - launched, 2)}
    moving = tps[:: max(1, len(tps) // args.moving)][: args.moving]
    pieces.clear()
    TIMES.clear()
    plan_ms, commit_ms, walls = [], [], []
    profile = cProfile.Profile() if args.profile else None
    for batch in range(1, args.cycles + 1):
        produce(a.bootstrap, moving, 3)
        w0 = time.monotonic()
        if profile is not None:
            profile.enable()
        start, plan, commit = cycle(start, batch)
        if profile is not None:
            profile.disable()
        walls.append(time.monotonic() - w0)
        plan_ms.append(plan)
        commit_ms.append(commit)
    if profile is not None:
        profile.dump_stats(args.profile)
    committer.close()
    return {"partitions": len(tps), "moving": len(moving), "startup": startup,
            "steady_plan_cpu_ms_median": round(statistics.median(plan_ms), 1),
            "steady_commit_cpu_ms_median": round(statistics.median(commit_ms), 1),
            "steady_wall_s_median": round(statistics.median(walls), 3),
            "steady_plan_pieces_cpu_ms_median": {k: round(statistics.median(p[k] for p in pieces), 1)
                                                 for k in pieces[0]},
            "steady_list_offsets_cpu_ms_median": round(statistics.median(TIMES.get("list_offsets", [0])), 1),
            "spark_offsets_json_bytes": len(json.dumps(start))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--moving", type=int, default=100)
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--profile", help="write a cProfile of the steady cycles here")
    args = parser.parse_args()
    os.environ.setdefault(devcluster.JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")  # as the tests'
    with tempfile.TemporaryDirectory(prefix="plan-profile-") as tmp:
        workdir = Path(tmp)
        try:
            print(json.dumps(run(args, workdir), indent=1))
        finally:
            for name in ("plan-profile-a", "plan-profile-b"):
                with contextlib.suppress(devcluster.DevClusterError):
                    devcluster.kill_cluster_hard(name, workdir)
                    devcluster.stop_cluster(name, workdir)


if __name__ == "__main__":
    main()
