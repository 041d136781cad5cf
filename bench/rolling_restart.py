"""Rolling restarts and broker faults under a live stream: Apache MirrorMaker 2 or mm2py, one scenario.

``python -m bench.rolling_restart [--tool mm2|mm2py]``. Two three-broker KRaft clusters (A source,
B target; RF 3, min.insync.replicas 2). An idempotent acks=all producer streams ~300 records/s
into a 6-partition topic of A throughout, each value numbered, while, one event at a time:

  a. every source broker is stopped (SIGTERM: a controlled shutdown) and started again, the topic
     back in sync before the next;
  b. the same for every target broker;
  c. the leader of partition 0 is killed (SIGKILL) and restarted, on the source, then on the target;
  d. the target's leader of the remote partition 0 is frozen (SIGSTOP) for 60 s, then resumed.

After each event the scenario waits until every record acknowledged so far is on the target, and
notes whether the replicator still runs. At the end: records produced and mirrored, missing,
duplicates, partitions out of source order, the replicator's exit code; for MM2 also whether a
task FAILED (its log, and the Connect status topic on the target). It reports and does not judge;
``tests/integration/test_rolling_restart.py`` runs the same scenario against mm2py and asserts.

Ports: A on 31393 (+2, +4; controllers +1), B on 31493, mm2py's metrics on 31499, all shifted by
``MM2PY_TEST_PORT_OFFSET`` (or ``--port-offset``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from mm2py.dev import cluster as devcluster
from tests.integration.mirror_helpers import Replicator
from tests.kafkautil import Stream, compare, consume_all, end_offsets

REPO = Path(__file__).resolve().parent.parent
WORK = REPO / "bench" / "work" / "rolling-restart"
NAMES = {"source": "roll-a", "target": "roll-b"}
# Odd client ports: Linux's connect() takes even local ports (odd ones are left to bind()), so a
# client retrying a stopped broker never connects to itself on that broker's port, which then
# stays taken (a self-connection, then its TIME_WAIT) when the offset moves the ports into the
# ephemeral range (32768-60999): a restart once waited 75 s for 34394 and gave up.
BASE_PORTS = {"source": 31393, "target": 31493}
BASE_METRICS_PORT = 31499
BROKERS = 3
PARTITIONS = 6
RATE = 300  # records/s
MIN_ISR = "2"
PAUSE_SECONDS = 60
MM2_HEAP = "1g"
# what MM2 (and mm2py) leave out of topic config sync by default, minus min.insync.replicas: the
# remote topic must be as safe as its source (RF 3 there too). Dots unescaped: a backslash is an
# escape in a Java properties file, and "." matches a dot.
CONFIG_EXCLUDE = ("follower.replication.throttled.replicas, leader.replication.throttled.replicas, "
                  "message.timestamp.difference.max.ms, message.timestamp.type, unclean.leader.election.enable")
# MM2 log lines that mean a task or connector died (Connect does not restart a FAILED task itself)
FAILURE_MARKERS = ("Task threw an uncaught and unrecoverable exception", "will not recover until manually restarted",
                   "FAILED")


def port_offset() -> int:
    return int(os.environ.get("MM2PY_TEST_PORT_OFFSET", "0"))


@dataclass(frozen=True)
class Clusters:
    workdir: Path
    source: devcluster.DevCluster
    target: devcluster.DevCluster


def start_clusters(workdir: Path, offset: int) -> Clusters:
    started = {role: devcluster.start_cluster(NAMES[role], BASE_PORTS[role] + offset, workdir=workdir,
                                              brokers=BROKERS)
               for role in ("source", "target")}
    return Clusters(workdir, started["source"], started["target"])


def stop_clusters(workdir: Path) -> None:
    for name in NAMES.values():
        if devcluster.cluster_status(name, workdir) is not None:
            devcluster.stop_cluster(name, workdir)


def create_source_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    new = NewTopic(topic, PARTITIONS, BROKERS, config={"min.insync.replicas": MIN_ISR})
    admin.create_topics([new])[topic].result(30)
    devcluster.wait_in_sync(bootstrap, topic, 60)


def remote_topic_facts(bootstrap: str, remote: str) -> tuple[int, str | None]:
    """(replication factor, min.insync.replicas) of the remote topic on the target."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(remote, timeout=30).topics[remote]
    rf = min(len(p.replicas) for p in md.partitions.values())
    resource = ConfigResource(ConfigResource.Type.TOPIC, remote)
    entries = admin.describe_configs([resource])[resource].result(30)
    entry = entries.get("min.insync.replicas")
    return rf, entry.value if entry is not None else None


def flow_properties(tool: str, clusters: Clusters, topic: str, offset: int) -> str:
    lines = [
        "clusters = A, B",
        f"A.bootstrap.servers = {clusters.source.bootstrap}",
        f"B.bootstrap.servers = {clusters.target.bootstrap}",
        "A->B.enabled = true",
        f"A->B.topics = {topic}",
        "tasks.max = 2",
        "replication.factor = 3",
        "checkpoints.topic.replication.factor = 3",
        "heartbeats.topic.replication.factor = 3",
        "offset-syncs.topic.replication.factor = 3",
        f"config.properties.exclude = {CONFIG_EXCLUDE}",
        "sync.topic.acls.enabled = false",
        "refresh.topics.interval.seconds = 5",
    ]
    if tool == "mm2":  # the dedicated-mode Connect worker's own topics, on the target
        lines += ["offset.storage.replication.factor = 3", "config.storage.replication.factor = 3",
                  "status.storage.replication.factor = 3"]
    else:
        lines += ["A->B.trigger.interval.ms = 200", "A->B.admin.timeout.ms = 10000",
                  f"metrics.port = {BASE_METRICS_PORT + offset}"]
    return "\n".join(lines) + "\n"


class Mm2(Replicator):
    """Apache MirrorMaker 2 in dedicated mode, as a child process (same interface as mm2py's Replicator)."""

    def start(self) -> Mm2:
        libs = devcluster.ensure_kafka_jars()
        log4j = self.log_path.parent / "log4j2.yaml"
        log4j.write_text("Configuration:\n  Appenders:\n    Console:\n      name: OUT\n      PatternLayout:\n"
                         "        Pattern: \"[%d] %p %m (%c)%n\"\n  Loggers:\n    Root:\n      level: WARN\n"
                         "      AppenderRef:\n        - ref: OUT\n")
        log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            ["java", f"-Xmx{MM2_HEAP}", f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{libs}/*",
             "org.apache.kafka.connect.mirror.MirrorMaker", str(self.config_path)],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        return self


@dataclass
class Phase:
    name: str
    seconds: float  # the event and the catch-up after it
    catch_up_seconds: float
    caught_up: bool
    alive: bool
    duplicates: int | None = None  # on the target so far, when caught up
    note: str = ""


@dataclass
class Outcome:
    tool: str
    topic: str
    remote: str
    records: int = 0  # acknowledged by the source
    producer_failures: int = 0
    on_target: int = 0
    missing: int = 0
    duplicates: int = 0
    out_of_order: list[int] = field(default_factory=list)
    remote_replication_factor: int | None = None
    remote_min_insync_replicas: str | None = None
    phases: list[Phase] = field(default_factory=list)
    alive_throughout: bool = True
    exit_code: int | None = None
    stop_error: str = ""
    task_failures: list[str] = field(default_factory=list)  # MM2: log lines and FAILED states
    seconds: float = 0.0
    log: str = ""
    acked: dict[int, list[bytes]] = field(default_factory=dict, repr=False)

    def report(self) -> str:
        lines = [f"tool {self.tool}: topic {self.topic} -> {self.remote} (RF {self.remote_replication_factor}, "
                 f"min.insync.replicas {self.remote_min_insync_replicas})",
                 "phase                                  total s  catch-up s  caught up  alive  duplicates  note"]
        lines += [f"{p.name:<38} {p.seconds:7.1f}  {p.catch_up_seconds:10.1f}  {p.caught_up!s:>9}  {p.alive!s:>5}"
                  f"  {'-' if p.duplicates is None else p.duplicates:>10}  {p.note}" for p in self.phases]
        lines += [f"records acknowledged: {self.records} (producer failures {self.producer_failures}); "
                  f"on the target: {self.on_target}; missing: {self.missing}; duplicates: {self.duplicates}; "
                  f"partitions out of source order: {self.out_of_order or 'none'}",
                  f"replicator alive after every event: {self.alive_throughout}; exit code after SIGTERM: "
                  f"{self.exit_code}{' (' + self.stop_error + ')' if self.stop_error else ''}",
                  f"task failures: {len(self.task_failures)}"]
        lines += [f"  {line[:300]}" for line in self.task_failures[:10]]
        lines.append(f"scenario: {self.seconds:.0f} s; log: {self.log}")
        return "\n".join(lines)


class Scenario:
    """One run of the event sequence against one replicator; ``strict`` raises at the first failure."""

    def __init__(self, tool: str, clusters: Clusters, run_dir: Path, topic: str, offset: int, *, strict: bool,
                 catch_up_timeout: float = 240, stall_timeout: float = 120,
                 say: Callable[[str], None] = print):
        self.tool, self.clusters, self.run_dir, self.strict = tool, clusters, run_dir, strict
        self.catch_up_timeout, self.stall_timeout, self.say = catch_up_timeout, stall_timeout, say
        self.source, self.target = clusters.source.bootstrap, clusters.target.bootstrap
        self.outcome = Outcome(tool, topic, f"A.{topic}", log=str(run_dir / f"{tool}.log"))
        self.offset = offset
        self.rep: Replicator | None = None
        self.stream: Stream | None = None

    # -- helpers

    def _fail(self, message: str) -> None:
        if self.strict:
            tail = self.rep.tail() if self.rep is not None else ""
            raise AssertionError(f"{self.tool}: {message}\nreplicator log ({self.outcome.log}):\n{tail}")
        self.say(f"!! {message}")

    def _alive(self) -> bool:
        return self.rep is not None and self.rep.alive()

    def _target_count(self) -> int | None:
        try:
            offsets = end_offsets(self.target, self.outcome.remote)
        except Exception:  # the target may still be settling
            return None
        return sum(offsets.values()) if offsets else None

    def _wait_mirrored(self, acked: dict[int, list[bytes]], what: str) -> tuple[bool, float, str, int | None]:
        """Until every record of ``acked`` is on the target: (done, seconds, why not, duplicates so far)."""
        wanted = sum(len(v) for v in acked.values())
        started = time.monotonic()
        last, moved = None, started
        while True:
            now = time.monotonic()
            if not self._alive():
                return False, now - started, "replicator exited", None
            count = self._target_count()
            if count is not None and count != last:
                last, moved = count, now
            if count is not None and count >= wanted:
                try:
                    found = compare(self.target, self.outcome.remote, acked)
                    if found.missing == 0:
                        return True, time.monotonic() - started, "", found.duplicates
                except Exception:  # retried; the target may be settling
                    pass
            if now - started > self.catch_up_timeout:
                return False, now - started, f"{what}: not caught up after {self.catch_up_timeout:.0f} s " \
                                             f"({last} of {wanted} on the target)", None
            if now - moved > self.stall_timeout:
                return False, now - started, f"{what}: no progress for {self.stall_timeout:.0f} s " \
                                             f"({last} of {wanted} on the target)", None
            time.sleep(2)

    def _phase(self, name: str, event: Callable[[], str | None]) -> None:
        assert self.stream is not None
        self.say(f"-- {name}")
        started = time.monotonic()
        note = event() or ""
        done, catch_up, why, duplicates = self._wait_mirrored(self.stream.snapshot(), name)
        alive = self._alive()
        phase = Phase(name, round(time.monotonic() - started, 1), round(catch_up, 1), done, alive, duplicates,
                      "; ".join(x for x in (note, why) if x))
        self.outcome.phases.append(phase)
        self.outcome.alive_throughout &= alive
        self.say(f"   {phase.seconds:.1f} s (catch-up {phase.catch_up_seconds:.1f} s), caught up {done}, "
                 f"replicator alive {alive}, duplicates so far {duplicates}{', ' + phase.note if phase.note else ''}")
        if not alive:
            self._fail(f"the replicator exited during {name}")
        elif not done:
            self._fail(why)

    # -- events

    def _restart(self, role: str, index: int, topic: str, *, kill: bool) -> str:
        cluster = self.clusters.source if role == "source" else self.clusters.target
        if kill:
            devcluster.kill_broker(cluster.name, index, self.clusters.workdir)
        else:
            devcluster.stop_broker(cluster.name, index, self.clusters.workdir)
        down = time.monotonic()
        devcluster.start_broker(cluster.name, index, self.clusters.workdir)
        up = time.monotonic()
        devcluster.wait_in_sync(cluster.bootstrap, topic, 180)
        return f"down {up - down:.1f} s, in sync {time.monotonic() - up:.1f} s later"

    def _leader(self, role: str, topic: str) -> int:
        bootstrap = self.source if role == "source" else self.target
        leader = devcluster.partition_leaders(bootstrap, topic)[0]
        assert leader is not None, f"partition 0 of {topic} has no leader"
        return leader  # node.id == index in a multi-broker dev cluster

    def _pause(self, topic: str) -> str:
        index = self._leader("target", topic)
        name = self.clusters.target.name
        devcluster.pause_broker(name, index, self.clusters.workdir)
        try:
            time.sleep(PAUSE_SECONDS)
        finally:
            devcluster.resume_broker(name, index, self.clusters.workdir)
        resumed = time.monotonic()
        devcluster.wait_in_sync(self.target, topic, 180)
        return f"paused broker {index} for {PAUSE_SECONDS} s, in sync {time.monotonic() - resumed:.1f} s after"

    def _first_records(self) -> str:
        assert self.stream is not None
        deadline = time.monotonic() + 60
        while sum(len(v) for v in self.stream.acked.values()) < 100 and time.monotonic() < deadline:
            time.sleep(0.2)
        return ""

    # -- the run

    def run(self) -> Outcome:
        out = self.outcome
        t0 = time.monotonic()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        create_source_topic(self.source, out.topic)
        config = self.run_dir / f"{self.tool}.properties"
        config.write_text(flow_properties(self.tool, self.clusters, out.topic, self.offset))
        runner = Mm2 if self.tool == "mm2" else Replicator
        self.rep = runner(config, Path(out.log)).start()
        self.stream = Stream(self.source, out.topic, PARTITIONS, RATE).start()
        try:
            self._phase("start: the flow mirrors", self._first_records)
            try:
                out.remote_replication_factor, out.remote_min_insync_replicas = \
                    remote_topic_facts(self.target, out.remote)
            except Exception as e:  # reported
                self._fail(f"cannot describe {out.remote} on the target: {e}")
            events: list[tuple[str, Callable[[], str | None]]] = []
            for role, topic in (("source", out.topic), ("target", out.remote)):
                for i in range(BROKERS):
                    events.append((f"a/b: {role} broker {i} stopped+started",
                                   lambda role=role, i=i, topic=topic: self._restart(role, i, topic, kill=False)))
            for role, topic in (("source", out.topic), ("target", out.remote)):
                def kill(role: str = role, topic: str = topic) -> str:
                    leader = self._leader(role, topic)
                    return f"broker {leader}: " + self._restart(role, leader, topic, kill=True)
                events.append((f"c: {role} leader of p0 SIGKILLed", kill))
            events.append((f"d: target leader of p0 SIGSTOPped {PAUSE_SECONDS} s", lambda: self._pause(out.remote)))
            for name, event in events:
                if not self._alive():
                    break
                self._phase(name, event)
            out.records = self.stream.stop()
            out.producer_failures = len(self.stream.failed) + self.stream.unflushed
            if self.strict:
                assert self.stream.unflushed == 0 and not self.stream.failed, \
                    (self.stream.unflushed, self.stream.failed[:3])
            out.acked = self.stream.acked
            self._phase("end: every acknowledged record mirrored", lambda: None)
        finally:
            if self.stream is not None:
                self.stream._stop.set()
            out.alive_throughout &= self._alive()
            try:
                out.exit_code = self.rep.stop()
            except AssertionError as e:  # ignored SIGTERM: killed
                out.stop_error = str(e).splitlines()[0]
                out.exit_code = self.rep.proc.returncode if self.rep.proc is not None else None
            out.seconds = round(time.monotonic() - t0, 1)
        try:
            final = compare(self.target, out.remote, out.acked)
            out.on_target, out.missing, out.duplicates, out.out_of_order = \
                final.on_target, final.missing, final.duplicates, final.out_of_order
        except Exception as e:  # reported
            self._fail(f"cannot read {out.remote} on the target: {e}")
        if self.tool == "mm2":
            out.task_failures = mm2_failures(Path(out.log), self.target)
        return out


def mm2_failures(log: Path, target: str) -> list[str]:
    """Lines of MM2's log that tell of a dead task or connector, and FAILED states in its status topic."""
    found = [line for line in log.read_text(errors="replace").splitlines()
             if any(marker in line for marker in FAILURE_MARKERS)]
    try:
        records = consume_all(target, "mm2-status.A.internal", timeout=30)
    except Exception as e:  # reported
        return [*found, f"(status topic mm2-status.A.internal unreadable: {e})"]
    for rs in records.values():
        for r in rs:
            try:
                state = json.loads(r.value or b"{}").get("state")
            except ValueError:
                continue
            if state == "FAILED":
                key = (r.key or b"").decode(errors="replace")
                found.append(f"status topic: {key} FAILED")
    return found


def run_scenario(tool: str, clusters: Clusters, run_dir: Path, topic: str, offset: int, *, strict: bool,
                 say: Callable[[str], None] = print, timeout_scale: float = 1.0) -> Outcome:
    """The scenario; ``timeout_scale`` stretches its catch-up and no-progress bounds (a loaded test run's)."""
    return Scenario(tool, clusters, run_dir, topic, offset, strict=strict, say=say,
                    catch_up_timeout=240 * timeout_scale, stall_timeout=120 * timeout_scale).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tool", choices=("mm2", "mm2py"), default="mm2")
    parser.add_argument("--port-offset", type=int, default=port_offset(),
                        help="added to every port (default: $MM2PY_TEST_PORT_OFFSET or 0)")
    args = parser.parse_args(argv)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = WORK / f"{args.tool}-{stamp}"
    workdir = WORK / "clusters"
    t0 = time.monotonic()
    say = lambda line: print(line, flush=True)  # noqa: E731
    stop_clusters(workdir)  # leftovers of an interrupted run
    clusters = start_clusters(workdir, args.port_offset)
    say(f"clusters up in {time.monotonic() - t0:.0f} s: A {clusters.source.bootstrap}, B {clusters.target.bootstrap}")
    try:
        outcome = run_scenario(args.tool, clusters, run_dir, f"roll-{uuid.uuid4().hex[:6]}", args.port_offset,
                               strict=False, say=say)
    finally:
        stop_clusters(workdir)
    print(outcome.report())
    result = {k: v for k, v in asdict(outcome).items() if k != "acked"}
    (run_dir / "outcome.json").write_text(json.dumps(result, indent=1))
    print(f"total {time.monotonic() - t0:.0f} s; {run_dir / 'outcome.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
