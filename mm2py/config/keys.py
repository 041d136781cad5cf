"""Every flow-level configuration key, declared once: name, type, default, doc.

Defaults are MirrorMaker 2's (``MirrorSourceConfig``, ``MirrorCheckpointConfig``,
``MirrorHeartbeatConfig``, ``MirrorConnectorConfig``) unless marked as an mm2py extension.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields

from mm2py.config.model import FlowConfig

_FLOW_DEFAULTS = {f.name: f.default for f in fields(FlowConfig) if f.name not in ("source", "target", "raw")}


class InvalidValue(ValueError):
    """A value that does not parse as its key's type; the message says what was expected."""


@dataclass(frozen=True)
class Key:
    name: str
    field: str
    kind: str  # bool | int | float | str | regex_list | enum
    doc: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    extension: bool = False  # an mm2py key MM2 does not have

    @property
    def default(self) -> object:
        return _FLOW_DEFAULTS[self.field]

    def parse(self, text: str) -> object:
        value = text.strip()
        if self.kind == "bool":
            if value.lower() not in ("true", "false"):
                raise InvalidValue(f"expected true or false, got {text!r}")
            return value.lower() == "true"
        if self.kind in ("int", "float"):
            try:
                number: float = int(value) if self.kind == "int" else float(value)
            except ValueError:
                expected = "an integer" if self.kind == "int" else "a number"
                raise InvalidValue(f"expected {expected}, got {text!r}") from None
            if self.minimum is not None and number < self.minimum:
                raise InvalidValue(f"must be at least {self.minimum:g}, got {text!r}")
            return number
        if self.kind == "enum":
            if value.lower() not in self.choices:
                raise InvalidValue(f"expected one of {', '.join(self.choices)}, got {text!r}")
            return value.lower()
        if self.kind == "regex_list":
            items = tuple(p.strip() for p in value.split(",") if p.strip())
            for pattern in items:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise InvalidValue(f"invalid regular expression {pattern!r}: {e}") from None
            return items
        if not value:
            raise InvalidValue("must not be empty")
        return value


def _k(name: str, kind: str, doc: str, **extra: object) -> Key:
    return Key(name, name.replace(".", "_").replace("-", "_"), kind, doc, **extra)  # type: ignore[arg-type]


FLOW_KEYS: tuple[Key, ...] = (
    _k("topics", "regex_list", "Topics to mirror: comma-separated regexes matching whole names."),
    _k("topics.exclude", "regex_list", "Topics never mirrored; wins over topics."),
    _k("groups", "regex_list", "Consumer groups to checkpoint."),
    _k("groups.exclude", "regex_list", "Consumer groups never checkpointed; wins over groups."),
    _k("replication.policy.class", "str", "Remote topic naming: MM2 Java class name or a Python path."),
    _k("replication.policy.separator", "str", "Separator between cluster alias and topic in remote names."),
    Key("replication.policy.internal.topic.separator.enabled", "internal_topic_separator_enabled", "bool",
        "Use the separator in internal topic names too (KIP-949)."),
    _k("replication.factor", "int", "Replication factor of created remote topics.", minimum=1),
    _k("heartbeats.topic.replication.factor", "int", "Replication factor of the heartbeats topic.", minimum=1),
    _k("checkpoints.topic.replication.factor", "int", "Replication factor of the checkpoints topic.", minimum=1),
    _k("offset-syncs.topic.replication.factor", "int", "Replication factor of the offset-syncs topic.",
       minimum=1),
    _k("offset-syncs.topic.location", "enum", "Cluster holding the offset-syncs topic.",
       choices=("source", "target")),
    _k("refresh.topics.enabled", "bool", "Look for new topics and partitions periodically."),
    _k("refresh.topics.interval.seconds", "float", "How often to look for new topics.", minimum=0),
    _k("refresh.groups.enabled", "bool", "Look for new consumer groups periodically."),
    _k("refresh.groups.interval.seconds", "float", "How often to look for new groups.", minimum=0),
    _k("sync.topic.configs.enabled", "bool", "Copy topic configs to remote topics."),
    _k("sync.topic.configs.interval.seconds", "float", "How often to copy topic configs.", minimum=0),
    _k("config.properties.exclude", "regex_list", "Topic configs never copied."),
    _k("use.defaults.from", "enum", "Where unset topic configs take defaults from.", choices=("source", "target")),
    _k("sync.topic.acls.enabled", "bool", "Copy topic ACLs to remote topics."),
    _k("sync.topic.acls.interval.seconds", "float", "How often to copy ACLs.", minimum=0),
    _k("emit.heartbeats.enabled", "bool", "Write heartbeats to the target."),
    _k("emit.heartbeats.interval.seconds", "float", "Heartbeat period.", minimum=0),
    _k("emit.checkpoints.enabled", "bool", "Write consumer group checkpoints to the target."),
    _k("emit.checkpoints.interval.seconds", "float", "Checkpoint period.", minimum=0),
    _k("sync.group.offsets.enabled", "bool", "Commit translated offsets to idle groups on the target."),
    _k("sync.group.offsets.interval.seconds", "float", "Group offset sync period.", minimum=0),
    Key("emit.offset-syncs.enabled", "emit_offset_syncs_enabled", "bool", "Write offset syncs (KIP-1031)."),
    _k("offset.lag.max", "int", "MM2's sync spacing; mm2py syncs exactly and keeps it for compatibility.",
       minimum=0),
    _k("heartbeats.replication.enabled", "bool", "Mirror heartbeats topics even if topics does not match."),
    _k("admin.timeout.ms", "int", "Timeout of admin operations; also bounds how long an unreachable "
       "cluster is waited for.", minimum=1),
    _k("consumer.poll.timeout.ms", "int", "Longest wait of one source fetch.", minimum=1),
    _k("tasks.max", "int", "Spark tasks per micro-batch of a flow (default: Spark's parallelism).", minimum=1),
    _k("exactly.once.support", "enum", "Exactly-once delivery on the target.",
       choices=("requested", "required", "disabled")),
    _k("partition.mismatch", "enum", "Target with fewer partitions: error, or hash keys like a Java producer.",
       choices=("error", "hash"), extension=True),
    _k("sync.topic.deletes.enabled", "bool", "Delete a remote topic when its source topic is deleted.",
       extension=True),
    _k("max.batch.bytes", "int", "Admission control: bytes per micro-batch of a flow.", minimum=1,
       extension=True),
    _k("trigger.interval.ms", "int", "Least time between micro-batches of a flow.", minimum=0, extension=True),
)
FLOW_KEYS_BY_NAME = {k.name: k for k in FLOW_KEYS}
AUTO_OFFSET_RESET = Key("consumer.auto.offset.reset", "auto_offset_reset", "enum",
                        "Where a partition without a recorded position starts.", choices=("earliest", "latest"))

# Keys MM2 files carry that mean nothing extra to mm2py, accepted without a warning.
ACCEPTED_TOP_LEVEL = re.compile(
    r"clusters|metrics\.port|spark\..+|offset\.flush\.interval\.ms|offset\.flush\.timeout\.ms"
    r"|dedicated\.mode\.enable\.internal\.rest|(key|value|header)\.converter(\..+)?"
    r"|(config|offset|status)\.storage\.(replication\.factor|topic|partitions)"
    r"|(topic|group|config\.property)\.filter\.class|forwarding\.admin\.class"
    r"|source\.cluster\.alias|target\.cluster\.alias|name|connector\.class|enabled"
    r"|(producer|consumer|admin)\..+|(security|sasl|ssl)\..+|client\.id|request\.timeout\.ms"
    r"|replication\.policy\..+|emit\.heartbeats\..+|checkpoints?\..+|offset-syncs\..+"
    r"|sync\.group\.offsets\..+|listeners|rest\..+|exactly\.once\.source\.support"
)
# Client settings given at top level apply to every cluster's clients (MM2's clusterProps).
TOP_LEVEL_CLIENT = re.compile(r"(security|sasl|ssl)\..+|client\.id|request\.timeout\.ms")
