"""Issue 44 part 4: SASL/OAUTHBEARER with OIDC client credentials (KIP-768) on every client mm2py runs.

Both clusters take only OAUTHBEARER (RS256 JWTs validated against the JWKS of mm2py.dev.oidc)
from clients; tokens live ``LIFETIME_S``. ``connect-mirror-maker`` runs A->B for several token
lifetimes while records arrive in waves, so the raw fetch (A) and produce (B) connections, the
planner's admin clients, the positions, offset syncs, checkpoints and heartbeats all have to
renew their tokens and re-authenticate. Every record must land once, and no authentication
error may appear. A refused client secret stops the start with exit 2 and a line naming the key,
without the secret.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from mm2py.config.model import ClusterConfig
from mm2py.config.oauth import problems
from mm2py.dev import cluster as devcluster
from mm2py.dev.oidc import OidcServer
from mm2py.formats import Heartbeat
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.kafka.oidc_client import jwt_claims
from mm2py.kafka.wire import RawClient
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import REPO, SINGLE_BROKER, Replicator, wait_for
from tests.kafkautil import commit_offsets, consume_all, create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.long]

A_PORT, B_PORT = 32000 + PORT_OFFSET, 32100 + PORT_OFFSET
LIFETIME_S = 20
WAVES, WAVE_GAP_S, PER_WAVE = 9, 15, 200  # ~2.3 minutes of arrivals: 6+ token lifetimes
SECRET = "oauth-test-secret-9f3c"
# what a client that lost its session or its token would say (kafka-python's log, mm2py's errors)
_OIDC: OidcServer | None = None  # the module's provider, for ``dev_token``
AUTH_TROUBLE = re.compile(r"authenticat|SaslAuthentication|re-authentication failed|socket disconnected|"
                          r"Connection lost|OAuth token|no OAUTHBEARER token", re.I)


def jmx_options(port: int) -> tuple[str, ...]:
    """A broker's JMX on 127.0.0.1:``port`` (no authentication: loopback, tests only)."""
    return (f"-Dcom.sun.management.jmxremote.port={port}", f"-Dcom.sun.management.jmxremote.rmi.port={port}",
            "-Dcom.sun.management.jmxremote.authenticate=false", "-Dcom.sun.management.jmxremote.ssl=false",
            "-Dcom.sun.management.jmxremote.host=127.0.0.1", "-Djava.rmi.server.hostname=127.0.0.1")


def socket_totals(jmx_port: int) -> dict[str, float]:
    """The client listener's connection counters, summed over network threads (Kafka's JmxTool)."""
    attributes = ("expired-connections-killed-count", "successful-authentication-total",
                  "successful-reauthentication-total", "failed-authentication-total")
    out = subprocess.run(
        ["java", "-XX:TieredStopAtLevel=1", "-cp", f"{devcluster.libs_dir()}/*", "org.apache.kafka.tools.JmxTool",
         "--one-time", "--report-format", "properties", "--attributes", ",".join(attributes),
         "--object-name", "kafka.server:type=socket-server-metrics,listener=SASL_PLAINTEXT,networkProcessor=*",
         "--jmx-url", f"service:jmx:rmi:///jndi/rmi://127.0.0.1:{jmx_port}/jmxrmi"],
        capture_output=True, text=True, timeout=120)
    totals = dict.fromkeys(attributes, 0.0)
    for name, value in re.findall(r":([\w-]+)=([\d.E]+)$", out.stdout, re.M):
        totals[name] += float(value)
    assert out.returncode == 0 and "time=" in out.stdout, out.stdout + out.stderr
    return totals


@pytest.fixture(scope="module")
def oauth_clusters(cluster_workdir: Path) -> Iterator[tuple[OidcServer, devcluster.DevCluster, devcluster.DevCluster]]:
    global _OIDC
    oidc = _OIDC = OidcServer({"mm2": SECRET}, lifetime_s=LIFETIME_S).start()
    login = devcluster.OAuthLogin(oidc.token_url, oidc.jwks_url, "mm2", SECRET)
    try:
        a = devcluster.start_cluster("oauth-a", A_PORT, workdir=cluster_workdir, listeners_security="SASL_PLAINTEXT",
                                     oauth=login, jvm_options=jmx_options(A_PORT + 5))
        b = devcluster.start_cluster("oauth-b", B_PORT, workdir=cluster_workdir, listeners_security="SASL_PLAINTEXT",
                                     oauth=login, jvm_options=jmx_options(B_PORT + 5))
        yield oidc, a, b
    finally:
        for name in ("oauth-a", "oauth-b"):
            with contextlib.suppress(Exception):
                devcluster.stop_cluster(name, cluster_workdir)
        oidc.stop()


def mm2_file(a: devcluster.DevCluster, b: devcluster.DevCluster, flow_keys: str) -> str:
    lines = ["clusters = A, B", f"A.bootstrap.servers = {a.bootstrap}", f"B.bootstrap.servers = {b.bootstrap}"]
    lines += [f"{alias}.{k} = {v}" for alias, c in (("A", a), ("B", b)) for k, v in c.client_properties.items()]
    return "\n".join(lines) + "\n" + flow_keys + SINGLE_BROKER


def commit(a: devcluster.DevCluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    commit_offsets(a.bootstrap, group, {(topic, p): o for p, o in offsets.items()}, client=a.rdkafka_config())


@pytest.mark.soak  # make test-soak (tests/lane_layout.py: the gate runs its shorter kin)
def test_a_flow_between_oauth_clusters_outlives_many_token_lifetimes(oauth_clusters, unique_name, tmp_path):
    oidc, a, b = oauth_clusters
    topic, group, remote = f"{unique_name}-t", f"{unique_name}-g", f"A.{unique_name}-t"
    src, dst = a.rdkafka_config(), b.rdkafka_config()
    assert "oauth_cb" in src and a.client_properties["sasl.mechanism"] == "OAUTHBEARER"
    create_topic(a.bootstrap, topic, 2, client=src)
    config = tmp_path / "mm2.properties"
    config.write_text(mm2_file(a, b, f"A->B.enabled = true\nA->B.topics = {topic}\nA->B.groups = {group}\n"
                                     "emit.checkpoints.interval.seconds = 5\nemit.heartbeats.interval.seconds = 5\n"
                                     "refresh.groups.interval.seconds = 5\n"))
    log = tmp_path / "replicator.log"
    issued_before = oidc.issued
    sockets_before = [socket_totals(A_PORT + 5), socket_totals(B_PORT + 5)]
    sent: list[tuple[bytes, bytes]] = []
    started = time.time()
    replicator = Replicator(config, log).start()
    try:
        for wave in range(WAVES):
            records = [(b"k%d-%d" % (wave, i), b"v%d-%d" % (wave, i)) for i in range(PER_WAVE)]
            produce(a.bootstrap, topic, [(k, v, None, None) for k, v in records], client=src)
            sent += records
            if wave == WAVES // 2:
                commit(a, group, topic, {0: 10, 1: 20})
            time.sleep(WAVE_GAP_S)
        commit(a, group, topic, {0: 100, 1: 50})

        def landed() -> int:
            try:
                return sum(len(p) for p in consume_all(b.bootstrap, remote, client=dst).values())
            except AssertionError:
                return 0

        wait_for(lambda: landed() >= len(sent), 180, "every record on B", replicator)
        time.sleep(2 * 5 + 5)  # a checkpoint and a heartbeat after the last commit
        seconds = time.time() - started
        assert replicator.alive(), replicator.tail()
    finally:
        code = replicator.stop() if replicator.alive() else replicator.proc.returncode
    text = log.read_text(errors="replace")
    sockets = [{k: v - before[k] for k, v in socket_totals(port).items()}
               for port, before in zip((A_PORT + 5, B_PORT + 5), sockets_before, strict=True)]
    got = [(r.key, r.value) for p in consume_all(b.bootstrap, remote, client=dst).values() for r in p]
    beats = [Heartbeat.from_record(r.key, r.value).timestamp / 1000 for p in consume_all(
        b.bootstrap, "heartbeats", client=dst).values() for r in p]
    checkpoints = consume_all(b.bootstrap, "A.checkpoints.internal", client=dst)
    syncs = consume_all(a.bootstrap, "mm2-offset-syncs.B.internal", client=src)
    lifetimes = seconds / LIFETIME_S
    print(f"oauth: {seconds:.0f} s = {lifetimes:.1f} token lifetimes; {len(got)} of {len(sent)} records on B, "
          f"{oidc.issued - issued_before} tokens issued, {len(beats)} heartbeats, exit {code}; brokers A, B: "
          f"{sockets}")
    assert lifetimes >= 5
    assert sorted(got) == sorted(sent), "every record exactly once, key and value kept"
    assert code == 0, text[-3000:]
    trouble = [line for line in text.splitlines() if AUTH_TROUBLE.search(line)]
    assert not trouble, trouble[:5]
    assert oidc.issued - issued_before >= lifetimes - 1, "tokens were renewed along the way"
    for cluster, counts in zip("AB", sockets, strict=True):
        # no client sent a request on an expired session; every one signed in again in time
        assert counts["expired-connections-killed-count"] == 0, (cluster, counts)
        assert counts["failed-authentication-total"] == 0, (cluster, counts)
        assert counts["successful-authentication-total"] + counts["successful-reauthentication-total"] >= lifetimes
    assert max(beats) > started + 5 * LIFETIME_S, "heartbeats kept coming after five token lifetimes"
    assert any(group.encode() in r.key for p in checkpoints.values() for r in p), "checkpoints written to B"
    assert any(topic.encode() in r.key for p in syncs.values() for r in p), "offset syncs written to A"
    assert SECRET not in text


def dev_token() -> tuple[str, float]:
    """A ``sasl.oauthbearer.token.provider`` callable, as an MSK IAM signer would be: (token, expiry)."""
    assert _OIDC is not None
    token = _OIDC.issue("mm2", "kafka")
    return token, float(jwt_claims(token)["exp"])  # type: ignore[arg-type]


def test_a_python_token_provider_stands_in_for_a_java_login_handler(oauth_clusters):
    _oidc, a, _b = oauth_clusters
    props = {**a.client_properties, "sasl.oauthbearer.token.provider": f"{__name__}:dev_token",
             "sasl.login.callback.handler.class": "software.amazon.msk.auth.iam.IAMClientCallbackHandler",
             "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"}
    del props["sasl.oauthbearer.token.endpoint.url"]
    assert problems(props) == {}
    cluster = ClusterConfig("A", a.bootstrap, consumer=props)
    raw = RawClient(cluster, client_id="provider-test", timeout_ms=30000)  # kafka-python
    try:
        assert raw.init_producer_id()[0] >= 0
    finally:
        raw.close()
    admin = AdminClient(rdkafka_config(a.bootstrap, props, "A", "admin"))  # librdkafka, oauth_cb
    assert admin.list_topics(timeout=30).brokers


def test_a_refused_client_secret_stops_the_start_naming_the_key_without_the_secret(oauth_clusters, unique_name,
                                                                                     tmp_path):
    oidc, a, b = oauth_clusters
    lines = mm2_file(a, b, f"A->B.enabled = true\nA->B.topics = {unique_name}\n").splitlines()
    # only B's secret is wrong
    text = "\n".join(line.replace(f'clientSecret="{SECRET}"', 'clientSecret="not-the-secret-7e1"')
                     if line.startswith("B.sasl.jaas.config") else line for line in lines) + "\n"
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    proc = subprocess.run([sys.executable, "-c", "import sys; from mm2py.cli import connect_mirror_maker_main as m; "
                           "sys.exit(m())", str(config)], capture_output=True, text=True, cwd=REPO, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    problems = [line for line in proc.stderr.splitlines() if "B.sasl.jaas.config" in line]
    assert len(problems) == 1 and "HTTP 401" in problems[0] and "invalid_client" in problems[0], output
    assert "A.sasl.jaas.config" not in output
    assert "not-the-secret-7e1" not in output and SECRET not in output
