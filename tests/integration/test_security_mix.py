"""Issue 44: one MM2 file, three ways to sign in, and no secret of it in anything a run shows.

A takes OAUTHBEARER tokens over TLS (SASL_SSL; RS256 tokens of mm2py.dev.oidc), B requires a
client certificate (SSL, ``ssl.client.auth = required``; a PKCS12 key store and a JKS trust
store), C takes SASL PLAIN (SASL_PLAINTEXT). Flows A->B (at-least-once) and B->C (exactly-once)
run in ``connect-mirror-maker`` at debug level, with Spark's event log and the metrics endpoint
on. The OAuth client secret is written literally; B's store passwords come from the file,
directory and environment providers, C's password from the environment inside its JAAS line.
Every record must reach C; ``mm2py status --json``, ``verify`` and a ``failover`` plan succeed
on the same file; and no secret (nor the HTTP Basic form of the OAuth one) appears in the run's
log, the event log, ``/metrics``, those commands' output, or the errors of a refused login.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm2py.dev import cluster as devcluster
from mm2py.dev.oidc import OidcServer
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import REPO, SINGLE_BROKER, Replicator, wait_for
from tests.kafkautil import TS0, commit_offsets, consume_all, create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.long]

# below the kernel's ephemeral range; each cluster takes port and port + 1
A_PORT, B_PORT, C_PORT, METRICS_PORT = (p + PORT_OFFSET for p in (31240, 31250, 31260, 31270))
JAVA = "org.apache.kafka.common.config.provider."
# made per run, so no other text can hold them by chance
OAUTH_SECRET = "oauth-" + secrets.token_hex(12)
TRUST_PW = "trust-" + secrets.token_hex(12)
C_PASSWORD = "plain-" + secrets.token_hex(12)
WRONG_PASSWORD = "wrong-" + secrets.token_hex(12)
RECORDS = 300


@pytest.fixture(scope="module")
def clusters(cluster_workdir: Path) -> Iterator[dict[str, devcluster.DevCluster]]:
    oidc = OidcServer({"mm2": OAUTH_SECRET}, lifetime_s=60).start()
    login = devcluster.OAuthLogin(oidc.token_url, oidc.jwks_url, "mm2", OAUTH_SECRET)
    try:
        yield {
            "A": devcluster.start_cluster("mix-a", A_PORT, workdir=cluster_workdir, listeners_security="SASL_SSL",
                                          oauth=login),
            "B": devcluster.start_cluster("mix-b", B_PORT, workdir=cluster_workdir, listeners_security="SSL",
                                          client_auth=True),
            "C": devcluster.start_cluster("mix-c", C_PORT, workdir=cluster_workdir,
                                          listeners_security="SASL_PLAINTEXT", sasl_users={"mm2": C_PASSWORD}),
        }
    finally:
        for name in ("mix-a", "mix-b", "mix-c"):
            with contextlib.suppress(Exception):
                devcluster.stop_cluster(name, cluster_workdir)
        oidc.stop()


def mm2_file(c: dict[str, devcluster.DevCluster], folder: Path, topic: str, group: str) -> str:
    """The MM2 file: literal OAuth secret on A, provider passwords on B and C."""
    b = c["B"].client_properties
    secret_dir = folder / "secrets"
    (secret_dir / "run").mkdir(parents=True, exist_ok=True)
    (secret_dir / "b.properties").write_text(f"keystore.password = {b['ssl.keystore.password']}\n")
    (secret_dir / "run" / "key.password").write_text(b["ssl.key.password"] + "\n")  # a mounted secret
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
        f'clientId="mm2" clientSecret="{OAUTH_SECRET}" scope="kafka";',
        "B.security.protocol = SSL",
        f"B.ssl.keystore.location = {b['ssl.keystore.location']}",
        "B.ssl.keystore.type = PKCS12",
        f"B.ssl.keystore.password = ${{file:{secret_dir}/b.properties:keystore.password}}",
        f"B.ssl.key.password = ${{dir:{secret_dir}/run:key.password}}",
        f"B.ssl.truststore.location = {trust}",  # no type: JKS, as for Java
        "B.ssl.truststore.password = ${env:MM2PY_TEST_TRUST_PW}",
        "C.security.protocol = SASL_PLAINTEXT",
        "C.sasl.mechanism = PLAIN",
        "C.sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="mm2" password="${env:MM2PY_TEST_C_PASSWORD}";',
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
            "C's password": C_PASSWORD, "a refused password": WRONG_PASSWORD, "a private key": "PRIVATE KEY-----"}


def mm2py(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``mm2py ARGS`` in a session of its own: on a timeout its Spark JVM is killed with it."""
    proc = subprocess.Popen([sys.executable, "-m", "mm2py", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"mm2py {' '.join(args)} still ran after {timeout} s:\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def leaks(where: str, text: str, extra: dict[str, str]) -> list[str]:
    """The secrets ``text`` shows, as written or inside a base64 blob (a pickled config, a header)."""
    values = {**secret_forms(), **extra}
    found = [f"{name} in {where}" for name, value in values.items() if value in text]
    for blob in re.findall(r"[A-Za-z0-9+/_-]{40,}={0,2}", text):
        with contextlib.suppress(ValueError):
            decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), altchars=b"-_" if "-" in blob else None)
            found += [f"{name} in a base64 blob in {where}" for name, value in values.items()
                      if value.encode() in decoded]
    return found


def event_log(folder: Path) -> str:
    """Every event Spark logged under ``folder``, decompressed (Spark 4 writes zstd by default)."""
    import zstandard

    texts = []
    for file in sorted(f for f in folder.rglob("*") if f.is_file()):
        data = file.read_bytes()
        if file.name.endswith(".zstd") and data:
            data = zstandard.ZstdDecompressor().stream_reader(data).read()
        texts.append(data.decode(errors="replace"))
    return "\n".join(texts)


def test_three_mechanisms_in_one_file_and_no_secret_in_any_output(
        clusters, unique_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = clusters["A"], clusters["B"], clusters["C"]
    monkeypatch.setenv("MM2PY_TEST_TRUST_PW", TRUST_PW)  # inherited by every command below
    monkeypatch.setenv("MM2PY_TEST_C_PASSWORD", C_PASSWORD)
    extra = {"B's store password": b.client_properties["ssl.keystore.password"]}
    topic, group = f"{unique_name}-t", f"{unique_name}-g"
    text = mm2_file(clusters, tmp_path, topic, group)
    assert all(v not in text for v in (TRUST_PW, C_PASSWORD, *extra.values())), "those come through providers"
    config = tmp_path / "mm2.properties"
    config.write_text(text)

    create_topic(a.bootstrap, topic, 2, client=a.rdkafka_config())
    records = [(b"k%d" % i, b"v%d" % i, [("h", b"%d" % i)], TS0 + i) for i in range(RECORDS)]
    produce(a.bootstrap, topic, records, client=a.rdkafka_config())
    commit_offsets(a.bootstrap, group, {(topic, 0): 40, (topic, 1): 30}, client=a.rdkafka_config())
    log = tmp_path / "replicator.log"
    replicator = Replicator(config, log, "--log-level", "debug", "--checkpoint-dir", str(tmp_path / "ckpt")).start()
    outputs: dict[str, str] = {}
    try:
        final = f"B.A.{topic}"

        def on_c() -> int:
            try:
                got = consume_all(c.bootstrap, final, isolation="read_committed", client=c.rdkafka_config())
                return sum(len(p) for p in got.values())
            except AssertionError:
                return 0

        wait_for(lambda: on_c() >= RECORDS, 420, f"{RECORDS} records in {final} on C", replicator)

        def checkpointed() -> bool:
            got = consume_all(b.bootstrap, "A.checkpoints.internal", client=b.rdkafka_config())
            return any(group.encode() in r.key for p in got.values() for r in p)

        wait_for(checkpointed, 120, "a checkpoint of the group on B", replicator)
        with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=30) as answer:
            outputs["/metrics"] = answer.read().decode()
        status = mm2py("status", "--json", str(config))
        outputs["status --json"] = status.stdout + status.stderr
        assert status.returncode == 0, outputs["status --json"]
        assert replicator.alive(), replicator.tail()
    finally:
        code = replicator.stop()
    assert code == 0, replicator.tail()
    got = consume_all(c.bootstrap, final, isolation="read_committed", client=c.rdkafka_config())
    assert sorted((r.key, r.value, r.headers, r.timestamp) for p in got.values() for r in p) == sorted(
        (k, v, tuple(h), ts) for k, v, h, ts in records), "every record on C once, every field kept"
    assert '"flow": "A->B"' in outputs["status --json"] and '"flow": "B->C"' in outputs["status --json"]
    assert "mm2_" in outputs["/metrics"] or "kafka_connect" in outputs["/metrics"], outputs["/metrics"][:500]

    verify = mm2py("verify", str(config), timeout=600)
    outputs["verify"] = verify.stdout + verify.stderr
    assert verify.returncode == 0, outputs["verify"]
    failover = mm2py("failover", str(config), "--group", group, "--from", "A", "--to", "B")
    outputs["failover"] = failover.stdout + failover.stderr
    assert failover.returncode == 0 and "dry run" in failover.stdout, outputs["failover"]
    assert f"A.{topic}" in failover.stdout, outputs["failover"]

    # a refused login: C's password wrong, written literally; status names the failure, not the password
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(text.replace("${env:MM2PY_TEST_C_PASSWORD}", WRONG_PASSWORD))
    refused = mm2py("status", "--json", str(wrong))
    outputs["status of a refused login"] = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "B->C" in refused.stdout, outputs["status of a refused login"]
    started = mm2py("run", "--log-level", "debug", "--once", str(wrong), "--clusters", "C")
    outputs["run with a refused login"] = started.stdout + started.stderr
    assert started.returncode != 0 and "C" in started.stderr, outputs["run with a refused login"][-3000:]

    outputs["replicator log (debug)"] = log.read_text(errors="replace")
    outputs["Spark event log"] = event_log(tmp_path / "events")
    assert "SparkListenerJobStart" in outputs["Spark event log"], "Spark wrote an event log of the jobs"
    for i, (where, out) in enumerate(outputs.items()):  # kept for a look after a failure
        (tmp_path / f"output-{i}.txt").write_text(f"{where}\n{out}")
    print("verify:", verify.stdout.strip().splitlines()[-3:], "\nfailover plan:", failover.stdout.strip())
    print("refused login:", [line for line in (refused.stderr + started.stderr).splitlines() if "C" in line][-2:])
    print("characters read:", {where: len(out) for where, out in outputs.items()})
    found = [leak for where, out in outputs.items() for leak in leaks(where, out, extra)]
    assert not found, found
