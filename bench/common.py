"""What bench/run.py and bench/shape.py share: where the bench works, its brokers' settings and
processes, the lines every bench file starts with, and how each tool is started and stopped.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import psutil

from bench import mm2_variants
from mm2py.dev import cluster as devcluster
from mm2py.kafka.admin import Admin

REPO = Path(__file__).resolve().parent.parent
# added to every port the bench's clusters listen on, as MM2PY_TEST_PORT_OFFSET moves the tests'
# (tests/conftest.py): benches of several checkouts then run side by side
PORT_OFFSET = int(os.environ.get("MM2PY_TEST_PORT_OFFSET", "0"))
WORK = REPO / "bench" / "work"
BROKER_PROPERTIES = {
    # a mirrored topic is deleted after each run; its files must leave before the next run, not
    # a minute later (the default delay), or two runs' copies share the disk or the memory
    "file.delete.delay.ms": 1000,
}
# The brokers' JVM as Kafka's own scripts start it (kafka-server-start.sh: -Xms = -Xmx;
# kafka-run-class.sh: G1 settings), with the 16 MB G1 regions of Kafka's documented production
# settings. With a 1 GB heap's default 1 MB regions every multi-MB produce request is a
# humongous object, and the target broker's concurrent marking took 9% of the machine during an
# mm2py b run; without -Xms the heap shrank between runs and grew back through page faults.
BROKER_HEAP = "1g"
BROKER_JVM = (f"-Xms{BROKER_HEAP}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
              "-XX:+ExplicitGCInvokesConcurrent", "-XX:G1HeapRegionSize=16M")


@dataclass(frozen=True)
class Brokers:
    """The bench's two broker processes and the folder that holds their clusters."""

    workdir: Path
    pids: dict[str, int]  # by role: source, target
    NAMES: ClassVar[dict[str, str]] = {"source": "bench-a", "target": "bench-b"}

    def data(self, role: str) -> Path:
        cluster = devcluster.cluster_status(self.NAMES[role], self.workdir)
        assert cluster is not None
        return cluster.data

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by each broker process, by role."""
        return {role: sum(psutil.Process(pid).cpu_times()[:2]) for role, pid in self.pids.items()}

    def wait_deleted(self, role: str, topics: list[str], timeout: float = 120) -> None:
        """Until the deleted topics' log folders are gone (renamed *-delete, then removed)."""
        data, deadline = self.data(role), time.monotonic() + timeout
        prefixes = tuple(f"{t}-" for t in topics)
        while any(f.name.startswith(prefixes) for f in data.iterdir()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {role} broker still holds log folders of deleted topics {topics[:3]}... "
                                   f"after {timeout:.0f} s in {data}")
            time.sleep(0.5)


def target_total(admin: Admin, remote: list[str]) -> int:
    topics = admin.topics()
    tps = [(t, p) for t in remote if t in topics for p in range(topics[t])]
    return sum(admin.list_offsets(tps, "latest").values()) if tps else 0


def flow_properties(alias: str, source_port: int, target_port: int, topics: str) -> list[str]:
    """The lines every bench file starts with: one flow ``alias->tgt`` on single-broker clusters."""
    return [
        f"clusters = {alias}, tgt",
        f"{alias}.bootstrap.servers = 127.0.0.1:{source_port}",
        f"tgt.bootstrap.servers = 127.0.0.1:{target_port}",
        f"{alias}->tgt.enabled = true",
        f"{alias}->tgt.topics = {topics}",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        "offset.storage.replication.factor = 1",
        "config.storage.replication.factor = 1",
        "status.storage.replication.factor = 1",
        "sync.topic.acls.enabled = false",
        "refresh.topics.interval.seconds = 5",
    ]


def stop_tool(proc: subprocess.Popen) -> None:
    """SIGTERM to the tool's process group (started with ``start_new_session``); SIGKILL after 60 s.
    Returns once the tool and every process under it exited: a JVM the tool launched outlives its
    parent by a moment, and may still write (a Spark checkpoint) after the parent is gone."""
    if proc.poll() is not None:
        return
    try:
        under = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        under = []
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    _, alive = psutil.wait_procs(under, timeout=60)
    for child in alive:
        child.kill()
    psutil.wait_procs(alive, timeout=10)


def write_log4j(work: Path) -> None:
    """MM2's log configuration for the bench, in ``work``: warnings and errors only."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "log4j2.yaml").write_text(
        "Configuration:\n  Appenders:\n    Console:\n      name: OUT\n      PatternLayout:\n"
        "        Pattern: \"[%d] %p %m (%c)%n\"\n  Loggers:\n    Root:\n      level: WARN\n"
        "      AppenderRef:\n        - ref: OUT\n")


def command(tool: str, config: Path, steady: bool = False) -> list[str]:
    if tool == "mm2" or tool.startswith("mm2@"):
        libs = devcluster.ensure_kafka_jars()
        heap = mm2_variants.variant_of(tool, steady)[1].heap
        return ["java", f"-Xmx{heap}", f"-Dlog4j2.configurationFile={WORK / 'log4j2.yaml'}", "-cp", f"{libs}/*",
                "org.apache.kafka.connect.mirror.MirrorMaker", str(config)]
    if tool == "copier":  # mm2py's copy path without Spark: the machine's ceiling (bench.copier)
        return [sys.executable, "-m", "bench.copier", str(config)]
    # mm2py and its variants (exactly-once mode, low latency...: set in the properties)
    level = os.environ.get("BENCH_MM2PY_LOG", "WARNING")
    return [sys.executable, "-m", "mm2py", "run", str(config), "--log-level", level]
