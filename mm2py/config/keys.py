"""Every configuration key mm2py understands, declared once: name, type, default, doc, scope.

Defaults are MirrorMaker 2's (``MirrorSourceConfig``, ``MirrorCheckpointConfig``,
``MirrorHeartbeatConfig``, ``MirrorConnectorConfig``) unless the key is marked as an mm2py
extension; flow defaults are read from ``FlowConfig`` so there is one source of truth.
Values are parsed as Kafka's ``ConfigDef`` parses them: trimmed first, lists split at commas.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from mm2py.config.model import flow_field_paths

_FLOW_DEFAULTS = flow_field_paths()  # "section.field" -> default
# a key's name as a field name (dots and dashes as '_') -> the FlowConfig path it fills
_PATHS = {path.rpartition(".")[2]: path for path in _FLOW_DEFAULTS} | {
    "copy_tail_ms": "copy.tail_ms", "copy_tail_commit_ms": "copy.tail_commit_ms",
    "copy_continuous_enabled": "copy.continuous_enabled",
    "copy_resident_enabled": "copy.resident_enabled", "copy_resident_grace_ms": "copy.resident_grace_ms",
    **{f"schemas_{path.rpartition('.')[2]}": path for path in _FLOW_DEFAULTS if path.startswith("schemas.")}}
_INT = re.compile(r"[+-]?\d+")
# Java's Long/Double syntax, not Python's: no "1_000", "nan" or "inf"
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(\.[A-Za-z_$][\w$]*)*")
_LIST_SPLIT = re.compile(r"\s*,\s*")


class Scope(enum.Enum):
    FLOW = "flow"  # top level, or ``{src}->{tgt}.key`` for one flow
    CLUSTER = "cluster"  # ``{alias}.key``
    GLOBAL = "global"  # top level only


class Kind(enum.Enum):
    BOOL = "bool"
    INT = "int"
    FLOAT = "float"
    STR = "str"
    CLASS = "class"  # a Java or Python class name
    LIST = "list"
    REGEX_LIST = "regex_list"
    ENUM = "enum"


class InvalidValue(ValueError):
    """A value that does not parse as its key's type; the message says what was expected."""


def split_list(text: str) -> tuple[str, ...]:
    """A ConfigDef LIST: comma-separated, white space around items dropped, empty items too."""
    return tuple(item for item in _LIST_SPLIT.split(text.strip()) if item)


@dataclass(frozen=True)
class Key:
    name: str
    kind: Kind
    default: object
    doc: str
    scope: Scope = Scope.FLOW
    field: str | None = None  # the FlowConfig field it fills, by path ("copy.tail_ms", mm2py.config.model)
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    extension: bool = False  # an mm2py key MirrorMaker 2 does not have
    deprecated_names: tuple[str, ...] = ()  # MM2's older spellings, still read

    def parse(self, text: str) -> object:
        value = text.strip()
        if self.kind is Kind.BOOL:
            if value.lower() not in ("true", "false"):
                raise InvalidValue(f"expected true or false, got {text!r}")
            return value.lower() == "true"
        if self.kind in (Kind.INT, Kind.FLOAT):
            return self._number(value, text)
        if self.kind is Kind.ENUM:
            if value.lower() not in self.choices:
                raise InvalidValue(f"expected one of {', '.join(self.choices)}, got {text!r}")
            return value.lower()
        if self.kind is Kind.LIST:
            return split_list(value)
        if self.kind is Kind.REGEX_LIST:
            items = split_list(value)
            for pattern in items:
                try:
                    re.compile(pattern)
                except re.error as e:
                    raise InvalidValue(f"invalid regular expression {pattern!r}: {e}") from None
            return items
        if not value:
            raise InvalidValue("must not be empty")
        if self.kind is Kind.CLASS and not _CLASS_NAME.fullmatch(value):
            raise InvalidValue(f"expected a class name (Java or Python dotted path), got {text!r}")
        return value

    def _number(self, value: str, text: str) -> float:
        if self.kind is Kind.INT:
            if not _INT.fullmatch(value):
                raise InvalidValue(f"expected an integer, got {text!r}")
            number: float = int(value)
        else:
            if not _FLOAT.fullmatch(value):
                raise InvalidValue(f"expected a number, got {text!r}")
            number = float(value)
        if self.minimum is not None and number < self.minimum:
            raise InvalidValue(f"must be at least {self.minimum:g}, got {text!r}")
        if self.maximum is not None and number > self.maximum:
            raise InvalidValue(f"must be at most {self.maximum:g}, got {text!r}")
        return number


def _flow(name: str, kind: Kind, doc: str, *, field: str | None = None, **extra: object) -> Key:
    """A flow key; its FlowConfig field (a path, ``"section.field"``) is named by the key's name with '.'
    and '-' as '_' unless given."""
    field = _PATHS[field or name.replace(".", "_").replace("-", "_")]
    return Key(name, kind, _FLOW_DEFAULTS[field], doc, Scope.FLOW, field, **extra)  # type: ignore[arg-type]


_RF = "Replication factor of the {} (MM2 default 3; 1 for a single-broker cluster)."

FLOW_KEYS: tuple[Key, ...] = (
    _flow("enabled", Kind.BOOL, "Run this flow; only meaningful as '{src}->{tgt}.enabled'."),
    _flow("topics", Kind.REGEX_LIST, "Topics to mirror: comma-separated regexes matching whole names."),
    _flow("topics.exclude", Kind.REGEX_LIST, "Topics never mirrored; wins over topics.",
          deprecated_names=("topics.blacklist",)),
    _flow("groups", Kind.REGEX_LIST, "Consumer groups to checkpoint."),
    _flow("groups.exclude", Kind.REGEX_LIST, "Consumer groups never checkpointed; wins over groups.",
          deprecated_names=("groups.blacklist",)),
    _flow("replication.policy.class", Kind.CLASS, "Remote topic naming: MM2's Java class name or a Python path."),
    _flow("topic.filter.class", Kind.CLASS, "Which topics a flow mirrors: MM2's DefaultTopicFilter (topics, "
          "topics.exclude) or the Python path of a class with should_replicate_topic (mm2py.config.filters)."),
    _flow("group.filter.class", Kind.CLASS, "Which consumer groups a flow checkpoints: MM2's DefaultGroupFilter "
          "(groups, groups.exclude) or the Python path of a class with should_replicate_group (mm2py.config.filters)."),
    _flow("config.property.filter.class", Kind.CLASS, "Which topic configs are copied: MM2's "
          "DefaultConfigPropertyFilter (config.properties.exclude, use.defaults.from) or the Python path of a class "
          "with should_replicate_config_property (mm2py.config.filters)."),
    _flow("replication.policy.separator", Kind.STR, "Separator between cluster alias and topic in remote names."),
    _flow("replication.policy.internal.topic.separator.enabled", Kind.BOOL,
          "Use the separator in internal topic names too (KIP-949).", field="internal_topic_separator_enabled"),
    _flow("replication.factor", Kind.INT, "Replication factor of created remote topics.", minimum=1),
    _flow("heartbeats.topic.replication.factor", Kind.INT, _RF.format("heartbeats topic"), minimum=1),
    _flow("checkpoints.topic.replication.factor", Kind.INT, _RF.format("checkpoints topic"), minimum=1),
    _flow("offset-syncs.topic.replication.factor", Kind.INT, _RF.format("offset-syncs topic"), minimum=1),
    _flow("offset-syncs.topic.location", Kind.ENUM, "Cluster holding the offset-syncs topic.",
          choices=("source", "target")),
    _flow("refresh.topics.enabled", Kind.BOOL, "Look for new topics and partitions periodically."),
    _flow("refresh.topics.interval.seconds", Kind.FLOAT, "How often to look for new topics.", minimum=0),
    _flow("refresh.groups.enabled", Kind.BOOL, "Look for new consumer groups periodically."),
    _flow("refresh.groups.interval.seconds", Kind.FLOAT, "How often to look for new groups.", minimum=0),
    _flow("sync.topic.configs.enabled", Kind.BOOL, "Copy topic configs to remote topics."),
    _flow("sync.topic.configs.interval.seconds", Kind.FLOAT, "How often to copy topic configs.", minimum=0),
    _flow("config.properties.exclude", Kind.REGEX_LIST, "Topic configs never copied.",
          deprecated_names=("config.properties.blacklist",)),
    _flow("use.defaults.from", Kind.ENUM, "Where unset topic configs take defaults from.",
          choices=("source", "target")),
    _flow("sync.topic.acls.enabled", Kind.BOOL, "Copy topic ACLs to remote topics."),
    _flow("sync.topic.acls.interval.seconds", Kind.FLOAT, "How often to copy ACLs.", minimum=0),
    _flow("emit.heartbeats.enabled", Kind.BOOL, "Write heartbeats to the target."),
    _flow("emit.heartbeats.interval.seconds", Kind.FLOAT, "Heartbeat period.", minimum=0),
    _flow("emit.checkpoints.enabled", Kind.BOOL, "Write consumer group checkpoints to the target."),
    _flow("emit.checkpoints.interval.seconds", Kind.FLOAT, "Checkpoint period.", minimum=0),
    _flow("sync.group.offsets.enabled", Kind.BOOL, "Commit translated offsets to idle groups on the target."),
    _flow("sync.group.offsets.interval.seconds", Kind.FLOAT, "Group offset sync period.", minimum=0),
    _flow("emit.offset-syncs.enabled", Kind.BOOL, "Write offset syncs (KIP-1031)."),
    _flow("offset-syncs.history.enabled", Kind.BOOL, "Also keep the syncs that start a linear run in "
          "mm2-offset-syncs-history.{alias}.internal beside the syncs topic, so groups far behind translate "
          "after the syncs topic is compacted; off (with a WARNING) when the principal may not create it."),
    _flow("offset.lag.max", Kind.INT, "MM2's sync spacing; mm2py syncs exactly and keeps it for compatibility.",
          minimum=0),
    _flow("heartbeats.replication.enabled", Kind.BOOL, "Mirror heartbeats topics even if topics does not match."),
    _flow("admin.timeout.ms", Kind.INT,
          "Timeout of admin operations; also bounds how long an unreachable cluster is waited for.", minimum=1),
    _flow("consumer.poll.timeout.ms", Kind.INT, "Longest wait of one source fetch.", minimum=1),
    _flow("tasks.max", Kind.INT, "Most Spark tasks per micro-batch of a flow (default: Spark's parallelism); "
          "above the core count tasks queue for a core, each paying a Python worker round trip.", minimum=1),
    _flow("exactly.once.support", Kind.ENUM, "Exactly-once delivery on the target: 'enabled' asks for it "
          "(at-least-once with a warning when the target cannot), 'required' refuses to start without it, "
          "'requested' follows {target}.exactly.once.source.support as in MM2.",
          choices=("requested", "enabled", "required", "disabled")),
    _flow("partition.mismatch", Kind.ENUM, "Target with fewer partitions: error, or hash keys like a Java producer.",
          choices=("error", "hash"), extension=True),
    _flow("source.reset.policy", Kind.ENUM, "A source partition gone back below the flow's position (its topic "
          "deleted and re-created, its log truncated, or diverged after an unclean leader election, found by "
          "leader epoch): 'continue' copies its records from its new log start (a diverged log: from the "
          "divergence point), after what the remote topic holds; 'stop' stops that partition with an error, "
          "other partitions go on; 'recreate' (a re-created source topic) deletes and re-creates the remote "
          "topic, which then mirrors the new one offset for offset (a truncated log is handled as 'continue'). "
          "Every case is recorded in mm2py-ledger.{source}.internal on the target.",
          choices=("continue", "stop", "recreate"), extension=True),
    _flow("sync.topic.deletes.enabled", Kind.BOOL, "Delete a remote topic when its source topic is deleted.",
          extension=True),
    _flow("max.batch.bytes", Kind.INT, "Admission control: most source bytes in one micro-batch of a flow "
          "(the first two micro-batches of a backlog, before a rate is measured, carry this or 512 MiB, "
          "whichever is less: lower it on a slow link).",
          minimum=1, extension=True),
    _flow("batch.duration.ms", Kind.INT, "Admission control: a micro-batch carries about this much time of data at "
          "the flow's measured rate, up to max.batch.bytes (0: always max.batch.bytes).", minimum=0,
          extension=True),
    _flow("batch.coalesce.bytes", Kind.INT, "Write runs of small source batches of a partition (plain, same "
          "codec, each at most an eighth of this) as one batch of up to this many bytes: each record's offset "
          "and timestamp deltas rewritten, its key, value and headers copied as bytes, the source's codec kept; "
          "records and their order unchanged; for many partitions with "
          "small batches, where each batch would cost a produce round trip (0: every batch as it came).",
          minimum=0, extension=True),
    _flow("provenance.enabled", Kind.BOOL, "On a cycle of flows that keep topic names (IdentityReplicationPolicy), "
          "stop records from looping by the producer id of their batches: each flow registers the producer ids "
          "it writes with, and their origin, in mm2py-provenance.internal on its target, and leaves out batches "
          "first written on its target. false: such cycles are refused or their looping topics held back.",
          extension=True),
    _flow("trigger.interval.ms", Kind.INT, "Least time between micro-batches of a flow.", minimum=0,
          extension=True),
    _flow("copy.tail.ms", Kind.INT, "How long a copy task of a caught-up flow keeps copying records that arrive "
          "after its planned ranges, so that they reach the target within a fetch round trip instead of "
          "waiting for the next micro-batch; positions and offset syncs are written when it ends. At-least-once "
          "flows without provenance, and only while the flow's tasks leave Spark a free task slot "
          "(0: tasks end at their planned ends).", minimum=0, extension=True),
    _flow("copy.tail.commit.ms", Kind.INT, "While a copy task tails, how often it records what the target "
          "acknowledged (offset syncs, then positions), so that a crash costs at most this long copied again "
          "rather than the whole tail; in an exactly-once copy interval, how often its transaction commits "
          "(what read_committed consumers wait for).", minimum=100, extension=True),
    _flow("copy.continuous.enabled", Kind.BOOL, "On a backlog, copy tasks copy for the whole micro-batch "
          "interval (batch.duration.ms from their start) rather than for their planned ranges: a task that "
          "finished its ranges goes on copying its partitions to where they are when the interval closes, so no "
          "task ends alone before the commit. With exactly-once, a task commits a transaction every "
          "copy.tail.commit.ms. Not with provenance; only while the flow's tasks fit in Spark's task slots at once.",
          extension=True),
    _flow("copy.resident.enabled", Kind.BOOL, "A tailing copy task returns at its window's end while its "
          "copier goes on in the Python worker until the flow's next task takes over from where the target "
          "acknowledged (a handover through a Unix socket on the executor's host), so records arriving between "
          "two micro-batches do not wait for the next one. At-least-once flows that tail (copy.tail.ms > 0), "
          "without provenance. On a cluster (executors on other hosts than the driver), a task that lands on "
          "another host than the copier it takes over from waits copy.resident.grace.ms first. Unset: on with "
          "a local Spark master (every executor on the driver's host), off on a cluster.",
          extension=True),
    _flow("copy.resident.grace.ms", Kind.INT, "How long a resident copier goes on after its task returned "
          "when no task takes over; with executors on other hosts (a non-local Spark master), how long a task "
          "that found no copier to take over here waits before it copies.", minimum=100, extension=True),
    _flow("schemas.mode", Kind.ENUM, "Avro records in the Confluent wire format between clusters with a schema "
          "registry each: translate (sync subjects, rewrite every schema id to the target's), preserve (the "
          "registry's storage topic is mirrored too and ids stay), off (bytes as they are).",
          choices=("translate", "preserve", "off"), extension=True),
    _flow("schemas.on.error", Kind.ENUM, "A record whose schema id cannot be translated (magic byte not 0, id "
          "unknown to the source registry, not Avro): fail the flow, pass it unchanged, or dead-letter it.",
          choices=("fail", "pass", "dead-letter"), extension=True),
    _flow("schemas.dead.letter.topic", Kind.STR, "Topic on the target taking dead-lettered records "
          "('{source}' is the source alias).", extension=True),
    _flow("schemas.keys", Kind.ENUM, "translate: which record keys carry a schema id. auto: those of topics "
          "whose source registry has a '{topic}-key' subject (TopicNameStrategy) and that start with a 0 byte; "
          "framed: every key starting with a 0 byte; raw: none (keys copied as they are; a Long key starts with a "
          "0 byte too).", choices=("auto", "framed", "raw"), extension=True),
    _flow("schemas.storage.topic", Kind.STR, "preserve: the source registry's storage topic (Apicurio kafkasql: "
          "kafkasql-journal; Confluent: _schemas); the flow must select it, and the target's registry runs "
          "read-only on its remote topic.", extension=True),
)

# The source consumer's reset policy, read from the replication consumer's settings (MM2 forces
# 'earliest' unless overridden; mm2py.config.clients); declared here for its type, default and doc.
AUTO_OFFSET_RESET = Key("auto.offset.reset", Kind.ENUM, _FLOW_DEFAULTS["delivery.auto_offset_reset"],
                        "Where a partition without a recorded position starts "
                        "('{source}.consumer.auto.offset.reset' or '{source}->{target}.consumer.auto.offset.reset').",
                        Scope.CLUSTER, "delivery.auto_offset_reset", choices=("earliest", "latest"))

CLUSTERS = Key("clusters", Kind.LIST, (), "Cluster aliases (required), e.g. 'A, B'.", Scope.GLOBAL)
METRICS_PORT = Key("metrics.port", Kind.INT, None, "Port of the Prometheus metrics endpoint (default: none).",
                   Scope.GLOBAL, minimum=1, maximum=65535, extension=True)
METRICS_BIND_ADDRESS = Key("metrics.bind.address", Kind.STR, "0.0.0.0",
                           "Address the metrics endpoint listens on (127.0.0.1: this machine only; default: every "
                           "interface).", Scope.GLOBAL, extension=True)
AUDIT_INTERVAL = Key("audit.interval.seconds", Kind.FLOAT, 60.0,
                     "Completeness audit: compare record counts per topic, partition and minute of the source and "
                     "the target every this many seconds, with metrics.port set (0: off).", Scope.GLOBAL, minimum=0,
                     extension=True)
SHUTDOWN_TIMEOUT = Key("shutdown.timeout.ms", Kind.INT, 25000,
                       "On SIGINT or SIGTERM: how long running micro-batches may take to commit (tails end at "
                       "once) before the queries are stopped anyway; what was not committed is copied again on "
                       "the next start. A second signal stops at once.", Scope.GLOBAL, minimum=0, extension=True)
BOOTSTRAP_SERVERS = Key("bootstrap.servers", Kind.LIST, None,
                        "Brokers of a cluster ('{alias}.bootstrap.servers', required for clusters in use).",
                        Scope.CLUSTER)

SCHEMA_REGISTRY_URL = Key("schema.registry.url", Kind.STR, None,
                          "The cluster's schema registry (Confluent API; Apicurio: .../apis/ccompat/v7), "
                          "'{alias}.schema.registry.url'; '{alias}.schema.registry.<setting>' passes any setting "
                          "of confluent-kafka's registry client (basic.auth.user.info, ssl.ca.location ...).",
                          Scope.CLUSTER, extension=True)

FLOW_KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in FLOW_KEYS}
# old spelling -> the key it stands for
DEPRECATED_NAMES: dict[str, Key] = {old: k for k in FLOW_KEYS for old in k.deprecated_names}
ALL_KEYS: tuple[Key, ...] = (*FLOW_KEYS, AUTO_OFFSET_RESET, CLUSTERS, METRICS_PORT, METRICS_BIND_ADDRESS,
                             AUDIT_INTERVAL, SHUTDOWN_TIMEOUT, BOOTSTRAP_SERVERS, SCHEMA_REGISTRY_URL)

CLIENT_TYPES = ("consumer", "producer", "admin")

# MM2's MirrorClientConfig.CLIENT_CONFIG_DEF: top-level settings that reach every cluster's
# clients (beneath that cluster's own). Top-level bootstrap.servers is a fallback there too.
TOP_LEVEL_CLIENT = re.compile(r"bootstrap\.servers|security\.protocol|(ssl|sasl)\..+")

# Connect worker settings: accepted without a warning but no client of ours takes them.
_WORKER = (
    r"offset\.flush\.(interval|timeout)\.ms|dedicated\.mode\.enable\.internal\.rest"
    r"|(key|value|header)\.converter(\..+)?|(config|offset|status)\.storage\..+"
    r"|exactly\.once\.source\.support|group\.id|listeners|rest\..+|task\..+|worker\..+"
    r"|forwarding\.admin\.class"
)
WORKER_KEY = re.compile(_WORKER)

# Keys MM2 files carry at top level (or per flow) that mean nothing extra to mm2py:
# accepted without a warning. Anything else unknown is listed in one warning.
ACCEPTED = re.compile(
    _WORKER
    + r"|spark\..+|(producer|consumer|admin)\..+|bootstrap\.servers|security\.protocol|(ssl|sasl)\..+"
    r"|client\.id|request\.timeout\.ms|name|connector\.class|source\.cluster\.alias|target\.cluster\.alias"
    r"|replication\.policy\..+|emit\.heartbeats\..+|emit\.checkpoints\..+|checkpoints\.topic\..+"
    r"|heartbeats\.topic\..+|offset-syncs\.topic\..+|sync\.group\.offsets\..+"
    r"|(source|target)\.(cluster|consumer|producer|admin)\..+"  # per flow: mm2py.config.clients
    r"|config\.providers(\..+)?"  # read before resolving: mm2py.config.transform
    r"|transforms(\..+)?|predicates(\..+)?"  # Connect's transforms on the flow's records: mm2py.transforms
    r"|errors\..+"  # what a record a transform fails on does: mm2py.transforms.tolerance
)

# Classes mm2py does not load: anything but MM2's defaults would be silently ignored.
DEFAULT_CLASSES = {
    "forwarding.admin.class": "org.apache.kafka.clients.admin.ForwardingAdmin",
}
