"""Dev clusters for real: the shared fixtures, ``mm2py dev-cluster`` end to end, security variants, crashes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from mm2py.dev import cluster as devcluster
from mm2py.errors import DevClusterError
from tests.conftest import TEST_PORTS
from tests.kafkautil import TS0, consume_all, create_topic, end_offsets, list_topics, produce, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lane_layout.py: a long lane, for balance

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def mm2py(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mm2py", *args], capture_output=True, text=True, env=env,
                          timeout=180)


def cluster_id(bootstrap: str, client: dict[str, object] | None = None) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, **(client or {})})
    return admin.describe_cluster().result(30).cluster_id


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphaned broker's exit status may wait for a reaper)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_shared_clusters_round_trip_and_are_independent(cluster_a, cluster_b, unique_name):
    assert cluster_a.bootstrap == f"127.0.0.1:{cluster_a.port}" and cluster_a.name == "test-a"
    sent = [(f"k{i}".encode(), f"v{i}".encode(), [("h", f"{i}".encode()), ("empty", None)], TS0 + i)
            for i in range(100)]
    create_topic(cluster_a.bootstrap, unique_name, 2)
    produce(cluster_a.bootstrap, unique_name, sent[:60], partition=0, compression="zstd")
    produce(cluster_a.bootstrap, unique_name, sent[60:], partition=1)

    got = consume_all(cluster_a.bootstrap, unique_name)
    assert end_offsets(cluster_a.bootstrap, unique_name) == {0: 60, 1: 40}
    assert [r.offset for r in got[0]] == list(range(60))
    as_sent = [(r.key, r.value, list(r.headers), r.timestamp) for p in (0, 1) for r in got[p]]
    assert as_sent == sent

    assert unique_name not in list_topics(cluster_b.bootstrap)
    assert end_offsets(cluster_b.bootstrap, unique_name) == {}
    assert cluster_id(cluster_a.bootstrap) != cluster_id(cluster_b.bootstrap)


def test_dev_cluster_up_list_down(tmp_path):
    env = dict(os.environ, MM2PY_VAR_DIR=str(tmp_path))
    port = TEST_PORTS["cli"]
    bootstrap = f"127.0.0.1:{port}"
    up = mm2py("dev-cluster", "up", "cli-x", "--port", str(port), env=env)
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout == f"{bootstrap}\n"
        # the command has exited; the broker it started lives on and serves requests
        create_topic(bootstrap, "hello", 1)
        assert "hello" in list_topics(bootstrap)

        again = mm2py("dev-cluster", "up", "cli-x", "--port", str(port), env=env)
        assert (again.returncode, again.stdout) == (0, f"{bootstrap}\n"), "up is idempotent"
        moved = mm2py("dev-cluster", "up", "cli-x", "--port", str(port + 10), env=env)
        assert moved.returncode == 1 and f"already runs on port {port}" in moved.stderr

        listing = mm2py("dev-cluster", "list", env=env).stdout.splitlines()
        row = next(line.split() for line in listing if line.startswith("cli-x "))
        pid = int(row[2])
        assert row[1] == bootstrap and row[3] == "running"
        assert "kafka.Kafka" in Path(f"/proc/{pid}/cmdline").read_text()
    finally:
        down = mm2py("dev-cluster", "down", "cli-x", env=env)
    assert (down.returncode, down.stdout) == (0, "cli-x: stopped\n"), down.stderr
    assert not running(pid), "broker still running after down"
    listing = mm2py("dev-cluster", "list", env=env).stdout
    assert "cli-x" in listing and "stopped" in listing
    cluster_dir = tmp_path / "dev-clusters" / "cli-x"
    assert (cluster_dir / "broker.log").exists() and not (cluster_dir / "data").exists()

    unknown = mm2py("dev-cluster", "down", "nope", env=env)
    assert unknown.returncode == 1 and "no dev cluster named 'nope'" in unknown.stderr


def test_hard_kill_then_restart_keeps_the_data(cluster_workdir, unique_name):
    port = TEST_PORTS["crash"]
    cluster = devcluster.start_cluster("crash", port, workdir=cluster_workdir)
    try:
        create_topic(cluster.bootstrap, unique_name, 1)
        produce(cluster.bootstrap, unique_name, [(None, b"survives", None, None)] * 10, partition=0)
        devcluster.kill_cluster_hard("crash", cluster_workdir)
        assert not cluster.running
        status = devcluster.cluster_status("crash", cluster_workdir)
        assert status is not None and status.state == "stopped"

        restarted = devcluster.start_cluster("crash", port, workdir=cluster_workdir)
        assert restarted.pid != cluster.pid and restarted.running
        assert [r.value for r in consume_all(restarted.bootstrap, unique_name)[0]] == [b"survives"] * 10
    finally:
        devcluster.stop_cluster("crash", cluster_workdir)
    assert not (cluster_workdir / "crash" / "data").exists()


def test_port_taken_by_another_cluster_is_refused(cluster_a, cluster_workdir):
    with pytest.raises(DevClusterError, match=rf"port {cluster_a.port}\b.* in use by another server"):
        devcluster.start_cluster("squatter", cluster_a.port, workdir=cluster_workdir, wait_timeout=10)
    assert cluster_a.ping()


def test_sasl_cluster_with_authorizer_enforces_acls(cluster_workdir, unique_name):
    cluster = devcluster.start_cluster(
        "sasl", TEST_PORTS["sasl"], workdir=cluster_workdir, listeners_security="SASL_PLAINTEXT",
        sasl_users={"alice": "alice-secret"}, extra_properties={"authorizer.class.name": STANDARD_AUTHORIZER})
    try:
        admin_conf = cluster.rdkafka_config()  # the admin user, a super user
        create_topic(cluster.bootstrap, unique_name, 1, client=admin_conf)
        alice = {**admin_conf, "sasl.username": "alice", "sasl.password": "alice-secret"}

        def alice_writes() -> str | None:
            """Why alice's write failed, or None when it was acknowledged."""
            producer = Producer({**alice, "message.timeout.ms": 10000})
            outcome: list[str | None] = []
            # str() at once: comparing confluent-kafka's KafkaError with None leaves a stray TypeError behind
            producer.produce(unique_name, b"from alice",
                             on_delivery=lambda err, _msg: outcome.append(None if err is None else str(err)))
            producer.flush(15)
            return outcome[0] if outcome else "no delivery report"

        denied = alice_writes()
        assert denied is not None and "authorization" in denied.lower()
        admin = AdminClient(admin_conf)
        acl = AclBinding(ResourceType.TOPIC, unique_name, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.WRITE, AclPermissionType.ALLOW)
        for future in admin.create_acls([acl]).values():
            future.result(30)
        wait_until(lambda: alice_writes() is None, 30, 1, "alice may write once the ACL exists")
        assert end_offsets(cluster.bootstrap, unique_name, client=admin_conf)[0] >= 1
    finally:
        devcluster.stop_cluster("sasl", cluster_workdir)


def test_ssl_cluster_serves_python_and_java_clients(cluster_workdir, kafka_jars, unique_name):
    cluster = devcluster.start_cluster("ssl", TEST_PORTS["ssl"], workdir=cluster_workdir, listeners_security="SSL")
    try:
        conf = cluster.rdkafka_config()
        create_topic(cluster.bootstrap, unique_name, 1, client=conf)
        produce(cluster.bootstrap, unique_name, [(b"k", b"over tls", None, None)], partition=0, client=conf)
        assert [r.value for r in consume_all(cluster.bootstrap, unique_name, client=conf)[0]] == [b"over tls"]
        # client.properties is what an MM2 file (Java clients) would carry for this cluster
        java = subprocess.run(
            ["java", "-Xmx256m", "-cp", f"{kafka_jars}/*", "org.apache.kafka.tools.TopicCommand",
             "--bootstrap-server", cluster.bootstrap, "--command-config", str(cluster.directory / "client.properties"),
             "--list"], capture_output=True, text=True, timeout=120)
        assert java.returncode == 0, java.stderr[-2000:]
        assert unique_name in java.stdout.split(), java.stdout
    finally:
        devcluster.stop_cluster("ssl", cluster_workdir)
