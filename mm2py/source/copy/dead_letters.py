"""Records a copy task sends to a dead-letter topic on the target instead of the remote topic.

One writer for every dead-letter path: untranslatable records (``schemas.on.error = dead-letter``,
``mm2py.source.copy.translating_writer``) and records a transform failed on (``errors.tolerance
= all`` with ``errors.deadletterqueue.topic.name``, ``mm2py.source.copy.transforming``).

Invariants: records go out with acks=all and idempotence, outside the produce window and any
transaction (at-least-once: a retried task may dead-letter a record again); ``settle`` returns
only once every record sent is written, and raises a retriable ``KafkaError`` naming the target
and topic otherwise, so progress past a dead-lettered record is never recorded before it is durable.
"""

from __future__ import annotations

from confluent_kafka import Producer

from mm2py.config.model import ClusterConfig
from mm2py.kafka import batches as rb
from mm2py.kafka import rdclients
from mm2py.kafka.clientconf import rdkafka_config


class DeadLetters:
    """A dead-letter topic on ``target``; the producer is made at the first record (constructor does no I/O)."""

    def __init__(self, target: ClusterConfig, topic: str, client_id: str, produce_timeout_ms: int = 30000):
        self.target = target
        self.topic = topic
        self.client_id = client_id
        self.produce_timeout_ms = produce_timeout_ms
        self.producer: Producer | None = None
        self.failures: list[str] = []

    def _producer(self) -> Producer:
        if self.producer is None:
            conf = rdkafka_config(self.target.bootstrap_servers, self.target.producer, self.target.alias, "producer")
            conf.setdefault("client.id", f"{self.client_id}-dead-letter")
            conf.update({"acks": "all", "enable.idempotence": True})
            self.producer = rdclients.producer(conf)
        return self.producer

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is not None:
            self.failures.append(f"{msg.topic()}: {err}")  # type: ignore[attr-defined]

    def send(self, rec: rb.Record, headers: list[tuple[str, str | bytes | None]]) -> None:
        """Send ``rec``'s key, value and timestamp with ``headers`` (the caller's: its own and the record's)."""
        producer = self._producer()
        while True:
            try:
                producer.produce(self.topic, key=rec.key, value=rec.value, timestamp=rec.timestamp,
                                 headers=headers, on_delivery=self._on_delivery)
                return
            except BufferError:
                producer.poll(0.1)

    def settle(self) -> None:
        """Every record sent written (acks=all); raises a retriable ``KafkaError`` otherwise."""
        rdclients.settle(self.producer, self.produce_timeout_ms, self.failures, "dead-lettered records",
                         self.target.alias, self.topic)
