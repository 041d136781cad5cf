"""Subjects synced from the source registry to the target's, ahead of the records that use them.

A subject reaches the target under the name the replication policy gives its topic
(TopicNameStrategy ``orders-value`` -> ``A.orders-value``; TopicRecordNameStrategy
``orders-x.Order`` -> ``A.orders-x.Order``); any other subject (RecordNameStrategy, references)
keeps its name. Every version up to the one a record needs is synced, in order, after the
schemas it references, and the subject's compatibility setting with them.

A schema the target already holds under that subject (same fastavro fingerprint) is reused,
never registered again; a registered one is checked back (``_checked``): its target id must
resolve to a schema with the source's fingerprint, else ``Untranslatable``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mm2py.schemas.canonical import NotAvro, fingerprint
from mm2py.schemas.registry import Registry, answered, reference_of, schema_text

if TYPE_CHECKING:  # imported at first use, as mm2py.schemas.registry does
    from confluent_kafka.schema_registry import RegisteredSchema

AVRO = "AVRO"


class Untranslatable(Exception):
    """A schema id that cannot be carried to the target; the message says why."""


def target_subject(subject: str, topic: str, remote_topic: str) -> str:
    """The subject's name on the target: topic-named subjects follow the topic's remote name."""
    if remote_topic != topic and subject.startswith(topic + "-"):
        return remote_topic + subject[len(topic):]
    return subject


@dataclass
class Mapped:
    """A source schema's place on the target."""

    target_id: int
    target_version: int
    fingerprint: str


@dataclass
class SubjectSync:
    """Syncs subjects from ``source`` to ``target``; remembers what it synced (per process)."""

    source: Registry
    target: Registry
    # (source subject, version) -> its place under the target subject
    done: dict[tuple[str, int, str], Mapped] = field(default_factory=dict)
    # target subject -> fingerprint -> (id, version) of what it holds
    held: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    compat_done: set[str] = field(default_factory=set)

    def sync_for(self, source_id: int, topic: str, remote_topic: str) -> int:
        """Sync the subjects holding ``source_id`` that ``topic``'s records use; the target id."""
        schema = self.source.schema(source_id)
        if schema is None:
            raise Untranslatable(f"schema id {source_id} is unknown to the source registry {self.source.url}")
        if (schema.schema_type or AVRO).upper() != AVRO:
            raise Untranslatable(f"schema id {source_id} is a {schema.schema_type} schema, not Avro")
        pairs = self.source.subjects_of(source_id)
        if not pairs:
            raise Untranslatable(f"schema id {source_id} is under no subject of the source registry")
        ours = [p for p in pairs if p[0].startswith(topic + "-")] or pairs
        mapped = [self.sync_subject(subject, version, target_subject(subject, topic, remote_topic))
                  for subject, version in ours]
        return mapped[0].target_id

    def sync_subject(self, subject: str, upto: int, to: str) -> Mapped:
        """Versions 1..``upto`` of ``subject`` on the target under ``to``; the place of ``upto``."""
        key = (subject, upto, to)
        if key in self.done:
            return self.done[key]
        if to not in self.compat_done:
            level = self.source.compatibility(subject)
            if level and self.target.compatibility(to) != level:
                self.target.set_compatibility(to, level)
            self.compat_done.add(to)
        last: Mapped | None = None
        for version in self.source.versions(subject):
            if version > upto:
                break
            if (subject, version, to) not in self.done:
                self.done[(subject, version, to)] = self._sync_version(self.source.version(subject, version), to)
            last = self.done[(subject, version, to)]
        if last is None:
            raise Untranslatable(f"version {upto} of subject {subject} is gone from the source registry")
        return last

    def _sync_version(self, registered: RegisteredSchema, to: str) -> Mapped:
        from confluent_kafka.schema_registry import Schema, SchemaReference

        schema = registered.schema
        if (schema.schema_type or AVRO).upper() != AVRO:
            raise Untranslatable(f"subject {registered.subject} version {registered.version} is a "
                                 f"{schema.schema_type} schema, not Avro")
        source_refs = list(schema.references or [])
        target_refs = []
        for ref in source_refs:  # referenced subjects keep their names (record names)
            subject, version = reference_of(ref)
            placed = self.sync_subject(subject, version, subject)
            target_refs.append(SchemaReference(ref.name, subject, placed.target_version))
        text = schema_text(schema)
        try:
            wanted = fingerprint(text, self.source.resolved_references(source_refs))
        except NotAvro as e:
            raise Untranslatable(f"subject {registered.subject} version {registered.version}: {e}") from e
        held = self._held(to)
        if wanted in held:
            target_id, target_version = held[wanted]
            return Mapped(target_id, target_version, wanted)
        copy = Schema(text, AVRO, target_refs)
        target_id = self.target.register(to, copy)
        found = self.target.lookup(to, copy)
        target_version = int(found.version) if found is not None and found.version is not None else -1
        self._checked(target_id, wanted, to)
        held[wanted] = (target_id, target_version)
        return Mapped(target_id, target_version, wanted)

    def _held(self, subject: str) -> dict[str, tuple[int, int]]:
        """Fingerprints of every version the target holds under ``subject``."""
        if subject not in self.held:
            prints: dict[str, tuple[int, int]] = {}
            for version in self.target.versions(subject):
                registered = self.target.version(subject, version)
                if (registered.schema.schema_type or AVRO).upper() != AVRO:
                    continue
                refs = self.target.resolved_references(list(registered.schema.references or []))
                try:
                    prints.setdefault(fingerprint(schema_text(registered.schema), refs),
                                      (int(answered(registered.schema_id, "a schema id")), int(version)))
                except NotAvro:
                    continue
            self.held[subject] = prints
        return self.held[subject]

    def _checked(self, target_id: int, wanted: str, subject: str) -> None:
        """The invariant: ``target_id`` resolves on the target to the schema we registered."""
        schema = self.target.schema(target_id)
        if schema is None:
            raise Untranslatable(f"the target registry {self.target.url} does not resolve id {target_id} it gave "
                                 f"for subject {subject}")
        refs = self.target.resolved_references(list(schema.references or []))
        try:
            got = fingerprint(schema_text(schema), refs)
        except NotAvro as e:
            raise Untranslatable(f"target id {target_id} of subject {subject}: {e}") from e
        if got != wanted:
            raise Untranslatable(f"the target registry {self.target.url} resolves id {target_id} (subject {subject}) "
                                 "to a different schema than the source's")
