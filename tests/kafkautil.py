"""Small helpers over real brokers for tests: create, produce, consume everything, offsets.

Every helper takes the bootstrap address first; ``client`` adds confluent-kafka settings, e.g.
``cluster.rdkafka_config()`` for a SASL or TLS dev cluster.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from mm2py.kafka import rdclients

Headers = list[tuple[str, bytes | None]]
# (key, value, headers, timestamp_ms); None headers/timestamp: none / the producer's clock
RecordTuple = tuple[bytes | None, bytes | None, Headers | None, int | None]
ClientConfig = Mapping[str, object] | None


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def _conf(bootstrap: str, client: ClientConfig, **defaults: object) -> dict[str, object]:
    conf = {**defaults, **(client or {}), "bootstrap.servers": bootstrap}
    if "logger" not in conf:  # a client logger (mm2py's rdkafka_config) already keeps librdkafka quiet
        # refused connections during broker restarts are expected noise in tests
        conf["log_level"] = 0
    return conf


def _admin(bootstrap: str, client: ClientConfig = None) -> AdminClient:
    return rdclients.admin_client(_conf(bootstrap, client))


def create_topic(bootstrap: str, name: str, partitions: int, config: Mapping[str, str] | None = None, *,
                 client: ClientConfig = None) -> None:
    """Create ``name`` (replication factor 1) and wait until its metadata is visible."""
    admin = _admin(bootstrap, client)  # must outlive the future: a collected client cancels its requests
    admin.create_topics([NewTopic(name, partitions, 1, config=dict(config or {}))])[name].result(30)
    _wait_served(bootstrap, name, partitions, client)


def add_partitions(bootstrap: str, name: str, total: int, *, client: ClientConfig = None) -> None:
    """Grow ``name`` to ``total`` partitions and wait until the new ones are served too."""
    admin = _admin(bootstrap, client)
    admin.create_partitions([NewPartitions(name, total)])[name].result(30)
    _wait_served(bootstrap, name, total, client)


def _wait_served(bootstrap: str, name: str, partitions: int, client: ClientConfig) -> None:
    def served() -> bool:
        # every partition's leader answers ListOffsets: right after creation it may still say
        # NOT_LEADER, and a producer's metadata may not know the partition yet (_UNKNOWN_PARTITION)
        try:
            return len(end_offsets(bootstrap, name, client=client)) == partitions
        except KafkaException:
            return False

    wait_until(served, 30, message=f"topic {name} with {partitions} partitions served by their leaders")


def delete_topic(bootstrap: str, name: str, *, client: ClientConfig = None) -> None:
    admin = _admin(bootstrap, client)
    admin.delete_topics([name])[name].result(30)


def list_topics(bootstrap: str, *, client: ClientConfig = None) -> set[str]:
    return set(_admin(bootstrap, client).list_topics(timeout=30).topics)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[RecordTuple],
    partition: int | None = None,
    compression: str | None = None,
    extra: Mapping[str, object] | None = None,
    *,
    client: ClientConfig = None,
) -> int:
    """Write ``records`` with acks=all and wait for every acknowledgement; returns how many were sent.

    ``partition`` None leaves partitioning to the producer (murmur2 of the key, like Java's).
    """
    conf = _conf(bootstrap, {**(client or {}), **(extra or {})}, **{
        "acks": "all", "linger.ms": 10, "compression.type": compression or "none",
        "partitioner": "murmur2_random"})
    producer = rdclients.producer(conf)
    errors: list[str] = []
    count = 0

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for key, value, headers, ts in records:
        kwargs: dict[str, object] = {"key": key, "value": value, "on_delivery": on_delivery}
        if headers:
            kwargs["headers"] = headers
        if ts is not None:
            kwargs["timestamp"] = ts
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain
                producer.poll(0.1)
        count += 1
        if count % 10000 == 0:
            producer.poll(0)
    left = producer.flush(60)
    assert not left and not errors, f"producing to {topic} failed: {left} unsent, {errors[:3]}"
    return count


def _consumer(bootstrap: str, client: ClientConfig, **settings: object) -> Consumer:
    # a fresh group id: these helpers never commit, and must not meet a test's own groups
    return rdclients.consumer(_conf(bootstrap, client, **{"group.id": f"mm2py-tests-{uuid.uuid4().hex[:8]}",
                                                "enable.auto.commit": False, **settings}))


def end_offsets(bootstrap: str, topic: str, *, client: ClientConfig = None) -> dict[int, int]:
    """High watermark per partition ({} when the topic does not exist)."""
    consumer = _consumer(bootstrap, client)
    try:
        md = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return {}
        return {p: _watermarks(consumer, TopicPartition(topic, p))[1] for p in md.partitions}
    finally:
        consumer.close()


def producer_ids(bootstrap: str, topic: str, partitions: int) -> dict[int, set[int]]:
    """The producer ids each partition's leader keeps state for (DescribeProducers, KIP-664)."""
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KafkaTopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        states = admin.describe_producers([KafkaTopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: {p.producer_id for p in state.active_producers} for tp, state in states.items()}
    finally:
        admin.close()


def _watermarks(consumer: Consumer, tp: TopicPartition, timeout: float = 30) -> tuple[int, int]:
    """(low, high) of ``tp``, asked again while the partition has no leader, for up to ``timeout`` s.

    A partition just created, just moved by a broker restart, or on a broker the controller fenced
    for a late heartbeat (both test lanes busy on two cores) has no leader for a moment.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(tp, timeout=10)
        except KafkaException as e:
            transient = e.args[0].retriable() or e.args[0].name() in _LEADER_ERRORS
            if not transient or time.monotonic() >= deadline:
                raise
            time.sleep(0.25)


# a base for explicit record timestamps: the brokers' 7-day retention deletes older records
# within minutes, mid-test (a 2023 timestamp once made `verify` wait for deleted records)
TS0 = int(time.time() * 1000) - 3_600_000

_LEADER_ERRORS = {"NOT_LEADER_FOR_PARTITION", "LEADER_NOT_AVAILABLE", "UNKNOWN_TOPIC_OR_PART"}


def consume_all(bootstrap: str, topic: str, timeout: float = 60, isolation: str = "read_uncommitted", *,
                client: ClientConfig = None) -> dict[int, list[Record]]:
    """Every record of every partition, from the log start to the high watermark seen at call time."""
    consumer = _consumer(bootstrap, client, **{"isolation.level": isolation, "auto.offset.reset": "earliest"})
    try:
        md = consumer.list_topics(topic, timeout=10).topics.get(topic)
        assert md is not None and md.error is None, f"topic {topic} not found at {bootstrap}"
        out: dict[int, list[Record]] = {p: [] for p in md.partitions}
        remaining: dict[int, int] = {}
        for p in md.partitions:
            low, high = _watermarks(consumer, TopicPartition(topic, p))
            if high > low:
                remaining[p] = high
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in remaining])
        deadline = time.monotonic() + timeout
        while remaining:
            assert time.monotonic() < deadline, f"consuming {topic} timed out; still to reach: {remaining}"
            for msg in consumer.consume(10000, timeout=0.5):
                assert not msg.error(), msg.error()
                p = msg.partition()
                out[p].append(Record(p, msg.offset(), msg.key(), msg.value(), tuple(msg.headers() or ()),
                                     msg.timestamp()[1]))
                if msg.offset() + 1 >= remaining.get(p, 0):
                    remaining.pop(p, None)
            # read_committed stops at the last stable offset, and the last offsets may be control
            # records that are never delivered: the position still moves past them
            for p in list(remaining):
                pos = consumer.position([TopicPartition(topic, p)])[0].offset
                if pos >= remaining[p]:
                    remaining.pop(p)
        return out
    finally:
        consumer.close()


# Waits detect hangs; they are no speed targets (make bench measures speed). make test's lanes share
# two cores, where a Spark start takes minutes at the worst: tests/lanes.py sets a scale of 2.
TIMEOUT_SCALE = float(os.environ.get("MM2PY_TEST_TIMEOUT_SCALE", "1"))


def wait_until(predicate: Callable[[], object], timeout: float = 30, interval: float = 0.5,
               message: str = "condition") -> None:
    """Poll ``predicate`` until it is truthy; AssertionError naming ``message`` after ``timeout`` s
    (times ``TIMEOUT_SCALE``)."""
    timeout *= TIMEOUT_SCALE
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for: {message}")
        time.sleep(interval)


class Stream:
    """A producer thread: ``rate`` records/s over ``partitions`` partitions, values numbered in send order."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, rate: int):
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 600000,
                                  "log_level": 2})  # fault tests restart brokers: connection errors are expected
        self.acked: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.failed: list[str] = []
        self.unflushed = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err: object, msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acked[msg.partition()].append(msg.value())  # type: ignore[attr-defined]

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            started = time.monotonic()
            for _ in range(self.rate // 10):
                p = n % self.partitions
                self.producer.produce(self.topic, value=b"%d-%08d" % (p, n), partition=p, on_delivery=self._delivered)
                n += 1
            self.producer.poll(0)
            self._stop.wait(max(0.0, 0.1 - (time.monotonic() - started)))

    def start(self) -> Stream:
        self._thread.start()
        return self

    def snapshot(self) -> dict[int, list[bytes]]:
        """The records acknowledged so far, per partition."""
        return {p: list(v) for p, v in self.acked.items()}

    def stop(self) -> int:
        """Stop sending, wait for the last acknowledgements; returns how many records were acknowledged."""
        self._stop.set()
        self._thread.join(10)
        self.unflushed = self.producer.flush(300)
        return sum(len(v) for v in self.acked.values())


@dataclass
class Comparison:
    on_target: int = 0
    missing: int = 0
    duplicates: int = 0
    out_of_order: list[int] = field(default_factory=list)  # partitions


def compare(target: str, remote: str, acked: dict[int, list[bytes]]) -> Comparison:
    """Acknowledged records against the remote topic: missing, duplicates, partitions out of source order."""
    got = {p: [r.value for r in rs] for p, rs in consume_all(target, remote).items()}
    out = Comparison(on_target=sum(len(v) for v in got.values()))
    for p, sent in acked.items():
        seen = got.get(p, [])
        first: dict[bytes | None, int] = {}
        for i, v in enumerate(seen):
            first.setdefault(v, i)
        out.duplicates += len(seen) - len(first)
        positions = [first.get(v) for v in sent]
        out.missing += sum(1 for i in positions if i is None)
        present = [i for i in positions if i is not None]
        if present != sorted(present):
            out.out_of_order.append(p)
    return out


def commit_offsets(bootstrap: str, group: str, offsets: Mapping[tuple[str, int], int],
                   client: Mapping[str, object] | None = None, timeout: float = 30) -> None:
    """Commit ``offsets`` for ``group`` as a consumer that does not subscribe (a console consumer's group).

    A coordinator that is still loading or moving (a fresh cluster) answers with a retriable error:
    the commit is tried again until ``timeout``.
    """
    consumer = rdclients.consumer({**(client or {}), "bootstrap.servers": bootstrap, "group.id": group,
                                   "enable.auto.commit": False, "log_level": 0})
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                                asynchronous=False)
                return
            except KafkaException as e:
                if not e.args[0].retriable() and e.args[0].code() not in _COORDINATOR_MOVING \
                        or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


_COORDINATOR_MOVING = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                       KafkaError.COORDINATOR_NOT_AVAILABLE}


def consume(bootstrap: str, group: str, topic: str, limits: dict[int, int] | None = None,
            idle: float = 4.0) -> list[bytes]:
    """Consume as an application does: subscribe in a group, read committed, commit as we go.

    With ``limits``, stop each partition after that many records (and commit there). The group's
    offsets when it returns are the position after the last record taken of each partition; on the
    way it commits the positions reached once a second (a synchronous commit per record would be a
    round trip per record: minutes over the few hundred thousand records of the long scenarios).
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed", "log_level": 0})
    consumer.subscribe([topic])
    seen: list[bytes] = []
    counts: dict[int, int] = {}
    reached: dict[int, int] = {}  # partition -> the position after its last record taken, not yet committed
    last = committed_at = time.monotonic()

    def commit() -> None:
        if reached:
            consumer.commit(offsets=[TopicPartition(topic, p, pos) for p, pos in reached.items()], asynchronous=False)
            reached.clear()

    try:
        while time.monotonic() - last < idle:
            if time.monotonic() - committed_at >= 1:
                commit()
                committed_at = time.monotonic()
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert not msg.error(), msg.error()
            p = msg.partition()
            if limits is not None and counts.get(p, 0) >= limits.get(p, 0):
                continue
            last = time.monotonic()
            counts[p] = counts.get(p, 0) + 1
            seen.append(msg.value())
            reached[p] = msg.offset() + 1
        commit()
    finally:
        consumer.close()
    return seen
