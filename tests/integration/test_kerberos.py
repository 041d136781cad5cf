"""Issue 44 part 3: Kerberos (GSSAPI) on mm2py's clients, against a real KDC and a Kerberos-only broker.

The fixture starts a throw-away MIT KDC (its own realm, config and database under the cluster's
folder, never /etc/krb5.conf) and a broker whose client listener takes GSSAPI only
(``mm2py.dev.kerberos``). Clients log in as ``mm2@MM2PY.TEST`` from a keytab, as an MM2 file
writes it (``sasl.jaas.config`` with Krb5LoginModule).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

from mm2py.config import load_text
from mm2py.dev import cluster as devcluster
from mm2py.dev import kerberos
from mm2py.kafka import krb5login
from mm2py.kafka.clientconf import kafka_python_config
from mm2py.kafka.wire import RawClient
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import REPO, SINGLE_BROKER, Replicator, wait_for
from tests.kafkautil import consume_all, list_topics

# every test here needs python-gssapi (kafka-python's GSSAPI), which only .venv-krb installs, and the
# connect-mirror-maker one a librdkafka with GSSAPI: all run in the krb lane (tests/lanes.py)
pytestmark = [pytest.mark.integration, pytest.mark.krb_clients]

KRB_PORT = 32700 + PORT_OFFSET  # controller on +1, the KDC on +2
_ENV = ("KRB5_CONFIG", "KRB5CCNAME", "KRB5_CLIENT_KTNAME", krb5login.LOGIN_ENV)


@pytest.fixture(scope="module")
def krb_cluster(cluster_workdir: Path) -> Iterator[devcluster.DevCluster]:
    saved = {name: os.environ.get(name) for name in _ENV}
    try:
        yield devcluster.start_cluster("krb-a", KRB_PORT, workdir=cluster_workdir, listeners_security="SASL_PLAINTEXT",
                                       sasl_mechanism="GSSAPI", kdc_port=KRB_PORT + 2)
    finally:
        with contextlib.suppress(Exception):
            devcluster.stop_cluster("krb-a", cluster_workdir)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def kdc_of(cluster: devcluster.DevCluster) -> kerberos.Kdc:
    return kerberos.Kdc(cluster.directory / "kdc", KRB_PORT + 2)


def kp_conf(cluster: devcluster.DevCluster) -> dict[str, object]:
    return kafka_python_config(cluster.bootstrap, cluster.client_properties, cluster.name)


def kp_produce(cluster: devcluster.DevCluster, topic: str, partitions: int, count: int) -> list[tuple[int, bytes]]:
    """Create ``topic`` and write ``count`` records round-robin with kafka-python over GSSAPI; (partition, value)."""
    admin = KafkaAdminClient(**kp_conf(cluster))
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**kp_conf(cluster), acks="all")
    sent = [(i % partitions, b"v%d" % i) for i in range(count)]
    for partition, value in sent:
        producer.send(topic, value=value, key=b"k" + value, partition=partition)
    producer.flush(60)
    producer.close()
    return sent


def kp_read(cluster: devcluster.DevCluster, topic: str, partitions: int) -> dict[int, list[tuple[bytes, bytes]]]:
    """Every record (key, value) of ``topic`` by partition, in order, read with kafka-python over GSSAPI."""
    consumer = KafkaConsumer(**kp_conf(cluster), enable_auto_commit=False)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    got: dict[int, list[tuple[bytes, bytes]]] = {p: [] for p in range(partitions)}
    for _ in range(60):
        if all(consumer.position(tp) >= ends[tp] for tp in tps):
            break
        for tp, records in consumer.poll(timeout_ms=1000).items():
            got[tp.partition] += [(r.key, r.value) for r in records]
    consumer.close()
    return got


def test_the_copy_paths_raw_client_fetches_from_a_kerberos_only_broker(krb_cluster, unique_name):
    topic = f"{unique_name}-t"
    sent = kp_produce(krb_cluster, topic, 2, 60)
    clusters = load_text(f"clusters = A\nA.bootstrap.servers = {krb_cluster.bootstrap}\n" + "".join(
        f"A.{k} = {v}\n" for k, v in krb_cluster.client_properties.items())).clusters
    client = RawClient(clusters["A"], client_id="kerberos-test")
    try:
        ends = client.list_offsets([(topic, 0), (topic, 1)])
        assert ends == {(topic, 0): 30, (topic, 1): 30}
        node = client.leaders({topic})[(topic, 0)]
        fetched = client.fetched(client.wait(client.fetch(node, {(topic, 0): 0}, partition_max_bytes=1 << 20,
                                                          max_bytes=1 << 20, max_wait_ms=10)))
        assert fetched[(topic, 0)].error_code == 0 and len(bytes(fetched[(topic, 0)].records)) > 0
    finally:
        client.close()
    assert kp_read(krb_cluster, topic, 2) == {p: [(b"k" + v, v) for q, v in sent if q == p] for p in (0, 1)}


EXECUTOR_SCRIPT = """
import sys
from mm2py.config import load_text
from mm2py.engine.driver import build_session
from mm2py.kafka.wire import RawClient

cluster = load_text(open(sys.argv[1]).read()).clusters["A"]
topic = sys.argv[2]

def ends(_):
    client = RawClient(cluster, client_id="kerberos-executor-test")
    try:
        yield sorted(client.list_offsets([(topic, 0), (topic, 1)]).items())
    finally:
        client.close()

spark = build_session("local[1]", {}, app_name="kerberos-executor-test")
print(spark.sparkContext.parallelize([0], 1).mapPartitions(ends).collect())
spark.stop()
"""


def test_spark_executors_log_in_from_the_keytab(krb_cluster, unique_name, tmp_path):
    """The raw client in a Spark task: a Python worker that makes its own ticket cache from the keytab."""
    topic = f"{unique_name}-t"
    kp_produce(krb_cluster, topic, 2, 10)
    config = tmp_path / "a.properties"
    config.write_text(f"clusters = A\nA.bootstrap.servers = {krb_cluster.bootstrap}\n" + "".join(
        f"A.{k} = {v}\n" for k, v in krb_cluster.client_properties.items()))
    env = {k: v for k, v in os.environ.items() if k not in _ENV[1:]}  # KRB5_CONFIG only, as an operator sets it
    done = subprocess.run([sys.executable, "-c", EXECUTOR_SCRIPT, str(config), topic], capture_output=True,
                          text=True, timeout=300, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"[[(('{topic}', 0), 5), (('{topic}', 1), 5)]]" in done.stdout, done.stdout


def mm2_file(krb_cluster: devcluster.DevCluster, target: devcluster.DevCluster, topic: str, **override: str) -> str:
    props = {**krb_cluster.client_properties, **override}
    lines = ["clusters = A, B", f"A.bootstrap.servers = {krb_cluster.bootstrap}",
             f"B.bootstrap.servers = {target.bootstrap}", "A->B.enabled = true", f"A->B.topics = {topic}",
             "emit.heartbeats.interval.seconds = 1", "sync.topic.configs.enabled = false"]
    return "\n".join(lines + [f"A.{k} = {v}" for k, v in props.items()]) + "\n" + SINGLE_BROKER


def test_a_kerberos_only_source_mirrors_through_connect_mirror_maker(krb_cluster, cluster_b, unique_name, tmp_path):
    topic = f"{unique_name}-t"
    sent = kp_produce(krb_cluster, topic, 2, 200)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_file(krb_cluster, cluster_b, topic))
    replicator = Replicator(config, tmp_path / "replicator.log").start()
    try:
        want = {p: [v for q, v in sent if q == p] for p in (0, 1)}

        def on_b(name: str) -> dict[int, list]:  # {} until the replicator has made the topic
            present = name in list_topics(cluster_b.bootstrap)
            return consume_all(cluster_b.bootstrap, name, timeout=10) if present else {}

        def landed() -> bool:
            got = on_b(f"A.{topic}")
            return {p: [r.value for r in got.get(p, [])] for p in (0, 1)} == want

        def synced() -> bool:
            admin = KafkaAdminClient(**kp_conf(krb_cluster))
            try:
                if "mm2-offset-syncs.B.internal" not in admin.list_topics():
                    return False
            finally:
                admin.close()
            return any(topic.encode() in key for key, _ in kp_read(krb_cluster, "mm2-offset-syncs.B.internal", 1)[0])

        wait_for(landed, 300, "every record on B, in order per partition", replicator)
        wait_for(lambda: any(r.key and topic.encode() in r.key for p in on_b("mm2-offsets.A.internal").values()
                             for r in p), 180, "positions on B", replicator)
        wait_for(synced, 180, "offset syncs on the Kerberos source (its producer logs in with Kerberos too)",
                 replicator)
        wait_for(lambda: sum(map(len, on_b("heartbeats").values())) > 0, 180, "heartbeats on B", replicator)
    finally:
        assert replicator.stop() == 0, replicator.tail()


def run_refused(config: Path, timeout: float = 120, **env_vars: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", "import sys; from mm2py.cli import connect_mirror_maker_main as m; sys.exit(m())",
           str(config)]
    env = {k: v for k, v in os.environ.items() if k not in _ENV[1:]}  # its own ticket cache, as a new process
    env.update(env_vars)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)


def _jaas(keytab: Path | str, principal: str) -> str:
    return (f'com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true '
            f'keyTab="{keytab}" principal="{principal}";')


def test_login_failures_are_one_named_error_at_start(krb_cluster, cluster_b, unique_name, tmp_path):
    kdc = kdc_of(krb_cluster)
    # a principal the KDC no longer knows, though its keytab holds it
    gone = kerberos.add_principal(kdc, f"gone-{unique_name[-8:]}", tmp_path / "gone.keytab")
    subprocess.run(["kadmin.local", "-r", kdc.realm, "-q", f"delprinc -force gone-{unique_name[-8:]}@{kdc.realm}"],
                   env={**os.environ, **kdc.env}, check=True, capture_output=True)
    # a realm whose KDC address nobody serves (a port of ours that nothing listens on)
    silent = tmp_path / "silent-krb5.conf"
    silent.write_text(kdc.krb5_conf.read_text().replace(f"127.0.0.1:{kdc.port}", f"127.0.0.1:{KRB_PORT + 3}"))
    mm2 = _jaas(kdc.keytab("mm2"), f"mm2@{kdc.realm}")
    cases = {
        "wrong principal": (_jaas(kdc.keytab("mm2"), f"nobody@{kdc.realm}"), "holds no key of nobody@", {}),
        "missing keytab": (_jaas(tmp_path / "absent.keytab", f"mm2@{kdc.realm}"), "absent.keytab does not exist", {}),
        "KDC refuses": (_jaas(gone, f"gone-{unique_name[-8:]}@{kdc.realm}"), "not found in Kerberos database", {}),
        "no KDC": (mm2, "Cannot contact any KDC", {"KRB5_CONFIG": str(silent)}),
    }
    for case, (jaas, why, env) in cases.items():
        config = tmp_path / f"{case.replace(' ', '-')}.properties"
        config.write_text(mm2_file(krb_cluster, cluster_b, unique_name, **{"sasl.jaas.config": jaas}))
        done = run_refused(config, **env)
        assert done.returncode == 2, (case, done.stdout, done.stderr)
        problem = [line for line in done.stderr.splitlines() if "key '" in line]
        assert len(problem) == 1 and "key 'A.sasl.jaas.config'" in problem[0] and why in problem[0], (
            case, done.stderr)
