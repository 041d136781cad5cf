"""``make bench``: Apache MirrorMaker 2 and mm2py, side by side, on the same data and machine.

Two local KRaft clusters (the tests' Kafka version); each workload is loaded into A once and
mirrored to B by MM2 (dedicated mode, tuned per its docs) and by mm2py, alternating, ``--pairs``
times. Each run uses its own source alias, so runs never share remote topics or positions.
Before the pairs of a workload, each tool runs it once unmeasured (``--warmup-runs``): the
brokers' JIT compilers then have compiled the fetch and produce paths every tool uses, and
no tool pays for that inside its measured window (during a first run on fresh brokers their
compiler threads took 11.8% of a 2-core machine's CPU, about 8 CPU-seconds). The brokers run
with the JVM options of Kafka's own start scripts, and each catch-up run's copy window starts
with the memory it needs recently touched (``WarmMemory``, held until the first record lands):
two costs of this machine, not of any replicator.
Writes bench/results.json and bench/results.md; ``--publish`` also writes the docs (bench.publish):
docs/bench-results.json and the summary in docs/benchmarks.md, to be committed.

``--security plaintext,tls`` runs every tool, floor included, in each mode on the same brokers
and loaded data: TLS runs reach both clusters through an SSL client listener beside each
broker's PLAINTEXT one, with the settings an MM2 operator writes (bench.security); the runs of
both modes alternate as one sequence, and each mode gets its own tables.

Tool ``floor`` is each workload with no replicator (run_floor, bench.floor): the backlog read on A
by Kafka's own consumer perf tool, or the probe reading the source topic itself; a target it misses is out of
reach on the machine, and the tables show it beside the tools.

Every run is checked for what landed (bench.landed) after the tool stopped: each partition of
the target's remote topics against the source's, record by record (count and SHA-256). A
partition with records missing, changed or foreign fails the bench; duplicates (at-least-once)
are reported.

Measured per run: records/s and MB/s from the first mirrored record to the last (start-up
excluded, reported apart), CPU seconds of the replicator's process tree per GB, its peak RSS;
for the steady workload, end-to-end latency per record (producer send -> consumer on B) once
the steady rate has run for a warm-up period.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import struct
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition

from bench import mm2_variants
from bench.common import (
    BROKER_HEAP,
    BROKER_JVM,
    BROKER_PROPERTIES,
    PORT_OFFSET,
    REPO,
    WORK,
    Brokers,
    command,
    flow_properties,
    stop_tool,
    target_total,
    write_log4j,
)
from bench.landed import check_landed
from bench.measure import TreeSampler, percentile
from bench.publish import publish, summarize
from bench.results import RunResult, cpu_per_gb
from bench.security import Network, TlsStores, broker_listeners, java_properties, make_stores, network, security_plan
from bench.variants import Variant, chain_lines, require_no_tombstones, sequence, variant_plan
from mm2py.config.model import ClusterConfig
from mm2py.dev import cluster as devcluster
from mm2py.kafka.admin import Admin
from mm2py.stores.positions import PositionStore, PositionTail

# MM2PY_TEST_PORT_OFFSET moves them (and the registries' and TLS listeners' beside them), as for the tests
A_PORT, B_PORT = 29092 + PORT_OFFSET, 29192 + PORT_OFFSET
TMPFS = Path("/dev/shm")
# left for the processes when broker logs live in memory: two brokers (1 GiB heaps), MM2 (3 GiB
# heap; ~2.6 GB RSS measured with 2 GiB) or mm2py (~2.2 GB), the load producer's buffers, the OS
PROCESS_HEADROOM = 8 << 30
# memory touched before a catch-up run besides the workload's size: the replicator's own
# (MM2 ~2.6 GB, mm2py ~2.2 GB), and what the host takes back while the tool starts
TOUCH_HEADROOM = 6 << 30
TOUCH_CHUNK = 256 << 20
# of the touched memory, what is freed before the tool starts, for its own start-up (MM2 ~2.6 GB
# RSS, mm2py ~2.2 GB); the rest is freed when the tool's first record lands (WarmMemory)
TOOL_START_MEMORY = 3 << 30
# mm2py-lowlat: copy tasks of a caught-up flow tail for a minute (README, "Latency")
LOW_LATENCY_TAIL_MS = 60000
# a run whose target count stands still this long after its first record has failed
STALL_SECONDS = 120


@dataclass(frozen=True)
class Workload:
    name: str
    topics: int
    partitions: int
    records: int  # per topic
    size: int
    compression: str
    steady_rate: int = 0  # records/s for the latency workload
    steady_seconds: int = 0
    # the steady rate runs this long before latencies count: start-up transients (JIT, the
    # first micro-batches of every connector) are not the steady state, for either tool
    steady_warmup_seconds: int = 20
    # values are Avro in the Confluent wire format (ids of the bench's registry on A): mm2py mirrors
    # them with schemas.mode = translate, mm2py-shallow byte for byte, MM2 byte for byte
    avro: bool = False


def workloads(scale: float) -> dict[str, Workload]:
    n = max(1000, int(5_000_000 * scale))
    return {
        "a": Workload("a-catchup-100B-lz4", 1, 16, n, 100, "lz4"),
        "b": Workload("b-catchup-1KiB-none", 1, 16, n, 1024, "none"),
        "c": Workload("c-steady-20k-per-s", 1, 16, 0, 100, "lz4", steady_rate=20_000,
                      steady_seconds=max(10, int(60 * min(1.0, scale * 5)))),
        "d": Workload("d-200-topics", 200, 1, max(100, n // 200), 100, "lz4"),
        "f": Workload("f-avro-translate-lz4", 1, 16, n, 100, "lz4", avro=True),
    }


# the bench's schema registries (Apicurio, mm2py.dev.registry), started when a workload is Avro
REGISTRY_PORTS = {"source": A_PORT - 11, "target": B_PORT - 11}
ORDER_SCHEMA = ('{"type":"record","name":"Order","namespace":"bench","fields":[{"name":"id","type":"long"},'
                '{"name":"amount","type":"double"},{"name":"customer","type":"string"},'
                '{"name":"items","type":{"type":"array","items":"string"}}]}')


def registry_url(role: str) -> str:
    from mm2py.dev.registry import CCOMPAT

    return f"http://127.0.0.1:{REGISTRY_PORTS[role]}{CCOMPAT}"


def shift_target_ids() -> None:
    """Register an unrelated schema on the target registry first, so that the Order schema gets
    another id there than on A: translate then rewrites every value's id, as between registries
    with their own histories (two fresh registries would give both the same id, and a batch
    whose ids all map to themselves passes as it is)."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    placeholder = '{"type":"record","name":"Placeholder","namespace":"bench","fields":[{"name":"n","type":"int"}]}'
    SchemaRegistryClient({"url": registry_url("target")}).register_schema("bench-placeholder-value",
                                                                          Schema(placeholder, "AVRO"))


def avro_values(topic: str, size: int, count: int = 1000) -> list[bytes]:
    """``count`` distinct Avro orders of about ``size`` bytes, framed with the source registry's id."""
    from confluent_kafka.schema_registry import SchemaRegistryClient, topic_subject_name_strategy
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": registry_url("source")}), ORDER_SCHEMA,
                                conf={"subject.name.strategy": topic_subject_name_strategy})
    pad = max(0, size - 60) // 3
    return [serializer({"id": i, "amount": i / 4, "customer": f"customer-{i:06d}-" + "c" * pad,
                        "items": [f"sku-{i % 97}-" + "s" * pad, f"sku-{i % 13}-" + "t" * pad]},
                       SerializationContext(topic, MessageField.VALUE)) for i in range(count)]


def topic_names(w: Workload) -> list[str]:
    return [f"bench-{w.name}"] if w.topics == 1 else [f"bench-{w.name}-{i:03d}" for i in range(w.topics)]


def log_bytes(w: Workload) -> int:
    """An upper bound of the workload's log size: values uncompressed, plus keys and batch framing."""
    return int(w.records * w.topics * (w.size + 80) * 1.05)


def choose_broker_dir(requested: str, chosen: list[Workload]) -> tuple[Path, str]:
    """Where the bench brokers keep their logs, and why: (work folder, reason for results.md).

    ``auto`` picks memory (tmpfs) when it holds every chosen workload's source log plus the
    largest one's copy on the target, with PROCESS_HEADROOM to spare. On this machine the page
    cache of a log on disk is reclaimed at ~50 MB/s while idle, so a run read 70-200 MB/s from
    disk or not, depending on what ran before: runs of the same tool swung 4x. In memory both
    tools read and write the same way every time; the brokers' own cost is unchanged.
    """
    if requested != "auto":
        return Path(requested).resolve(), f"broker logs in {requested} (--broker-dir)"
    need = sum(log_bytes(w) for w in chosen if not w.steady_rate) + max(log_bytes(w) for w in chosen)
    shm = TMPFS / ("mm2py-bench" if not PORT_OFFSET else f"mm2py-bench{PORT_OFFSET:+d}")  # one per port offset
    if TMPFS.is_dir():
        fs = os.statvfs(TMPFS)
        # an interrupted bench's clusters are reused, their source logs included: that room is ours
        ours = sum(f.stat().st_size for f in shm.rglob("*") if f.is_file()) if shm.is_dir() else 0
        free = min(fs.f_bavail * fs.f_frsize, psutil.virtual_memory().available) + ours
        if free >= need + PROCESS_HEADROOM:
            return shm, f"broker logs in memory ({shm}, tmpfs): {need / 1e9:.1f} GB needed"
        why = f"{free / 1e9:.1f} GB free in {TMPFS} and memory, {(need + PROCESS_HEADROOM) / 1e9:.1f} GB needed"
    else:
        why = f"no {TMPFS}"
    return devcluster.default_workdir(), f"broker logs on disk ({why}); page-cache reclaim may swing runs"


def load(w: Workload, bootstrap: str, brokers: Brokers) -> int:
    """Write the workload into A; returns its size in bytes (values).

    A topic left by an interrupted bench is reused only when it holds exactly this workload's
    records (another --scale leaves other counts): the figures per GB count on that.
    """
    admin = Admin(ClusterConfig("A", bootstrap))
    existing = admin.topics()
    for topic in topic_names(w):
        if topic in existing and target_total(admin, [topic]) != w.records:
            admin.delete_topic(topic)
            brokers.wait_deleted("source", [topic])
            del existing[topic]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1 << 20,
                         "compression.type": w.compression, "acks": 1, "log_level": 0,
                         "queue.buffering.max.kbytes": 1 << 20})
    value = os.urandom(w.size // 2).hex().encode()[: w.size]  # half-random: compressible like real data
    for topic in topic_names(w):
        if topic in existing:
            continue
        admin.create_topic(topic, w.partitions, 1)
        values = avro_values(topic, w.size) if w.avro else [value]
        require_no_tombstones(w.name, values)  # the filter variant's target must equal its source
        for i in range(w.records):
            while True:
                try:
                    producer.produce(topic, value=values[i % len(values)], key=b"%d" % (i % 100_000),
                                     partition=i % w.partitions)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(300)
    return w.records * w.topics * w.size


def committed_total(tail: PositionTail, topics: list[str]) -> int:
    """Source records whose positions are committed on the target (exactly-once mode): positions
    move in the same transaction as the data, and transaction markers make offsets overcount."""
    return sum(position + 1 for (topic, _), position in tail.refresh().items() if topic in topics)


def mm2_properties(alias: str, w: Workload, tool: str, net: Network | None = None, transforms: str = "none") -> str:
    """The MM2 file of one run; ``net`` (default plaintext) gives both clusters' ports and client
    security settings, as an MM2 operator writes them for each cluster alias; ``transforms`` the
    chain every replicator runs (bench.variants: none adds nothing)."""
    net = net or network("plaintext", A_PORT, B_PORT, None)
    lines = [
        # a steady run mirrors its own topic only: earlier runs' steady topics stay on the source
        *flow_properties(alias, net.source.port, net.target.port,
                         f"{topic_names(w)[0]}-{alias}" if w.steady_rate else f"bench-{w.name}.*"),
        *net.source.lines(alias),
        *net.target.lines("tgt"),
        f"tasks.max = {max(w.partitions, 2) if w.topics == 1 else 4}",
        # MM2's documented tuning: batching producer, large fetches
        "tgt.producer.linger.ms = 20",
        "tgt.producer.batch.size = 524288",
        f"tgt.producer.compression.type = {w.compression}",
        f"{alias}.consumer.max.poll.records = 10000",
        f"{alias}.consumer.fetch.max.bytes = 67108864",
        f"{alias}.consumer.max.partition.fetch.bytes = 8388608",
    ]
    if tool != "copier":  # the sweep's variant (bench.mm2_variants); mm2py runs MM2's best file unchanged
        variant = tool if tool.startswith("mm2@") else "mm2"
        lines += mm2_variants.lines_of(mm2_variants.variant_of(variant, bool(w.steady_rate))[1], alias)
    if tool == "mm2py-lowlat":  # README's low-latency setting: micro-batches commit once a minute
        lines.append(f"copy.tail.ms = {LOW_LATENCY_TAIL_MS}")
    if tool == "mm2py-eos":  # mm2py's exactly-once mode (MM2's key; required: no silent fallback)
        lines.append("tgt.exactly.once.source.support = required")
    if tool == "mm2py-continuous":  # backlog micro-batches as copy intervals (mm2py.source.copy.continuous)
        lines.append("copy.continuous.enabled = true")
    if tool == "mm2py-resident":  # tails' copiers outlive their tasks (mm2py.source.copy.resident)
        lines.append("copy.resident.enabled = true")
    if tool == "mm2py-provenance":  # on a cycle of a blind policy: provenance on (bench.untraced)
        lines += ["replication.policy.class = bench.untraced.PrefixedUntracedPolicy",
                  f"tgt->{alias}.enabled = true", f"tgt->{alias}.topics = bench-none",
                  f"tgt->{alias}.emit.heartbeats.enabled = false", f"tgt->{alias}.emit.checkpoints.enabled = false"]
    if w.avro and tool.startswith("mm2py"):
        lines += [f"{alias}.schema.registry.url = {registry_url('source')}",
                  f"tgt.schema.registry.url = {registry_url('target')}",
                  f"schemas.mode = {'off' if tool == 'mm2py-shallow' else 'translate'}"]
    lines += chain_lines(transforms, f"{alias}->tgt")
    # BENCH_EXTRA: more properties for an experiment, e.g. "emit.heartbeats.enabled = false"
    return "\n".join(lines) + "\n" + os.environ.get("BENCH_EXTRA", "").replace(";", "\n") + "\n"


class LatencyProbe:
    """Steady producer with send time in the value; consumer on B measuring arrival time.

    Both reach their cluster as the run's tool does (``net``: plaintext or TLS)."""

    def __init__(self, w: Workload, remote: str, net: Network, read_source: bool = False):
        self.w, self.remote, self.net = w, remote, net
        self.read_source = read_source  # the floor reads the source itself
        self.samples: list[float] = []
        self.arrived: list[float] = []  # arrival time (epoch s) of each sample
        self.stop = threading.Event()
        self.measure_from_us = float("inf")  # send time (µs) from which latencies count

    def produce(self, topic: str) -> int:
        producer = Producer(self.net.source.rdkafka("A", **{
            "linger.ms": 5, "acks": 1, "compression.type": self.w.compression, "log_level": 0,
            "queue.buffering.max.messages": 1_000_000}))
        pad = b"x" * (self.w.size - 8)
        sent = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.w.steady_warmup_seconds + self.w.steady_seconds:
            if time.monotonic() - t0 >= self.w.steady_warmup_seconds and self.measure_from_us == float("inf"):
                self.measure_from_us = time.time_ns() / 1000
            due = int((time.monotonic() - t0) * self.w.steady_rate)
            while sent < due:
                try:
                    producer.produce(topic, value=struct.pack(">q", time.time_ns() // 1000) + pad,
                                     partition=sent % self.w.partitions)
                except BufferError:  # the source fell behind: wait for deliveries, keep the rate
                    producer.poll(0.05)
                    continue
                sent += 1
            producer.poll(0)
            time.sleep(0.002)
        producer.flush(60)
        return sent

    def consume(self) -> None:
        side = self.net.source if self.read_source else self.net.target
        consumer = Consumer(side.rdkafka("A" if self.read_source else "tgt", **{
            "group.id": f"lat-{self.remote}", "fetch.wait.max.ms": 10, "log_level": 0, "enable.auto.commit": False}))
        while not self.stop.is_set():
            md = consumer.list_topics(self.remote, timeout=5).topics.get(self.remote)
            if md is not None and md.error is None and md.partitions:
                break
            time.sleep(0.2)
        consumer.assign([TopicPartition(self.remote, p, 0) for p in range(self.w.partitions)])
        samples, arrived, unpack = self.samples, self.arrived, struct.Struct(">q").unpack_from
        while not self.stop.is_set():
            # consume() returns when it has its count or at its timeout: a short timeout, so that
            # records do not wait in the probe for a fuller list (a 0.1 s timeout added 0-100 ms)
            batch = consumer.consume(10000, 0.002)
            now_us = time.time_ns() / 1000  # every record of the list had arrived by now
            for msg in batch:
                value = msg.value()
                if msg.error() or value is None or len(value) < 8:
                    continue
                sent_us = unpack(value)[0]
                if sent_us >= self.measure_from_us:
                    samples.append(now_us - sent_us)
                    arrived.append(now_us / 1e6)
        consumer.close()

    def write_profile(self, path: Path, step: float = 0.1) -> None:
        """Per ``step`` seconds of arrival (UTC, to read beside the tool's log): count, p50 and max ms."""
        buckets: dict[int, list[float]] = {}
        n = len(self.arrived)  # the reader may still be appending: samples are appended first
        for at, us in zip(self.arrived[:n], self.samples[:n], strict=True):
            buckets.setdefault(int(at / step), []).append(us / 1000)
        with path.open("w") as out:
            for key in sorted(buckets):
                ms = sorted(buckets[key])
                clock = datetime.datetime.fromtimestamp(key * step, datetime.UTC).strftime("%H:%M:%S.%f")[:-5]
                out.write(f"{clock} {len(ms)} {ms[len(ms) // 2]:.0f} {ms[-1]:.0f}\n")


def warm_up(topic: str, remote: str, partitions: int, dst: Admin, deadline: float, net: Network) -> None:
    """Send one short record per partition (the latency probe ignores them) until all arrived."""
    producer = Producer(net.source.rdkafka("A", log_level=0))
    for p in range(partitions):
        producer.produce(topic, value=b"warm", partition=p)
    producer.flush(30)
    while target_total(dst, [remote]) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"warm-up records never reached {remote}")
        time.sleep(0.2)
    time.sleep(2)  # let the periodic connectors settle into their rhythm too


def warm_source(w: Workload, brokers: Brokers) -> tuple[int, float]:
    """Read the workload's source log files once, so the run finds them in memory: (bytes, seconds).

    This machine reclaims cold page cache at ~50 MB/s (Cached fell 2398 -> 785 MB in 57 s of
    idle), so between runs much of a 5 GB log left memory, and whichever tool ran next read it
    from disk: runs swung 4x. Reading it just before each run gives every tool the same start.
    """
    started, size = time.monotonic(), 0
    data = brokers.data("source")
    for topic in topic_names(w):
        for folder in data.glob(f"{topic}-*"):
            for file in folder.glob("*.log"):
                with open(file, "rb") as f:
                    while chunk := f.read(8 << 20):
                        size += len(chunk)
    return size, time.monotonic() - started


class WarmMemory:
    """Memory written just before a run and held until its copy window starts.

    This machine is a VM whose host takes back the guest's free memory (free page reporting),
    and writing such memory again costs the writer several times what recently used memory
    costs; the target broker writes the whole mirrored log. Freed memory is handed out before
    what was reported, but it is reported a part at a time within seconds, so memory freed
    before the tool starts is mostly gone by the end of a slow start-up (docs/benchmark-history.md,
    "Memory the host takes back during start-up"). So the memory is written,
    ``TOOL_START_MEMORY`` of it freed for the tool's own start-up, and the rest freed by
    ``release`` once the first record is mirrored: every tool's copy window starts with the
    same warm memory, however long its start-up took.
    """

    def __init__(self, w: Workload):
        self.w = w
        self._chunks: list[bytearray] = []
        self.touched = 0
        self.seconds = 0.0

    def touch(self) -> WarmMemory:
        """Write to the memory the run will need, free the tool's share of it, hold the rest."""
        free = psutil.virtual_memory().free - (2 << 30)  # free, not available: the source log's cache stays
        want = min(free, log_bytes(self.w) + TOUCH_HEADROOM)
        started = time.monotonic()
        while self.touched < want:
            chunk = bytearray(TOUCH_CHUNK)
            chunk[::4096] = b"\1" * (TOUCH_CHUNK // 4096)  # a write to every page
            self._chunks.append(chunk)
            self.touched += TOUCH_CHUNK
        self.seconds = time.monotonic() - started
        del self._chunks[:TOOL_START_MEMORY // TOUCH_CHUNK]  # the newest pages stay held
        return self

    @property
    def held(self) -> int:
        return len(self._chunks) * TOUCH_CHUNK

    def release(self) -> None:
        """Free what is held: the copy window starts (or the run ended without one)."""
        self._chunks.clear()


def latency_of(samples: list[float]) -> dict[str, float]:
    """p50, p99, p99.9 and max in ms of the probe's samples (µs), and their count; {} without samples."""
    if not samples:
        return {}
    return {"p50": percentile(samples, 0.5) / 1000, "p99": percentile(samples, 0.99) / 1000,
            "p99.9": percentile(samples, 0.999) / 1000, "max": max(samples) / 1000, "count": len(samples)}


def run_alias(pair: int, short: str, w: Workload, net: Network, transforms: str = "none") -> str:
    """A run's source alias ([A-Za-z0-9]): r<pair> (w<n> for warm-up runs), the tool's short name,
    the workload's key, t for TLS and f for the filter chain. Unique per run, so runs never share
    remote topics, MM2's internal topics or positions."""
    run = f"r{pair}" if pair > 0 else f"w{1 - pair}"
    return f"{run}{short}{w.name[0]}{'t' if net.tls else ''}{'f' if transforms == 'filter' else ''}"


def run_floor(w: Workload, pair: int, data_bytes: int, brokers: Brokers, net: Network) -> RunResult:
    """The workload with no replicator, measured by the same clock or probe (``floor`` in the tables).

    Catch-up: Kafka's own consumer perf tool reads the backlog on A (bench.floor), in a process of
    its own whose CPU is sampled like a tool's; its count must be the backlog's. Steady: the latency probe's
    consumer reads the source topic itself, so its latency is the brokers' and the probe's own.
    Either reads as the tools do in ``net``'s mode: over TLS in a TLS run.
    """
    alias = run_alias(pair, "fl", w, net)
    if w.steady_rate:
        brokers_before = brokers.cpu()
        topic = f"{topic_names(w)[0]}-{alias}"
        Admin(ClusterConfig("A", f"127.0.0.1:{A_PORT}")).create_topic(topic, w.partitions, 1)
        probe = LatencyProbe(w, topic, net, read_source=True)
        reader = threading.Thread(target=probe.consume, daemon=True)
        reader.start()
        first = time.monotonic()
        sent = probe.produce(topic)
        done = time.monotonic()
        time.sleep(2)
        probe.stop.set()
        reader.join(30)
        probe.write_profile(WORK / f"{alias}.latency")
        brokers_per_gb = cpu_per_gb(brokers_before, brokers.cpu(), sent * w.size / 1e9)
        Admin(ClusterConfig("A", f"127.0.0.1:{A_PORT}")).delete_topic(topic)
        return RunResult("floor", w.name, pair, sent, sent * w.size, 0.0, round(done - first, 2),
                         round(sent / max(done - first, 1e-6)), round(sent * w.size / max(done - first, 1e-6) / 1e6, 1),
                         0.0, 0.0, 0, latency_of(probe.samples),
                         {}, brokers_per_gb, verified_records=len(probe.samples), security=net.mode)
    size, seconds = warm_source(w, brokers)
    print(f"{alias}: {size / 1e6:.0f} MB of source log read into memory in {seconds:.1f} s", flush=True)
    warm = WarmMemory(w).touch()
    warm.release()  # the floor writes nothing: all of it is the reader's
    print(f"{alias}: {warm.touched / 1e9:.1f} GB of memory touched in {warm.seconds:.1f} s", flush=True)
    brokers_before = brokers.cpu()
    total = w.records * w.topics
    floor_args = [net.source.bootstrap, ",".join(topic_names(w)), str(total)]
    if net.source.client:  # the Java consumer's security settings, as a client properties file
        client_file = WORK / f"{alias}.client.properties"
        client_file.write_text(java_properties(net.source.client))
        floor_args.append(str(client_file))
    proc = subprocess.Popen([sys.executable, "-m", "bench.floor", *floor_args], stdout=subprocess.PIPE, cwd=REPO,
                            start_new_session=True, text=True)
    with TreeSampler(proc.pid) as sampler:
        out, _ = proc.communicate(timeout=1900)
    gb = data_bytes / 1e9
    brokers_per_gb = cpu_per_gb(brokers_before, brokers.cpu(), gb)
    if proc.returncode != 0:
        raise RuntimeError(f"floor {w.name}: bench.floor exited with {proc.returncode}: {out.strip()[-500:]}")
    read = json.loads(out.strip().splitlines()[-1])
    window = max(read["fetch_s"], 1e-6)
    cpu = sampler.result.cpu_seconds
    print(f"{alias}: floor read {read['records']} of {total} records in {window:.1f} s", flush=True)
    return RunResult("floor", w.name, pair, total, data_bytes, round(read["wall_s"] - window, 2), round(window, 2),
                     round(total / window), round(data_bytes / window / 1e6, 1), round(cpu, 1),
                     round(cpu / gb, 1) if gb else 0.0, round(sampler.result.peak_rss / 2**20), {},
                     sampler.result.cpu_by_kind, brokers_per_gb,
                     verified_records=read["records"], differences=0 if read["records"] == total else 1,
                     differing=[] if read["records"] == total else [f"read {read['records']} of {total}"],
                     security=net.mode)


def run_one(tool: str, w: Workload, pair: int, data_bytes: int, brokers: Brokers, net: Network,
            transforms: str = "none") -> RunResult:
    """One run of ``tool`` on ``w``, its clients reaching both clusters in ``net``'s mode and its file
    holding chain ``transforms``; the bench's own observers (the target's count, positions, what
    landed) use the plaintext listeners."""
    if tool == "floor":
        return run_floor(w, pair, data_bytes, brokers, net)
    short = (tool.replace('py', 'p').replace('-eos', 'e').replace('-shallow', 's').replace('-provenance', 'v')
             .replace('-lowlat', 'l').replace('-continuous', 'c').replace('-resident', 'r')
             .replace('@', '').replace('-', ''))  # a cluster alias: [A-Za-z0-9]
    alias = run_alias(pair, short, w, net, transforms)
    remote = [f"{alias}.{t}" for t in topic_names(w)]
    dst = Admin(ClusterConfig("tgt", f"127.0.0.1:{B_PORT}"))
    total = w.records * w.topics
    config = WORK / f"{alias}.properties"
    config.write_text(mm2_properties(alias, w, tool, net, transforms))
    warm = None
    if not w.steady_rate:
        size, seconds = warm_source(w, brokers)
        print(f"{alias}: {size / 1e6:.0f} MB of source log read into memory in {seconds:.1f} s", flush=True)
        warm = WarmMemory(w).touch()
        print(f"{alias}: {warm.touched / 1e9:.1f} GB of memory touched in {warm.seconds:.1f} s, "
              f"{warm.held / 1e9:.1f} GB held until the first record lands", flush=True)
    log = open(WORK / f"{alias}.log", "wb")  # noqa: SIM115 - closed below
    # seconds since start and records on the target, per poll: where a run's time went
    timeline = open(WORK / f"{alias}.timeline", "w")  # noqa: SIM115 - closed below
    brokers_before = brokers.cpu()
    t0 = time.monotonic()
    proc = subprocess.Popen(command(tool, config, bool(w.steady_rate)), stdout=log, stderr=subprocess.STDOUT, cwd=REPO,
                            start_new_session=True)
    probe = None
    tail: PositionTail | None = None
    first = None
    try:
        with TreeSampler(proc.pid) as sampler:
            if w.steady_rate:
                # let the replicator start and see the (empty) topic before the clock starts
                topic = topic_names(w)[0]
                Admin(ClusterConfig("A", f"127.0.0.1:{A_PORT}")).create_topic(f"{topic}-{alias}", w.partitions, 1)
                remote = [f"{alias}.{topic}-{alias}"]
                deadline = time.monotonic() + 180
                while remote[0] not in dst.topics() and time.monotonic() < deadline:
                    time.sleep(0.5)
                # steady state is what this workload measures: the clock starts once a first
                # record went through (start-up is reported apart, as for the other workloads)
                warm_up(topic_names(w)[0] + f"-{alias}", remote[0], w.partitions, dst, deadline, net)
                probe = LatencyProbe(w, remote[0], net)
                reader = threading.Thread(target=probe.consume, daemon=True)
                reader.start()
                first = time.monotonic()
                sent = probe.produce(f"{topic}-{alias}")
                data_bytes = sent * w.size
                total = sent + w.partitions  # the warm-up records are on the target too
            deadline = time.monotonic() + 1800
            seen, moved = -1, time.monotonic()
            sources = [t[len(alias) + 1:] for t in remote]
            tail = PositionTail(PositionStore(ClusterConfig("tgt", f"127.0.0.1:{B_PORT}"), alias), dst) if (
                tool == "mm2py-eos") else None
            while True:
                mirrored = committed_total(tail, sources) if tail is not None else target_total(dst, remote)
                timeline.write(f"{time.monotonic() - t0:.2f} {mirrored}\n")
                if first is None and mirrored > 0:
                    first = time.monotonic()
                    if warm is not None:
                        warm.release()
                if mirrored >= total:
                    break
                if mirrored != seen:
                    seen, moved = mirrored, time.monotonic()
                if proc.poll() is not None:
                    raise RuntimeError(f"{tool} exited with {proc.returncode}; see {log.name}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{tool} did not finish {w.name}")
                if first is not None and time.monotonic() - moved > STALL_SECONDS:
                    # a tool whose task died (MM2 keeps running after a task's OutOfMemoryError)
                    raise RuntimeError(f"{tool} stopped at {mirrored} of {total} records of {w.name} for "
                                       f"{STALL_SECONDS} s; see {log.name}")
                time.sleep(0.2)
            done = time.monotonic()
            brokers_after = brokers.cpu()
            if probe is not None:
                time.sleep(2)
                probe.stop.set()
                probe.write_profile(WORK / f"{alias}.latency")
    finally:
        if warm is not None:
            warm.release()
        stop_tool(proc)
        log.close()
        timeline.close()
    if tail is not None:
        tail.close()
    # what landed, before the remote topics go: every partition against the source's (bench.landed)
    pairs = ([(f"{topic_names(w)[0]}-{alias}", remote[0])] if w.steady_rate  # the probe's topic
             else list(zip(topic_names(w), remote, strict=True)))
    clusters = [ClusterConfig(name, f"127.0.0.1:{port}",
                              schema_registry={"url": registry_url(role)} if w.avro else {})
                for name, port, role in (("A", A_PORT, "source"), ("tgt", B_PORT, "target"))]
    # mm2py's translate mode rewrites the schema ids: its Avro values are compared decoded
    landed = check_landed(*clusters, pairs, decode=w.avro and tool in ("mm2py", "mm2py-eos"))
    print(f"{alias}: verified {landed.verdict()}: {landed.records_target} records on the target, "
          f"{landed.records_source} on the source, {landed.partitions} partitions in {landed.seconds:.1f} s"
          + (f"; differing: {', '.join(landed.differing_partitions[:5])}" if landed.differing_partitions else ""),
          flush=True)
    if tool == "mm2py-provenance":  # the registry was in place: the copy tasks registered their ids
        from mm2py.kafka.compacted import read_all
        from mm2py.source.provenance import REGISTRY_TOPIC

        registered = sum(1 for _ in read_all(clusters[1], REGISTRY_TOPIC))
        print(f"{alias}: {registered} producer ids registered in {REGISTRY_TOPIC} on the target", flush=True)
        if not registered:
            raise RuntimeError(f"{tool} {w.name}: no producer id registered; provenance was not on")
    for topic in remote:
        dst.delete_topic(topic)
    brokers.wait_deleted("target", remote)  # the next run starts with the same free memory or disk
    if probe is not None:
        total -= w.partitions  # report what the probe sent, not the warm-up records
    mirror_s = max(done - (first or t0), 1e-6)
    gb = data_bytes / 1e9
    latency = latency_of(probe.samples) if probe is not None else {}
    cpu = sampler.result.cpu_seconds
    return RunResult(tool, w.name, pair, total, data_bytes, round((first or done) - t0, 2), round(mirror_s, 2),
                     round(total / mirror_s), round(data_bytes / mirror_s / 1e6, 1), round(cpu, 1),
                     round(cpu / gb, 1) if gb else 0.0, round(sampler.result.peak_rss / 2**20), latency,
                     sampler.result.cpu_by_kind, cpu_per_gb(brokers_before, brokers_after, gb),
                     landed.records_target, landed.duplicates, len(landed.differing_partitions),
                     list(landed.differing_partitions[:20]), landed.seconds, net.mode, transforms)


def prime_mm2py() -> None:
    """Let mm2py write its driver JVM's class archive (mm2py.engine.jvmcache) before any measured run.

    The first mm2py run on a machine writes it at exit, later runs map it; measured runs are
    all "later runs", as on any machine where mm2py ran before.
    """
    from mm2py.engine.driver import JVM_OPTIONS
    from mm2py.engine.jvmcache import DriverArchive
    from mm2py.engine.sparkhome import use_lean_spark_home

    archive = DriverArchive(JVM_OPTIONS, use_lean_spark_home())
    if archive.final.exists():
        return
    prime = Workload("prime", 1, 1, 0, 0, "none")
    topic = topic_names(prime)[0]
    admin = Admin(ClusterConfig("A", f"127.0.0.1:{A_PORT}"))
    if topic not in admin.topics():
        admin.create_topic(topic, 1, 1)
    config = WORK / "prime.properties"
    config.write_text(mm2_properties("prime", prime, "mm2py"))
    subprocess.run([*command("mm2py", config), "--once"], cwd=REPO, check=True, capture_output=True)
    deadline = time.monotonic() + 120
    while not archive.final.exists() and time.monotonic() < deadline:
        time.sleep(1)
        archive.promote_finished()  # once the JVM that writes it has exited


def broker_properties(port: int, stores: TlsStores | None) -> dict[str, object]:
    """A bench broker's extra settings: BROKER_PROPERTIES, and with ``stores`` its SSL client listener."""
    return {**BROKER_PROPERTIES, **(broker_listeners(port, stores) if stores else {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the issue's record counts")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--workloads", default="a,b,c,d,e",
                        help="a-d and f here; e (5,000 partitions) runs bench.shape on clusters of its own")
    parser.add_argument("--tools", default="floor,mm2,mm2py",
                        help="floor (the workload with no replicator: bench/floor.py), mm2, mm2py, mm2py-lowlat "
                             "(copy.tail.ms 60 s), mm2py-continuous (copy.continuous.enabled), "
                             "mm2py-resident (copy.resident.enabled), "
                             "mm2py-eos (exactly-once mode), mm2py-shallow (Avro workloads copied "
                             "without schemas.mode = translate), mm2py-provenance (the flow on an identity-like "
                             "cycle: provenance on) and copier (mm2py's copy path alone, without Spark)")
    parser.add_argument("--warmup-runs", type=int, default=1,
                        help="unmeasured runs of each tool per workload before the measured pairs")
    parser.add_argument("--broker-dir", default="auto",
                        help="folder for the two bench clusters; auto: in memory (/dev/shm) when it fits, else var/")
    parser.add_argument("--security", default="plaintext",
                        help="plaintext, tls or both (plaintext,tls): how every tool's clients reach both clusters; "
                             "tls: an SSL client listener beside each broker's PLAINTEXT one (bench.security)")
    parser.add_argument("--tls-workloads", default=None,
                        help="with tls in --security: the workloads (a,b...) that also run on TLS; default all")
    parser.add_argument("--transforms", default="none",
                        help="none, filter or both (none,filter): the chain every replicator runs; filter: Connect's "
                             "Filter with RecordIsTombstone in every tool's file, on plaintext (bench.variants)")
    parser.add_argument("--transform-workloads", default=None,
                        help="with filter in --transforms: the workloads (a,b...) that also run it; default all")
    parser.add_argument("--publish", action="store_true",
                        help="when every run finished and verified, write each variant's JSON (bench-results.json, "
                             "bench-results-tls.json, bench-results-filter.json) and block of benchmarks.md in --docs")
    parser.add_argument("--docs", default=None,
                        help="the folder --publish writes to (its benchmarks.md with the markers); default docs/")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    keys = args.workloads.split(",")
    shape_too = "e" in keys
    if shape_too:
        keys.remove("e")
    try:
        plan = variant_plan(security_plan(keys, args.security, args.tls_workloads, shape_too), args.transforms,
                            args.transform_workloads, shape_too)
    except ValueError as e:
        parser.error(str(e))
    if shape_too:  # production shape: its own clusters, after the others stopped theirs
        if keys:
            main([*argv, "--workloads", ",".join(keys)])
        from bench import shape

        return shape.main([])
    chosen = [workloads(args.scale)[key] for key in keys]
    workdir, where = choose_broker_dir(args.broker_dir, chosen)
    tls = any(v.mode == "tls" for variants in plan.values() for v in variants)
    setting = f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, Kafka " \
              f"{devcluster.KAFKA_VERSION}, {where}, {args.warmup_runs} unmeasured warm-up run(s) per tool and " \
              "workload, " \
              f"the workload's size + {TOUCH_HEADROOM >> 30} GiB of memory touched before each catch-up run and " \
              f"all but {TOOL_START_MEMORY >> 30} GiB of it held until the first record lands, " \
              f"brokers' JVM: -Xmx{BROKER_HEAP} {' '.join(BROKER_JVM)}" \
              + (", an SSL client listener beside each broker's PLAINTEXT one" if tls else "")
    print(setting, flush=True)
    write_log4j(WORK)
    stores = make_stores(WORK / "tls") if tls else None
    nets = {mode: network(mode, A_PORT, B_PORT, stores) for mode in ("plaintext", "tls") if stores or mode != "tls"}
    brokers = Brokers(workdir, {
        role: devcluster.start_cluster(Brokers.NAMES[role], port, workdir=workdir, heap=BROKER_HEAP,
                                       jvm_options=BROKER_JVM, extra_properties=broker_properties(port, stores)).pid
        for role, port in (("source", A_PORT), ("target", B_PORT))})
    results: list[RunResult] = []
    registries: list = []  # mm2py.dev.registry.DevRegistry, for Avro workloads
    try:
        if {"mm2py", "mm2py-eos", "mm2py-shallow", "mm2py-provenance", "mm2py-lowlat", "mm2py-continuous",
                "mm2py-resident"} & set(
                args.tools.split(",")):
            prime_mm2py()
        if any(w.avro for w in chosen):
            from mm2py.dev import registry as devregistry

            for role, port in REGISTRY_PORTS.items():
                registries.append(devregistry.start_registry(f"bench-{role}", port, workdir=workdir))
            shift_target_ids()
        for key, w in zip(keys, chosen, strict=True):
            data = load(w, f"127.0.0.1:{A_PORT}", brokers) if not w.steady_rate else 0
            # every tool in each of the workload's variants, alternating as one sequence
            runs: list[tuple[str, Variant]] = sequence(args.tools.split(","), plan[key])
            for pair in range(1 - args.warmup_runs, args.pairs + 1):
                for tool, variant in (runs if pair % 2 else list(reversed(runs))):
                    if tool == "copier" and (w.steady_rate or variant.transforms != "none"):
                        continue  # it copies what is there and exits, with no chain
                    net = nets[variant.mode]
                    r = run_one(tool, w, pair, data, brokers, net, variant.transforms)
                    if pair < 1:
                        print(f"warm-up run, not counted: {tool} {w.name} ({net.mode}, transforms "
                              f"{variant.transforms}) {r.mb_per_s} MB/s, verified "
                              f"{r.verdict()}", flush=True)
                    else:
                        results.append(r)
                        print(json.dumps(asdict(r)), flush=True)
                        (REPO / "bench" / "results.json").write_text(json.dumps([asdict(x) for x in results],
                                                                                indent=1))
                        (REPO / "bench" / "results.md").write_text(summarize(results, setting))
                    if r.differences:  # duplicates alone are at-least-once delivery: reported, not fatal
                        raise RuntimeError(f"{tool} {w.name} (run {pair}{', TLS' if net.tls else ''}"
                                           f"{', ' + variant.transforms if variant.transforms != 'none' else ''}): the "
                                           "target's records differ from the "
                                           f"source's in {r.differences} partition(s), first "
                                           f"{', '.join(r.differing[:5])} (source topic:partition)")
        if args.publish:
            written = publish(results, setting, argv, Path(args.docs) if args.docs else REPO / "docs", REPO)
            print(f"published: {', '.join(str(f) for f in written)}", flush=True)
    finally:
        for name in Brokers.NAMES.values():
            devcluster.stop_cluster(name, workdir)  # and its data: in memory it would pin GBs of RAM
        for registry in registries:
            from mm2py.dev import registry as devregistry

            devregistry.stop_registry(registry.name, workdir)
    print(summarize(results, setting))
    return 0


if __name__ == "__main__":
    sys.exit(main())
