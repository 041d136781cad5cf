"""Topic configs and topic ACLs (what mm2py.metadata syncs), as a part of ``Admin``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourcePatternType,
    ResourceType,
)

from mm2py.errors import KafkaError
from mm2py.kafka.resources import TopicAcl, TopicConfigEntry

_STATIC_BROKER = (ConfigSource.STATIC_BROKER_CONFIG, ConfigSource.STATIC_BROKER_CONFIG.value)


class TopicSettingsAdmin:
    """DescribeConfigs, IncrementalAlterConfigs and topic ACLs, mixed into ``Admin``: it uses
    Admin's client, timeout and error translation, so its errors name the cluster and topic."""

    timeout: float

    @property
    def _client(self) -> AdminClient:
        raise NotImplementedError

    def _result(self, future: object, action: str, topic: str | None = None, group: str | None = None) -> object:
        raise NotImplementedError

    def _translate(self, exc: BaseException, action: str, topic: str | None = None,
                   group: str | None = None) -> KafkaError:
        raise NotImplementedError

    def topic_configs(self, topics: Iterable[str]) -> dict[str, list[TopicConfigEntry]]:
        """Every config entry of each of ``topics`` (DescribeConfigs)."""
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
        if not resources:
            return {}
        futures = self._client.describe_configs(resources, request_timeout=self.timeout)
        out = {}
        for resource, future in futures.items():
            entries = self._result(future, "describing topic configs", resource.name)
            out[resource.name] = [
                TopicConfigEntry(e.name, e.value, e.is_default, e.is_read_only, e.is_sensitive,
                                 e.source in _STATIC_BROKER)
                for e in entries.values()  # type: ignore[attr-defined]
            ]
        return out

    def alter_topic_configs(self, changes: Mapping[str, Mapping[str, str | None]]) -> None:
        """Set (value) or delete (None) topic configs with IncrementalAlterConfigs."""
        resources = []
        for topic, ops in sorted(changes.items()):
            if not ops:
                continue
            entries = [
                ConfigEntry(name, value, incremental_operation=(
                    AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE))
                for name, value in sorted(ops.items())
            ]
            resources.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries))
        if not resources:
            return
        futures = self._client.incremental_alter_configs(resources, request_timeout=self.timeout)
        for resource, future in futures.items():
            self._result(future, "altering topic configs", resource.name)

    def topic_acls(self) -> list[TopicAcl] | None:
        """Every TOPIC ACL binding; None when the cluster has no authorizer."""
        # None matches any name, principal and host; confluent-kafka's type hints allow only str
        wanted = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                                  AclOperation.ANY, AclPermissionType.ANY)
        try:
            bindings = self._client.describe_acls(wanted, request_timeout=self.timeout).result(timeout=self.timeout)
        except KafkaException as e:
            if e.args and isinstance(e.args[0], CKafkaError) and e.args[0].code() == CKafkaError.SECURITY_DISABLED:
                return None
            raise self._translate(e, "describing topic ACLs") from e
        return [TopicAcl(b.name, b.principal, b.host, b.operation.name, b.permission_type.name,
                         b.resource_pattern_type.name) for b in bindings]

    def create_acls(self, acls: Iterable[TopicAcl]) -> None:
        """Create TOPIC ACL bindings (existing ones are left as they are)."""
        bindings = [AclBinding(ResourceType.TOPIC, a.topic, ResourcePatternType[a.pattern], a.principal, a.host,
                               AclOperation[a.operation], AclPermissionType[a.permission]) for a in acls]
        if not bindings:
            return
        futures = self._client.create_acls(bindings, request_timeout=self.timeout)
        for binding, future in futures.items():
            self._result(future, "creating an ACL", binding.name)
