"""Local Apache Kafka clusters (KRaft, combined broker+controller nodes) on loopback.

For the demo, the tests and the benchmark: real brokers from Apache Kafka's jars, fetched
from Maven Central by ``build/kafka/pom.xml`` into ``.cache/`` (git-ignored). Each cluster
lives in ``var/dev-clusters/NAME/`` (``MM2PY_VAR_DIR`` moves ``var/``): server.properties,
data/, broker.log, broker.pid, jvm.args, port and client.properties (the Java client settings
that reach it, as an MM2 file would spell them). The broker runs detached, in its own session,
so it outlives the command that started it.

A multi-broker cluster (``start_cluster(..., brokers=N)``) is N such nodes forming one KRaft
quorum, all N voters. Node i (0-based, ``node.id`` i) listens for clients on ``port + 2*i`` and
for controllers on ``port + 2*i + 1``; it keeps its server.properties, data/, broker.log and
broker.pid in ``NAME/broker-I/``, while ``NAME/`` holds port, brokers and client.properties.
``stop_broker``, ``kill_broker``, ``start_broker``, ``pause_broker`` and ``resume_broker`` act
on one node, for fault tests and rehearsals; ``wait_in_sync`` waits for a topic's full ISR.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mm2py.dev.brokercds import BrokerArchive, broker_java
from mm2py.dev.oidc_process import stop_oidc
from mm2py.errors import DevClusterError

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient, PartitionMetadata

KAFKA_VERSION = "4.3.0"
REPO = Path(__file__).resolve().parents[2]  # mm2py/dev/cluster.py -> the checkout
SECURITY_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
# The broker's own SASL identity (inter-broker and broker->controller); also what clients get.
ADMIN_USER, ADMIN_PASSWORD = "admin", "admin-secret"
_STORE_PASSWORD = "mm2py-dev"
# Multi-broker clusters: replication factor of internal and default topics, and min.insync.replicas
_MAX_RF, _MAX_MIN_ISR = 3, 2
# seconds a broker may take to finish shutting down once no controller quorum is left (see _terminate)
_NO_QUORUM_GRACE = 5.0
# A closed client connection keeps its local port in TIME_WAIT for 60 s on Linux
PORT_WAIT = 75.0
_BIND_ATTEMPTS = 3
# Extra JVM options for every dev broker, read at each launch and not kept in jvm.args: the test
# suite's brokers live minutes, and there C2's compiles cost more CPU than they return (tests/conftest.py)
JVM_OPTIONS_ENV = "MM2PY_DEV_BROKER_JVM_OPTS"
# Kafka's storage tool lives a second: C2 would compile nothing it gets to use (docs/design.md)
_TOOL_JVM = ("-XX:TieredStopAtLevel=1",)

_LOG4J = """Configuration:
  Appenders:
    RollingFile:
      name: FILE
      fileName: "{log}"
      filePattern: "{log}.%i"
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
      Policies:
        SizeBasedTriggeringPolicy:
          size: 20MB
      DefaultRolloverStrategy:
        max: 2
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: FILE
"""

log = logging.getLogger(__name__)
# Brokers started by this process, so that stopping one also reaps it (no zombies).
_children: dict[int, subprocess.Popen[bytes]] = {}


def var_dir() -> Path:
    return Path(os.environ.get("MM2PY_VAR_DIR", REPO / "var"))


def default_workdir() -> Path:
    return var_dir() / "dev-clusters"


def libs_dir(version: str = KAFKA_VERSION) -> Path:
    return REPO / ".cache" / f"kafka-{version}" / "libs"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock across processes (parallel test sessions, the demo's two threads)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_kafka_jars(version: str = KAFKA_VERSION) -> Path:
    """Fetch Apache Kafka's jars with Maven unless they are cached already; returns the libs folder."""
    libs = libs_dir(version)
    stamp = libs / ".fetched"  # written only after a complete copy, so a broken download is retried
    if stamp.exists():
        return libs
    with _locked(libs.parent / ".fetch.lock"):
        if stamp.exists():
            return libs
        pom = REPO / "build" / "kafka" / "pom.xml"
        cmd = ["mvn", "-q", "-B", "-f", str(pom), "package", f"-Dkafka.version={version}"]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError as e:
            raise DevClusterError("Maven (mvn) is not installed; it fetches Kafka's jars from Maven Central") from e
        if proc.returncode != 0 or not any(libs.glob("kafka_2.13-*.jar")):
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise DevClusterError(
                f"fetching Kafka {version} jars failed ({' '.join(cmd)}, exit {proc.returncode}):\n{tail}")
        stamp.touch()
    return libs


@dataclass(frozen=True)
class BrokerNode:
    """One node (broker and KRaft controller in one JVM) of a dev cluster; ``running`` is checked live."""

    index: int  # 0-based position in the cluster: what stop_broker & co. and `--broker` take
    node_id: int  # Kafka's node.id: the index in a multi-broker cluster, 1 in a single-broker one
    port: int
    controller_port: int
    directory: Path  # its server.properties, data/, broker.log, broker.pid
    pid: int | None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.directory / "broker.log"

    @property
    def data(self) -> Path:
        """The node's log.dirs: one folder per partition, and the KRaft metadata log."""
        return self.directory / "data"

    @property
    def running(self) -> bool:
        return self.pid is not None and _is_our_broker(self.pid, self.directory)


@dataclass(frozen=True)
class DevCluster:
    """What is known about one dev cluster, read from its folder; ``running`` is checked live."""

    name: str
    port: int
    controller_port: int
    directory: Path
    pid: int | None  # node 0's in a multi-broker cluster; see ``nodes``
    protocol: str = "PLAINTEXT"
    # Java client settings (security.protocol, sasl.jaas.config, ssl.truststore.*), as in an MM2 file
    client_properties: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    brokers: int = 1
    # every node's pid, by index, in a multi-broker cluster (empty for a single broker: see ``pid``)
    node_pids: tuple[int | None, ...] = ()

    @property
    def nodes(self) -> tuple[BrokerNode, ...]:
        if self.brokers == 1:
            return (BrokerNode(0, 1, self.port, self.controller_port, self.directory, self.pid),)
        pids = self.node_pids or (None,) * self.brokers
        return tuple(BrokerNode(i, i, self.port + 2 * i, self.port + 2 * i + 1, _node_dir(self.directory, i), pids[i])
                     for i in range(self.brokers))

    def node(self, index: int) -> BrokerNode:
        if not 0 <= index < self.brokers:
            raise DevClusterError(f"cluster {self.name} has {self.brokers} broker(s) (0..{self.brokers - 1}), "
                                  f"no broker {index}")
        return self.nodes[index]

    @property
    def bootstrap(self) -> str:
        """Every node's client address, comma-separated."""
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def log(self) -> Path:
        """The broker's log (node 0's in a multi-broker cluster)."""
        return self.nodes[0].log

    @property
    def data(self) -> Path:
        """The broker's log.dirs: one folder per partition (node 0's in a multi-broker cluster)."""
        return self.nodes[0].data

    @property
    def running(self) -> bool:
        """Whether any of its brokers runs."""
        return any(node.running for node in self.nodes)

    @property
    def state(self) -> str:
        """running, stopped, or (some but not all brokers up) degraded."""
        up = sum(node.running for node in self.nodes)
        return "running" if up == self.brokers else "degraded" if up else "stopped"

    def rdkafka_config(self) -> dict[str, object]:
        """Settings for a confluent-kafka client of this cluster (bootstrap and security)."""
        from mm2py.kafka.clientconf import rdkafka_config

        return rdkafka_config(self.bootstrap, self.client_properties, self.name)

    def ping(self, timeout: float = 5.0) -> bool:
        """True when a broker answers a metadata request within ``timeout`` seconds."""
        try:
            return _probe(self, timeout)()
        except Exception:  # any failure means "not answering"
            return False


def _node_dir(directory: Path, index: int) -> Path:
    return directory / f"broker-{index}"


def _is_our_broker(pid: int, directory: Path) -> bool:
    if (child := _children.get(pid)) is not None:
        # started by this process: ask the kernel directly. /proc/PID/cmdline is empty for a few
        # milliseconds after Popen returns, which must not read as "exited".
        return child.poll() is None
    # The command line must name this cluster's server.properties: after a reboot the pid may
    # belong to an unrelated process, and a zombie child of ours is no broker either.
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z" and str(directory / "server.properties").encode() in cmdline


def _read_properties(path: Path) -> dict[str, str]:
    """The ``key=value`` files this module writes itself (one line each, backslashes escaped)."""
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key] = value.replace("\\\\", "\\")
    return out


def _write_properties(path: Path, props: Mapping[str, object]) -> None:
    # java.util.Properties reads a backslash as an escape; nothing else we write needs one
    escaped = {k: str(v).replace("\\", "\\\\") for k, v in props.items()}
    path.write_text("".join(f"{k}={v}\n" for k, v in escaped.items()))


def _read(name: str, workdir: Path) -> DevCluster | None:
    directory = workdir / name
    port_file = directory / "port"
    if not port_file.exists():
        return _read_legacy(directory)
    client = _read_properties(directory / "client.properties")
    port = int(port_file.read_text().strip())
    brokers_file = directory / "brokers"
    brokers = int(brokers_file.read_text().strip()) if brokers_file.exists() else 1
    if brokers > 1:
        pids = tuple(_read_pid(_node_dir(directory, i)) for i in range(brokers))
        return DevCluster(name=name, port=port, controller_port=port + 1, directory=directory, pid=pids[0],
                          protocol=client.get("security.protocol", "PLAINTEXT"), client_properties=client,
                          brokers=brokers, node_pids=pids)
    server = _read_properties(directory / "server.properties")
    controller = server.get("controller.quorum.bootstrap.servers", f"127.0.0.1:{port + 1}")
    return DevCluster(
        name=name,
        port=port,
        controller_port=int(controller.rsplit(":", 1)[1]),
        directory=directory,
        pid=_read_pid(directory),
        protocol=client.get("security.protocol", "PLAINTEXT"),
        client_properties=client,
    )


def _read_pid(directory: Path) -> int | None:
    pid_file = directory / "broker.pid"
    pid_text = pid_file.read_text().strip() if pid_file.exists() else ""
    return int(pid_text) if pid_text else None


def _read_legacy(directory: Path) -> DevCluster | None:
    # folders written before the pid/port files (one cluster.json) must stay visible to `down`
    state = directory / "cluster.json"
    if not state.exists():
        return None
    fields = json.loads(state.read_text())
    return DevCluster(name=directory.name, port=fields["port"], controller_port=fields["port"] + 1,
                      directory=directory, pid=fields.get("pid"), protocol=fields.get("protocol", "PLAINTEXT"),
                      client_properties={"security.protocol": fields.get("protocol", "PLAINTEXT")})


def _ssl_material(directory: Path) -> dict[str, str]:
    """A self-signed certificate for 127.0.0.1: a PKCS12 keystore for the broker, its PEM for clients."""
    keystore, pem = directory / "keystore.p12", directory / "ca.pem"
    if not keystore.exists():
        common = ["-storepass", _STORE_PASSWORD, "-keystore", str(keystore), "-storetype", "PKCS12", "-noprompt"]
        steps = [
            ["keytool", "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-validity", "3650",
             "-dname", "CN=127.0.0.1", "-ext", "SAN=ip:127.0.0.1,dns:localhost", *common],
            ["keytool", "-exportcert", "-rfc", "-alias", "broker", "-file", str(pem), *common],
        ]
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise DevClusterError(f"creating a TLS certificate with keytool failed:\n{proc.stdout}{proc.stderr}")
    return {"keystore": str(keystore), "truststore": str(pem)}


@dataclass(frozen=True)
class OAuthLogin:
    """An OIDC provider (mm2py.dev.oidc) whose RS256 tokens a dev cluster's client listener takes
    (SASL/OAUTHBEARER), and the client credentials its clients sign in with."""

    token_url: str
    jwks_url: str
    client_id: str
    client_secret: str = field(repr=False)
    audience: str = "kafka"

    @property
    def jvm_options(self) -> tuple[str, ...]:
        """Kafka 4 brokers fetch only the OAUTHBEARER URLs this system property allows."""
        return (f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.jwks_url},{self.token_url}",)


def _oauth_properties(protocol: str, oauth: OAuthLogin) -> tuple[dict[str, str], dict[str, str]]:
    """OAUTHBEARER beside PLAIN on the client listener: brokers validate JWTs against the JWKS URL."""
    prefix = f"listener.name.{protocol.lower()}.oauthbearer."
    server = {
        # the controller listener keeps PLAIN alone (it has no OAUTHBEARER login module)
        f"listener.name.{protocol.lower()}.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        prefix + "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
        prefix + "sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": oauth.jwks_url,
        "sasl.oauthbearer.expected.audience": oauth.audience,
    }
    client = {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": oauth.token_url,
        "sasl.jaas.config": ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                             f'clientId="{oauth.client_id}" clientSecret="{oauth.client_secret}" scope="kafka";'),
    }
    return server, client


def listener_properties(
    protocol: str, port: int, controller_port: int, directory: Path, sasl_users: Mapping[str, str] | None = None,
    oauth: OAuthLogin | None = None, client_auth: bool = False,
) -> tuple[dict[str, str], dict[str, str]]:
    """Broker and client settings for a client listener speaking ``protocol``.

    The one place listeners are composed, so SASL and TLS are a parameter rather than a copy.
    With ``oauth`` (SASL protocols only) the client listener also takes OAUTHBEARER tokens and
    clients use them; the brokers' own connections stay PLAIN. ``client_auth`` (TLS protocols
    only) requires a client certificate (``mm2py.dev.mtls``).
    Returns (server properties, Java client properties).
    """
    protocol = protocol.upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise DevClusterError(f"unknown security protocol {protocol!r}; one of {', '.join(SECURITY_PROTOCOLS)}")
    sasl, tls = protocol.startswith("SASL_"), protocol.endswith("SSL")
    # With SASL the controller listener authenticates too, so the broker reaches its controller
    # as User:admin (a super user) rather than as ANONYMOUS, which an authorizer would refuse.
    controller_protocol = "SASL_PLAINTEXT" if sasl else "PLAINTEXT"
    server = {
        "listeners": f"{protocol}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"{protocol}://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": f"CONTROLLER:{controller_protocol},{protocol}:{protocol}",
        "inter.broker.listener.name": protocol,
    }
    client = {"security.protocol": protocol}
    if sasl:
        users = {ADMIN_USER: ADMIN_PASSWORD, **(sasl_users or {})}
        jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{ADMIN_USER}" '
                f'password="{users[ADMIN_USER]}" ' + " ".join(f'user_{u}="{p}"' for u, p in users.items()) + ";")
        server.update({
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": jaas,
            "listener.name.controller.plain.sasl.jaas.config": jaas,
        })
        client.update({
            "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": (f'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                 f'username="{ADMIN_USER}" password="{users[ADMIN_USER]}";'),
        })
    if oauth is not None:
        if not sasl:
            raise DevClusterError(f"OAUTHBEARER needs a SASL protocol, not {protocol}")
        server_oauth, client_oauth = _oauth_properties(protocol, oauth)
        server.update(server_oauth)
        client.update(client_oauth)
    if tls:
        stores = _ssl_material(directory)
        server.update({
            "ssl.keystore.location": stores["keystore"],
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.password": _STORE_PASSWORD,
            "ssl.key.password": _STORE_PASSWORD,
            # the broker is a TLS client of itself (inter-broker listener)
            "ssl.truststore.location": stores["truststore"],
            "ssl.truststore.type": "PEM",
        })
        # PEM truststores work for Java clients (KIP-651) and for librdkafka / kafka-python alike
        client.update({"ssl.truststore.location": stores["truststore"], "ssl.truststore.type": "PEM"})
    if client_auth:
        if not tls:
            raise DevClusterError(f"client certificates need a TLS protocol (SSL, SASL_SSL), not {protocol}")
        from mm2py.dev.mtls import client_auth_properties

        server_mtls, client_mtls = client_auth_properties(directory, stores["truststore"])
        server.update(server_mtls)
        client.update(client_mtls)
    return server, client


def _server_properties(directory: Path, port: int, controller_port: int, listeners: dict[str, str],
                       extra: Mapping[str, object]) -> dict[str, object]:
    props: dict[str, object] = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "log.dirs": str(directory / "data"),
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "5",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "num.partitions": "1",
        # the default 128 MiB would take a quarter of the 512 MiB heap
        "log.cleaner.dedupe.buffer.size": str(16 << 20),
        # a compacted topic is cleaned within a second of its segment rolling, not 15 s
        "log.cleaner.backoff.ms": "1000",
        # MM2 creates its topics explicitly; a typo in a test should fail, not create a topic
        "auto.create.topics.enable": "false",
        # the only controller's no-op records (every 500 ms by default) tell no follower anything;
        # they were a third of an idle broker's CPU (docs/design.md)
        "metadata.max.idle.interval.ms": "5000",
        **listeners,
    }
    if "authorizer.class.name" in extra and "super.users" not in extra:
        # the broker's own requests must pass the authorizer: it is User:admin under SASL, else ANONYMOUS
        sasl = listeners["listener.security.protocol.map"].startswith("CONTROLLER:SASL")
        props["super.users"] = f"User:{ADMIN_USER}" if sasl else "User:ANONYMOUS"
    props.update(extra)
    return props


def ports_in_use(ports: list[int]) -> list[int]:
    """Which of ``ports`` on 127.0.0.1 a server could not bind now."""
    busy = []
    for port in ports:
        with socket.socket() as s:
            # our own TIME_WAIT leftovers do not stop Kafka or Spark (both set SO_REUSEADDR); same here
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                busy.append(port)
    return busy


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _listener_ports() -> set[int]:
    """Local TCP ports some socket listens on (any address, IPv4 or IPv6), from the kernel's tables.

    A server too busy to accept (a full backlog) does not answer a connect; this still sees it.
    """
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 3 and fields[3] == "0A":  # TCP_LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def wait_ports_free(ports: list[int], what: str, timeout: float = PORT_WAIT) -> None:
    """Return once every port can be bound; fail at once if a server listens on one.

    Our fixed ports lie in Linux's ephemeral range (32768-60999), so a client's outgoing
    connection, or its TIME_WAIT for a minute after closing, can hold one for a while.
    """
    deadline = time.monotonic() + timeout
    warned = False
    while busy := ports_in_use(ports):
        listeners = _listener_ports()
        if servers := [p for p in busy if p in listeners or _listening(p)]:
            raise DevClusterError(f"cannot start {what}: port {', '.join(map(str, servers))} on 127.0.0.1 "
                                  "is already in use by another server")
        if not warned:  # a silent minute looks like a hang
            log.warning("port %s on 127.0.0.1 is held by a client connection (or its TIME_WAIT); "
                        "waiting up to %.0f s to start %s", ", ".join(map(str, busy)), timeout, what)
            warned = True
        if time.monotonic() >= deadline:
            raise DevClusterError(f"cannot start {what}: port {', '.join(map(str, busy))} on 127.0.0.1 is still "
                                  f"held by client connections after {timeout:.0f} s")
        time.sleep(1)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no output)"
    return "\n".join(text[-lines:]) or "(empty)"


def _errors(path: Path, lines: int = 12) -> str:
    """The ERROR/FATAL lines and their causes: a Java stack trace's tail rarely says what went wrong."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    picked = [line for line in text
              if "] ERROR " in line or "] FATAL " in line or line.startswith(("Caused by:", "Exception in thread"))]
    return "\n".join(picked[-lines:])


def _label(cluster: DevCluster, node: BrokerNode) -> str:
    """How messages name a node: the cluster's name alone when it has one broker."""
    return cluster.name if cluster.brokers == 1 else f"{node.index} of cluster {cluster.name}"


def _failure_report(node: BrokerNode) -> str:
    stdout = node.directory / "stdout.log"
    errors = _errors(node.log) or _tail(node.log)
    return (f"--- errors in {node.log} ---\n{errors}\n"
            f"--- {stdout} (tail) ---\n{_tail(stdout, 10)}")


def _how_it_ended(node: BrokerNode) -> str:
    child = _children.get(node.pid) if node.pid is not None else None
    code = child.poll() if child is not None else None
    if code is None:
        return "exited"
    return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"


def _wait_ready(cluster: DevCluster, timeout: float, nodes: Sequence[BrokerNode] | None = None) -> None:
    """Return once each of ``nodes`` (default: all) runs and answers requests.

    With several brokers each node must answer itself and list itself as a live broker: registered
    with the controllers and unfenced, so caught up. (Right after a SIGKILL the others still list the
    dead incarnation until its session expires, so their word is not enough.)
    """
    nodes = cluster.nodes if nodes is None else nodes
    if cluster.brokers > 1:
        _wait_live(cluster, nodes, timeout)
        return

    node = nodes[0]
    answers = _probe(cluster)
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        if not node.running:
            raise DevClusterError(f"broker {cluster.name} {_how_it_ended(node)} during start-up\n"
                                  f"{_failure_report(node)}")
        try:
            if answers():
                return
        except Exception as e:  # refused until the broker is up; reported on timeout
            last = str(e)
        if time.monotonic() >= deadline:
            raise DevClusterError(f"broker {cluster.name} did not accept requests at {cluster.bootstrap} within "
                                  f"{timeout:.0f} s ({last})\n{_failure_report(node)}")
        time.sleep(0.5)


def _probe(cluster: DevCluster, timeout: float = 2) -> Callable[[], bool]:
    """Whether a broker answers within ``timeout`` s: librdkafka's metadata; kafka-python's for Kerberos."""
    if cluster.client_properties.get("sasl.mechanism") == "GSSAPI":  # not in confluent-kafka's wheels
        from mm2py.dev.kerberos import answers_kafka_python

        return lambda: answers_kafka_python(cluster.bootstrap, cluster.client_properties, cluster.name, timeout)
    from mm2py.kafka.rdclients import admin_client

    conf: dict[str, Any] = {**cluster.rdkafka_config(), "socket.connection.setup.timeout.ms": 2000}
    admin = admin_client(conf)
    return lambda: bool(admin.list_topics(timeout=timeout).brokers)


def _wait_live(cluster: DevCluster, nodes: Sequence[BrokerNode], timeout: float) -> None:
    from mm2py.kafka.rdclients import admin_client

    deadline = time.monotonic() + timeout
    waiting = list(nodes)
    last: dict[int, str] = {}
    while True:
        for node in list(waiting):
            if not node.running:
                raise DevClusterError(f"broker {_label(cluster, node)} {_how_it_ended(node)} during start-up\n"
                                      f"{_failure_report(node)}")
            # a new client each time: one that knows the other brokers may ask them instead
            conf: dict[str, Any] = {**cluster.rdkafka_config(), "bootstrap.servers": node.bootstrap,
                                    "socket.connection.setup.timeout.ms": 2000}
            admin = admin_client(conf)
            try:
                if node.node_id in admin.list_topics(timeout=2).brokers:
                    waiting.remove(node)
                else:
                    last[node.index] = "answers, but is not a live broker yet"
            except Exception as e:  # refused until the broker is up; reported on timeout
                last[node.index] = str(e)
        if not waiting:
            return
        if time.monotonic() >= deadline:
            raise DevClusterError("\n".join(
                f"broker {_label(cluster, node)} did not become a live broker at {node.bootstrap} within "
                f"{timeout:.0f} s ({last.get(node.index, 'no answer yet')})\n{_failure_report(node)}"
                for node in waiting))
        time.sleep(0.5)


def start_cluster(
    name: str,
    port: int,
    *,
    workdir: Path | None = None,
    extra_properties: Mapping[str, object] | None = None,
    listeners_security: str = "PLAINTEXT",
    sasl_users: Mapping[str, str] | None = None,
    oauth: OAuthLogin | None = None,
    controller_port: int | None = None,
    heap: str = "512m",
    jvm_options: tuple[str, ...] = (),
    wait_timeout: float = 90,
    brokers: int = 1,
    sasl_mechanism: str = "PLAIN",
    kdc_port: int | None = None,
    client_auth: bool = False,
) -> DevCluster:
    """Start cluster ``name`` on 127.0.0.1:``port``; returns once the broker accepts requests.

    Idempotent: a cluster of that name already running on ``port`` is returned as it is. Data
    left by ``stop_cluster(keep_data=True)`` or a crash is reused, so a restart recovers the logs.
    ``jvm_options`` go to the broker's JVM after ``-Xmx``.

    ``brokers`` N > 1 starts N nodes forming one KRaft quorum (all N voters): node i serves clients
    on ``port + 2*i`` and its controller on ``port + 2*i + 1``; the call returns once every node is
    a live broker. Internal and default topics get replication factor min(3, N) (transaction log
    min.insync.replicas min(2, N)). Such clusters speak PLAINTEXT only. ``oauth`` (with a SASL
    ``listeners_security``) makes clients sign in with OAUTHBEARER tokens of that OIDC provider. Nodes of a running
    multi-broker cluster that are down (``stop_broker``, a crash) are started again.

    ``sasl_mechanism`` GSSAPI (with a SASL protocol): Kerberos from a KDC of the cluster's own on
    127.0.0.1:``kdc_port`` (default port + 3; port + 2 is an OAUTHBEARER cluster's OIDC provider),
    see ``mm2py.dev.kerberos``. ``client_auth`` (SSL or SASL_SSL): the broker requires a client
    certificate, which ``client.properties`` names (a PKCS12 key store, ``mm2py.dev.mtls``).
    """
    workdir = Path(workdir) if workdir is not None else default_workdir()
    if brokers < 1:
        raise DevClusterError(f"a cluster needs at least one broker, not {brokers}")
    if brokers > 1 and listeners_security.upper() != "PLAINTEXT":
        raise DevClusterError(f"multi-broker dev clusters speak PLAINTEXT only, not {listeners_security}; "
                              "use a single-broker cluster for SASL or TLS")
    if brokers > 1 and controller_port not in (None, port + 1):
        raise DevClusterError("a multi-broker cluster's controller ports follow its client ports (port + 2*i + 1); "
                              "a controller port of one's own is for single-broker clusters")
    controller_port = controller_port if controller_port is not None else port + 1
    with _locked(workdir / f".{name}.lock"):
        existing = _read(name, workdir)
        if existing is not None and existing.running:
            if existing.port != port:
                raise DevClusterError(f"cluster {name} already runs on port {existing.port}, not {port}")
            if existing.brokers != brokers:
                raise DevClusterError(f"cluster {name} already runs with {existing.brokers} broker(s), not {brokers}")
            if existing.state == "running":
                _wait_ready(existing, wait_timeout)  # it may still be starting in another process
                return existing
        directory = workdir / name
        layout = DevCluster(name, port, controller_port, directory, None, brokers=brokers)
        if existing is not None and existing.brokers != brokers and any(
                (node.data / "meta.properties").exists() for node in existing.nodes):
            raise DevClusterError(f"cluster {name} has the data of {existing.brokers} broker(s); start it with as "
                                  f"many, or `mm2py dev-cluster down {name}` to discard the data")
        formatted = all((node.data / "meta.properties").exists() for node in layout.nodes)
        if formatted and existing is not None and (existing.port, existing.controller_port) != (port, controller_port):
            # the KRaft voter set stored in data/ names the old controller endpoint
            raise DevClusterError(f"cluster {name} has data from ports {existing.port}/{existing.controller_port}; "
                                  f"start it there, or `mm2py dev-cluster down {name}` to discard the data")
        up = {node.index for node in existing.nodes if node.running} if existing is not None else set()
        if up and not formatted:
            raise DevClusterError(f"cluster {name} has running brokers but not the data of all; "
                                  f"`mm2py dev-cluster down {name}` and start it afresh")
        starting = [node for node in layout.nodes if node.index not in up]
        ports = [p for node in starting for p in (node.port, node.controller_port)]
        wait_ports_free(ports, f"cluster {name}")  # before leaving a folder behind
        libs = ensure_kafka_jars()
        directory.mkdir(parents=True, exist_ok=True)
        if brokers == 1:
            (directory / "brokers").unlink(missing_ok=True)
            (directory / "broker.pid").unlink(missing_ok=True)
            listeners, client = listener_properties(listeners_security, port, controller_port, directory, sasl_users,
                                                    oauth, client_auth)
            jvm_options = (*jvm_options, *(oauth.jvm_options if oauth else ()))
            if sasl_mechanism.upper() == "GSSAPI":
                from mm2py.dev.kerberos import kerberize

                listeners, client, jvm_options = kerberize(directory, listeners_security, kdc_port or port + 3,
                                                           listeners, client, jvm_options)
            server_file = directory / "server.properties"
            _write_properties(server_file, _server_properties(directory, port, controller_port, listeners,
                                                              dict(extra_properties or {})))
            _write_properties(directory / "client.properties", client)
            (directory / "port").write_text(f"{port}\n")
            (directory / "log4j2.yaml").write_text(_LOG4J.format(log=directory / "broker.log"))
            if not formatted:
                _format(name, directory, libs)
        else:
            for node in starting:
                node.directory.mkdir(exist_ok=True)
                (node.directory / "broker.pid").unlink(missing_ok=True)
                listeners, client = listener_properties("PLAINTEXT", node.port, node.controller_port, node.directory)
                _write_properties(node.directory / "server.properties",
                                  _node_properties(node, layout.nodes, listeners, dict(extra_properties or {})))
                (node.directory / "log4j2.yaml").write_text(_LOG4J.format(log=node.log))
            _write_properties(directory / "client.properties", {"security.protocol": "PLAINTEXT"})
            (directory / "port").write_text(f"{port}\n")
            (directory / "brokers").write_text(f"{brokers}\n")
            if not formatted:
                _format_quorum(name, layout.nodes, libs)
        return _start_nodes(name, workdir, [node.index for node in starting], libs, heap, jvm_options, wait_timeout,
                            whole=True)


def _start_nodes(name: str, workdir: Path, indexes: list[int], libs: Path, heap: str, jvm_options: tuple[str, ...],
                 wait_timeout: float, *, whole: bool) -> DevCluster:
    """Launch the nodes ``indexes`` of a configured, formatted cluster; wait for all nodes (``whole``) or those."""
    layout = _read(name, workdir)
    assert layout is not None
    ports = [p for i in indexes for p in (layout.nodes[i].port, layout.nodes[i].controller_port)]
    for attempt in range(1, _BIND_ATTEMPTS + 1):
        wait_ports_free(ports, f"cluster {name}")
        archives = {}
        for i in indexes:
            archive = BrokerArchive(libs, broker_java())
            archives[_launch(layout.nodes[i].directory, libs, heap, jvm_options, archive.options())] = archive
        cluster = _read(name, workdir)
        assert cluster is not None
        started = [cluster.nodes[i] for i in indexes]
        try:
            _wait_ready(cluster, wait_timeout, None if whole else started)
            for pid, archive in archives.items():
                archive.dump(pid)  # the broker that records its classes (mm2py.dev.brokercds)
            return cluster
        except DevClusterError:
            for archive in archives.values():
                archive.release()
            _terminate(started, timeout=10)
            for node in started:
                (node.directory / "broker.pid").unlink(missing_ok=True)
            # a client connection may take the port between our check and the broker's bind
            if attempt == _BIND_ATTEMPTS or not any("Address already in use" in _tail(node.log, 400)
                                                    for node in started):
                raise
    raise AssertionError("unreachable")


def _node_properties(node: BrokerNode, nodes: Sequence[BrokerNode], listeners: dict[str, str],
                     extra: Mapping[str, object]) -> dict[str, object]:
    """server.properties of one node of a multi-broker cluster."""
    replicas, min_isr = str(min(_MAX_RF, len(nodes))), str(min(_MAX_MIN_ISR, len(nodes)))
    quorum = {
        "node.id": str(node.node_id),
        "controller.quorum.bootstrap.servers": ",".join(f"127.0.0.1:{n.controller_port}" for n in nodes),
        "default.replication.factor": replicas,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
    }
    return _server_properties(node.directory, node.port, node.controller_port, listeners, {**quorum, **extra})


def _brief(output: str) -> str:
    """A failed Java tool's output without the stack frames."""
    return "\n".join([line for line in output.splitlines() if not line.startswith("\tat ")][-15:])


def _storage_format(libs: Path) -> list[str]:
    """The command of Kafka's storage tool's ``format``, before its arguments."""
    return ["java", *_TOOL_JVM, *BrokerArchive(libs, broker_java()).mapping(), "-cp", f"{libs}/*",
            "kafka.tools.StorageTool", "format"]


def _format(name: str, directory: Path, libs: Path) -> None:
    shutil.rmtree(directory / "data", ignore_errors=True)
    fmt = subprocess.run(
        [*_storage_format(libs),
         # "=" form: a base64 id may start with "-", which would read as an option
         f"--cluster-id={_cluster_id()}",
         "-c", str(directory / "server.properties"), "--standalone"],
        capture_output=True, text=True,
    )
    if fmt.returncode != 0:
        raise DevClusterError(f"formatting {name}'s log directory failed:\n" + _brief(fmt.stdout + fmt.stderr))


def _format_quorum(name: str, nodes: Sequence[BrokerNode], libs: Path) -> None:
    """Format every node's log directory: one cluster id, all nodes the initial KRaft voters."""
    cluster_id = _cluster_id()
    # id@host:port:directory-id; each node's metadata log directory takes its id from this list
    voters = ",".join(f"{node.node_id}@127.0.0.1:{node.controller_port}:{_cluster_id()}" for node in nodes)
    procs = []
    for node in nodes:  # in parallel: each is a JVM start
        shutil.rmtree(node.data, ignore_errors=True)
        procs.append((node, subprocess.Popen(
            [*_storage_format(libs), f"--cluster-id={cluster_id}",
             "-c", str(node.directory / "server.properties"), f"--initial-controllers={voters}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)))
    failed = []
    for node, proc in procs:
        output, _ = proc.communicate()
        if proc.returncode != 0:
            failed.append(f"broker {node.index}:\n{_brief(output)}")
    if failed:
        raise DevClusterError(f"formatting {name}'s log directories failed:\n" + "\n".join(failed))


def _launch(directory: Path, libs: Path, heap: str, jvm_options: tuple[str, ...] = (),
            cds: tuple[str, ...] = ()) -> int:
    """Start a node's broker JVM (``cds``: its class-archive options, not kept in jvm.args); its pid."""
    for log in ("broker.log", "stdout.log"):  # a failure report must show this run only; keep one before
        with contextlib.suppress(FileNotFoundError):
            (directory / log).replace(directory / f"{log}.previous")
    # for start_broker, which restarts a node as it was started
    (directory / "jvm.args").write_text("".join(f"{arg}\n" for arg in (f"-Xmx{heap}", *jvm_options)))
    extra = os.environ.get(JVM_OPTIONS_ENV, "").split()
    with open(directory / "stdout.log", "wb") as out:
        proc = subprocess.Popen(
            ["java", f"-Xmx{heap}", *cds, *extra, *jvm_options,
             f"-Dlog4j2.configurationFile={directory / 'log4j2.yaml'}",
             "-cp", f"{libs}/*", "kafka.Kafka", str(directory / "server.properties")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=directory,
            start_new_session=True,  # its own session: ^C or the caller's exit leaves it running
        )
    _children[proc.pid] = proc
    (directory / "broker.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def _jvm_args(directory: Path) -> tuple[str, tuple[str, ...]]:
    """The heap and JVM options a node was last started with (start_cluster's defaults if unknown)."""
    args_file = directory / "jvm.args"
    args = args_file.read_text().splitlines() if args_file.exists() else []
    if not args or not args[0].startswith("-Xmx"):
        return "512m", ()
    return args[0].removeprefix("-Xmx"), tuple(args[1:])


def _cluster_id() -> str:
    # KRaft wants a base64 UUID: 22 characters
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def _terminate(nodes: Sequence[BrokerNode], timeout: float, quorum: Sequence[BrokerNode] = ()) -> None:
    """SIGTERM the nodes' process groups, all at once; SIGKILL those still there after ``timeout`` s.

    ``quorum``: every node of a multi-broker cluster. A broker's controlled shutdown waits (up to
    5 minutes) for the active controller's consent; once fewer than a majority of the quorum's nodes
    run there is no controller to give it, so the nodes left get SIGKILL after a short grace instead.
    """
    live = [node for node in nodes if node.pid is not None]
    for node in live:
        assert node.pid is not None
        _signal_group(node.pid, signal.SIGTERM)
        _signal_group(node.pid, signal.SIGCONT)  # a paused broker acts on SIGTERM only once it runs again
    deadline = time.monotonic() + timeout
    majority = len(quorum) // 2 + 1
    lost_since: float | None = None
    while live:
        live = [node for node in live if not _wait_gone(node, 0.2)]
        now = time.monotonic()
        if not live or now >= deadline:
            break
        if quorum and sum(node.running for node in quorum) < majority:
            lost_since = now if lost_since is None else lost_since
            if now - lost_since >= _NO_QUORUM_GRACE:
                log.info("no KRaft quorum left to consent to a controlled shutdown; killing broker(s) %s",
                         ", ".join(str(node.index) for node in live))
                break
    for node in live:
        assert node.pid is not None
        _signal_group(node.pid, signal.SIGKILL)
    for node in live:
        _wait_gone(node, 10)


def _wait_gone(node: BrokerNode, timeout: float) -> bool:
    assert node.pid is not None
    child = _children.get(node.pid)
    if child is not None:
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        _children.pop(node.pid, None)
        return True
    deadline = time.monotonic() + timeout
    while node.running:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    # the broker leads its own process group (start_new_session), so this reaches all it started
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _require(name: str, workdir: Path | None) -> DevCluster:
    cluster = _read(name, Path(workdir) if workdir is not None else default_workdir())
    if cluster is None:
        raise DevClusterError(f"no dev cluster named {name!r} in {workdir or default_workdir()}")
    return cluster


def stop_cluster(name: str, workdir: Path | None = None, *, keep_data: bool = False, timeout: float = 30) -> bool:
    """Stop cluster ``name`` (SIGTERM, after ``timeout`` s SIGKILL) and delete its data unless ``keep_data``.

    Returns whether it was running (any of its brokers). Its folder (settings, broker.log) stays for
    ``list`` and post-mortems. The brokers of a multi-broker cluster stop together; the last ones,
    left without a controller quorum to consent to their controlled shutdown, get SIGKILL after 5 s.
    """
    cluster = _require(name, workdir)
    was_running = cluster.running
    if was_running:
        _terminate([node for node in cluster.nodes if node.running], timeout, _quorum(cluster))
    for node in cluster.nodes:
        (node.directory / "broker.pid").unlink(missing_ok=True)
        if not keep_data:
            shutil.rmtree(node.data, ignore_errors=True)
    stop_oidc(cluster.directory)  # the OIDC provider of an OAUTHBEARER cluster (dev-cluster up)
    if (cluster.directory / "kdc").is_dir():
        from mm2py.dev.kerberos import stop_kdc

        stop_kdc(cluster.directory / "kdc")
    return was_running


def _quorum(cluster: DevCluster) -> tuple[BrokerNode, ...]:
    return cluster.nodes if cluster.brokers > 1 else ()


def kill_cluster_hard(name: str, workdir: Path | None = None) -> None:
    """SIGKILL every broker's process tree, as a crash would (fault tests); the data stays for a restart."""
    cluster = _require(name, workdir)
    running = [node for node in cluster.nodes if node.running]
    for node in running:
        assert node.pid is not None
        _signal_group(node.pid, signal.SIGKILL)
    for node in running:
        _wait_gone(node, 10)


def _running_node(name: str, index: int, workdir: Path | None) -> BrokerNode:
    cluster = _require(name, workdir)
    node = cluster.node(index)
    if not node.running:
        raise DevClusterError(f"broker {_label(cluster, node)} is not running")
    return node


def stop_broker(name: str, index: int, workdir: Path | None = None, *, timeout: float = 30) -> bool:
    """Stop broker ``index`` (0-based) of cluster ``name`` and wait until it has exited.

    SIGTERM: a controlled shutdown, which hands its partition leaderships to others first; SIGKILL
    after ``timeout`` s. Its data stays for ``start_broker``. Returns whether it was running.
    """
    cluster = _require(name, workdir)
    node = cluster.node(index)
    was_running = node.running
    if was_running:
        _terminate([node], timeout, _quorum(cluster))
    (node.directory / "broker.pid").unlink(missing_ok=True)
    return was_running


def kill_broker(name: str, index: int, workdir: Path | None = None) -> bool:
    """SIGKILL broker ``index`` of cluster ``name``, as a crash would, and wait until it is gone.

    The other brokers notice only when its controller session expires (``broker.session.timeout.ms``).
    Its data stays for ``start_broker``. Returns whether it was running.
    """
    node = _require(name, workdir).node(index)
    if not node.running:
        return False
    assert node.pid is not None
    _signal_group(node.pid, signal.SIGKILL)
    _wait_gone(node, 10)
    return True


def pause_broker(name: str, index: int, workdir: Path | None = None) -> None:
    """SIGSTOP broker ``index`` of cluster ``name``: a frozen JVM (a long GC pause, a stalled VM)."""
    node = _running_node(name, index, workdir)
    assert node.pid is not None
    _signal_group(node.pid, signal.SIGSTOP)


def resume_broker(name: str, index: int, workdir: Path | None = None) -> None:
    """SIGCONT broker ``index`` of cluster ``name`` after ``pause_broker``."""
    node = _running_node(name, index, workdir)
    assert node.pid is not None
    _signal_group(node.pid, signal.SIGCONT)


def start_broker(name: str, index: int, workdir: Path | None = None, *, wait_timeout: float = 90) -> DevCluster:
    """Start broker ``index`` of cluster ``name`` again, on its data, with the JVM settings it last had.

    Returns (the cluster, read afresh) once the node is a live broker again: registered, caught up
    with the metadata, unfenced. A node that runs already is waited for and left alone.
    """
    workdir = Path(workdir) if workdir is not None else default_workdir()
    with _locked(workdir / f".{name}.lock"):
        cluster = _require(name, workdir)
        node = cluster.node(index)
        if node.running:
            _wait_ready(cluster, wait_timeout, [node])
            return cluster
        if not (node.data / "meta.properties").exists():
            raise DevClusterError(f"broker {_label(cluster, node)} has no data to start on; start the whole "
                                  f"cluster (`mm2py dev-cluster up {name}`)")
        heap, jvm_options = _jvm_args(node.directory)
        return _start_nodes(name, workdir, [index], ensure_kafka_jars(), heap, jvm_options, wait_timeout,
                            whole=False)


def partition_leaders(bootstrap: str, topic: str, *, client: Mapping[str, object] | None = None,
                      timeout: float = 30) -> dict[int, int | None]:
    """The node id leading each partition of ``topic`` (None: no leader now).

    Retries for up to ``timeout`` s while brokers come and go; DevClusterError after that.
    """
    admin = _admin(bootstrap, client)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return {p.id: p.leader if p.leader >= 0 else None for p in _partitions(admin, topic, 5)}
        except Exception as e:  # retried; reported on timeout
            if time.monotonic() >= deadline:
                raise DevClusterError(f"cannot describe topic {topic} at {bootstrap} within {timeout:.0f} s: "
                                      f"{e}") from e
        time.sleep(0.5)


def wait_in_sync(bootstrap: str, topic: str, timeout: float = 60, *,
                 client: Mapping[str, object] | None = None) -> None:
    """Return once every partition of ``topic`` has a leader and all its replicas in its ISR.

    DevClusterError after ``timeout`` s, naming the partitions short of replicas. ``client`` adds
    confluent-kafka settings (``cluster.rdkafka_config()`` for a SASL or TLS cluster).
    """
    admin = _admin(bootstrap, client)
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while True:
        try:
            short = [p for p in _partitions(admin, topic, 5) if p.leader < 0 or set(p.isrs) != set(p.replicas)]
            if not short:
                return
            last = "; ".join(f"partition {p.id}: leader {p.leader}, replicas {p.replicas}, isr {p.isrs}"
                             for p in sorted(short, key=lambda p: p.id))
        except Exception as e:  # brokers come and go here; reported on timeout
            last = str(e)
        if time.monotonic() >= deadline:
            raise DevClusterError(f"topic {topic} at {bootstrap} not fully in sync after {timeout:.0f} s: {last}")
        time.sleep(0.5)


def _admin(bootstrap: str, client: Mapping[str, object] | None) -> AdminClient:
    from mm2py.kafka.clientconf import RDKAFKA_LOGGER
    from mm2py.kafka.rdclients import admin_client

    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": RDKAFKA_LOGGER,
                            "socket.connection.setup.timeout.ms": 2000, **(client or {})}
    return admin_client(conf)


def _partitions(admin: AdminClient, topic: str, timeout: float) -> list[PartitionMetadata]:
    # A Metadata request, which any broker answers. (librdkafka sends DescribeTopics to the broker the
    # metadata names as controller: in KRaft a random live one, possibly the one just killed, which
    # it then waits for.)
    topics = admin.list_topics(topic, timeout=timeout).topics
    if topic not in topics or topics[topic].error is not None:
        raise DevClusterError(f"topic {topic}: {topics[topic].error if topic in topics else 'not found'}")
    return list(topics[topic].partitions.values())


def cluster_status(name: str, workdir: Path | None = None) -> DevCluster | None:
    """The cluster named ``name`` (check ``.running`` / ``.state``), or None when there is none."""
    return _read(name, Path(workdir) if workdir is not None else default_workdir())


def list_clusters(workdir: Path | None = None) -> list[DevCluster]:
    workdir = Path(workdir) if workdir is not None else default_workdir()
    if not workdir.is_dir():
        return []
    found = (_read(d.name, workdir) for d in sorted(workdir.iterdir()) if d.is_dir())
    return [c for c in found if c is not None]
