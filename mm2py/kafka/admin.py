"""Cluster administration behind one small interface (confluent-kafka's AdminClient).

The rest of mm2py never touches a client library's admin API directly: errors are turned
into ``mm2py.errors`` types here, naming the cluster and topic.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, IsolationLevel, KafkaException, TopicPartition
from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka.admin import (
    AdminClient,
    ClusterMetadata,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)

from mm2py.config.model import ClusterConfig
from mm2py.errors import ClusterUnreachableError, KafkaError, missing_acl
from mm2py.kafka.admin_errors import principal_of, translate
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.kafka.login_watch import LoginWatch
from mm2py.kafka.rdclients import admin_client, serve_token
from mm2py.kafka.retry import retrying
from mm2py.kafka.topic_settings import TopicSettingsAdmin
from mm2py.types import TP


class Admin(TopicSettingsAdmin):
    """Admin operations on one cluster. Cheap to build; build it where it is used."""

    def __init__(self, cluster: ClusterConfig, *, timeout_ms: int = 60000):
        self.alias = cluster.alias
        self.bootstrap = cluster.bootstrap_servers
        self.timeout = timeout_ms / 1000
        conf: dict[str, Any] = rdkafka_config(cluster.bootstrap_servers, cluster.admin, cluster.alias, "admin")
        conf.setdefault("client.id", f"mm2py-admin-{cluster.alias}")
        self._conf = conf
        self._login = LoginWatch(cluster.alias)  # a refused login named within seconds
        self._admin: AdminClient | None = None
        self.principal = principal_of(cluster.admin)

    @property
    def _client(self) -> AdminClient:
        """The admin client (made on first use), its due OAUTHBEARER token refresh served first
        (``rdclients.serve_token``)."""
        if self._admin is None:
            self._admin = admin_client(self._login.watching(self._conf))
        else:
            serve_token(self._admin, self._conf)
        return self._admin

    def _refused_login(self, action: str, cause: BaseException, topic: str | None = None) -> KafkaError | None:
        return self._login.refused(self._client, action, cause, topic)

    def _translate(self, exc: BaseException, action: str, topic: str | None = None,
                   group: str | None = None) -> KafkaError:
        refused = self._refused_login(action, exc, topic)
        if refused is not None:
            return refused
        return translate(exc, cluster=self.alias, action=action, topic=topic, principal=self.principal, group=group)

    def _metadata(self, topic: str | None = None) -> ClusterMetadata:
        """Metadata within the admin timeout; a refused login ends the wait early (``LoginWatch``).
        Raises the last KafkaException; callers translate it (``_translate`` names a refused login)."""
        return self._login.metadata(self._client, topic, self.timeout)

    @property
    def client_config(self) -> dict[str, str]:
        return dict(self._conf)

    def _result(self, future: object, action: str, topic: str | None = None, group: str | None = None) -> object:
        try:
            return future.result(timeout=self.timeout)  # type: ignore[attr-defined]
        except KafkaException as e:
            raise self._translate(e, action, topic, group) from e
        except TimeoutError as e:
            refused = self._refused_login(action, e, topic)
            if refused is not None:
                raise refused from e
            raise ClusterUnreachableError(
                f"{action}: no answer from {self.bootstrap} within {self.timeout:.0f} s",
                cluster=self.alias, topic=topic, cause=e, retriable=True,
            ) from e

    def topics(self) -> dict[str, int]:
        """Every topic's partition count."""
        try:
            md = self._metadata()
        except KafkaException as e:
            raise self._translate(e, f"listing topics at {self.bootstrap}") from e
        out = {}
        for name, topic in md.topics.items():
            if topic.error is not None:
                continue
            out[name] = len(topic.partitions)
        return out

    def invisible_topics(self, names: Iterable[str]) -> dict[str, str]:
        """Of ``names``, those a topic listing leaves out, each with why: "missing" or "unauthorized".

        A cluster lists only the topics the principal may DESCRIBE; asked by name, it tells
        an unauthorized topic apart from one that does not exist.
        """
        out = {}
        for name in names:
            try:
                md = self._metadata(name)
            except KafkaException as e:
                raise self._translate(e, f"describing topic {name}", topic=name) from e
            error = md.topics[name].error if name in md.topics else None
            if error is None:
                continue
            out[name] = "unauthorized" if error.code() == CKafkaError.TOPIC_AUTHORIZATION_FAILED else "missing"
        return out

    def topic_ids(self, names: Iterable[str]) -> dict[str, str]:
        """The topic id of each of ``names`` that exists, as ``uuid.UUID`` text (as mm2py.kafka.wire gives it).

        A re-created topic has a new id (mm2py.source.plan.resets); a topic missing or hidden is left out.
        """
        from confluent_kafka import TopicCollection

        wanted = sorted(set(names))
        if not wanted:
            return {}
        futures = self._client.describe_topics(TopicCollection(wanted), request_timeout=self.timeout)
        out = {}
        for name, future in futures.items():
            try:
                tid = future.result(self.timeout).topic_id
            except KafkaException:
                continue
            bits = ((tid.get_most_significant_bits() & (1 << 64) - 1) << 64
                    | tid.get_least_significant_bits() & (1 << 64) - 1)
            out[name] = str(uuid.UUID(int=bits))
        return out

    def broker_count(self) -> int:
        try:
            return len(self._metadata().brokers)
        except KafkaException as e:
            raise self._translate(e, "describing the cluster") from e

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, config: Mapping[str, str] | None = None
    ) -> bool:
        """Create a topic; False when it already existed."""
        return self.create_topics([(name, partitions, replication_factor, config)])[name]

    def create_topics(self, specs: Sequence[tuple[str, int, int, Mapping[str, str] | None]]) -> dict[str, bool]:
        """Create topics ``(name, partitions, replication factor, config)`` in one request; each name
        answers False when it already existed. Returns once every created partition has a leader."""
        if not specs:
            return {}
        new = [NewTopic(name, n, rf, config=dict(config or {})) for name, n, rf, config in specs]
        futures = self._client.create_topics(new, operation_timeout=self.timeout)
        created: dict[str, bool] = {}
        for name, future in futures.items():
            try:
                future.result(timeout=self.timeout)
                created[name] = True
            except KafkaException as e:
                code = e.args[0].code() if e.args and isinstance(e.args[0], CKafkaError) else None
                if code != CKafkaError.TOPIC_ALREADY_EXISTS:
                    raise self._translate(e, "creating topic", name) from e
                created[name] = False
        self.wait_for_leaders({name: n for name, n, _, _ in specs if created[name]})
        return created

    def wait_for_leaders(self, wanted: Mapping[str, int]) -> None:
        """A created topic (name -> partitions) is usable once every partition has a leader; wait for that."""
        deadline = time.monotonic() + self.timeout
        waiting = dict(wanted)
        while waiting:
            try:
                one = next(iter(waiting)) if len(waiting) == 1 else None  # else every topic, in one request
                listed = self._client.list_topics(one, timeout=self.timeout).topics
            except KafkaException:
                listed = {}
            for name, partitions in list(waiting.items()):
                topic = listed.get(name)
                if topic is not None and topic.error is not None and \
                        topic.error.code() == CKafkaError.TOPIC_AUTHORIZATION_FAILED:
                    # created (CREATE on the cluster) but hidden: waiting cannot help
                    raise missing_acl("DESCRIBE", "TOPIC", name, cluster=self.alias, principal=self.principal,
                                      topic=name, doing="waiting for the created topic's leaders")
                if (topic is not None and topic.error is None and len(topic.partitions) >= partitions
                        and all(p.leader >= 0 for p in topic.partitions.values())):
                    del waiting[name]
            if not waiting:
                return
            if time.monotonic() > deadline:
                name = min(waiting)
                raise KafkaError(f"partitions have no leader {self.timeout:.0f} s after creation "
                                 f"({len(waiting)} topics waiting)", cluster=self.alias, topic=name, retriable=True)
            time.sleep(0.1)

    def create_partitions(self, name: str, total: int) -> None:
        future = self._client.create_partitions([NewPartitions(name, total)])[name]
        self._result(future, f"growing to {total} partitions", topic=name)
        self.wait_for_leaders({name: total})

    def delete_topic(self, name: str) -> None:
        future = self._client.delete_topics([name], operation_timeout=self.timeout)[name]
        self._result(future, "deleting topic", topic=name)

    def list_offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]:
        """Offsets per partition: ``latest`` is the last stable offset (read_committed)."""
        tps = list(tps)
        return retrying(lambda: self._list_offsets(tps, spec), self.timeout)

    def _list_offsets(self, tps: list[TP], spec: str) -> dict[TP, int]:
        specs = {"latest": OffsetSpec.latest, "earliest": OffsetSpec.earliest}
        request = {TopicPartition(t, p): specs[spec]() for t, p in tps}
        if not request:
            return {}
        futures = self._client.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED,
                                            request_timeout=self.timeout)
        out = {}
        for tp, future in futures.items():
            info = self._result(future, f"listing {spec} offsets", topic=tp.topic)
            out[(tp.topic, tp.partition)] = info.offset  # type: ignore[attr-defined]
        return out

    def groups(self) -> dict[str, str]:
        """Every consumer group and its state (``EMPTY``, ``STABLE``, ...)."""
        result = self._result(self._client.list_consumer_groups(request_timeout=self.timeout), "listing groups")
        return {g.group_id: g.state.name for g in result.valid}  # type: ignore[attr-defined]

    def group_state(self, group: str) -> tuple[str, int]:
        """A group's state and its number of active members (``DEAD``, 0 when absent)."""
        future = self._client.describe_consumer_groups([group], request_timeout=self.timeout)[group]
        desc = self._result(future, f"describing group {group}", group=group)
        return desc.state.name, len(desc.members)  # type: ignore[attr-defined]

    def alter_group_offsets(self, group: str, offsets: Mapping[TP, int]) -> None:
        if not offsets:
            return
        request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in offsets.items()])
        future = self._client.alter_consumer_group_offsets([request], request_timeout=self.timeout)[group]
        self._result(future, f"committing offsets of group {group}", group=group)

    def offsets_for_time(self, tps: Iterable[TP], timestamp_ms: int) -> dict[TP, int]:
        request = {TopicPartition(t, p): OffsetSpec.for_timestamp(timestamp_ms) for t, p in tps}
        if not request:
            return {}
        futures = self._client.list_offsets(request, request_timeout=self.timeout)
        return {(tp.topic, tp.partition): self._result(f, "finding offsets by time", topic=tp.topic).offset  # type: ignore[attr-defined]
                for tp, f in futures.items()}

    def group_offsets(self, group: str) -> dict[TP, int]:
        future = self._client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
        result = self._result(future, f"reading offsets of group {group}", group=group)
        return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}  # type: ignore[attr-defined]
