"""Local single-node Apache Kafka clusters (KRaft, combined broker+controller) on loopback.

For the demo, the tests and the benchmark: real brokers from Apache Kafka's jars, fetched
from Maven Central by ``build/kafka/pom.xml`` into ``.cache/`` (git-ignored). Each cluster
lives in ``var/dev-clusters/NAME/`` (``MM2PY_VAR_DIR`` moves ``var/``) and runs detached, so
it outlives the command that started it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mm2py.errors import DevClusterError

KAFKA_VERSION = "4.3.0"
REPO = Path(__file__).resolve().parent.parent

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


def var_dir() -> Path:
    return Path(os.environ.get("MM2PY_VAR_DIR", REPO / "var"))


def libs_dir(version: str = KAFKA_VERSION) -> Path:
    return REPO / ".cache" / f"kafka-{version}" / "libs"


def ensure_kafka_jars(version: str = KAFKA_VERSION) -> Path:
    """Fetch Apache Kafka's jars with Maven unless they are cached already."""
    libs = libs_dir(version)
    stamp = libs / ".fetched"
    if stamp.exists():
        return libs
    pom = REPO / "build" / "kafka" / "pom.xml"
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(pom), "package", f"-Dkafka.version={version}"],
        capture_output=True, text=True,
    )
    if proc.returncode != 0 or not any(libs.glob("kafka_2.13-*.jar")):
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise DevClusterError(f"fetching Kafka {version} jars with Maven failed:\n{tail}")
    stamp.touch()
    return libs


@dataclass(frozen=True)
class Listener:
    """How clients reach the broker: the protocol and, for SASL, the users it knows."""

    protocol: str = "PLAINTEXT"  # PLAINTEXT | SASL_PLAINTEXT | SSL | SASL_SSL
    users: dict[str, str] = field(default_factory=dict)  # SASL/PLAIN username -> password

    def properties(self, port: int) -> dict[str, str]:
        props = {
            "listeners": f"{self.protocol}://127.0.0.1:{port},CONTROLLER://127.0.0.1:{port + 1}",
            "advertised.listeners": f"{self.protocol}://127.0.0.1:{port}",
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{self.protocol}:{self.protocol}",
            "inter.broker.listener.name": self.protocol,
        }
        if self.protocol.startswith("SASL"):
            users = self.users or {"admin": "admin-secret"}
            admin_user, admin_pass = next(iter(users.items()))
            jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{admin_user}" '
                    f'password="{admin_pass}" '
                    + " ".join(f'user_{u}="{p}"' for u, p in users.items()) + ";")
            props.update({
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                f"listener.name.{self.protocol.lower()}.plain.sasl.jaas.config": jaas,
            })
        return props


@dataclass(frozen=True)
class DevCluster:
    name: str
    port: int
    pid: int
    directory: str
    protocol: str = "PLAINTEXT"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return _alive(self.pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child of ours is not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _state_file(directory: Path) -> Path:
    return directory / "cluster.json"


def _read(name: str, workdir: Path) -> DevCluster | None:
    path = _state_file(workdir / name)
    if not path.exists():
        return None
    return DevCluster(**json.loads(path.read_text()))


def _server_properties(directory: Path, port: int, listener: Listener, extra: dict[str, str]) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{port + 1}",
        "controller.listener.names": "CONTROLLER",
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
        "log.cleaner.dedupe.buffer.size": str(16 << 20),
        "auto.create.topics.enable": "false",
    }
    props.update(listener.properties(port))
    props.update(extra)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def _wait_ready(cluster: DevCluster, client: dict[str, str], timeout: float, log: Path) -> None:
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout
    # refused connections are expected until the broker is up: keep librdkafka quiet
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "socket.connection.setup.timeout.ms": 2000,
                         "log_level": 0, **client})
    last = ""
    while time.monotonic() < deadline:
        if not cluster.running:
            raise DevClusterError(f"broker {cluster.name} exited during start-up:\n{_tail(log)}")
        try:
            md = admin.list_topics(timeout=2)
            if md.brokers:
                return
        except Exception as e:  # noqa: BLE001 - not up yet; report the last reason on timeout
            last = str(e)
        time.sleep(0.5)
    raise DevClusterError(f"broker {cluster.name} did not accept requests within {timeout:.0f} s ({last}):\n"
                          f"{_tail(log)}")


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start_cluster(
    name: str,
    port: int,
    *,
    workdir: Path | None = None,
    listener: Listener | None = None,
    extra_properties: dict[str, str] | None = None,
    client_config: dict[str, str] | None = None,
    heap: str = "512m",
    wait_timeout: float = 90,
) -> DevCluster:
    """Start (or find running) cluster ``name``; returns once it accepts requests."""
    workdir = workdir or var_dir() / "dev-clusters"
    listener = listener or Listener()
    existing = _read(name, workdir)
    if existing and existing.running:
        if existing.port != port:
            raise DevClusterError(f"cluster {name} already runs on port {existing.port}, not {port}")
        return existing
    libs = ensure_kafka_jars()
    directory = workdir / name
    if directory.exists():
        subprocess.run(["rm", "-rf", str(directory)], check=True)
    directory.mkdir(parents=True)
    (directory / "server.properties").write_text(
        _server_properties(directory, port, listener, dict(extra_properties or {})))
    log = directory / "broker.log"
    (directory / "log4j2.yaml").write_text(_LOG4J.format(log=log))
    classpath = f"{libs}/*"
    cluster_id = uuid.uuid4().hex[:22]
    fmt = subprocess.run(
        ["java", "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id,
         "-c", str(directory / "server.properties"), "--standalone"],
        capture_output=True, text=True,
    )
    if fmt.returncode != 0:
        raise DevClusterError(f"formatting {name}'s log directory failed:\n{fmt.stdout}{fmt.stderr}")
    with open(directory / "stdout.log", "ab") as out:
        proc = subprocess.Popen(
            ["java", f"-Xmx{heap}", f"-Xms{heap}", "-XX:+UseG1GC",
             f"-Dlog4j2.configurationFile={directory / 'log4j2.yaml'}",
             "-cp", classpath, "kafka.Kafka", str(directory / "server.properties")],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    cluster = DevCluster(name, port, proc.pid, str(directory), listener.protocol)
    _state_file(directory).write_text(json.dumps(asdict(cluster)))
    try:
        _wait_ready(cluster, client_config or {}, wait_timeout, log)
    except DevClusterError:
        stop_cluster(name, workdir=workdir, keep_data=True)
        raise
    return cluster


def stop_cluster(name: str, *, workdir: Path | None = None, keep_data: bool = False, timeout: float = 30) -> bool:
    """Stop cluster ``name`` (SIGTERM, then SIGKILL); False when it was not running."""
    workdir = workdir or var_dir() / "dev-clusters"
    cluster = _read(name, workdir)
    if cluster is None:
        return False
    was_running = cluster.running
    if was_running:
        _signal_group(cluster.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while cluster.running and time.monotonic() < deadline:
            time.sleep(0.2)
        if cluster.running:
            _signal_group(cluster.pid, signal.SIGKILL)
            time.sleep(0.5)
    if not keep_data:
        subprocess.run(["rm", "-rf", cluster.directory], check=False)
    return was_running


def kill_cluster_hard(name: str, *, workdir: Path | None = None) -> None:
    """SIGKILL a cluster's broker, as a crash would (fault tests)."""
    cluster = _read(name, workdir or var_dir() / "dev-clusters")
    if cluster is None:
        raise DevClusterError(f"no cluster named {name}")
    _signal_group(cluster.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def list_clusters(workdir: Path | None = None) -> list[DevCluster]:
    workdir = workdir or var_dir() / "dev-clusters"
    if not workdir.exists():
        return []
    found = (_read(d.name, workdir) for d in sorted(workdir.iterdir()) if d.is_dir())
    return [c for c in found if c is not None]
