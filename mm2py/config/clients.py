"""Which configuration key reaches which Kafka client: MirrorMaker 2's rules (Kafka 4.3), written once.

An MM2 file can spell a client setting five ways. For a flow ``A->B`` they reach its clients as
below (``MirrorMakerConfig.clusterProps`` / ``connectorBaseConfig``, ``MirrorConnectorConfig``'s
``source*Config``/``target*Config`` builders, Connect's ``Worker.baseProducerConfigs``). Layers are
listed weakest first; a later one replaces an earlier one key by key. ``<sec>`` is MM2's
``CLIENT_CONFIG_DEF``: ``bootstrap.servers``, ``security.protocol``, ``ssl.*``, ``sasl.*``. A ``+``
marks a layer whose unset security keys are filled: ``A.<sec>+`` by top-level ``<sec>``,
``A.consumer.*+`` by ``A.<sec>`` and then top-level ``<sec>``.

============================  ==============================  =================================================
mm2py client (flow field)     MM2 client (client.id role)     settings, weakest first
============================  ==============================  =================================================
raw fetch of the copy path    replication consumer            ``A.<sec>+`` < ``A->B.source.cluster.<sec>``
(``source.consumer``)         (replication-consumer)          < ``A->B.consumer.*`` < ``A.consumer.*+``
                                                              < ``A->B.source.consumer.*``
raw produce of the copy       Connect worker producer of      ``B.producer.*+`` < ``A->B.producer.override.*``
path, heartbeat and           herder A->B (no role suffix)
checkpoint writers
(``target.producer``)
offset-syncs writer, at       offset-syncs-source-producer    as the replication consumer, ``producer``
source (``source.producer``)                                  for ``consumer``
offset-syncs reader, at       offset-syncs-source-consumer    as the replication consumer
source
source admin                  replication-source-admin, ...   as the replication consumer, ``admin``
(``source.admin``)                                            for ``consumer``
target admin                  replication-target-admin, ...   ``B.<sec>+`` < ``A->B.target.cluster.<sec>``
(``target.admin``)                                            < ``A->B.admin.*`` < ``B.admin.*+``
                                                              < ``A->B.target.admin.*``
checkpoints reader            checkpoints-target-consumer     as the target admin, ``consumer`` for ``admin``
(``target.consumer``)
offset-syncs writer and       offset-syncs-target-producer,   as the target admin, ``producer`` / ``consumer``
reader at target              offset-syncs-target-consumer    for ``admin``
(``offset_syncs``)
position store                the worker's internal clients   ``B.*`` without a client prefix (top-level
(``target.client``)                                           ``<sec>`` fills)
============================  ==============================  =================================================

What follows from these rules (each is MM2's behaviour, kept):

- top-level ``consumer.*``, ``producer.*``, ``admin.*`` and top-level client settings other than
  ``<sec>`` (``client.id``, ``request.timeout.ms``) reach no client, nor does ``A->B.<key>``
  without a client prefix. mm2py names them in its start-up warning;
- ``A.consumer.x`` beats ``A->B.consumer.x``; ``A->B.producer.x`` never reaches the data producer
  (only the offset-syncs writer), ``B.producer.x`` reaches every flow into B;
- ``A.<sec>`` and top-level ``<sec>`` fill ``A.consumer.*`` (etc.), so they beat
  ``A->B.consumer.<sec>`` and ``A->B.source.cluster.<sec>``, which matter only where neither is set;
- ``A.<key>`` for a non-``<sec>`` key reaches only the position store's clients of flows into A
  (MM2: its Connect workers' internal clients), never a replication client: warned too;
- a ``client.id`` set for a connector-built client becomes ``<id>|A->B|<Connector>|<role>``, as
  MM2's ``addClientId`` makes it; the data producer's is used as given. Unset, mm2py names its
  clients itself;
- every client of a cluster connects to ``{alias}.bootstrap.servers``: a ``bootstrap.servers``
  under a client prefix is warned, not used.

How mm2py's clients take what reaches them is in ``RAW_FETCH`` / ``RAW_PRODUCE`` (kafka-python,
``mm2py.kafka.clientconf.kafka_python_config`` and ``mm2py.source.copy.copy_settings.CopySettings``) and
``mm2py.kafka.clientconf.rdkafka_config`` (the librdkafka clients). Settings that do not apply
are reviewed here (``review``) and named in one start-up warning with the reason; security
settings that cannot be honoured are refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from mm2py.config.keys import CLIENT_TYPES, FLOW_KEYS_BY_NAME, TOP_LEVEL_CLIENT
from mm2py.config.krb5jaas import settings_problem
from mm2py.config.oauth import problems as oauth_problems
from mm2py.config.rdkafka_keys import RDKAFKA_ADMIN, RDKAFKA_CONSUMER, RDKAFKA_PRODUCER

# MM2's MirrorClientConfig.CLIENT_CONFIG_DEF: what a cluster's clients inherit from '{alias}.' and the top level
SECURITY = TOP_LEVEL_CLIENT


def is_security(name: str) -> bool:
    return SECURITY.fullmatch(name) is not None


@dataclass(frozen=True)
class Setting:
    """One client setting: its value and the key it was written under."""

    value: str
    key: str


Layer = dict[str, Setting]


@dataclass(frozen=True)
class Spellings:
    """Client settings as the file spells them, prefixes stripped and values trimmed."""

    top: Mapping[str, str]  # top-level <sec> settings (bootstrap.servers excluded)
    clusters: Mapping[str, Mapping[str, str]]  # alias -> every '{alias}.k' client setting ('consumer.x' kept typed)
    flows: Mapping[tuple[str, str], Mapping[str, str]]  # (src, tgt) -> every '{src}->{tgt}.k'


def cluster_props(spellings: Spellings, alias: str) -> Layer:
    """MM2's ``clusterProps(alias)``: ``alias.*`` stripped, security settings copied into each client type."""
    props = {k: Setting(v, f"{alias}.{k}") for k, v in spellings.clusters.get(alias, {}).items()}
    for name, setting in list(props.items()):
        if is_security(name):
            for kind in CLIENT_TYPES:
                props.setdefault(f"{kind}.{name}", setting)
    for name, value in spellings.top.items():
        setting = Setting(value, name)
        for kind in CLIENT_TYPES:
            props.setdefault(f"{kind}.{name}", setting)
        props.setdefault(name, setting)
    return props


def _strip(layer: Mapping[str, Setting], prefix: str) -> Layer:
    return {k[len(prefix):]: s for k, s in layer.items() if k.startswith(prefix) and len(k) > len(prefix)}


def _flow_layer(spellings: Spellings, src: str, tgt: str) -> Layer:
    return {k: Setting(v, f"{src}->{tgt}.{k}") for k, v in spellings.flows.get((src, tgt), {}).items()}


def _connector_client(spellings: Spellings, src: str, tgt: str, side: str, kind: str) -> Layer:
    """MM2's ``{side}{Kind}Config``: ``<side>.cluster.<sec>`` < ``kind.*`` < ``<side>.kind.*``."""
    alias = src if side == "source" else tgt
    props = cluster_props(spellings, alias)
    flow = _flow_layer(spellings, src, tgt)
    base = {k: s for k, s in props.items() if not k.startswith(CLIENT_TYPES)}
    base.update(_strip(flow, f"{side}.cluster."))
    out = {k: s for k, s in base.items() if is_security(k)}
    # connector-level 'kind.*': the flow's own; MM2's keys (consumer.poll.timeout.ms, admin.timeout.ms) and
    # Connect's client overrides are no client settings
    out.update({k: s for k, s in _strip(flow, f"{kind}.").items()
                if f"{kind}.{k}" not in FLOW_KEYS_BY_NAME and not k.startswith("override.")})
    typed = _strip(props, f"{kind}.")
    typed.update(_strip(flow, f"{side}.{kind}."))
    out.update(typed)
    return out


def _worker_producer(spellings: Spellings, src: str, tgt: str) -> Layer:
    """Connect's task producer of herder src->tgt: the worker's ``producer.*`` < ``producer.override.*``."""
    out = _strip(cluster_props(spellings, tgt), "producer.")
    out.update(_strip(_flow_layer(spellings, src, tgt), "producer.override."))
    return out


def _with_role(layer: Layer, flow: str, connector: str, role: str) -> Layer:
    """MM2's ``addClientId``: a user's client.id gets the flow, connector and role appended."""
    if "client.id" in layer:
        setting = layer["client.id"]
        layer = {**layer, "client.id": Setting(f"{setting.value}|{flow}|{connector}|{role}", setting.key)}
    return layer


@dataclass(frozen=True)
class FlowClients:
    """The settings of every client of one flow, each with the key it came from."""

    replication_consumer: Layer
    data_producer: Layer
    source_producer: Layer  # offset-syncs-source-producer
    source_admin: Layer
    target_admin: Layer
    checkpoints_consumer: Layer
    offset_syncs_producer: Layer
    offset_syncs_consumer: Layer
    offset_syncs_admin: Layer

    def roles(self) -> Iterator[tuple[str, str, Layer]]:
        """(client, kind, settings), the copy path's clients first."""
        yield "replication consumer", "consumer", self.replication_consumer
        yield "data producer", "producer", self.data_producer
        yield "offset-syncs producer", "producer", self.offset_syncs_producer
        yield "offset-syncs consumer", "consumer", self.offset_syncs_consumer
        yield "source admin", "admin", self.source_admin
        yield "target admin", "admin", self.target_admin
        yield "checkpoints consumer", "consumer", self.checkpoints_consumer


def flow_clients(spellings: Spellings, src: str, tgt: str, offset_syncs_location: str = "source") -> FlowClients:
    """Every client of flow ``src->tgt`` as MM2 4.3 configures it (see the module's table)."""
    name = f"{src}->{tgt}"

    def connector(side: str, kind: str, connector_class: str, role: str) -> Layer:
        return _with_role(_connector_client(spellings, src, tgt, side, kind), name, connector_class, role)

    source_consumer = connector("source", "consumer", "MirrorSourceConnector", "replication-consumer")
    source_producer = connector("source", "producer", "MirrorSourceConnector", "offset-syncs-source-producer")
    source_admin = connector("source", "admin", "MirrorSourceConnector", "replication-source-admin")
    target_admin = connector("target", "admin", "MirrorSourceConnector", "replication-target-admin")
    if offset_syncs_location == "target":
        syncs_producer = connector("target", "producer", "MirrorSourceConnector", "offset-syncs-target-producer")
        syncs_consumer = connector("target", "consumer", "MirrorCheckpointConnector", "offset-syncs-target-consumer")
        syncs_admin = connector("target", "admin", "MirrorSourceConnector", "offset-syncs-target-admin")
    else:
        syncs_producer = source_producer
        syncs_consumer = connector("source", "consumer", "MirrorCheckpointConnector", "offset-syncs-source-consumer")
        syncs_admin = connector("source", "admin", "MirrorSourceConnector", "offset-syncs-source-admin")
    return FlowClients(
        replication_consumer=source_consumer,
        data_producer=_worker_producer(spellings, src, tgt),
        source_producer=source_producer,
        source_admin=source_admin,
        target_admin=target_admin,
        checkpoints_consumer=connector("target", "consumer", "MirrorCheckpointConnector",
                                       "checkpoints-target-consumer"),
        offset_syncs_producer=syncs_producer,
        offset_syncs_consumer=syncs_consumer,
        offset_syncs_admin=syncs_admin,
    )


def values(layer: Mapping[str, Setting]) -> dict[str, str]:
    """The plain settings a client is given (bootstrap.servers comes from the cluster, not from here)."""
    return {k: s.value for k, s in layer.items() if k != "bootstrap.servers"}


# -- what each Java client setting means to mm2py's clients -----------------------------------------

# Settings of Kafka's Java clients (4.3), beyond <sec>: a name in none of these is a typo or a plugin's.
COMMON_SETTINGS = frozenset({
    "bootstrap.servers", "client.dns.lookup", "metadata.max.age.ms", "send.buffer.bytes", "receive.buffer.bytes",
    "client.id", "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms", "retry.backoff.max.ms",
    "request.timeout.ms", "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
    "connections.max.idle.ms", "metrics.sample.window.ms", "metrics.num.samples", "metrics.recording.level",
    "metric.reporters", "auto.include.jmx.reporter", "enable.metrics.push", "security.providers",
    "metadata.recovery.strategy", "metadata.recovery.rebootstrap.trigger.ms",
})
CONSUMER_SETTINGS = COMMON_SETTINGS | {
    "group.id", "group.instance.id", "group.protocol", "group.remote.assignor", "session.timeout.ms",
    "heartbeat.interval.ms", "partition.assignment.strategy", "max.poll.records", "max.poll.interval.ms",
    "enable.auto.commit", "auto.commit.interval.ms", "auto.offset.reset", "fetch.min.bytes", "fetch.max.bytes",
    "fetch.max.wait.ms", "max.partition.fetch.bytes", "check.crcs", "key.deserializer", "value.deserializer",
    "interceptor.classes", "exclude.internal.topics", "isolation.level", "allow.auto.create.topics", "client.rack",
    "default.api.timeout.ms", "internal.leave.group.on.close", "internal.throw.on.fetch.stable.offset.unsupported",
}
PRODUCER_SETTINGS = COMMON_SETTINGS | {
    "acks", "batch.size", "linger.ms", "delivery.timeout.ms", "max.request.size", "max.block.ms", "buffer.memory",
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level", "retries",
    "key.serializer", "value.serializer", "partitioner.class", "partitioner.adaptive.partitioning.enable",
    "partitioner.availability.timeout.ms", "partitioner.ignore.keys", "interceptor.classes", "enable.idempotence",
    "transaction.timeout.ms", "transactional.id", "max.in.flight.requests.per.connection", "metadata.max.idle.ms",
    "transaction.two.phase.commit.enable",
}
ADMIN_SETTINGS = COMMON_SETTINGS | {"bootstrap.controllers", "retries", "default.api.timeout.ms"}
KNOWN = {"consumer": CONSUMER_SETTINGS, "producer": PRODUCER_SETTINGS, "admin": ADMIN_SETTINGS}

# What the raw (kafka-python) connections of the copy path honour, and how.
RAW_CONNECTION = frozenset({
    "client.id",  # the id the brokers see (quotas, request logs)
    "request.timeout.ms",  # how long a request may go unanswered before its connection is dropped
    "send.buffer.bytes", "receive.buffer.bytes",  # SO_SNDBUF / SO_RCVBUF (-1: the OS's)
    "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "connections.max.idle.ms", "metadata.max.age.ms",
    "client.dns.lookup",
})
RAW_FETCH = RAW_CONNECTION | {
    "max.partition.fetch.bytes", "fetch.max.bytes", "fetch.max.wait.ms", "fetch.min.bytes",  # each Fetch request
    "client.rack",  # Fetch's rack_id: fetch from the closest replica where the brokers have a replica selector
    "check.crcs",  # verify each batch's CRC before it is sent on
    "retry.backoff.ms",  # the pause before a partition whose leader moved is fetched again
    "auto.offset.reset",  # where a partition without a position starts (earliest or latest)
    "isolation.level",  # read_committed: the only level mm2py reads at
}
RAW_PRODUCE = RAW_CONNECTION | {
    "request.timeout.ms",  # also each Produce request's timeout, as the Java producer sends it
    "max.in.flight.requests.per.connection",  # requests per broker connection (and, up to 5, batches per partition)
    "acks",  # all (or -1): the only level mm2py writes at
    "enable.idempotence",  # true: mm2py always writes idempotently
    "delivery.timeout.ms",  # how long a partition's writes may go refused (resent in place) before the task fails
    "retry.backoff.ms",  # the pause before a refused write is resent
}

# Settings that do nothing in MM2's own client either: accepted without a word.
NO_EFFECT = {
    # MM2's consumers are assigned partitions (no group, no commits) and read bytes
    "consumer": frozenset({
        "group.id", "group.instance.id", "group.protocol", "group.remote.assignor", "session.timeout.ms",
        "heartbeat.interval.ms", "partition.assignment.strategy", "max.poll.interval.ms", "enable.auto.commit",
        "auto.commit.interval.ms", "exclude.internal.topics", "allow.auto.create.topics", "key.deserializer",
        "value.deserializer", "internal.leave.group.on.close", "internal.throw.on.fetch.stable.offset.unsupported",
    }),
    # MM2 gives every record its partition, as bytes
    "producer": frozenset({
        "key.serializer", "value.serializer", "partitioner.class", "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms", "partitioner.ignore.keys",
    }),
    "admin": frozenset(),
}

CODEC = ("batches keep the source's codec: the copy path passes record batches through unchanged "
         "(only topics copied record by record, partition.mismatch=hash, apply it)")
BATCHING = ("batches pass through as the source's producers wrote them; nothing is re-batched or delayed "
            "(only topics copied record by record, partition.mismatch=hash, apply it)")
BUFFERING = "nothing is queued for sending: a copy task holds at most fetch.max.bytes of fetched batches"
FAILURES = ("a write refused for a retriable reason is resent until delivery.timeout.ms, however many times; "
            "any other failure fails the Spark task, which Spark retries from the last committed position")
ACKS = "mm2py always writes with acks=all"
IDEMPOTENCE = "the copy path always writes idempotently (in order per partition, whatever max.in.flight)"
REQUEST_SIZE = "batches are sent as they are; the remote topic's max.message.bytes bounds them"
TRANSACTIONS = "the copy path does not write in a transaction of this producer"
RECORDS = "the copy path moves whole batches; fetches are bounded in bytes (max.partition.fetch.bytes, fetch.max.bytes)"
READ_COMMITTED = "mm2py reads read_committed: records of aborted transactions are never mirrored"
API_TIMEOUT = "mm2py bounds its waits with admin.timeout.ms"
BACKOFF = "mm2py pauses retry.backoff.ms between retries, without growing the pause"
METADATA_IDLE = "the copy path looks up the target's leaders afresh for every task"
REBOOTSTRAP = "mm2py's clients do not re-bootstrap; they reconnect to the brokers they know"
JAVA_CLASSES = "Java plugin classes are not loaded by mm2py"
METRICS = "Java client metrics do not exist in mm2py; it serves its own (metrics.port)"
NOT_RAW = "the copy path's raw connections have no such setting"
NO_LIBRDKAFKA = "mm2py's {kind} for this role is librdkafka's, which has no such setting"
UNKNOWN = "not a setting of Kafka's Java {kind}, so no client uses it"
BOOTSTRAP = "every client of a cluster connects to '{alias}.bootstrap.servers'"

_PRODUCER_NOTES = {
    "compression.type": CODEC, "compression.gzip.level": CODEC, "compression.lz4.level": CODEC,
    "compression.zstd.level": CODEC, "batch.size": BATCHING, "linger.ms": BATCHING, "buffer.memory": BUFFERING,
    "max.block.ms": BUFFERING, "retries": FAILURES, "retry.backoff.max.ms": BACKOFF, "max.request.size": REQUEST_SIZE,
    "transactional.id": TRANSACTIONS,
    "transaction.timeout.ms": TRANSACTIONS, "transaction.two.phase.commit.enable": TRANSACTIONS,
    "metadata.max.idle.ms": METADATA_IDLE,
}
_CONSUMER_NOTES = {
    "max.poll.records": RECORDS, "default.api.timeout.ms": API_TIMEOUT, "retry.backoff.max.ms": BACKOFF,
}
_COMMON_NOTES = {
    "interceptor.classes": JAVA_CLASSES, "metric.reporters": JAVA_CLASSES, "security.providers": JAVA_CLASSES,
    "metrics.sample.window.ms": METRICS, "metrics.num.samples": METRICS, "metrics.recording.level": METRICS,
    "auto.include.jmx.reporter": METRICS, "enable.metrics.push": METRICS,
    "metadata.recovery.strategy": REBOOTSTRAP, "metadata.recovery.rebootstrap.trigger.ms": REBOOTSTRAP,
}
_RDKAFKA = {"consumer": RDKAFKA_CONSUMER, "producer": RDKAFKA_PRODUCER, "admin": RDKAFKA_ADMIN}
# decided by mm2py for its librdkafka clients (as MM2 decides them for its own): no note
_DECIDED = frozenset({"group.id", "enable.auto.commit", "auto.offset.reset", "isolation.level"})

# Integer settings mm2py's clients read, with Kafka's lower bounds: a bad value is refused at start.
INTEGERS = {
    "max.partition.fetch.bytes": 0, "fetch.max.bytes": 0, "fetch.max.wait.ms": 0, "fetch.min.bytes": 0,
    "request.timeout.ms": 0, "max.in.flight.requests.per.connection": 1, "send.buffer.bytes": -1,
    "receive.buffer.bytes": -1, "socket.connection.setup.timeout.ms": 0, "socket.connection.setup.timeout.max.ms": 0,
    "reconnect.backoff.ms": 0, "reconnect.backoff.max.ms": 0, "connections.max.idle.ms": -1,
    "metadata.max.age.ms": 0, "retry.backoff.ms": 0, "delivery.timeout.ms": 0,
}
DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")

# Security settings mm2py cannot honour: ignoring them would change who is trusted or how one signs in.
_REFUSED_SECURITY = {
    "ssl.cipher.suites": "cipher suites cannot be restricted by mm2py's clients",
    "ssl.engine.factory.class": JAVA_CLASSES,
    "ssl.keystore.key": "inline PEM keys are not supported; put the key in a file (ssl.keystore.location, "
                        "ssl.keystore.type=PEM)",
    "ssl.keystore.certificate.chain": "inline PEM certificates are not supported; use ssl.keystore.location "
                                      "with ssl.keystore.type=PEM",
    "ssl.truststore.certificates": "inline PEM certificates are not supported; use ssl.truststore.location "
                                   "with ssl.truststore.type=PEM",
    "sasl.client.callback.handler.class": JAVA_CLASSES,
    "sasl.login.class": JAVA_CLASSES,
}


def _security_problem(name: str, value: str) -> str | None:
    if name in _REFUSED_SECURITY:
        return _REFUSED_SECURITY[name]
    if name == "ssl.enabled.protocols":
        enabled = {p.strip().upper() for p in value.split(",") if p.strip()}
        if "TLSV1.2" not in enabled or "TLSV1.3" not in enabled:
            return "mm2py's clients speak TLS 1.2 and 1.3 and cannot be limited to fewer (or older) protocols"
    if name == "sasl.mechanism" and value.strip().upper() not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512",
                                                                  "OAUTHBEARER", "GSSAPI", ""):
        return (f"SASL mechanism {value.strip()} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, "
                "OAUTHBEARER and GSSAPI are)")
    return None


def _value_problem(name: str, value: str) -> str | None:
    if name in INTEGERS:
        try:
            number = int(value)
        except ValueError:
            return f"expected an integer, got {value!r}"
        if number < INTEGERS[name]:
            return f"must be at least {INTEGERS[name]}, got {value!r}"
    if name == "client.dns.lookup" and value not in DNS_LOOKUPS:
        return f"expected one of {', '.join(DNS_LOOKUPS)}, got {value!r}"
    return None


def _note(role: str, kind: str, name: str, value: str) -> str | None:
    """Why mm2py's client in ``role`` does not apply ``name = value``; None when it does (or MM2 would not)."""
    if is_security(name) and name != "bootstrap.servers":
        return None
    if name == "bootstrap.servers":
        return BOOTSTRAP
    if name not in KNOWN[kind]:
        return UNKNOWN.format(kind=kind)
    if name in NO_EFFECT[kind]:
        return None
    if name == "acks" and value.strip().lower() not in ("all", "-1"):
        return ACKS
    if name == "enable.idempotence" and value.strip().lower() == "false" and role == "data producer":
        return IDEMPOTENCE
    if name == "isolation.level" and value.strip().lower() != "read_committed":
        return READ_COMMITTED
    if name in _COMMON_NOTES:
        return _COMMON_NOTES[name]
    if role == "replication consumer":
        return None if name in RAW_FETCH else _CONSUMER_NOTES.get(name, NOT_RAW)
    if role == "data producer":
        return None if name in RAW_PRODUCE else _PRODUCER_NOTES.get(name, NOT_RAW)
    if name in _RDKAFKA[kind] or name in _DECIDED or name in ("acks", "enable.idempotence"):
        return None
    return NO_LIBRDKAFKA.format(kind=kind)


@dataclass
class Review:
    """What the clients of running flows do not apply (warned) and what mm2py refuses to run with.

    A key is judged by the first client it reaches in ``FlowClients.roles`` order over all flows:
    ``A.consumer.x`` by the replication consumer of flows from A, not by the checkpoints reader of
    flows into A; ``B.producer.x`` by the data producer of flows into B.
    """

    judged: dict[str, tuple[int, str | None]] = field(default_factory=dict)  # key -> (role rank, why or None)
    refused: dict[str, str] = field(default_factory=dict)  # key as written -> why mm2py cannot run with it

    def add(self, clients: FlowClients) -> None:
        for rank, (role, kind, layer) in enumerate(clients.roles()):
            # how the client signs in depends on several keys together (mm2py.config.oauth)
            for name, why in oauth_problems(values(layer)).items():
                self.refused.setdefault((layer.get(name) or layer["sasl.mechanism"]).key, why)
            for name, setting in layer.items():
                problem = _security_problem(name, setting.value) if is_security(name) else _value_problem(
                    name, setting.value.strip())
                if problem is not None:
                    self.refused.setdefault(setting.key, problem)
                elif setting.key not in self.judged or rank < self.judged[setting.key][0]:
                    self.judged[setting.key] = (rank, _note(role, kind, name, setting.value))
            if (kerberos := settings_problem(values(layer))) is not None:  # GSSAPI: the JAAS line and service
                name, why = kerberos
                mechanism = layer["sasl.mechanism"].key  # '{alias}.sasl.mechanism' or a client-prefixed spelling
                self.refused.setdefault(layer[name].key if name in layer else mechanism.removesuffix(
                    "sasl.mechanism") + name, why)

    @property
    def warned(self) -> dict[str, str]:
        """Key as written -> why the client it is meant for does not apply it."""
        return {key: why for key, (_rank, why) in self.judged.items() if why is not None}


def review(*flows: FlowClients) -> Review:
    found = Review()
    for clients in flows:
        found.add(clients)
    return found


# -- spellings that reach no client at all --------------------------------------------------------

_TOP_CLIENT = re.compile(r"((source\.|target\.)?(consumer|producer|admin)|(source|target)\.cluster)\..+"
                         r"|client\.id|request\.timeout\.ms")
NOWHERE_TOP = ("MM2 gives top-level client settings other than security ones to no client; "
               "write '{alias}.consumer.<key>', '{alias}.producer.<key>' or '{alias}.admin.<key>'")
NOWHERE_FLOW = ("MM2 gives '{src}->{tgt}.<key>' without a client prefix to no client; write "
                "'{src}->{tgt}.consumer.<key>' (or .producer. / .admin.), or '{alias}.<key>' for security settings")
WORKER_ONLY = ("MM2 gives '{alias}.<key>' (no client prefix) only to its Connect workers' internal clients, which "
               "mm2py's position store stands for; for the replication clients write '{alias}.consumer.<key>' or "
               "'{alias}.producer.<key>'")


def top_level_nowhere(name: str) -> bool:
    """A top-level key that looks like a client setting but reaches no client (MM2's rules)."""
    return (_TOP_CLIENT.fullmatch(name) is not None and name not in FLOW_KEYS_BY_NAME
            and name not in ("source.cluster.alias", "target.cluster.alias"))


def flow_level_nowhere(setting: str) -> bool:
    """A flow key ``{src}->{tgt}.<setting>`` that is a client setting without a client prefix."""
    head = setting.partition(".")[0]
    if head in CLIENT_TYPES or setting in FLOW_KEYS_BY_NAME or setting.startswith(("source.", "target.")):
        return False
    return is_security(setting) or any(setting in known for known in KNOWN.values())


def worker_only(setting: str) -> bool:
    """A cluster key ``{alias}.<setting>`` that a replication client would take, had it a client prefix."""
    if is_security(setting) or setting.partition(".")[0] in CLIENT_TYPES:
        return False
    return any(setting in known for known in KNOWN.values())
