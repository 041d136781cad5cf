"""Schema ids of records rewritten from the source registry's to the target registry's.

Invariant: no record is ever written with an id the target registry cannot resolve to the same
schema. A source id is mapped only by ``SubjectSync``, which registers (or finds, by fastavro
fingerprint) the schema on the target and checks the target id back; a record whose id cannot be
mapped raises ``Untranslatable`` and is never written as it is, unless ``schemas.on.error = pass``
says so (``mm2py.source.copy.translating_writer``).

What is translated, per record: the value when it is not null (always the wire format in a
translated flow); the key when ``schemas.keys`` says keys of the topic are frames (``auto``: the
source registry has a ``{topic}-key`` subject) and it starts with magic byte 0 and is at least 5
bytes long (a Long key starts with a 0 byte too, hence the subject check); an id
carried in a ``__key_schema_id`` / ``__value_schema_id`` header instead of the payload. One record
out for one record in: offsets, timestamps, header order and the body bytes are untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mm2py.kafka.batches import Record
from mm2py.schemas import frames
from mm2py.schemas.subjects import SubjectSync, Untranslatable

_ID_HEADERS = (frames.KEY_HEADER, frames.VALUE_HEADER)


@dataclass
class IdTranslator:
    """Source id -> target id, synced on first sight (per topic, since subjects follow topic names)."""

    sync: SubjectSync
    ids: dict[int, int] = field(default_factory=dict)
    seen: set[tuple[int, str]] = field(default_factory=set)

    def target_id(self, source_id: int, topic: str, remote_topic: str) -> int:
        if (source_id, topic) not in self.seen:
            self.ids[source_id] = self.sync.sync_for(source_id, topic, remote_topic)
            self.seen.add((source_id, topic))
        return self.ids[source_id]

    def _frame(self, data: bytes, topic: str, remote_topic: str, what: str) -> bytes:
        try:
            source_id = frames.schema_id(data)
        except frames.FrameError as e:
            raise Untranslatable(f"{what}: {e}") from None
        target_id = self.target_id(source_id, topic, remote_topic)
        return data if target_id == source_id else frames.with_id(data, target_id)

    def record(self, rec: Record, topic: str, remote_topic: str, keys: bool = True) -> Record:
        """``rec`` naming the target's schema ids; raises ``Untranslatable``. ``keys`` False: keys are raw."""
        carried = {name for name, _ in rec.headers if name in _ID_HEADERS}
        headers = rec.headers
        if carried:
            headers = tuple(
                (name, self._frame(value or b"", topic, remote_topic, f"header {name}") if name in _ID_HEADERS
                 else value)
                for name, value in rec.headers)
        key = rec.key
        if keys and key is not None and frames.KEY_HEADER not in carried and len(key) >= frames.PREFIX \
                and key[0] == frames.MAGIC:
            key = self._frame(key, topic, remote_topic, "key")
        value = rec.value
        if value is not None and frames.VALUE_HEADER not in carried:
            value = self._frame(value, topic, remote_topic, "value")
        if key is rec.key and value is rec.value and headers is rec.headers:
            return rec
        return Record(rec.offset, rec.timestamp, key, value, headers)
