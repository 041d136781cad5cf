"""The copier of a ``schemas.mode = translate`` flow: raw fetches, records rewritten, batches rebuilt.

The flow's transforms run first (this writer is a ``TransformingWriter``): on a topic a link may
touch, each owned batch goes through the chain with the ids the source wrote (a decoded link,
``mm2py.transforms.decoded``, reads values with the source registry and writes them back under the
same source id), then the records it kept have their ids translated as below and are rebuilt as
one batch, so the target holds the target registry's ids for what the chain made. Heartbeats
topics go through the chain as bytes and are never translated.

Fetching, range ownership, aborted and control records, ordering and acknowledgement are the raw
copier's (this is the ``BatchWriter`` a translating flow's copier writes with): each source batch becomes one
target batch with the same records in the same order, each key/value/header id rewritten to the
target registry's (``mm2py.schemas.translate``), compressed with the source batch's codec.
A batch the raw copier would pass unchanged has its ids overwritten in place (``inplace``: records
byte for byte the same otherwise; a batch whose ids all map to themselves passes as it is); others,
and any batch holding an untranslatable record, take the record path (decoded, rewritten, rebuilt).

Invariants:
- one record out for each record in that the chain kept (a dropped or dead-lettered record leaves
  a gap that the rebuilt batch's offset list carries), so offset syncs stay exact and checkpoints
  and failover work unchanged;
- runs of small batches of topics carrying schema ids are never merged (``batch.coalesce.bytes``):
  a merged run would keep the source's ids;
- no record reaches the remote topic with an id the target cannot resolve to the same schema;
  under ``schemas.on.error = pass`` an untranslatable record is written as its bytes were,
  and under ``dead-letter`` it goes to the dead-letter topic on the target instead, which is
  flushed before the range is reported done (nothing is lost between the two);
- ``fail`` stops the flow with a ``SchemaError`` naming topic, partition and offset;
- in exactly-once mode the rebuilt batches belong to the task's transaction like raw ones; the
  dead-letter topic is written outside it (at-least-once: a retried task may dead-letter again).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from mm2py.errors import SchemaError
from mm2py.kafka import batches as rb
from mm2py.schemas import inplace
from mm2py.schemas.registry import registry_for
from mm2py.schemas.settings import SchemaSettings
from mm2py.schemas.subjects import SubjectSync, Untranslatable
from mm2py.schemas.translate import IdTranslator
from mm2py.source.copy.batch_writer import owned_records
from mm2py.source.copy.dead_letters import DeadLetters
from mm2py.source.copy.partition import PartitionCopy, Pending
from mm2py.source.copy.small_run import SmallRun
from mm2py.source.copy.transforming import TransformingWriter
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.transforms import Chain
from mm2py.transforms.tolerance import ErrorPolicy

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


class TranslatingWriter(TransformingWriter):
    """Queues batches with their schema ids rewritten to the target registry's, after the flow's
    transform chain (``chain``, none by default; ``errors`` as for ``TransformingWriter``).
    ``letters(topic)`` gives the dead-letter writer of a topic on the target, for
    ``schemas.dead.letter.topic`` and ``errors.deadletterqueue.topic.name``. Constructor does no I/O.
    """

    def __init__(self, coalesce_bytes: int = 0, *, schemas: SchemaSettings, letters: Callable[[str], DeadLetters],
                 chain: Chain | None = None, errors: ErrorPolicy | None = None):
        errors = errors or ErrorPolicy()
        super().__init__(chain or Chain(), coalesce_bytes, f"{schemas.source_alias}->{schemas.target_alias}", errors,
                         letters(errors.dead_letter_topic) if errors.dead_letter_topic else None)
        self.schemas = schemas
        self.source_alias = schemas.source_alias  # the flow's source, named in a SchemaError
        self.translator = translator_for(schemas)
        self.id_maps: dict[str, inplace.IdMap] = {}  # by source topic
        self.framed_keys: dict[str, bool] = {}  # by source topic: schemas.keys decided
        self.schema_dead_letters = letters(schemas.dead_letter_topic)
        self.passed: dict[tuple[str, int], int] = {}  # per source partition
        self.dead_lettered: dict[tuple[str, int], int] = {}

    def _dead_letter(self, rec: rb.Record, r: PartitionRange, reason: str) -> None:
        self.schema_dead_letters.send(rec, [*rec.headers, ("mm2py.error", reason.encode()),
                                            ("mm2py.topic", r.topic.encode()),
                                            ("mm2py.partition", str(r.partition).encode()),
                                            ("mm2py.offset", str(rec.offset).encode())])

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

    def small_run(self, r: PartitionRange) -> SmallRun | None:
        """No coalescing on topics carrying schema ids: a merged run would keep its source ids."""
        return None if self.schemas.carries_schemas(r.topic) else super().small_run(r)

    def enqueue(self, part: PartitionCopy, buf: bytes | memoryview, view: rb.BatchView,
                trim_before: int | None) -> None:
        r = part.range
        if not self.schemas.carries_schemas(r.topic) or self._chain(r.target_topic).links:
            # heartbeats pass as bytes; a transformed topic's kept records reach enqueue_rebuilt
            super().enqueue(part, buf, view, trim_before)
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
        self.enqueue_rebuilt(part, owned_records(buf, view, trim_before), rb.codec_of(buf, view))

    def enqueue_rebuilt(self, part: PartitionCopy, records: list[rb.Record], codec: int) -> None:
        """``records`` (what the chain kept, or a batch's owned records) with their ids translated, as one batch."""
        if self.schemas.carries_schemas(part.range.topic):
            records = self._translated(part, records)
        super().enqueue_rebuilt(part, records, codec)

    def _translated(self, part: PartitionCopy, records: list[rb.Record]) -> list[rb.Record]:
        """``records`` naming the target's ids; an untranslatable one as ``schemas.on.error`` says."""
        r = part.range
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
        return out

    def settle(self) -> None:
        """Every dead-lettered record (a transform's, an untranslatable one) written (acks=all) before progress
        past it is recorded."""
        super().settle()
        self.schema_dead_letters.settle()

    def finish(self, results: list[RangeResult]) -> list[RangeResult]:
        return [replace(r, schema_passed=self.passed.get((r.topic, r.partition), 0),
                        schema_dead_lettered=self.dead_lettered.get((r.topic, r.partition), 0)) for r in results]
