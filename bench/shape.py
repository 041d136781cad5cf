"""Workload e of ``make bench``: production shape, 5,000 partitions (500 topics x 10).

For each tool (``floor``, ``mm2py``, ``mm2``), on two bench clusters of its own:

1. the 500 source topics are created afresh and a backlog is written into them (2 GB of 1 KiB
   records by default, spread evenly over the 5,000 partitions);
2. the tool starts (the floor: a plain consumer on A reads the backlog, no replicator); the
   catch-up ends when the target holds the whole backlog (start to end, and first mirrored
   record to last);
3. a probe producer writes a steady 20,000 records/s spread over all 5,000 partitions, each
   value carrying its send time; a probe consumer assigned to every remote partition (the
   floor: to the source partitions themselves) measures send-to-arrival latency once the rate
   has run ``--warmup`` seconds: p50, p99, p99.9, max;
4. after the probe stops and the target caught up, every partition is compared record by record
   with its source (``bench.landed``: count and digest); a difference fails the run;
5. measured over the run: the tool's CPU seconds by process and in the steady window (per
   second, and for mm2py per micro-batch of the driver: CLI, planner and Spark JVM), peak RSS.

    python -m bench.shape [--tools floor,mm2py,mm2] [--backlog-gb 2] [--steady-seconds 60]

Writes bench/shape-results.json and prints a Markdown table (docs/benchmarks.md quotes it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import struct
import subprocess
import sys
import tempfile
import threading
import time
from array import array
from dataclasses import asdict, dataclass, field
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import (
    BROKER_HEAP,
    BROKER_JVM,
    BROKER_PROPERTIES,
    REPO,
    WORK,
    Brokers,
    flow_properties,
    stop_tool,
    target_total,
    write_log4j,
)
from bench.common import command as bench_command
from bench.landed import check_landed
from bench.measure import TreeSampler, percentile
from mm2py.config.model import ClusterConfig
from mm2py.dev import cluster as devcluster
from mm2py.kafka.admin import Admin

A_PORT, B_PORT = 29292, 29392
NAMES = {"source": "shape-a", "target": "shape-b"}
# the driver's processes in local mode (bench.partition_memory names them the same way)
DRIVER_KINDS = ("python", "python:mm2py", "python:pyspark.sql.streaming.python_streaming_source_runner",
                "jvm:SparkSubmit")
STALL_SECONDS = 180
# mm2py's settings for this shape (--mm2py-settings): small batches from thousands of partitions
# are written as fewer, larger ones (mm2py.source.copy.small_run.SmallRun)
MM2PY_SETTINGS = "batch.coalesce.bytes = 262144"
MICRO_BATCH_LINE = re.compile(rb"micro-batch mirrored")


class ShapeBrokers(Brokers):
    NAMES = NAMES  # Brokers.data() finds the clusters by these names


@dataclass(frozen=True)
class Shape:
    topics: int = 500
    partitions: int = 10
    backlog_bytes: int = 2_000_000_000
    size: int = 1024  # backlog record value bytes
    steady_rate: int = 20_000
    steady_size: int = 100  # steady record value bytes (lz4, as workload c)
    warmup_seconds: int = 20
    steady_seconds: int = 60

    @property
    def backlog_records(self) -> int:
        return self.backlog_bytes // self.size // (self.topics * self.partitions) * self.topics * self.partitions

    def topic_names(self) -> list[str]:
        return [f"shape-{i:03d}" for i in range(self.topics)]


@dataclass
class ShapeResult:
    tool: str
    partitions: int
    backlog_records: int
    backlog_bytes: int
    startup_s: float = 0.0  # launch to the first record on the target
    catchup_s: float = 0.0  # launch to the whole backlog on the target
    catchup_window_s: float = 0.0  # first record to last
    catchup_mb_per_s: float = 0.0  # over the window
    steady_records: int = 0
    latency_ms: dict[str, float] = field(default_factory=dict)
    steady_cpu_per_s: float = 0.0  # the tool's CPU seconds per second in the measured steady window
    steady_cpu_by_kind_per_s: dict[str, float] = field(default_factory=dict)
    micro_batches_per_s: float = 0.0
    driver_cpu_ms_per_micro_batch: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mb: float = 0.0
    peak_rss_mb_by_kind: dict[str, float] = field(default_factory=dict)
    verified: str = ""
    verify_s: float = 0.0
    # per second of send time (epoch s): the slowest arrival's latency, ms (where the p99 comes from)
    worst_by_second: list[tuple[int, float]] = field(default_factory=list)


def prepare_topics(shape: Shape, admin: AdminClient, existing: set[str], brokers: Brokers) -> None:
    """Delete what a previous run left in the source topics and create them empty."""
    names = shape.topic_names()
    old = [t for t in names if t in existing]
    if old:
        for future in admin.delete_topics(old, operation_timeout=120).values():
            future.result(180)
        brokers.wait_deleted("source", old, timeout=300)
        deadline = time.monotonic() + 120
        while set(old) & set(admin.list_topics(timeout=30).topics) and time.monotonic() < deadline:
            time.sleep(0.5)
    for future in admin.create_topics([NewTopic(t, shape.partitions, 1) for t in names],
                                      operation_timeout=120).values():
        future.result(300)


def load_backlog(shape: Shape, bootstrap: str) -> float:
    """Write the backlog evenly over every partition; returns the seconds it took."""
    started = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20, "acks": 1,
                         "compression.type": "none", "log_level": 0, "queue.buffering.max.kbytes": 1 << 21})
    value = os.urandom(shape.size // 2).hex().encode()[: shape.size]
    names = shape.topic_names()
    per_partition = shape.backlog_records // (shape.topics * shape.partitions)
    for i in range(per_partition):
        for topic in names:
            for p in range(shape.partitions):
                while True:
                    try:
                        producer.produce(topic, value=value, key=b"%d" % i, partition=p)
                        break
                    except BufferError:
                        producer.poll(0.05)
    if producer.flush(600):
        raise RuntimeError("the backlog producer did not deliver everything within 600 s")
    return time.monotonic() - started


def _time_arrivals(bootstrap: str, assignment: list[tuple[str, int, int]], from_us: Synchronized,
                   to_us: Synchronized, stop: EventType, path: str) -> None:
    """The probe's consumer (a child process): send-to-arrival microseconds of records sent in the window."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "shape-probe",
                         "fetch.wait.max.ms": 10, "log_level": 0, "enable.auto.commit": False})
    consumer.assign([TopicPartition(t, p, o) for t, p, o in assignment])
    samples, sent = array("d"), array("d")
    while not stop.is_set():
        msgs = consumer.consume(10000, 0.1)
        low, high = from_us.value, to_us.value
        for msg in msgs:
            if msg.error() or len(msg.value() or b"") < 8:
                continue
            sent_us = struct.unpack(">q", msg.value()[:8])[0]
            if low <= sent_us <= high:
                samples.append(time.time_ns() / 1000 - sent_us)
                sent.append(sent_us)
    consumer.close()
    with open(path, "wb") as f:
        samples.tofile(f)
        sent.tofile(f)


class SteadyProbe:
    """A steady producer over every source partition, send time in the value; a consumer timing arrivals."""

    def __init__(self, shape: Shape, topics: list[str], consume_bootstrap: str, consume_topics: list[str],
                 starts: dict[tuple[str, int], int]):
        self.shape, self.topics = shape, topics
        self.consume_bootstrap, self.consume_topics, self.starts = consume_bootstrap, consume_topics, starts
        self.samples: list[float] = []
        self.sent_us: list[float] = []  # each sample's send time (µs since the epoch)
        self.sent = 0
        # the consumer runs in a process of its own (consume): it shares neither the GIL nor a
        # core's time slices with the producer's thread, in the floor's runs as in the tools'
        context = multiprocessing.get_context("spawn")
        self.stop = context.Event()
        # send times (µs) bounding the measured window, shared with the consumer's process
        self.measure_from_us = context.Value("d", float("inf"))
        self.measure_to_us = context.Value("d", float("inf"))
        self._context = context
        self.window: tuple[float, float] = (0.0, 0.0)  # monotonic start and end of the measured window

    def produce(self) -> None:
        s = self.shape
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{A_PORT}", "linger.ms": 5, "acks": 1,
                             "compression.type": "lz4", "log_level": 0,
                             "queue.buffering.max.messages": 2_000_000})
        pad = b"x" * (s.steady_size - 8)
        targets = [(t, p) for p in range(s.partitions) for t in self.topics]
        t0 = time.monotonic()
        while time.monotonic() - t0 < s.warmup_seconds + s.steady_seconds:
            if time.monotonic() - t0 >= s.warmup_seconds and self.measure_from_us.value == float("inf"):
                self.measure_from_us.value = time.time_ns() / 1000
                self.window = (time.monotonic(), 0.0)
            due = int((time.monotonic() - t0) * s.steady_rate)
            while self.sent < due:
                topic, p = targets[self.sent % len(targets)]
                try:
                    producer.produce(topic, value=struct.pack(">q", time.time_ns() // 1000) + pad, partition=p)
                except BufferError:
                    producer.poll(0.05)
                    continue
                self.sent += 1
            producer.poll(0)
            time.sleep(0.002)
        self.measure_to_us.value = time.time_ns() / 1000
        self.window = (self.window[0], time.monotonic())
        if producer.flush(120):
            raise RuntimeError("the steady producer did not deliver everything within 120 s")

    def consume(self) -> None:
        """Time every record from send to arrival in a child process until ``stop`` is set."""
        with tempfile.NamedTemporaryFile(prefix="shape-probe-", suffix=".f64", delete=False) as f:
            path = f.name
        try:
            child = self._context.Process(target=_time_arrivals, daemon=True, args=(
                self.consume_bootstrap, [(t, p, self.starts.get((t, p), 0)) for t in self.consume_topics
                                         for p in range(self.shape.partitions)],
                self.measure_from_us, self.measure_to_us, self.stop, path))
            child.start()
            child.join()
            if child.exitcode != 0:
                raise RuntimeError(f"the probe's consumer process failed (exit code {child.exitcode})")
            both = array("d")
            with open(path, "rb") as f:
                both.frombytes(f.read())
            half = len(both) // 2
            self.samples, self.sent_us = both[:half].tolist(), both[half:].tolist()
        finally:
            os.unlink(path)

    def latency(self) -> dict[str, float]:
        if not self.samples:
            return {}
        return {"p50": percentile(self.samples, 0.5) / 1000, "p99": percentile(self.samples, 0.99) / 1000,
                "p99.9": percentile(self.samples, 0.999) / 1000, "max": max(self.samples) / 1000,
                "count": len(self.samples)}

    def worst_by_second(self) -> list[tuple[int, float]]:
        """The slowest arrival of each second of send time, ms: the tails' timeline."""
        worst: dict[int, float] = {}
        for latency, sent in zip(self.samples, self.sent_us, strict=True):
            second = int(sent // 1e6)
            worst[second] = max(worst.get(second, 0.0), latency / 1000)
        return sorted((s, round(ms)) for s, ms in worst.items())


def properties(alias: str, shape: Shape, tool: str) -> str:
    lines = flow_properties(alias, A_PORT, B_PORT, "shape-.*")
    if tool == "mm2py":
        lines += [line.strip() for line in MM2PY_SETTINGS.split(";") if line.strip()]
    if tool == "mm2":
        # as an MM2 operator sets it for 5,000 partitions on a 2-core worker: a few tasks (each a
        # consumer and a producer), a batching producer with requests in flight, large fetches
        lines += [
            "tasks.max = 4",
            "tgt.producer.linger.ms = 20",
            "tgt.producer.batch.size = 524288",
            "tgt.producer.max.in.flight.requests.per.connection = 5",
            # with requests in flight, only the idempotent producer keeps a partition's order through
            # a retry: without it MM2 wrote 10 records of a partition before the 87 ahead of them
            # (the first produce to a just-created remote topic was retried), and verification failed
            "tgt.producer.enable.idempotence = true",
            f"{alias}.consumer.max.poll.records = 10000",
            f"{alias}.consumer.fetch.max.bytes = 67108864",
            f"{alias}.consumer.max.partition.fetch.bytes = 1048576",
        ]
    return "\n".join(lines) + "\n" + os.environ.get("BENCH_EXTRA", "").replace(";", "\n") + "\n"


def command(tool: str, config: Path) -> list[str]:
    if tool == "mm2":
        return bench_command(tool, config)
    # INFO: the steady window's micro-batches are counted from mm2py's "micro-batch mirrored" lines
    return [sys.executable, "-m", "mm2py", "run", str(config), "--log-level", "INFO"]


def wait_for(what: str, done, deadline: float, proc: subprocess.Popen | None = None, log: Path | None = None) -> None:
    last, moved = None, time.monotonic()
    while True:
        value = done()
        if value is True:
            return
        if value != last:
            last, moved = value, time.monotonic()
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the tool exited with {proc.returncode}; see {log}")
        if time.monotonic() > deadline or time.monotonic() - moved > STALL_SECONDS:
            raise RuntimeError(f"{what}: stopped at {last}; see {log}")
        time.sleep(0.5)


def run_floor(shape: Shape) -> ShapeResult:
    """No replicator: a plain consumer reads the backlog on A; the probe is timed A to A."""
    names = shape.topic_names()
    result = ShapeResult("floor", shape.topics * shape.partitions, shape.backlog_records,
                         shape.backlog_records * shape.size)
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{A_PORT}", "group.id": "shape-floor", "log_level": 0,
                         "enable.auto.commit": False, "fetch.max.bytes": 64 << 20,
                         "max.partition.fetch.bytes": 1 << 20})
    consumer.assign([TopicPartition(t, p, 0) for t in names for p in range(shape.partitions)])
    t0, count, first = time.monotonic(), 0, None
    while count < shape.backlog_records:
        msgs = consumer.consume(10000, 1.0)
        if msgs and first is None:
            first = time.monotonic()
        count += sum(1 for m in msgs if not m.error())
        if time.monotonic() - t0 > 600:
            raise RuntimeError(f"floor: read {count} of {shape.backlog_records} backlog records in 600 s")
    done = time.monotonic()
    consumer.close()
    result.catchup_s = round(done - t0, 2)
    result.startup_s = round((first or done) - t0, 2)
    result.catchup_window_s = round(done - (first or t0), 2)
    result.catchup_mb_per_s = round(result.backlog_bytes / max(done - (first or t0), 1e-6) / 1e6, 1)
    admin = Admin(ClusterConfig("A", f"127.0.0.1:{A_PORT}"))
    ends = admin.list_offsets([(t, p) for t in names for p in range(shape.partitions)], "latest")
    probe = SteadyProbe(shape, names, f"127.0.0.1:{A_PORT}", names, ends)
    steady(probe)
    result.steady_records, result.latency_ms = probe.sent, probe.latency()
    result.worst_by_second = probe.worst_by_second()
    return result


def steady(probe: SteadyProbe) -> None:
    reader = threading.Thread(target=probe.consume, daemon=True)
    reader.start()
    try:
        probe.produce()
        time.sleep(3)  # the last records' latencies
    finally:
        probe.stop.set()
        reader.join(30)


def micro_batches(log: Path) -> int:
    with open(log, "rb") as f:
        return len(MICRO_BATCH_LINE.findall(f.read()))


def run_tool(tool: str, shape: Shape, brokers: Brokers) -> ShapeResult:
    alias = f"e{tool.replace('mm2py', 'py')}{int(time.time()) % 100000}"
    names = shape.topic_names()
    remote = [f"{alias}.{t}" for t in names]
    config = WORK / f"{alias}.properties"
    config.write_text(properties(alias, shape, tool))
    log = WORK / f"{alias}.log"
    dst = Admin(ClusterConfig("tgt", f"127.0.0.1:{B_PORT}"), timeout_ms=120_000)
    result = ShapeResult(tool, shape.topics * shape.partitions, shape.backlog_records,
                         shape.backlog_records * shape.size)
    out = open(log, "wb")  # noqa: SIM115 - closed below
    t0 = time.monotonic()
    proc = subprocess.Popen(command(tool, config), stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                            start_new_session=True)
    first: list[float] = []

    def landed_backlog() -> bool | int:
        n = target_total(dst, remote)
        if n and not first:
            first.append(time.monotonic())
        return True if n >= shape.backlog_records else n

    try:
        with TreeSampler(proc.pid, 0.5) as sampler:
            wait_for(f"{tool} catch-up", landed_backlog, t0 + 3600, proc, log)
            done = time.monotonic()
            result.startup_s = round(first[0] - t0, 2)
            result.catchup_s = round(done - t0, 2)
            result.catchup_window_s = round(done - first[0], 2)
            result.catchup_mb_per_s = round(result.backlog_bytes / max(done - first[0], 1e-6) / 1e6, 1)
            print(f"{tool}: backlog on the target {result.catchup_s:.1f} s after launch "
                  f"({result.catchup_mb_per_s} MB/s from the first record)", flush=True)
            ends = dst.list_offsets([(t, p) for t in remote for p in range(shape.partitions)], "latest")
            probe = SteadyProbe(shape, names, f"127.0.0.1:{B_PORT}", remote, ends)
            reader = threading.Thread(target=probe.consume, daemon=True)
            reader.start()
            marks: dict[str, tuple[dict[str, float], int]] = {}

            def mark(name: str) -> None:
                marks[name] = (sampler.cpu_by_kind_now(), micro_batches(log))

            producer = threading.Thread(target=probe.produce, daemon=True)
            producer.start()
            time.sleep(shape.warmup_seconds)
            mark("from")
            producer.join()
            mark("to")
            window = probe.window[1] - probe.window[0]
            sent = probe.sent

            def landed_all() -> bool | int:
                n = target_total(dst, remote)
                return True if n >= shape.backlog_records + sent else n

            wait_for(f"{tool} steady records", landed_all, time.monotonic() + 600, proc, log)
            time.sleep(3)
            probe.stop.set()
            reader.join(30)
    finally:
        stop_tool(proc)
        out.close()
    result.steady_records, result.latency_ms = sent, probe.latency()
    result.worst_by_second = probe.worst_by_second()
    (cpu_from, batches_from), (cpu_to, batches_to) = marks["from"], marks["to"]
    used = {k: cpu_to.get(k, 0.0) - cpu_from.get(k, 0.0) for k in cpu_to}
    result.steady_cpu_per_s = round(sum(used.values()) / window, 3)
    result.steady_cpu_by_kind_per_s = {k: round(v / window, 3) for k, v in sorted(used.items()) if v > 0.05}
    if tool == "mm2py" and batches_to > batches_from:
        result.micro_batches_per_s = round((batches_to - batches_from) / window, 2)
        driver = sum(v for k, v in used.items() if k in DRIVER_KINDS)
        result.driver_cpu_ms_per_micro_batch = round(driver * 1000 / (batches_to - batches_from), 1)
    result.cpu_s = round(sampler.result.cpu_seconds, 1)
    result.peak_rss_mb = round(sampler.result.peak_rss / 2**20)
    result.peak_rss_mb_by_kind = {k: round(v / 2**20) for k, v in sampler.result.peak_rss_by_kind.items()
                                  if v > 20 << 20}
    landed = check_landed(ClusterConfig("A", f"127.0.0.1:{A_PORT}"), ClusterConfig("tgt", f"127.0.0.1:{B_PORT}"),
                          list(zip(names, remote, strict=True)))
    result.verified, result.verify_s = landed.verdict(), round(landed.seconds, 1)
    if not landed.complete or landed.records_source != shape.backlog_records + sent:
        differing = [(t, int(p)) for t, p in (d.rsplit(":", 1) for d in landed.differing_partitions[:5])]
        counts = {f"{t}:{p}": (Admin(ClusterConfig("A", f"127.0.0.1:{A_PORT}")).list_offsets([(t, p)])[(t, p)],
                               dst.list_offsets([(f"{alias}.{t}", p)])[(f"{alias}.{t}", p)]) for t, p in differing}
        raise RuntimeError(f"{tool}: the target differs from the source ({landed.verdict()}; "
                           f"{landed.records_source} source records, {shape.backlog_records + sent} written); "
                           f"first differing partitions with their source and target ends: {counts}; "
                           f"the clusters are kept in {brokers.workdir} (--keep)")
    target_admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{B_PORT}"})  # kept: its futures die with it
    for future in target_admin.delete_topics(remote, operation_timeout=120).values():
        future.result(180)
    brokers.wait_deleted("target", remote, timeout=300)
    return result


def table(results: list[ShapeResult]) -> str:
    lines = ["| tool | catch-up s (launch to end) | catch-up MB/s (first to last) | steady p50/p99/p99.9/max ms | "
             "CPU/s steady | driver CPU ms per micro-batch | micro-batches/s | peak RSS MB | verified |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lat = "/".join(f"{r.latency_ms[k]:.0f}" for k in ("p50", "p99", "p99.9", "max")) if r.latency_ms else "-"
        # a window under 2 s (a tiny --backlog-gb) is one poll of the target: no rate to speak of
        rate = f"{r.catchup_mb_per_s:.1f}" if r.catchup_window_s >= 2 else "-"
        lines.append(f"| {r.tool} | {r.catchup_s:.1f} | {rate} | {lat} | "
                     f"{r.steady_cpu_per_s:.2f} | {r.driver_cpu_ms_per_micro_batch or '-'} | "
                     f"{r.micro_batches_per_s or '-'} | {r.peak_rss_mb:.0f} | {r.verified or '-'} |")
    by = {r.tool: r for r in results}
    if "mm2py" in by and "mm2" in by:
        py, mm = by["mm2py"], by["mm2"]
        rates = (f"{py.catchup_mb_per_s / max(mm.catchup_mb_per_s, 1e-9):.2f}x the MB/s first to last"
                 if min(py.catchup_window_s, mm.catchup_window_s) >= 2 else "no rate (a window under 2 s)")
        lines += ["", f"catch-up mm2py/MM2: {mm.catchup_s / py.catchup_s:.2f}x as fast launch to end, {rates}; "
                      f"steady CPU mm2py/MM2: {py.steady_cpu_per_s / max(mm.steady_cpu_per_s, 1e-9):.2f}x"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    global MM2PY_SETTINGS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", default="floor,mm2py,mm2")
    parser.add_argument("--topics", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--backlog-gb", type=float, default=2.0)
    parser.add_argument("--steady-rate", type=int, default=20_000)
    parser.add_argument("--steady-seconds", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=20, help="seconds at the steady rate before latencies count")
    parser.add_argument("--broker-dir", default="/dev/shm/mm2py-shape")
    parser.add_argument("--mm2py-settings", default=MM2PY_SETTINGS,
                        help="properties added to mm2py's file, ';'-separated")
    parser.add_argument("--keep", action="store_true", help="leave the clusters running when a run fails")
    args = parser.parse_args(argv)
    MM2PY_SETTINGS = args.mm2py_settings
    shape = Shape(args.topics, args.partitions, int(args.backlog_gb * 1e9), steady_rate=args.steady_rate,
                  steady_seconds=args.steady_seconds, warmup_seconds=args.warmup)
    workdir = Path(args.broker_dir)
    write_log4j(WORK)
    setting = (f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, Kafka "
               f"{devcluster.KAFKA_VERSION}, broker logs in {workdir}, {shape.topics} topics x {shape.partitions} "
               f"partitions, backlog {shape.backlog_records:,} x {shape.size} B, steady {shape.steady_rate:,}/s x "
               f"{shape.steady_size} B lz4 for {shape.warmup_seconds}+{shape.steady_seconds} s; mm2py: "
               f"{MM2PY_SETTINGS or 'defaults'}; MM2: tasks.max 4, linger 20 ms, batch 512 KiB, 5 in flight, "
               "idempotent")
    print(setting, flush=True)
    brokers = ShapeBrokers(workdir, {
        role: devcluster.start_cluster(NAMES[role], port, workdir=workdir, heap=BROKER_HEAP, jvm_options=BROKER_JVM,
                                       extra_properties=BROKER_PROPERTIES).pid
        for role, port in (("source", A_PORT), ("target", B_PORT))})
    results: list[ShapeResult] = []
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{A_PORT}"})
    failed = False
    try:
        for tool in args.tools.split(","):
            prepare_topics(shape, admin, set(admin.list_topics(timeout=30).topics), brokers)
            loaded = load_backlog(shape, f"127.0.0.1:{A_PORT}")
            print(f"{tool}: backlog of {shape.backlog_records:,} records loaded in {loaded:.0f} s", flush=True)
            r = run_floor(shape) if tool == "floor" else run_tool(tool, shape, brokers)
            results.append(r)
            print(json.dumps(asdict(r)), flush=True)
            (REPO / "bench" / "shape-results.json").write_text(
                json.dumps({"setting": setting, "results": [asdict(x) for x in results]}, indent=1))
    except BaseException:
        failed = True
        raise
    finally:
        if not (failed and args.keep):
            for name in NAMES.values():
                devcluster.stop_cluster(name, workdir)
    print(setting)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
