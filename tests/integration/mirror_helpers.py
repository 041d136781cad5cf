"""Shared helpers for tests that run mm2py flows on real clusters and real Spark."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from mm2py.config import load_text
from mm2py.config.model import MirrorMakerConfig
from mm2py.dev import cluster as devcluster
from mm2py.engine.driver import Engine
from mm2py.ops.failover import plan_failover
from mm2py.stores.positions import PositionStore
from tests.integration import reaper
from tests.kafkautil import TIMEOUT_SCALE, Stream, consume, create_topic, end_offsets, produce

REPO = Path(__file__).resolve().parents[2]

SINGLE_BROKER = """
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
"""


@contextlib.contextmanager
def three_brokers(name: str, port: int, workdir: Path) -> Iterator[devcluster.DevCluster]:
    """A three-broker dev cluster whose controllers fence a stopped or frozen broker 6 s after its
    last heartbeat (default 9 s); stopped at exit."""
    cluster = devcluster.start_cluster(name, port, workdir=workdir, brokers=3, extra_properties={
        "broker.session.timeout.ms": 6000, "broker.heartbeat.interval.ms": 1000})
    try:
        yield cluster
    finally:
        devcluster.stop_cluster(name, workdir)


def properties(clusters: dict[str, str], flows: dict[str, dict[str, str]], extra: str = "") -> str:
    """An MM2 properties text: ``clusters`` alias -> bootstrap, ``flows`` "A->B" -> flow keys."""
    lines = [f"clusters = {', '.join(clusters)}"]
    lines += [f"{alias}.bootstrap.servers = {bootstrap}" for alias, bootstrap in clusters.items()]
    for flow, keys in flows.items():
        lines.append(f"{flow}.enabled = true")
        lines += [f"{flow}.{k} = {v}" for k, v in keys.items()]
    return "\n".join(lines) + "\n" + SINGLE_BROKER + extra


def mirror_once(spark, text: str, tmp_path: Path, timeout: float = 240) -> Engine:
    """Run every enabled flow in-process until it caught up with what the sources hold now."""
    config: MirrorMakerConfig = load_text(text)
    engine = Engine(config, spark, str(tmp_path / "ckpt"))
    try:
        engine.start(config.enabled_flows, until_caught_up=True)
        engine.await_caught_up(timeout)
    finally:
        engine.stop()
    return engine


class Replicator:
    """``connect-mirror-maker`` as a real child process, as an operator runs it."""

    def __init__(self, config_path: Path, log_path: Path, *args: str):
        self.config_path = config_path
        self.log_path = log_path
        self.args = args
        self.proc: subprocess.Popen | None = None

    def start(self) -> Replicator:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        cmd = [sys.executable, "-c", "import sys; from mm2py.cli import connect_mirror_maker_main as m; "
               "sys.exit(m())", str(self.config_path), *self.args]
        self.proc = reaper.track(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                                  start_new_session=True), f"replicator of {self.config_path}")
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the whole process tree (driver JVM and Python workers too)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, timeout: float = 90, *, driver_only: bool = False) -> int:
        """SIGTERM to the process group (as Ctrl-C or systemd), or with ``driver_only`` to mm2py's process alone.

        The signal goes once mm2py's process catches it: before that the interpreter is still starting
        (no mm2py code has run, nothing can be owed) and any program dies of it, as Python's default."""
        assert self.proc is not None
        proc = self.proc
        wait_for(lambda: proc.poll() is not None or _catches(proc.pid, signal.SIGTERM), 30,
                 f"replicator {proc.pid} catching SIGTERM")
        if self.proc.poll() is None:  # not reaped meanwhile: its pid is still its own
            if driver_only:
                os.kill(self.proc.pid, signal.SIGTERM)
            else:
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
                raise AssertionError(f"replicator ignored SIGTERM for {timeout} s; log: {self.tail()}") from None
        return self.proc.returncode

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])


def _catches(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (the SigCgt mask of /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(mask >> (signum - 1) & 1)


def wait_for(predicate, timeout: float, message: str, replicator: Replicator | None = None) -> None:
    """Poll ``predicate`` each second until truthy; AssertionError naming ``message`` after ``timeout``
    s (times kafkautil's ``TIMEOUT_SCALE``) or as soon as ``replicator`` exited."""
    timeout *= TIMEOUT_SCALE
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if replicator is not None and not replicator.alive():
            raise AssertionError(f"replicator exited while waiting for: {message}\n{replicator.tail()}")
        time.sleep(1)
    extra = f"\nreplicator log:\n{replicator.tail()}" if replicator else ""
    raise AssertionError(f"timed out after {timeout} s waiting for: {message}{extra}")


def python_workers(root: int) -> list[psutil.Process]:
    """Spark's Python workers under process ``root``: children of the worker daemon (mm2py.connectors.daemon)."""
    try:
        tree = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []

    def command(p: psutil.Process) -> str:
        try:
            return " ".join(p.cmdline())
        except psutil.Error:  # gone, or a zombie
            return ""

    def children(p: psutil.Process) -> list[psutil.Process]:
        try:
            return p.children()
        except psutil.Error:  # the daemon ended since the tree was listed
            return []

    daemons = [p for p in tree if "mm2py.connectors.daemon" in command(p)]
    return [w for d in daemons for w in children(d)]


def kill_python_workers(replicator: Replicator) -> int:
    """SIGKILL every Spark Python worker of ``replicator``; how many were hit (one may end meanwhile)."""
    hit = 0
    for worker in python_workers(replicator.proc.pid) if replicator.proc else []:
        with contextlib.suppress(ProcessLookupError):
            os.kill(worker.pid, signal.SIGKILL)
            hit += 1
    return hit


def a_group_on_a_mirrored_topic(spark, cluster_a, cluster_b, unique_name: str, tmp_path):
    """3,000 records in 3 partitions mirrored A->B, a group that read part of each on A; (topic, file text, plan)."""
    topic = f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, topic, 3)
    values = [f"o-{i}".encode() for i in range(3000)]
    for p in range(3):
        produce(cluster_a.bootstrap, topic, [(b"k", v, None, None) for v in values[p::3]], partition=p)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    mirror_once(spark, text, tmp_path / "m1")
    group = f"{unique_name}-g"
    consume(cluster_a.bootstrap, group, topic, limits={0: 333, 1: 1000, 2: 1})
    return topic, text, plan_failover(load_text(text), group, "A", "B")


def stop_at_the_ends(stream: Stream, source: str, topic: str, store: PositionStore, replicator: Replicator,
                     timeout: float) -> int:
    """Stop ``stream``, wait for the flow's positions on the target at ``topic``'s ends on ``source``,
    then stop ``replicator`` cleanly; the records sent."""
    sent = stream.stop()
    assert not stream.failed, stream.failed[:3]
    ends = end_offsets(source, topic)
    wait_for(lambda: {tp: at for tp, at in store.load().items() if tp[0] == topic}
             == {(topic, p): end - 1 for p, end in ends.items()}, timeout,
             "positions on B at the source's ends", replicator)
    assert replicator.stop() == 0, replicator.tail()
    return sent


def card_records(n: int) -> list[tuple]:
    """Values with digits to mask; every 9th holds DROP, every 11th a tombstone; recent timestamps."""
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        value: bytes | None = b"order %d card 4%015d" % (i, i * 7919)
        if i % 9 == 0:
            value = b"DROP %d" % i
        if i % 11 == 0:
            value = None
        out.append((b"k%d" % (i % 30), value, [("id", b"%d" % i)], now + i))
    return out


def batch_lines(log: Path) -> list[dict[str, int]]:
    """records and tailed_records of every ``micro-batch mirrored`` line of the replicator's log."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if '"micro-batch mirrored"' in line:
            event = json.loads(line[line.index("{"):])  # a child process logs JSON lines
            out.append({"records": event["records"], "tailed": event["tailed_records"]})
    return out


def copy_intervals(log: Path) -> int:
    """Micro-batches in ``log`` that copied past their planned ends: tails, or copy intervals where
    ``copy.tail.ms = 0``."""
    return sum(1 for b in batch_lines(log) if b["tailed"])


def next_commit(log: Path, replicator: Replicator, timeout: float = 60) -> None:
    """Return as the next micro-batch's commit line is written: its handover to the next plan and launch."""
    seen = len(batch_lines(log))
    deadline = time.monotonic() + timeout * TIMEOUT_SCALE
    while len(batch_lines(log)) == seen and time.monotonic() < deadline and replicator.alive():
        time.sleep(0.01)
    assert len(batch_lines(log)) > seen, replicator.tail()


def records_behind(bootstrap: str, topic: str, store: PositionStore) -> int:
    """Records of ``topic`` on the source past the positions recorded on the target."""
    return sum(end_offsets(bootstrap, topic).values()) - sum(at + 1 for tp, at in store.load().items()
                                                              if tp[0] == topic)
