"""Raw Kafka protocol access for the data path: Fetch and Produce of whole record batches.

Built on kafka-python's protocol classes and network client, which carry the ``records``
field as opaque bytes both ways. Request versions are pinned to the last ones that name
topics rather than topic ids (Fetch v12, Produce v12), which every Kafka from 2.7 on speaks;
fetches name topics by id (Fetch v13) in a session, and for topics pinned to an id
(``pin_topic_ids``: the topic a copy was planned for, never a re-created one).
Instances are made inside Spark tasks (never pickled) and closed when the task ends.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import kafka.errors as kerr
from kafka.future import Future
from kafka.net.compat import KafkaNetClient
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest

from mm2py.config.model import ClusterConfig
from mm2py.errors import (
    AuthenticationError,
    AuthorizationError,
    ClusterUnreachableError,
    KafkaError,
    RecordTooLargeError,
)
from mm2py.kafka import fastio
from mm2py.kafka.classify import UNKNOWN_TOPIC_OR_PARTITION, is_retriable
from mm2py.kafka.clientconf import kafka_python_config
from mm2py.kafka.fetch_request import fetch_request, parsed_fetch
from mm2py.kafka.fetch_response import FetchedPartition
from mm2py.kafka.fetch_session import FetchSession
from mm2py.kafka.leader_epochs import EpochEnd, epoch_answers, epoch_request
from mm2py.kafka.list_offsets import EARLIEST, TIMESTAMPS, OffsetRequests, list_offsets_request
from mm2py.kafka.log_dirs import log_dirs_request, log_sizes_of
from mm2py.kafka.reauth import renew_ending_session
from mm2py.kafka.topic_ids import TopicIds
from mm2py.types import TP

W = TypeVar("W")  # what one broker is asked (``RawClient._per_broker``)
V = TypeVar("V")  # a partition's answer
METADATA = MetadataRequest[12]
# kafka-python refuses sends past this per connection; we stay one below it.
MAX_IN_FLIGHT = 16
# The settings a raw client takes from its cluster's configuration, by what it is used for: the
# copy path fetches as MM2's replication consumer and produces as the Connect worker's producer
# (mm2py.config.clients); the planner's DescribeLogDirs is an admin's request.
ROLES = ("consumer", "producer", "admin")


@dataclass(frozen=True, slots=True)
class ProducedPartition:
    error_code: int
    base_offset: int
    error_message: str | None


def settings_of(cluster: ClusterConfig, role: str) -> Mapping[str, str]:
    """The settings of the ``role`` client of ``cluster`` (consumer, producer or admin)."""
    if role not in ROLES:
        raise ValueError(f"unknown client role {role!r} (expected one of {', '.join(ROLES)})")
    return getattr(cluster, role)


def error_for(code: int) -> type[Exception]:
    return kerr.for_code(code)


def to_kafka_error(
    code: int,
    *,
    cluster: str,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    detail: str | None = None,
) -> KafkaError:
    """Map a broker error code to our exception tree, keeping where it happened."""
    exc = error_for(code)
    text = f"{exc.__name__}" + (f": {detail}" if detail else "")
    where: dict[str, Any] = {"cluster": cluster, "topic": topic, "partition": partition, "offset": offset}
    if issubclass(exc, kerr.AuthorizationError):
        return AuthorizationError(f"not authorized ({text})", **where)
    if exc in (kerr.MessageSizeTooLargeError, kerr.RecordListTooLargeError):
        return RecordTooLargeError(f"batch larger than the target allows ({text})", **where)
    return KafkaError(text, retriable=is_retriable(code, library_says_retriable=getattr(exc, "retriable", False)),
                      **where)




def _connect(cluster: ClusterConfig, conf: dict[str, Any], role: str, timeout_ms: int) -> KafkaNetClient:
    """A kafka-python network client that reached a broker; its failures as named errors."""
    try:
        net = KafkaNetClient(**conf)
        net.check_version(timeout_ms=timeout_ms)
        return net
    except kerr.SaslAuthenticationFailedError as e:
        raise AuthenticationError("authentication failed", cluster=cluster.alias, cause=e) from e
    except kerr.KafkaError as e:
        # kafka-python's bootstrap retries a refused SASL login until it times out, like a silent broker
        login = (f"; or the brokers refused the SASL login of this client ({role} settings)"
                 if str(conf.get("security_protocol", "")).startswith("SASL") else "")
        raise ClusterUnreachableError(
            f"no broker answered at {cluster.bootstrap_servers} within {timeout_ms} ms{login}",
            cluster=cluster.alias,
            cause=e,
        ) from e
    except OSError as e:
        raise AuthenticationError("authentication failed", cluster=cluster.alias, cause=e) from e


class RawClient:
    """One cluster's brokers, spoken to with raw protocol requests.

    Its connection settings are those of ``role`` in ``cluster`` (``cluster.consumer`` for
    fetching, ``cluster.producer`` for producing): security, client.id, timeouts, buffer sizes
    (``mm2py.kafka.clientconf.kafka_python_config``), client.rack for the fetches' rack_id and
    max.in.flight.requests.per.connection.

    Invariants:
    - at most ``max_in_flight`` (below ``MAX_IN_FLIGHT``) requests are outstanding per broker connection;
    - every error leaving this class is a ``mm2py.errors.KafkaError`` naming the cluster.
    """

    def __init__(
        self, cluster: ClusterConfig, *, client_id: str, timeout_ms: int = 60000, receive_max_bytes: int = 256 << 20,
        role: str = "consumer",
    ):
        self.alias = cluster.alias
        self.timeout_ms = timeout_ms
        settings = settings_of(cluster, role)
        conf = kafka_python_config(cluster.bootstrap_servers, settings, cluster.alias)
        conf.setdefault("client_id", client_id)
        conf["max_in_flight_requests_per_connection"] = MAX_IN_FLIGHT
        conf["receive_message_max_bytes"] = receive_max_bytes
        conf.setdefault("request_timeout_ms", min(timeout_ms, 30000))
        self.client_id = str(conf["client_id"])
        self.rack = settings.get("client.rack", "") if role == "consumer" else ""
        # a producer setting only (Java's consumer and admin have no such key)
        wanted = int(settings.get("max.in.flight.requests.per.connection", MAX_IN_FLIGHT - 1)) if (
            role == "producer") else MAX_IN_FLIGHT - 1
        self.max_in_flight = max(1, min(wanted, MAX_IN_FLIGHT - 1))
        self._net = _connect(cluster, conf, role, timeout_ms)
        self._in_flight: dict[int, list[Future]] = {}
        self._sessions: dict[int, FetchSession] = {}  # by broker: KIP-227 fetch sessions (``fetch``)
        self._topic_ids = TopicIds()  # from metadata answers (``leaders``); fetch sessions name topics by id
        self._offset_requests = OffsetRequests()
        self._leader_epochs: dict[TP, int] = {}  # each partition's leader epoch, from metadata answers (``leaders``)

    def close(self) -> None:
        self._net.close()

    # -- request plumbing -------------------------------------------------------------

    def _send(self, node: int, request: object) -> Future:
        pending = self._in_flight.setdefault(node, [])
        pending[:] = [f for f in pending if not f.is_done]
        while len(pending) >= self.max_in_flight:
            self._net.poll(timeout_ms=self.timeout_ms, future=pending[0])
            pending[:] = [f for f in pending if not f.is_done]
        renew_ending_session(self._net._manager._conns.get(node))  # a kept connection's SASL session (KIP-368)
        self._await_ready(node)
        fastio.adapt(self._net._manager._conns.get(node))
        future = self._net.send(node, request)
        pending.append(future)
        return future

    def _await_ready(self, node: int) -> None:
        """Connect to ``node`` if needed; wait out a pause the broker asked for (a quota's throttle time).

        kafka-python's ``await_ready`` polls once for a paused connection and gives up, although the
        pause ends by itself; a broker quota on this client's client.id must slow the copy, not fail it.
        """
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            try:
                self._net.await_ready(node, timeout_ms=max(1, int((deadline - time.monotonic()) * 1000)))
                return
            except kerr.KafkaError as e:
                conn = self._net._manager._conns.get(node)
                if conn is None or not conn.connected or not conn.paused or time.monotonic() >= deadline:
                    raise KafkaError(f"broker {node} not reachable", cluster=self.alias, cause=e,
                                     retriable=True) from e
                self._net.poll(timeout_ms=min(100, max(1, int((deadline - time.monotonic()) * 1000))))

    def poll(self, timeout_ms: int = 0, future: Future | None = None) -> None:
        """Read what the brokers answered so far, waiting up to ``timeout_ms`` (less once ``future`` is done)."""
        self._net.poll(timeout_ms=timeout_ms, future=future)

    def wait(self, future: Future) -> Any:  # a kafka-python response: its fields by the request's schema
        deadline = time.monotonic() + self.timeout_ms / 1000
        while not future.is_done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaError("request timed out", cluster=self.alias, retriable=True)
            self._net.poll(timeout_ms=left * 1000, future=future)
        if future.failed():
            exc = future.exception
            if isinstance(exc, kerr.SaslAuthenticationFailedError):
                raise AuthenticationError("authentication failed", cluster=self.alias, cause=exc)
            raise KafkaError("request failed", cluster=self.alias, cause=exc, retriable=True)
        return future.value

    def any_node(self) -> int:
        node = self._net.least_loaded_node(bootstrap_fallback=True)
        if node is None:
            raise ClusterUnreachableError("no broker known", cluster=self.alias)
        return node

    # -- metadata ---------------------------------------------------------------------

    def knows_broker(self, node_id: int) -> bool:
        """Whether the address of broker ``node_id`` is known (from metadata seen so far)."""
        return self._net.cluster.broker_metadata(node_id) is not None

    def leaders(self, topics: Iterable[str], *, missing_ok: bool = False) -> dict[TP, int]:
        """Current leader broker of every partition of ``topics``; with ``missing_ok``, topics
        the cluster does not have are left out instead of raising."""
        names = sorted(set(topics))
        request = METADATA(
            topics=[METADATA.MetadataRequestTopic(name=t) for t in names],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        response = self.wait(self._send(self.any_node(), request))
        leaders: dict[TP, int] = {}
        for topic in response.topics:
            if topic.error_code == UNKNOWN_TOPIC_OR_PARTITION and missing_ok:
                continue
            if topic.error_code:
                raise to_kafka_error(topic.error_code, cluster=self.alias, topic=topic.name)
            if topic.topic_id is not None and topic.topic_id.int:
                self._topic_ids.learn(topic.name, topic.topic_id)
            for part in topic.partitions:
                leaders[(topic.name, part.partition_index)] = part.leader_id
                self._leader_epochs[(topic.name, part.partition_index)] = part.leader_epoch
        return leaders

    def leader_epochs(self, tps: Iterable[TP]) -> dict[TP, int]:
        """The leader epochs of ``tps`` as the newest metadata answer (``leaders``) gave them; unknown ones left out."""
        return {tp: self._leader_epochs[tp] for tp in tps if tp in self._leader_epochs}

    def epoch_ends(self, epochs: Mapping[TP, int]) -> dict[TP, EpochEnd]:
        """Where each partition's leader ends epoch ``epochs[tp]`` (OffsetsForLeaderEpoch), one request per leader.

        A partition without a leader is left out; a partition's error is in its answer.
        """
        if not epochs:
            return {}
        leaders = self.leaders({t for t, _ in epochs})
        by_node: dict[int, dict[TP, int]] = {}
        for tp, epoch in epochs.items():
            if (node := leaders.get(tp, -1)) >= 0:
                by_node.setdefault(node, {})[tp] = epoch
        return self._per_broker(by_node, lambda _node, wanted: epoch_request(wanted),
                                lambda answer, _wanted: epoch_answers(answer))

    def _per_broker(self, by_node: Mapping[int, W], build: Callable[[int, W], object],
                    parse: Callable[[Any, W], Mapping[TP, V]]) -> dict[TP, V]:
        """One request per broker (``build`` of what it is asked), sent together; the answers merged."""
        futures = [(self._send(node, build(node, wanted)), wanted) for node, wanted in by_node.items()]
        out: dict[TP, V] = {}
        for future, wanted in futures:
            out.update(parse(self.wait(future), wanted))
        return out

    def pin_topic_ids(self, ids: Mapping[str, str]) -> None:
        """Fetch the topics of ``ids`` by these ids (``uuid.UUID`` text) whatever metadata says later;
        replaces the last pins. A changed id ends this client's fetch sessions, which the brokers
        hold by the old id."""
        if self._topic_ids.pin({name: uuid.UUID(topic_id) for name, topic_id in ids.items()}):
            self._sessions.clear()

    def recreated(self, topic: str) -> str | None:
        """The id metadata gives a pinned ``topic`` now, when it is not the pinned one (re-created)."""
        moved = self._topic_ids.moved(topic)
        return None if moved is None else str(moved)

    def topic_ids(self, topics: Iterable[str]) -> dict[str, str]:
        """The ids of ``topics`` as the newest metadata answer (``leaders``) gave them; unknown ones left out."""
        learned = self._topic_ids.learned
        return {t: str(i) for t in topics if (i := learned(t)) is not None}

    # -- fetch ------------------------------------------------------------------------

    def fetch(
        self,
        node: int,
        positions: Mapping[TP, int],
        *,
        partition_max_bytes: int,
        max_bytes: int,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        closest_replica: bool = False,
        session: bool = False,
    ) -> Future:
        """One Fetch request for ``positions`` (in that order: a partition first in the request gets its
        first batch whole even when larger than the limits, KIP-74).

        ``closest_replica``: send client.rack, so that the leader may answer with a replica to fetch
        from instead (``FetchedPartition.preferred_read_replica``); only for callers that follow it.
        ``session``: in this client's fetch session with ``node`` (mm2py.kafka.fetch_session): the request
        names only partitions whose offset changed, and the answer only partitions with news, in the
        broker's order. Callers wait for each answer before the next session request to ``node``;
        a sessionless request closes the session. Sessions name topics by id (Fetch v13), as Java
        consumers do: a broker keys a session's partitions by topic and partition, and by name the
        keys of similarly named topics collide (``31 * partition + hash(name)``), which made a broker
        spend seconds building a session of 5,000 partitions. A topic whose id this client has not
        seen in a metadata answer (``leaders``) is fetched without a session. Pinned topics
        (``pin_topic_ids``) are fetched by their pinned id, in a session or not.
        """
        ids = self._topic_ids
        by_id = all(ids.knows(topic) for topic, _ in positions) and (
            session or all(ids.pinned(topic) for topic, _ in positions))
        session = session and by_id
        plan = self._sessions.setdefault(node, FetchSession()).request(positions, partition_max_bytes,
                                                                      use_session=session)
        request = fetch_request(plan, topic_id=ids.id_of if by_id else None,
                                partition_max_bytes=partition_max_bytes, max_bytes=max_bytes,
                                max_wait_ms=max_wait_ms, min_bytes=min_bytes,
                                rack=self.rack if closest_replica else "")
        try:
            future = self._send(node, request)
        except BaseException:
            self._sessions[node].failed(plan)
            raise
        sessions = self._sessions[node]
        future.add_callback(lambda response: sessions.answered(plan, response.error_code, response.session_id))
        future.add_errback(lambda _: sessions.failed(plan))
        return future

    def fetched(self, response: Any) -> dict[TP, FetchedPartition]:
        """A Fetch answer's partitions, by topic name (a v13 answer names its topics by id)."""
        if isinstance(response, fastio.RawFetch):  # read in place by an adapted connection
            return self._named(response.partitions)
        out = parsed_fetch(response)
        return self._named(out)

    def _named(self, parts: dict[tuple[str | uuid.UUID, int], FetchedPartition]) -> dict[TP, FetchedPartition]:
        """``parts`` keyed by topic name: an answer keyed by name (v12) is returned as it is."""
        first = next(iter(parts), None)
        if first is None or isinstance(first[0], str):
            return parts  # type: ignore[return-value]
        name_of: Callable[[Any], str] = self._topic_ids.name_of
        try:
            return {(name_of(topic), partition): data for (topic, partition), data in parts.items()}
        except KeyError as e:
            raise KafkaError(f"a fetch answer names topic id {e.args[0]}, which this client does not know (never "
                             "named, or the old id of a topic recreated since)", cluster=self.alias) from e

    # -- produce ----------------------------------------------------------------------

    def produce(self, node: int, batches: Mapping[TP, fastio.Pieces], *, timeout_ms: int,
                transactional_id: str | None = None) -> Future:
        """Send one batch per partition in one ProduceRequest (acks=all); a batch is a tuple of pieces.

        ``transactional_id``: the batches are transactional; the leader adds their partitions to
        that id's open transaction (transaction version 2).
        """
        return self._send(node, fastio.ChunkedProduce(dict(batches), timeout_ms, transactional_id))

    @staticmethod
    def produced(response: Any) -> dict[TP, ProducedPartition]:
        out: dict[TP, ProducedPartition] = {}
        for topic in response.responses:
            for p in topic.partition_responses:
                out[(topic.name, p.index)] = ProducedPartition(p.error_code, p.base_offset, p.error_message)
        return out

    def log_sizes(self, topics: Iterable[str]) -> dict[TP, int]:
        """Bytes on disk of every partition of ``topics`` (its leader's copy), via DescribeLogDirs."""
        by_node: dict[int, dict[str, list[int]]] = {}
        for (topic, partition), node in self.leaders(topics).items():
            by_node.setdefault(node, {}).setdefault(topic, []).append(partition)
        return self._per_broker(by_node, lambda _node, wanted: log_dirs_request(wanted), log_sizes_of)

    def log_start_offset(self, node: int, tp: TP) -> int:
        """The first offset a partition still holds (ListOffsets, earliest), asked of broker ``node``."""
        return self._offsets(self.wait(self._send(node, list_offsets_request([tp], EARLIEST))))[tp]

    def list_offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]:
        """Offsets per partition, one ListOffsets request per leader: ``latest`` is the last stable
        offset (read_committed), ``earliest`` the log start offset.

        A partition without a leader, or one its broker refuses, raises its error (retriable ones
        as retriable) naming the topic and partition.
        """
        wanted = list(tps)
        if not wanted:
            return {}
        timestamp = TIMESTAMPS[spec]
        leaders = self.leaders({t for t, _ in wanted})
        by_node: dict[int, list[TP]] = {}
        for tp in wanted:
            node = leaders.get(tp)
            if node is None or node < 0:
                code = (kerr.UnknownTopicOrPartitionError if node is None else kerr.LeaderNotAvailableError).errno
                raise to_kafka_error(code, cluster=self.alias, topic=tp[0], partition=tp[1])
            by_node.setdefault(node, []).append(tp)
        return self._per_broker(by_node, lambda node, part: self._offset_requests.request(node, part, timestamp),
                                lambda answer, _part: self._offsets(answer))

    def _offsets(self, response: object) -> dict[TP, int]:
        out: dict[TP, int] = {}
        for topic in response.topics:  # type: ignore[attr-defined]
            for part in topic.partitions:
                if part.error_code:
                    raise to_kafka_error(part.error_code, cluster=self.alias, topic=topic.name,
                                         partition=part.partition_index)
                out[(topic.name, part.partition_index)] = part.offset
        return out

    def init_producer_id(self) -> tuple[int, int]:
        """A fresh idempotent producer id and epoch from the cluster."""
        deadline = time.monotonic() + self.timeout_ms / 1000
        while True:
            request = InitProducerIdRequest[4](
                transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1
            )
            response = self.wait(self._send(self.any_node(), request))
            if response.error_code == 0:
                return response.producer_id, response.producer_epoch
            exc = error_for(response.error_code)
            if not getattr(exc, "retriable", False) or time.monotonic() > deadline:
                raise to_kafka_error(response.error_code, cluster=self.alias, detail="InitProducerId")
            time.sleep(0.1)
