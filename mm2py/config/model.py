"""Frozen, typed configuration objects: what the rest of mm2py reads.

They are built once, at the edge, by ``mm2py.config.load`` from an MM2 properties (or YAML)
file; nothing downstream parses strings again. Client settings stay in Kafka's own
(Java client) spelling; ``mm2py.kafka.clientconf`` translates them per client library.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any


class FrozenMap(Mapping[str, Any]):
    """A read-only, hashable, picklable mapping (Spark pickles configs to executors)."""

    __slots__ = ("_data",)

    def __init__(self, values: Mapping[str, Any] | None = None):
        self._data = dict(values or {})

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._data.items())))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(self._data) == dict(other)

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))


def frozen_map(values: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
    return FrozenMap(values)


@dataclass(frozen=True)
class ClusterConfig:
    """One Kafka cluster named in ``clusters``.

    In ``MirrorMakerConfig.clusters`` (mm2py's own tools): ``client`` holds every
    ``{alias}.<client-setting>`` with top-level security settings beneath; ``consumer``/``producer``/
    ``admin`` are ``client`` overlaid with top-level and then ``{alias}.`` typed keys.

    In a ``FlowConfig`` (``source``, ``target``, ``offset_syncs``) the same cluster carries the
    settings of that flow's clients, as MM2 routes them: ``source.consumer`` is the replication
    consumer, ``target.producer`` the data producer, and so on (``mm2py.config.clients`` has the
    table). ``client`` stays the cluster's (the position store's clients, MM2's worker clients).
    """

    alias: str
    bootstrap_servers: str
    client: Mapping[str, str] = field(default_factory=frozen_map)
    consumer: Mapping[str, str] = field(default_factory=frozen_map)
    producer: Mapping[str, str] = field(default_factory=frozen_map)
    admin: Mapping[str, str] = field(default_factory=frozen_map)
    # '{alias}.schema.registry.<setting>' without the prefix: confluent-kafka's registry client
    # settings (url, basic.auth.user.info ...); empty: no registry (mm2py.schemas)
    schema_registry: Mapping[str, str] = field(default_factory=frozen_map)


@dataclass(frozen=True)
class NamingConfig:
    """How remote and internal topics are named: the replication policy and its keys."""

    replication_policy_class: str = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    replication_policy_separator: str = "."
    internal_topic_separator_enabled: bool = True


@dataclass(frozen=True)
class SelectionConfig:
    """What a flow mirrors: its topics and groups, the filter classes, and how often they are listed."""

    topics: tuple[str, ...] = (".*",)
    topics_exclude: tuple[str, ...] = (r".*[\-\.]internal", r".*\.replica", "__.*")
    groups: tuple[str, ...] = (".*",)
    groups_exclude: tuple[str, ...] = ("console-consumer-.*", "connect-.*", "__.*")
    # MM2's default filter classes, or Python paths (mm2py.config.filters)
    topic_filter_class: str = "org.apache.kafka.connect.mirror.DefaultTopicFilter"
    group_filter_class: str = "org.apache.kafka.connect.mirror.DefaultGroupFilter"
    refresh_topics_enabled: bool = True
    refresh_topics_interval_seconds: float = 600.0
    refresh_groups_enabled: bool = True
    refresh_groups_interval_seconds: float = 600.0
    heartbeats_replication_enabled: bool = True


@dataclass(frozen=True)
class DeliveryConfig:
    """How records reach the target: delivery mode, loops, where copying starts and what a gone-back source does."""

    exactly_once_support: str = "requested"  # "requested" | "enabled" | "required" | "disabled"
    # the delivery mode (mm2py.config.delivery): "off" | "enabled" | "required", and the key that set it
    exactly_once: str = "off"
    exactly_once_key: str | None = None
    auto_offset_reset: str = "earliest"  # from {source}.consumer.auto.offset.reset
    # mm2py additions (not in MM2)
    partition_mismatch: str = "error"  # "error" | "hash"
    # a source partition gone back (topic re-created, log truncated): mm2py.source.plan.resets
    source_reset_policy: str = "continue"  # "continue" | "stop" | "recreate"
    provenance_enabled: bool = True  # identity cycles: loop prevention by producer id (mm2py.source.provenance)


@dataclass(frozen=True)
class CopyConfig:
    """The copy path's pace: tasks, micro-batch size and interval, tailing (mm2py additions but tasks.max)."""

    tasks_max: int | None = None  # None: Spark's default parallelism
    consumer_poll_timeout_ms: int = 1000
    max_batch_bytes: int = 1024 * 1024 * 1024  # admission control: most source bytes per micro-batch
    batch_duration_ms: int = 2000  # ... and about this much time of data at the measured rate
    batch_coalesce_bytes: int = 0  # runs of small source batches written as one batch of up to this size
    trigger_interval_ms: int = 500  # minimum time between micro-batches
    tail_ms: int = 10000  # a caught-up copy task keeps copying new records this long (mm2py.source.copy.tail)
    tail_commit_ms: int = 2000  # a tailing task records its progress this often (mm2py.source.copy.tail_commit)
    continuous_enabled: bool = False  # backlog tasks copy for the interval (mm2py.source.copy.continuous)
    # a tail's copier outlives its task (mm2py.source.copy.resident); None: with a local master only
    resident_enabled: bool | None = None
    resident_grace_ms: int = 5000  # ... this long past its task's return, unless a task releases it first


@dataclass(frozen=True)
class MetadataSyncConfig:
    """Remote topics' creation and what is synced to them: configs, ACLs, deletions."""

    replication_factor: int = 2
    config_property_filter_class: str = "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"
    sync_topic_configs_enabled: bool = True
    sync_topic_configs_interval_seconds: float = 600.0
    config_properties_exclude: tuple[str, ...] = (
        r"follower\.replication\.throttled\.replicas",
        r"leader\.replication\.throttled\.replicas",
        r"message\.timestamp\.difference\.max\.ms",
        r"message\.timestamp\.type",
        r"unclean\.leader\.election\.enable",
        r"min\.insync\.replicas",
    )
    use_defaults_from: str = "target"  # "source" | "target"
    sync_topic_acls_enabled: bool = True
    sync_topic_acls_interval_seconds: float = 600.0
    sync_topic_deletes_enabled: bool = False  # mm2py addition


@dataclass(frozen=True)
class CheckpointsConfig:
    """Offset syncs, checkpoints and group offset sync, with their topics."""

    emit_checkpoints_enabled: bool = True
    emit_checkpoints_interval_seconds: float = 60.0
    sync_group_offsets_enabled: bool = False
    sync_group_offsets_interval_seconds: float = 60.0
    emit_offset_syncs_enabled: bool = True
    offset_syncs_history_enabled: bool = True  # mm2py.source.sync_history
    offset_lag_max: int = 100
    offset_syncs_topic_location: str = "source"  # "source" | "target"
    checkpoints_topic_replication_factor: int = 3
    offset_syncs_topic_replication_factor: int = 3


@dataclass(frozen=True)
class HeartbeatsConfig:
    """The flow's heartbeat connector and its topic."""

    emit_heartbeats_enabled: bool = True
    emit_heartbeats_interval_seconds: float = 1.0
    heartbeats_topic_replication_factor: int = 3


@dataclass(frozen=True)
class SchemasConfig:
    """Schema registry handling (mm2py.schemas; mm2py addition)."""

    mode: str = "off"  # "translate" | "preserve" | "off"
    on_error: str = "fail"  # "fail" | "pass" | "dead-letter"
    dead_letter_topic: str = "mm2py-schemas-dead-letter.{source}.internal"
    storage_topic: str = "kafkasql-journal"  # preserve: the source registry's storage topic
    keys: str = "auto"  # translate: "auto" | "framed" | "raw"


@dataclass(frozen=True)
class FlowConfig:
    """One replication flow ``source->target`` with every setting resolved, in sections.

    Precedence (as MM2's MirrorMakerConfig): ``{src}->{tgt}.key`` beats the top-level ``key``
    beats the default. ``{alias}.key`` is a client setting of that cluster, never a flow setting;
    only ``delivery.auto_offset_reset`` comes from the replication consumer's settings (``source.consumer``).
    Client settings reach ``source``/``target``/``offset_syncs`` as ``mm2py.config.clients`` says.
    Each setting lives in one section (``FLOW_SECTIONS``); ``mm2py.config.keys`` names a key's
    field by its path, ``"section.field"`` (``flow_value`` reads one).
    """

    source: ClusterConfig
    target: ClusterConfig
    enabled: bool = False
    admin_timeout_ms: int = 60000
    naming: NamingConfig = NamingConfig()
    selection: SelectionConfig = SelectionConfig()
    delivery: DeliveryConfig = DeliveryConfig()
    copy: CopyConfig = CopyConfig()
    metadata: MetadataSyncConfig = MetadataSyncConfig()
    checkpoints: CheckpointsConfig = CheckpointsConfig()
    heartbeats: HeartbeatsConfig = HeartbeatsConfig()
    schemas: SchemasConfig = SchemasConfig()
    # every resolved key (including unknown ones), for plugins and diagnostics
    raw: Mapping[str, str] = field(default_factory=frozen_map)
    # the cluster holding the offset syncs (offset-syncs.topic.location), with the settings of the
    # clients that write and read them; None: ``source`` or ``target`` as they are
    offset_syncs: ClusterConfig | None = None

    @property
    def name(self) -> str:
        return f"{self.source.alias}->{self.target.alias}"


# FlowConfig's sections: attribute -> class
FLOW_SECTIONS: dict[str, type] = {
    "naming": NamingConfig, "selection": SelectionConfig, "delivery": DeliveryConfig, "copy": CopyConfig,
    "metadata": MetadataSyncConfig, "checkpoints": CheckpointsConfig, "heartbeats": HeartbeatsConfig,
    "schemas": SchemasConfig,
}
# FlowConfig's own settings besides the clusters, ``raw`` and the sections
FLOW_TOP_LEVEL = ("enabled", "admin_timeout_ms")


def flow_field_paths() -> dict[str, Any]:
    """Every setting of a flow by its path (``"copy.tail_ms"``, ``"enabled"``) -> its default."""
    paths: dict[str, Any] = {}
    for f in fields(FlowConfig):
        if f.name in FLOW_TOP_LEVEL:
            paths[f.name] = f.default
        elif f.name in FLOW_SECTIONS:
            for inner in fields(FLOW_SECTIONS[f.name]):
                paths[f"{f.name}.{inner.name}"] = inner.default
    return paths


def flow_value(flow: FlowConfig, path: str) -> Any:
    """The setting at ``path`` (``"selection.topics"``) of ``flow``."""
    value: Any = flow
    for part in path.split("."):
        value = getattr(value, part)
    return value


def build_flow(source: ClusterConfig, target: ClusterConfig, values: Mapping[str, Any], **rest: Any) -> FlowConfig:
    """A flow from settings by path (``flow_field_paths``); an unknown path is a ValueError naming it."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {name: {} for name in FLOW_SECTIONS}
    for path, value in values.items():
        section, _, name = path.rpartition(".")
        if not section and name in FLOW_TOP_LEVEL:
            top[name] = value
        elif section in sections:
            sections[section][name] = value
        else:
            raise ValueError(f"no flow setting {path!r}")
    built = {name: FLOW_SECTIONS[name](**given) for name, given in sections.items()}
    return FlowConfig(source=source, target=target, **top, **built, **rest)


@dataclass(frozen=True)
class MirrorMakerConfig:
    """A whole MM2 file: its clusters, every flow that runs (enabled or heartbeat-only), Spark."""

    clusters: Mapping[str, ClusterConfig]
    flows: tuple[FlowConfig, ...]
    spark: Mapping[str, str] = field(default_factory=frozen_map)  # spark.* keys, e.g. spark.master
    metrics_port: int | None = None
    metrics_bind_address: str = "0.0.0.0"  # metrics.bind.address
    audit_interval_seconds: float = 60.0  # audit.interval.seconds; 0: no completeness audit
    shutdown_timeout_ms: int = 25000  # shutdown.timeout.ms: a signalled stop's wait for commits
    source_path: str | None = None
    unknown_keys: tuple[str, ...] = ()

    @property
    def enabled_flows(self) -> tuple[FlowConfig, ...]:
        return tuple(f for f in self.flows if f.enabled)

    def heartbeat_flows(self, targets: tuple[str, ...] | None) -> tuple[FlowConfig, ...]:
        """Every flow into the listed targets (all clusters when none), enabled or not: as MM2's
        herders do, each runs a heartbeat connector when ``emit.heartbeats.enabled``. B->A's beats
        are what make A's ``heartbeats`` topic, mirrored as ``A.heartbeats`` by A->B."""
        into = set(targets) if targets else set(self.clusters)
        return tuple(f for f in self.flows if f.target.alias in into)

    def flows_into(self, targets: tuple[str, ...] | None) -> tuple[FlowConfig, ...]:
        """Enabled flows, limited to those whose target is listed (``--clusters``)."""
        if not targets:
            return self.enabled_flows
        return tuple(f for f in self.enabled_flows if f.target.alias in targets)
