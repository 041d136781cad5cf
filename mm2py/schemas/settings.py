"""What a copy task needs to know about a flow's schema handling; picklable, sent with the task."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm2py.flowspec import FlowSpec


@dataclass(frozen=True)
class SchemaSettings:
    """``schemas.*`` of one flow with both clusters' registry client settings.

    ``source_registry``/``target_registry`` are confluent-kafka registry client settings
    (``url``, ``basic.auth.user.info`` ...), from ``{alias}.schema.registry.<setting>``.
    """

    mode: str
    on_error: str
    dead_letter_topic: str
    source_alias: str
    target_alias: str
    source_registry: Mapping[str, str]
    target_registry: Mapping[str, str]
    heartbeats_topic: str = "heartbeats"
    keys: str = "auto"  # schemas.keys: auto | framed | raw
    separator: str = "."

    @property
    def translates(self) -> bool:
        return self.mode == "translate"

    def carries_schemas(self, topic: str) -> bool:
        """``carries_schemas`` of ``topic`` with this flow's heartbeats topic and separator."""
        return carries_schemas(topic, heartbeats=self.heartbeats_topic, separator=self.separator)

    @classmethod
    def for_flow(cls, spec: FlowSpec) -> SchemaSettings | None:
        """The flow's settings, or None when its records pass as bytes (``off``, ``preserve``)."""
        flow = spec.flow
        if flow.schemas.mode != "translate":
            return None
        return cls(
            mode=flow.schemas.mode, on_error=flow.schemas.on_error,
            dead_letter_topic=flow.schemas.dead_letter_topic.replace("{source}", flow.source.alias),
            source_alias=flow.source.alias, target_alias=flow.target.alias,
            source_registry=flow.source.schema_registry, target_registry=flow.target.schema_registry,
            heartbeats_topic=spec.policy.heartbeats_topic(), separator=flow.naming.replication_policy_separator,
            keys=flow.schemas.keys,
        )


def carries_schemas(topic: str, *, heartbeats: str = "heartbeats", separator: str = ".") -> bool:
    """False for heartbeats topics (``heartbeats``, ``A.heartbeats`` ...): MM2's own binary records,
    whose key starts with a 0 byte (a string's length) without being a frame; they pass as bytes,
    untranslated and untouched by a decoded transform."""
    return topic != heartbeats and not topic.endswith(separator + heartbeats)
