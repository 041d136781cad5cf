"""Issue 44: a production MM2 file's TLS runs unchanged: Java stores, mutual TLS, secrets from providers.

Two SSL brokers that require a client certificate (``ssl.client.auth = required``), their key
store PKCS12 and their trust store JKS, made with ``keytool`` for the run. Clients name Java
stores as an MM2 file does: a PKCS12 key store and a JKS trust store with literal passwords,
mirrored A->B by ``connect-mirror-maker`` as an operator runs it; then a JKS key store (its key
password its own) and a PKCS12 trust store whose every password comes through a config
provider (file, directory, environment), mirrored in-process, where Spark's Python workers
convert the stores themselves.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from mm2py.dev import cluster as devcluster
from mm2py.kafka.clientconf import rdkafka_config
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import SINGLE_BROKER, Replicator, mirror_once, wait_for
from tests.kafkautil import TS0, consume_all, create_topic, end_offsets, produce

pytestmark = pytest.mark.integration

# below the kernel's ephemeral range (32768+); each cluster takes port and port + 1
A_PORT, B_PORT = 31440 + PORT_OFFSET, 31540 + PORT_OFFSET
BROKER_PW, CLIENT_PW, TRUST_PW, JKS_STORE_PW, JKS_KEY_PW = ("broker-pw-1", "client-pw-2", "trust-pw-3",
                                                              "jks-store-pw-4", "jks-key-pw-5")
JAVA = "org.apache.kafka.common.config.provider."


def keytool(folder: Path, *args: str) -> None:
    subprocess.run(["keytool", *args, "-noprompt"], cwd=folder, check=True, capture_output=True)


def make_stores(folder: Path) -> None:
    """broker.p12 (127.0.0.1), client.p12 and client.jks (each its own self-signed key), server-trust.jks
    (all three certificates), client-trust.jks and client-trust.p12 (the broker's)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, store_type, store_pw, key_pw, dname, ext in (
            ("broker.p12", "PKCS12", BROKER_PW, BROKER_PW, "CN=127.0.0.1", ["-ext", "SAN=ip:127.0.0.1,dns:localhost"]),
            ("client.p12", "PKCS12", CLIENT_PW, CLIENT_PW, "CN=mm2py-client", []),
            ("client.jks", "JKS", JKS_STORE_PW, JKS_KEY_PW, "CN=mm2py-jks-client", [])):
        keytool(folder, "-genkeypair", "-alias", "me", "-keyalg", "RSA", "-keysize", "2048", "-validity", "30",
                "-dname", dname, *ext, "-storetype", store_type, "-keystore", name, "-storepass", store_pw,
                "-keypass", key_pw)
        keytool(folder, "-exportcert", "-rfc", "-alias", "me", "-keystore", name, "-storepass", store_pw,
                "-file", name + ".pem")
    for store, store_type, certs in (("server-trust.jks", "JKS", ("broker.p12", "client.p12", "client.jks")),
                                     ("client-trust.jks", "JKS", ("broker.p12",)),
                                     ("client-trust.p12", "PKCS12", ("broker.p12",))):
        for cert in certs:
            keytool(folder, "-importcert", "-alias", cert, "-file", cert + ".pem", "-storetype", store_type,
                    "-keystore", store, "-storepass", TRUST_PW)


def client_settings(stores: Path) -> dict[str, str]:
    """Mutual TLS as a Java client is configured: PKCS12 key store, JKS trust store (no type named)."""
    return {"security.protocol": "SSL", "ssl.keystore.location": str(stores / "client.p12"),
            "ssl.keystore.type": "PKCS12", "ssl.keystore.password": CLIENT_PW, "ssl.key.password": CLIENT_PW,
            "ssl.truststore.location": str(stores / "client-trust.jks"), "ssl.truststore.password": TRUST_PW}


@pytest.fixture(scope="module")
def mtls_clusters(cluster_workdir: Path) -> Iterator[tuple[devcluster.DevCluster, devcluster.DevCluster, Path]]:
    stores = cluster_workdir / "java-stores"
    make_stores(stores)
    original = devcluster.listener_properties

    def required_client_auth(*args, **kwargs):
        server, _client = original(*args, **kwargs)
        server.update({"ssl.keystore.location": str(stores / "broker.p12"), "ssl.keystore.type": "PKCS12",
                       "ssl.keystore.password": BROKER_PW, "ssl.key.password": BROKER_PW,
                       "ssl.truststore.location": str(stores / "server-trust.jks"), "ssl.truststore.type": "JKS",
                       "ssl.truststore.password": TRUST_PW, "ssl.client.auth": "required"})
        return server, client_settings(stores)  # the dev tooling's own clients (readiness) use them too

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(devcluster, "listener_properties", required_client_auth)
            a = devcluster.start_cluster("jks-a", A_PORT, workdir=cluster_workdir, listeners_security="SSL")
            b = devcluster.start_cluster("jks-b", B_PORT, workdir=cluster_workdir, listeners_security="SSL")
        yield a, b, stores
    finally:
        for name in ("jks-a", "jks-b"):
            with contextlib.suppress(Exception):
                devcluster.stop_cluster(name, cluster_workdir)


def seed(cluster: devcluster.DevCluster, topic: str, count: int) -> list[tuple[bytes, bytes, list, int]]:
    client = cluster.rdkafka_config()
    create_topic(cluster.bootstrap, topic, 2, client=client)
    records = [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], TS0 + i) for i in range(count)]
    produce(cluster.bootstrap, topic, records, client=client)
    return records


def mirrored(cluster: devcluster.DevCluster, topic: str) -> list[tuple[bytes, bytes, tuple, int]]:
    got = consume_all(cluster.bootstrap, topic, client=cluster.rdkafka_config())
    return sorted((r.key, r.value, r.headers, r.timestamp) for p in got.values() for r in p)


def test_mutual_tls_with_pkcs12_key_store_and_jks_trust_store_through_connect_mirror_maker(
        mtls_clusters, unique_name: str, tmp_path: Path) -> None:
    a, b, stores = mtls_clusters
    # the brokers do require a certificate: a client with the trust store alone is turned away
    anonymous = {k: v for k, v in client_settings(stores).items() if not k.startswith(("ssl.keystore", "ssl.key."))}
    admin = AdminClient({**rdkafka_config(a.bootstrap, anonymous, "A"), "socket.connection.setup.timeout.ms": 3000})
    with pytest.raises(Exception):  # noqa: B017 - librdkafka's KafkaException of a failed handshake
        admin.list_topics(timeout=5)

    topic = f"{unique_name}-t"
    records = seed(a, topic, 300)
    lines = ["clusters = A, B", f"A.bootstrap.servers = {a.bootstrap}", f"B.bootstrap.servers = {b.bootstrap}",
             *(f"{alias}.{k} = {v}" for alias in ("A", "B") for k, v in client_settings(stores).items()),
             "A->B.enabled = true", f"A->B.topics = {topic}", "B->A.enabled = false"]
    config = tmp_path / "mm2.properties"
    config.write_text("\n".join(lines) + "\n" + SINGLE_BROKER)
    remote = f"A.{topic}"
    replicator = Replicator(config, tmp_path / "replicator.log").start()
    try:
        def landed() -> int:
            try:
                return sum(end_offsets(b.bootstrap, remote, client=b.rdkafka_config()).values())
            except Exception:  # not created yet
                return 0

        wait_for(lambda: landed() >= len(records), 240, f"{len(records)} records in {remote}", replicator)
    finally:
        replicator.stop()
    assert mirrored(b, remote) == sorted((k, v, tuple(h), ts) for k, v, h, ts in records), "every record, once"


def test_every_secret_through_providers_with_a_jks_key_store(
        mtls_clusters, spark, unique_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, stores = mtls_clusters
    topic = f"{unique_name}-t"
    records = seed(a, topic, 200)
    secrets = tmp_path / "secrets"
    (secrets / "run").mkdir(parents=True)
    (secrets / "kafka.properties").write_text(f"keystore.password = {JKS_STORE_PW}\n")
    (secrets / "run" / "truststore.password").write_text(TRUST_PW + "\n")  # a mounted secret, newline and all
    monkeypatch.setenv("MM2PY_TEST_KEY_PASSWORD", JKS_KEY_PW)
    clients = {"security.protocol": "SSL",
               "ssl.keystore.location": str(stores / "client.jks"),
               "ssl.keystore.password": f"${{file:{secrets}/kafka.properties:keystore.password}}",
               "ssl.key.password": "${env:MM2PY_TEST_KEY_PASSWORD}",
               "ssl.truststore.location": str(stores / "client-trust.p12"),
               "ssl.truststore.type": "PKCS12",
               "ssl.truststore.password": f"${{dir:{secrets}/run:truststore.password}}"}
    text = "\n".join([
        "config.providers = file, dir, env",
        f"config.providers.file.class = {JAVA}FileConfigProvider",
        f"config.providers.file.param.allowed.paths = {secrets}",
        f"config.providers.dir.class = {JAVA}DirectoryConfigProvider",
        f"config.providers.dir.param.allowed.paths = {secrets}/run",
        f"config.providers.env.class = {JAVA}EnvVarConfigProvider",
        "config.providers.env.param.allowlist.pattern = MM2PY_TEST_.*",
        "clusters = A, B", f"A.bootstrap.servers = {a.bootstrap}", f"B.bootstrap.servers = {b.bootstrap}",
        *(f"{alias}.{k} = {v}" for alias in ("A", "B") for k, v in clients.items()),
        "A->B.enabled = true", f"A->B.topics = {topic}",
    ]) + "\n" + SINGLE_BROKER
    assert JKS_STORE_PW not in text and TRUST_PW not in text and JKS_KEY_PW not in text
    mirror_once(spark, text, tmp_path)
    assert mirrored(b, f"A.{topic}") == sorted((k, v, tuple(h), ts) for k, v, h, ts in records)
    # Spark's Python workers read the stores too, and leave no key material behind (mm2py.kafka.tls)
    assert not list(Path(tempfile.gettempdir()).glob("mm2py-tls-*"))
