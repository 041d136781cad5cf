"""Records a copy task produces one by one to the target, outside the produce window.

The record paths (``mm2py.source.copy.rehash``: other partitions of the remote topic;
``mm2py.source.copy.time_routing``: window topics) write with this sender instead of queuing
raw batches.

Invariants: the data producer's settings apply (``target.producer``: compression, linger,
batch size), with acks=all and idempotence forced, so per target partition records land in
the order sent, once; ``settle`` returns only once every record sent is acknowledged and raises
a retriable ``KafkaError`` naming the target and topic otherwise, so no progress past a record
is recorded before it is durable.
"""

from __future__ import annotations

from confluent_kafka import Producer

from mm2py.config.model import ClusterConfig
from mm2py.kafka import batches as rb
from mm2py.kafka import rdclients
from mm2py.kafka.clientconf import rdkafka_config


class RecordSender:
    """An idempotent producer to ``target``, made by ``start`` (the constructor does no I/O)."""

    def __init__(self, target: ClusterConfig, client_id: str, produce_timeout_ms: int = 30000):
        self.target = target
        self.client_id = client_id
        self.produce_timeout_ms = produce_timeout_ms
        self.producer: Producer | None = None
        self.failures: list[str] = []
        self.last_topic = ""  # the last topic written, named in an error

    def start(self) -> None:
        conf = rdkafka_config(self.target.bootstrap_servers, self.target.producer, self.target.alias, "producer")
        conf.setdefault("client.id", self.client_id)
        conf.setdefault("linger.ms", 5)
        conf.update({"acks": "all", "enable.idempotence": True})
        self.producer = rdclients.producer(conf)

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is not None:
            self.failures.append(f"{msg.topic()}: {err}")  # type: ignore[attr-defined]

    def send(self, topic: str, partition: int, rec: rb.Record) -> None:
        """Produce ``rec`` (key, value, timestamp, headers) to ``topic`` partition ``partition``."""
        assert self.producer is not None, "started by the writer"
        self.last_topic = topic
        while True:
            try:
                self.producer.produce(topic, key=rec.key, value=rec.value, partition=partition,
                                      timestamp=rec.timestamp, headers=list(rec.headers) or None,
                                      on_delivery=self._on_delivery)
                return
            except BufferError:  # local queue full: let deliveries drain
                self.producer.poll(0.1)

    def settle(self, what: str) -> None:
        """Every record sent acknowledged (acks=all), or a retriable ``KafkaError`` naming ``what`` and the topic."""
        rdclients.settle(self.producer, self.produce_timeout_ms, self.failures, what, self.target.alias,
                         self.last_topic)
