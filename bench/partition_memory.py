"""Memory per mirrored partition: the replicator's peak RSS by process kind at two flow sizes.

One flow, ``--small`` then ``--large`` topics of 10 partitions (a few records each), each run
``connect-mirror-maker --once`` as a child process on two dev clusters of its own; the
difference between the two runs' peaks, over the difference in partitions, is what a
partition costs in the driver (the CLI process, Spark's JVM, the Python process running the data
sources' planning) and in the Python workers that run the tasks. Every record is checked on the
target before a figure counts.

    python -m bench.partition_memory [--small 50] [--large 400] [--port-offset -12000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.measure import TreeSampler
from mm2py.dev import cluster as devcluster
from tests.integration.mirror_helpers import properties
from tests.kafkautil import end_offsets

PARTITIONS, RECORDS = 10, 20
LABELS = {
    "python": "driver: connect-mirror-maker (Python)",
    "python:pyspark.sql.streaming.python_streaming_source_runner": "driver: data source runner (planning)",
    "jvm:SparkSubmit": "driver: Spark JVM",
    "python:mm2py.connectors.daemon": "Python workers (copy tasks), all",
    "jvm:Main": "spark-submit launcher",
}


def fill(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics], operation_timeout=120).values():
        future.result(180)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "log_level": 0})
    for t in topics:
        for p in range(PARTITIONS):
            for i in range(RECORDS):
                producer.produce(t, value=b"%d" % i, partition=p)
        producer.poll(0)
    assert producer.flush(120) == 0


def run(workdir: Path, a: str, b: str, prefix: str, topics: int) -> dict[str, float]:
    names = [f"{prefix}-{i:04d}" for i in range(topics)]
    fill(a, names)
    config = workdir / f"{prefix}.properties"
    config.write_text(properties({"A": a, "B": b}, {"A->B": {"topics": f"{prefix}-.*",
                                                          "emit.checkpoints.enabled": "false"}}))
    cmd = [sys.executable, "-c", "import sys; from mm2py.cli import connect_mirror_maker_main as m; sys.exit(m())",
           str(config), "--once", "--checkpoint-dir", str(workdir / f"{prefix}-ckpt")]
    started = time.monotonic()
    with open(workdir / f"{prefix}.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        with TreeSampler(proc.pid, 0.1) as sampler:
            rc = proc.wait(1800)
    assert rc == 0, (workdir / f"{prefix}.log").read_text()[-3000:]
    landed = sum(sum(end_offsets(b, f"A.{t}").values()) for t in names)
    assert landed == topics * PARTITIONS * RECORDS, f"{landed} records on the target"
    out = {kind: rss / 2**20 for kind, rss in sampler.result.peak_rss_by_kind.items()}
    out["seconds"] = time.monotonic() - started
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=50, help="topics of 10 partitions in the small run")
    parser.add_argument("--large", type=int, default=400, help="topics of 10 partitions in the large run")
    parser.add_argument("--port-offset", type=int, default=-12000)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="mm2py-partmem-"))
    a = devcluster.start_cluster("partmem-a", 30092 + args.port_offset, workdir=workdir)
    b = devcluster.start_cluster("partmem-b", 30192 + args.port_offset, workdir=workdir)
    try:
        small = run(workdir, a.bootstrap, b.bootstrap, "small", args.small)
        large = run(workdir, a.bootstrap, b.bootstrap, "large", args.large)
    finally:
        devcluster.stop_cluster("partmem-a", workdir)
        devcluster.stop_cluster("partmem-b", workdir)
    n_small, n_large = args.small * PARTITIONS, args.large * PARTITIONS
    print(f"| process | peak MiB at {n_small} partitions | at {n_large} | KiB per partition |")
    print("|---|---|---|---|")
    for kind in sorted(set(small) | set(large)):
        if kind == "seconds" or max(small.get(kind, 0.0), large.get(kind, 0.0)) < 10:
            continue  # short-lived helpers (launcher scripts, rm)
        s, l_ = small.get(kind, 0.0), large.get(kind, 0.0)
        print(f"| {LABELS.get(kind, kind)} | {s:.0f} | {l_:.0f} | {(l_ - s) * 1024 / (n_large - n_small):.1f} |")
    print(f"runs: {small['seconds']:.0f} s and {large['seconds']:.0f} s; every record checked on the target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
