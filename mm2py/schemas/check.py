"""Start-up checks of ``schemas.mode``: refused before Spark starts when a flow cannot keep its schemas.

- ``translate`` needs ``{alias}.schema.registry.url`` on both clusters of the flow (a
  ``ConfigError`` naming each missing key), and ``partition.mismatch = error``;
- ``preserve`` needs the flow to select the registry's storage topic (``schemas.storage.topic``),
  which it then mirrors like any topic, configs included (``retention.ms=-1``); records pass as
  bytes with the source's ids, which the target's registry, read-only on the remote storage
  topic, resolves as the source's did;
- every registry named must answer (a ``SchemaRegistryError`` naming the cluster and URL);
- ``schemas.on.error = dead-letter``: the dead-letter topic is created on the target if missing.
"""

from __future__ import annotations

from collections.abc import Iterable

from mm2py.config.filters import topic_filter_for
from mm2py.config.model import FlowConfig
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.flowspec import FlowSpec
from mm2py.kafka.admin import Admin
from mm2py.schemas.registry import Registry
from mm2py.schemas.settings import SchemaSettings


def problems_of(flows: Iterable[FlowConfig]) -> list[ConfigProblem]:
    problems: list[ConfigProblem] = []
    for flow in flows:
        if flow.schemas.mode == "off":
            continue
        if flow.schemas.mode == "preserve":
            storage = flow.schemas.storage_topic
            if not topic_filter_for(flow).should_replicate_topic(storage):
                problems.append(ConfigProblem(f"{flow.name}.topics", f"flow {flow.name} has schemas.mode = preserve "
                                              f"but does not select the registry's storage topic {storage!r} "
                                              "(schemas.storage.topic): add it to topics"))
            continue
        if flow.delivery.partition_mismatch == "hash":  # its record path (mm2py.source.copy.rehash) does not translate
            problems.append(ConfigProblem(f"{flow.name}.partition.mismatch", f"flow {flow.name}: "
                                          "partition.mismatch = hash cannot be combined with schemas.mode = "
                                          "translate (re-keyed records would keep the source's ids); use 'error'"))
        for cluster in (flow.source, flow.target):
            if not cluster.schema_registry.get("url"):
                problems.append(ConfigProblem(
                    f"{cluster.alias}.schema.registry.url",
                    f"missing: flow {flow.name} has schemas.mode = {flow.schemas.mode}, which needs the schema "
                    f"registry of {cluster.alias}"))
    return problems


def require_registries(flow: FlowConfig) -> None:
    """Both clusters of ``flow`` name a registry (``verify --decode``), else a ``ConfigError`` naming the keys."""
    missing = [ConfigProblem(f"{c.alias}.schema.registry.url", f"missing: decoding records of flow {flow.name} "
                             f"needs the schema registry of {c.alias}")
               for c in (flow.source, flow.target) if not c.schema_registry.get("url")]
    if missing:
        raise ConfigError(missing)


def check_schemas(flows: Iterable[FlowConfig]) -> None:
    """Refuse flows whose schema handling cannot work; prepare the dead-letter topics."""
    flows = [f for f in flows if f.schemas.mode != "off"]
    problems = problems_of(flows)
    if problems:
        raise ConfigError(problems)
    pinged: set[str] = set()
    for flow in flows:
        for cluster in (flow.source, flow.target):
            if "url" in cluster.schema_registry and cluster.schema_registry["url"] not in pinged:
                Registry(cluster.alias, cluster.schema_registry).ping()
                pinged.add(cluster.schema_registry["url"])
        settings = SchemaSettings.for_flow(FlowSpec.alone(flow))
        if settings is not None and flow.schemas.on_error == "dead-letter":
            admin = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
            admin.create_topic(settings.dead_letter_topic, 1,
                               min(flow.metadata.replication_factor, admin.broker_count()))
