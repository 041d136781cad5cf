"""The copier of a ``schemas.mode = translate`` flow: raw fetches, records rewritten, batches rebuilt.

Fetching, range ownership, aborted and control records, ordering and acknowledgement are the raw
copier's (this is the ``BatchWriter`` a translating flow's copier writes with): each source batch becomes one
target batch with the same records in the same order, each key/value/header id rewritten to the
target registry's (``mm2py.schemas.translate``), compressed with the source batch's codec.
A batch the raw copier would pass unchanged has its ids overwritten in place (``inplace``: records
byte for byte the same otherwise; a batch whose ids all map to themselves passes as it is); others,
and any batch holding an untranslatable record, take the record path (decoded, rewritten, rebuilt).

Invariants:
- one record out for one record in (a dead-lettered record leaves a gap that the rebuilt batch's
  offset list carries), so offset syncs stay exact and checkpoints and failover work unchanged;
- no record reaches the remote topic with an id the target cannot resolve to the same schema;
  under ``schemas.on.error = pass`` an untranslatable record is written as its bytes were,
  and under ``dead-letter`` it goes to the dead-letter topic on the target instead, which is
  flushed before the range is reported done (nothing is lost between the two);
- ``fail`` stops the flow with a ``SchemaError`` naming topic, partition and offset;
- in exactly-once mode the rebuilt batches belong to the task's transaction like raw ones; the
  dead-letter topic is written outside it (at-least-once: a retried task may dead-letter again).
"""

from __future__ import annotations

from dataclasses import replace

from confluent_kafka import KafkaException, Producer

from mm2py.config.model import ClusterConfig
from mm2py.errors import KafkaError, SchemaError
from mm2py.kafka import batches as rb
from mm2py.kafka import rdclients
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.schemas import inplace
from mm2py.schemas.registry import registry_for
from mm2py.schemas.settings import SchemaSettings
from mm2py.schemas.subjects import SubjectSync, Untranslatable
from mm2py.schemas.translate import IdTranslator
from mm2py.source.copy.batch_writer import BatchWriter, owned_records
from mm2py.source.copy.partition import PartitionCopy, Pending
from mm2py.source.ranges import PartitionRange, RangeResult

_translators: dict[tuple[str, str, tuple, tuple], IdTranslator] = {}


def translator_for(schemas: SchemaSettings) -> IdTranslator:
    """This process's translator for the flow's two registries (its id map outlives a task)."""
    key = (schemas.source_alias, schemas.target_alias, tuple(sorted(schemas.source_registry.items())),
           tuple(sorted(schemas.target_registry.items())))
    if key not in _translators:
        sync = SubjectSync(registry_for(schemas.source_alias, schemas.source_registry),
                           registry_for(schemas.target_alias, schemas.target_registry))
        _translators[key] = IdTranslator(sync)
    return _translators[key]


class TranslatingWriter(BatchWriter):
    """Queues batches with their schema ids rewritten to the target registry's. Constructor does no I/O."""

    def __init__(self, coalesce_bytes: int = 0, *, target: ClusterConfig, schemas: SchemaSettings, client_id: str,
                 produce_timeout_ms: int = 30000):
        super().__init__(coalesce_bytes)
        self.target = target
        self.schemas = schemas
        self.client_id = client_id
        self.source_alias = schemas.source_alias  # the flow's source, named in a SchemaError
        self.produce_timeout_ms = produce_timeout_ms
        self.translator = translator_for(schemas)
        self.id_maps: dict[str, inplace.IdMap] = {}  # by source topic
        self.framed_keys: dict[str, bool] = {}  # by source topic: schemas.keys decided
        self.dead_letters: Producer | None = None
        self.failures: list[str] = []
        self.passed: dict[tuple[str, int], int] = {}  # per source partition
        self.dead_lettered: dict[tuple[str, int], int] = {}

    def _dead_letter_producer(self) -> Producer:
        if self.dead_letters is None:
            conf = rdkafka_config(self.target.bootstrap_servers, self.target.producer, self.target.alias, "producer")
            conf.setdefault("client.id", f"{self.client_id}-dead-letter")
            conf.update({"acks": "all", "enable.idempotence": True})
            self.dead_letters = rdclients.producer(conf)
        return self.dead_letters

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is not None:
            self.failures.append(f"{msg.topic()}: {err}")  # type: ignore[attr-defined]

    def _dead_letter(self, rec: rb.Record, r: PartitionRange, reason: str) -> None:
        headers: list[tuple[str, str | bytes | None]] = [
            *rec.headers, ("mm2py.error", reason.encode()), ("mm2py.topic", r.topic.encode()),
            ("mm2py.partition", str(r.partition).encode()), ("mm2py.offset", str(rec.offset).encode())]
        producer = self._dead_letter_producer()
        while True:
            try:
                producer.produce(self.schemas.dead_letter_topic, key=rec.key, value=rec.value,
                                 timestamp=rec.timestamp, headers=headers, on_delivery=self._on_delivery)
                return
            except BufferError:
                producer.poll(0.1)

    def _id_map(self, r: PartitionRange) -> inplace.IdMap:
        """Source id -> the target id's bytes, for records of ``r``'s topic (subjects follow topic names)."""
        found = self.id_maps.get(r.topic)
        if found is None:
            cache: dict[bytes, bytes] = {}

            def found(source_id: bytes) -> bytes:
                target = cache.get(source_id)
                if target is None:
                    target = cache[source_id] = self.translator.target_id(
                        int.from_bytes(source_id, "big"), r.topic, r.target_topic).to_bytes(4, "big")
                return target

            self.id_maps[r.topic] = found
        return found

    def _keys(self, topic: str) -> bool:
        """Whether keys of ``topic`` carry schema ids (``schemas.keys``; auto: a ``{topic}-key`` subject)."""
        if topic not in self.framed_keys:
            mode = self.schemas.keys
            self.framed_keys[topic] = mode == "framed" or (
                mode == "auto" and bool(self.translator.sync.source.versions(f"{topic}-key")))
        return self.framed_keys[topic]

    def enqueue(self, part: PartitionCopy, buf: bytes | memoryview, view: rb.BatchView,
                trim_before: int | None) -> None:
        r = part.range
        if not self.schemas.carries_schemas(r.topic):
            super().enqueue(part, buf, view, trim_before)  # heartbeats: the raw copier's path
            return
        if view.passes_unchanged and trim_before is None:
            try:
                batch, rewritten = inplace.rewritten_batch(buf, view, self._id_map(r), self._keys(r.topic))
            except Untranslatable:
                pass  # a record schemas.on.error decides about: the record path below
            else:
                part.enqueue(self.stamp(batch, rewritten, part),  # the source's batch when no id changed
                             Pending(view.base_offset, view.record_count, rewritten.size), rebuilt=batch is not buf)
                return
        records = owned_records(buf, view, trim_before)
        out: list[rb.Record] = []
        for rec in records:
            try:
                out.append(self.translator.record(rec, r.topic, r.target_topic, self._keys(r.topic)))
            except Untranslatable as e:
                tp = (r.topic, r.partition)
                if self.schemas.on_error == "pass":
                    self.passed[tp] = self.passed.get(tp, 0) + 1
                    out.append(rec)
                elif self.schemas.on_error == "dead-letter":
                    self.dead_lettered[tp] = self.dead_lettered.get(tp, 0) + 1
                    part.dropped += 1
                    self._dead_letter(rec, r, str(e))
                else:
                    raise SchemaError(f"record not translatable to {self.schemas.target_alias}'s registry "
                                      f"(schemas.on.error = fail): {e}", cluster=self.source_alias, topic=r.topic,
                                      partition=r.partition, offset=rec.offset) from None
        rebuilt = rb.rebuild(out, rb.codec_of(buf, view), self.producer_id, self.epoch, part.sequence,
                             self.transactional)
        if rebuilt is None:
            return
        part.enqueue((rebuilt,), Pending.rebuilt([rec.offset for rec in out], len(rebuilt)), rebuilt=True)

    def settle(self) -> None:
        """Every dead-lettered record written (acks=all) before progress past it is recorded."""
        if self.dead_letters is None:
            return
        try:
            left = self.dead_letters.flush(self.produce_timeout_ms / 1000)
        except KafkaException as e:
            self.failures.append(str(e))
            left = -1
        if left or self.failures:
            raise KafkaError(f"dead-lettered records not all written ({left} unsent): "
                             f"{'; '.join(self.failures[:3])}", cluster=self.target.alias,
                             topic=self.schemas.dead_letter_topic, retriable=True)

    def finish(self, results: list[RangeResult]) -> list[RangeResult]:
        return [replace(r, schema_passed=self.passed.get((r.topic, r.partition), 0),
                        schema_dead_lettered=self.dead_lettered.get((r.topic, r.partition), 0)) for r in results]
