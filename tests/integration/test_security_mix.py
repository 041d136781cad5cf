"""Issue 44: one MM2 file, three ways to sign in, and no secret of it in anything a run shows.

A takes OAUTHBEARER tokens over TLS (SASL_SSL; RS256 tokens of mm2py.dev.oidc), B requires a
client certificate (SSL, ``ssl.client.auth = required``; a PKCS12 key store and a JKS trust
store), C takes Kerberos only (SASL_PLAINTEXT, GSSAPI; a KDC of its own, mm2py.dev.kerberos).
Flows A->B (at-least-once) and B->C (exactly-once) run in ``connect-mirror-maker`` at debug
level, with Spark's event log and the metrics endpoint on, while records are written to A (a
second half once the first has reached C). Every secret comes through a provider: the OAuth
client secret and B's key store password from the file provider, B's key password from the
directory provider, its trust store password from the environment provider, C's keytab path
from the file provider and its principal from the environment, inside its Krb5LoginModule JAAS
line. Every record must reach B (at least once, in plain writes) and C (exactly once, in
transactions); heartbeats reach B and C; ``mm2py status --json`` shows both flows running and
caught up, ``verify --json`` finds every partition of both flows equal, and ``failover
--execute`` commits on B the offsets the checkpoints and the records give; a wrong principal
for the keytab is one error naming C's key; and no secret (nor the HTTP Basic form of the OAuth
one) appears in the run's log, the event log, ``/metrics``, those commands' output, or the
refused login's. Marked ``krb_clients``: C's librdkafka clients need ``.venv-krb``
(tests/lanes.py), and on its confluent-kafka (2.12) A's OAuth clients get their tokens only from
a poll (mm2py.kafka.rdclients).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm2py.dev import cluster as devcluster
from mm2py.dev import kerberos
from mm2py.dev.oidc import OidcServer
from mm2py.formats import Checkpoint
from mm2py.kafka import krb5login
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import SINGLE_BROKER, Replicator, wait_for
from tests.integration.security_helpers import committed_on, count, event_log, leaks, mm2py
from tests.kafkautil import TS0, commit_offsets, consume_all, create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.krb_clients]

# below the kernel's ephemeral range; each cluster takes port and port + 1, C's KDC C_PORT + 2
A_PORT, B_PORT, C_PORT, METRICS_PORT = (p + PORT_OFFSET for p in (31240, 31250, 31260, 31270))
JAVA = "org.apache.kafka.common.config.provider."
# made per run, so no other text can hold them by chance
OAUTH_SECRET = "oauth-" + secrets.token_hex(12)
TRUST_PW = "trust-" + secrets.token_hex(12)
RECORDS = 300
# what kerberize and the Kerberos logins set in this process, put back when the module ends
_KRB_ENV = ("KRB5_CONFIG", "KRB5CCNAME", "KRB5_CLIENT_KTNAME", krb5login.LOGIN_ENV)


@pytest.fixture(scope="module")
def clusters(cluster_workdir: Path) -> Iterator[dict[str, devcluster.DevCluster]]:
    oidc = OidcServer({"mm2": OAUTH_SECRET}, lifetime_s=60).start()
    login = devcluster.OAuthLogin(oidc.token_url, oidc.jwks_url, "mm2", OAUTH_SECRET)
    saved = {name: os.environ.get(name) for name in _KRB_ENV}
    try:
        yield {
            "A": devcluster.start_cluster("mix-a", A_PORT, workdir=cluster_workdir, listeners_security="SASL_SSL",
                                          oauth=login),
            "B": devcluster.start_cluster("mix-b", B_PORT, workdir=cluster_workdir, listeners_security="SSL",
                                          client_auth=True),
            "C": devcluster.start_cluster("mix-c", C_PORT, workdir=cluster_workdir,
                                          listeners_security="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                                          kdc_port=C_PORT + 2),
        }
    finally:
        for name in ("mix-a", "mix-b", "mix-c"):
            with contextlib.suppress(Exception):
                devcluster.stop_cluster(name, cluster_workdir)
        oidc.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def mm2_file(c: dict[str, devcluster.DevCluster], folder: Path, topic: str, group: str) -> str:
    """The MM2 file: every secret by a provider (A's client secret, B's passwords, C's keytab and principal)."""
    b = c["B"].client_properties
    secret_dir = folder / "secrets"
    (secret_dir / "run").mkdir(parents=True, exist_ok=True)
    (secret_dir / "a.properties").write_text(f"client.secret = {OAUTH_SECRET}\n")
    (secret_dir / "b.properties").write_text(f"keystore.password = {b['ssl.keystore.password']}\n")
    (secret_dir / "run" / "key.password").write_text(b["ssl.key.password"] + "\n")  # a mounted secret
    kdc = kerberos.Kdc(c["C"].directory / "kdc", C_PORT + 2)
    (secret_dir / "c.properties").write_text(f"keytab = {kdc.keytab(kerberos.CLIENT_PRINCIPAL)}\n")
    trust = folder / "b-trust.jks"
    if not trust.exists():  # a JKS trust store holding B's certificate, as a Java client is given it
        subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "b", "-file", b["ssl.truststore.location"],
                        "-keystore", str(trust), "-storepass", TRUST_PW], check=True, capture_output=True)
    a = {k: v for k, v in c["A"].client_properties.items() if k != "sasl.jaas.config"}
    lines = [
        "config.providers = file, dir, env",
        f"config.providers.file.class = {JAVA}FileConfigProvider",
        f"config.providers.file.param.allowed.paths = {secret_dir}",
        f"config.providers.dir.class = {JAVA}DirectoryConfigProvider",
        f"config.providers.dir.param.allowed.paths = {secret_dir}/run",
        f"config.providers.env.class = {JAVA}EnvVarConfigProvider",
        "config.providers.env.param.allowlist.pattern = MM2PY_TEST_.*",
        "clusters = A, B, C",
        *(f"{alias}.bootstrap.servers = {cluster.bootstrap}" for alias, cluster in c.items()),
        *(f"A.{k} = {v}" for k, v in a.items()),
        "A.sasl.jaas.config = org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        f'clientId="mm2" clientSecret="${{file:{secret_dir}/a.properties:client.secret}}" scope="kafka";',
        "B.security.protocol = SSL",
        f"B.ssl.keystore.location = {b['ssl.keystore.location']}",
        "B.ssl.keystore.type = PKCS12",
        f"B.ssl.keystore.password = ${{file:{secret_dir}/b.properties:keystore.password}}",
        f"B.ssl.key.password = ${{dir:{secret_dir}/run:key.password}}",
        f"B.ssl.truststore.location = {trust}",  # no type: JKS, as for Java
        "B.ssl.truststore.password = ${env:MM2PY_TEST_TRUST_PW}",
        "C.security.protocol = SASL_PLAINTEXT",
        "C.sasl.mechanism = GSSAPI",
        f"C.sasl.kerberos.service.name = {kerberos.SERVICE}",
        "C.sasl.jaas.config = com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        f'keyTab="${{file:{secret_dir}/c.properties:keytab}}" principal="${{env:MM2PY_TEST_C_PRINCIPAL}}";',
        f"A->B.enabled = true\nA->B.topics = {topic}\nA->B.groups = {group}",
        f"B->C.enabled = true\nB->C.topics = A.{topic}",
        "C.exactly.once.source.support = enabled",
        "emit.checkpoints.interval.seconds = 5\nemit.heartbeats.interval.seconds = 5",
        "refresh.groups.interval.seconds = 5",
        f"metrics.port = {METRICS_PORT}\nmetrics.bind.address = 127.0.0.1",
        "spark.eventLog.enabled = true", f"spark.eventLog.dir = file://{folder / 'events'}",
    ]
    (folder / "events").mkdir(exist_ok=True)
    return "\n".join(lines) + "\n" + SINGLE_BROKER


def secret_forms() -> dict[str, str]:
    """Every secret of the file, and the HTTP Basic form the OAuth secret travels in."""
    basic = base64.b64encode(f"mm2:{OAUTH_SECRET}".encode()).decode()
    return {"OAuth client secret": OAUTH_SECRET, "its Basic header": basic, "trust store password": TRUST_PW,
            "a private key": "PRIVATE KEY-----"}


def checkpoints(b: devcluster.DevCluster, group: str) -> dict[tuple[str, int], int]:
    """The newest checkpoint of ``group`` on B, per (remote topic, partition): its downstream offset."""
    got = consume_all(b.bootstrap, "A.checkpoints.internal", client=b.rdkafka_config())
    found = sorted(((r.timestamp, r.offset), Checkpoint.from_record(r.key, r.value)) for p in got.values() for r in p)
    return {cp.topic_partition: cp.downstream_offset for _, cp in found if cp.consumer_group_id == group}


def translated(a: devcluster.DevCluster, b: devcluster.DevCluster, topic: str,
               committed: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Each committed A offset's record found by value in B's remote topic: its B offset."""
    on_a = consume_all(a.bootstrap, topic, client=a.rdkafka_config())
    on_b = {p: {r.value: r.offset for r in rs} for p, rs in
            consume_all(b.bootstrap, f"A.{topic}", client=b.rdkafka_config()).items()}
    at = {p: {r.offset: r.value for r in rs} for p, rs in on_a.items()}
    return {(f"A.{t}", p): on_b[p][at[p][offset]] for (t, p), offset in committed.items()}


def test_three_mechanisms_in_one_file_and_no_secret_in_any_output(
        clusters, unique_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = clusters["A"], clusters["B"], clusters["C"]
    monkeypatch.setenv("MM2PY_TEST_TRUST_PW", TRUST_PW)  # inherited by every command below
    monkeypatch.setenv("MM2PY_TEST_C_PRINCIPAL", f"{kerberos.CLIENT_PRINCIPAL}@{kerberos.REALM}")
    extra = {"B's store password": b.client_properties["ssl.keystore.password"]}
    topic, group = f"{unique_name}-t", f"{unique_name}-g"
    text = mm2_file(clusters, tmp_path, topic, group)
    assert all(v not in text for v in (OAUTH_SECRET, TRUST_PW, *extra.values())), "those come through providers"
    assert ".keytab" not in text and f"@{kerberos.REALM}" not in text, "C's keytab and principal come by provider"
    config = tmp_path / "mm2.properties"
    config.write_text(text)

    create_topic(a.bootstrap, topic, 2, client=a.rdkafka_config())
    records = [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], TS0 + i) for i in range(RECORDS)]
    half = RECORDS // 2
    produce(a.bootstrap, topic, records[:half], client=a.rdkafka_config())
    committed = {(topic, 0): 40, (topic, 1): 30}
    commit_offsets(a.bootstrap, group, committed, client=a.rdkafka_config())
    log = tmp_path / "replicator.log"
    replicator = Replicator(config, log, "--log-level", "debug", "--checkpoint-dir", str(tmp_path / "ckpt")).start()
    outputs: dict[str, str] = {}
    final = f"B.A.{topic}"
    try:
        wait_for(lambda: count(c, final, "read_committed") >= half, 420, f"{half} records in {final} on C",
                 replicator)
        produce(a.bootstrap, topic, records[half:], client=a.rdkafka_config())  # while both flows run
        wait_for(lambda: count(c, final, "read_committed") >= RECORDS, 300, f"{RECORDS} records in {final} on C",
                 replicator)
        want = translated(a, b, topic, committed)
        wait_for(lambda: checkpoints(b, group) == want, 120,
                 f"checkpoints of the group on B equal to the translation the records give ({want})", replicator)
        wait_for(lambda: count(b, "heartbeats") > 0 and count(c, "heartbeats") > 0, 120, "heartbeats on B and C",
                 replicator)
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=30) as answer:
            outputs["/metrics"] = answer.read().decode()
        status = mm2py("status", "--json", str(config))
        outputs["status --json"] = status.stdout + status.stderr
        assert status.returncode == 0, outputs["status --json"]
        assert replicator.alive(), replicator.tail()
        flows = {f["flow"]: f for f in json.loads(status.stdout)}
        assert sorted(flows) == ["A->B", "B->C"], outputs["status --json"]
        for name, flow in flows.items():
            assert flow["error"] is None and flow["replicator_state"] == "running", (name, flow)
            assert flow["last_heartbeat_age_s"] is not None, (name, flow)
            data = [t for t in flow["topics"] if t["topic"] == {"A->B": topic, "B->C": f"A.{topic}"}[name]]
            assert len(data) == 1 and data[0]["lag_records"] == 0, (name, flow)  # heartbeats keep coming
        assert flows["A->B"]["last_checkpoint_age_s"] is not None, flows["A->B"]
    finally:
        code = replicator.stop()
    assert code == 0, replicator.tail()
    sent = sorted((k, v, tuple(h), ts) for k, v, h, ts in records)
    on_b = consume_all(b.bootstrap, f"A.{topic}", client=b.rdkafka_config())
    assert sorted({(r.key, r.value, r.headers, r.timestamp) for p in on_b.values() for r in p}) == sent, (
        "every record on B at least once, every field kept")
    assert all([r.offset for r in p] == list(range(len(p))) for p in on_b.values()), "A->B writes no transactions"
    got = consume_all(c.bootstrap, final, isolation="read_committed", client=c.rdkafka_config())
    assert sorted((r.key, r.value, r.headers, r.timestamp) for p in got.values() for r in p) == sent, (
        "every record on C once, every field kept")
    assert any([r.offset for r in p] != list(range(len(p))) for p in got.values()), (
        "B->C writes in transactions: their commit markers take offsets on C")
    assert "mm2_" in outputs["/metrics"] or "kafka_connect" in outputs["/metrics"], outputs["/metrics"][:500]

    verify = mm2py("verify", "--json", str(config), timeout=600)
    outputs["verify"] = verify.stdout + verify.stderr
    assert verify.returncode == 0, outputs["verify"]
    audited = json.loads(verify.stdout)
    assert {(v["flow"], v["topic"]) for v in audited} >= {("A->B", topic), ("B->C", f"A.{topic}")}, audited
    for flow in ("A->B", "B->C"):
        checks = [v for v in audited if v["flow"] == flow and v["topic"].endswith(topic)]
        assert all(v["ok"] for v in checks) and sum(v["target"]["count"] for v in checks) == RECORDS, checks
    failover = mm2py("failover", str(config), "--group", group, "--from", "A", "--to", "B")
    outputs["failover"] = failover.stdout + failover.stderr
    assert failover.returncode == 0 and "dry run" in failover.stdout, outputs["failover"]
    assert f"A.{topic}" in failover.stdout, outputs["failover"]
    assert committed_on(b, group, list(want)) == {}, "the group has no offsets on B before the failover"
    executed = mm2py("failover", str(config), "--group", group, "--from", "A", "--to", "B", "--execute")
    outputs["failover --execute"] = executed.stdout + executed.stderr
    assert executed.returncode == 0 and f"committed {len(want)} offsets" in executed.stdout, outputs[
        "failover --execute"]
    assert committed_on(b, group, list(want)) == want, "the group resumes on B where the checkpoints say"

    # a refused Kerberos login: a principal C's keytab holds no key of; one error naming C's key
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(text.replace("${env:MM2PY_TEST_C_PRINCIPAL}", f"nobody@{kerberos.REALM}"))
    refused = mm2py("run", "--log-level", "debug", "--once", str(wrong), "--clusters", "C")
    outputs["run with a refused login"] = refused.stdout + refused.stderr
    problem = [line for line in refused.stderr.splitlines() if "key '" in line]
    assert refused.returncode == 2 and len(problem) == 1, outputs["run with a refused login"][-3000:]
    assert "key 'C.sasl.jaas.config'" in problem[0] and f"holds no key of nobody@{kerberos.REALM}" in problem[0], (
        problem)

    outputs["replicator log (debug)"] = log.read_text(errors="replace")
    outputs["Spark event log"] = event_log(tmp_path / "events")
    assert "SparkListenerJobStart" in outputs["Spark event log"], "Spark wrote an event log of the jobs"
    for i, (where, out) in enumerate(outputs.items()):  # kept for a look after a failure
        (tmp_path / f"output-{i}.txt").write_text(f"{where}\n{out}")
    print("verify:", [(v["flow"], v["topic"], v["partition"], v["target"]["count"]) for v in audited],
          "\nfailover:", executed.stdout.strip())
    print("refused login:", problem[0], "\ncharacters read:", {where: len(out) for where, out in outputs.items()})
    found = [leak for where, out in outputs.items() for leak in leaks(where, out, {**secret_forms(), **extra})]
    assert not found, found
