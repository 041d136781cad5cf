"""Issue 26: Avro topics mirrored between clusters that each have a schema registry (real Apicurio).

``schemas.mode = translate``: subjects reach B's registry under the remote topic's name and every
record's schema ids are rewritten, so a consumer on B with B's registry reads what A's consumers
read, while the bytes copied as they are would not decode there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from confluent_kafka.serialization import MessageField

from mm2py.cli import main
from mm2py.config import load_text
from mm2py.config.model import ClusterConfig
from mm2py.dev import registry as devregistry
from mm2py.dev.registry import DevRegistry
from mm2py.errors import SchemaError
from mm2py.ops.failover import apply_plan, plan_failover
from mm2py.schemas.check import check_schemas
from tests.conftest import PORT_OFFSET, own_clusters
from tests.integration.mirror_helpers import mirror_once, properties
from tests.integration.schema_helpers import (
    KEY,
    V1,
    V2,
    client,
    decode,
    decoder,
    encode,
    serializer,
    two_registries,
)
from tests.integration.target_checks import raw_batches
from tests.kafkautil import TS0, commit_offsets, consume_all, create_topic, produce, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lane_layout.py: a long lane, for balance


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevRegistry, DevRegistry]]:
    with two_registries(tmp_path_factory.mktemp("registries")) as started:
        yield started


def schema_text(a: str, b: str, reg_a: DevRegistry, reg_b: DevRegistry, topic: str, **flow: str) -> str:
    return properties({"A": a, "B": b}, {"A->B": {"topics": topic, "schemas.mode": "translate", **flow}},
                      f"A.schema.registry.url = {reg_a.url}\nB.schema.registry.url = {reg_b.url}\n"
                      "emit.checkpoints.enabled = false\n")


def avro_rows(reg: DevRegistry, topic: str, start: int, count: int, schema: str) -> list[tuple]:
    keys, values = serializer(reg.url, KEY), serializer(reg.url, schema)
    rows = []
    for i in range(start, start + count):
        value = {"id": i, "amount": i / 4}
        if schema == V2:
            value["note"] = f"n{i}"
        rows.append((encode(keys, topic, {"id": i}, MessageField.KEY), encode(values, topic, value), None, TS0 + i))
    return rows


def decoded(reg: DevRegistry, topic: str, bootstrap: str) -> dict[int, list[tuple]]:
    des = decoder(reg.url)
    return {p: [(r.offset, decode(des, topic, r.key, MessageField.KEY), decode(des, topic, r.value), r.timestamp)
                for r in records]
            for p, records in consume_all(bootstrap, topic).items()}


def test_translate_keeps_avro_readable_on_b(spark, cluster_a, cluster_b, registries, unique_name, tmp_path,
                                            capsys):
    reg_a, reg_b = registries
    topic = f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, topic, 2)
    # an evolution mid-stream on each partition, compressed batches (lz4 and zstd)
    for p, codec in enumerate(("lz4", "zstd")):
        produce(cluster_a.bootstrap, topic, avro_rows(reg_a, topic, 0, 150, V1), partition=p, compression=codec)
        produce(cluster_a.bootstrap, topic, avro_rows(reg_a, topic, 150, 150, V2), partition=p, compression=codec)
    text = schema_text(cluster_a.bootstrap, cluster_b.bootstrap, reg_a, reg_b, topic)
    check_schemas(load_text(text).enabled_flows)
    mirror_once(spark, text, tmp_path)

    remote = f"A.{topic}"
    source = decoded(reg_a, topic, cluster_a.bootstrap)
    target = decoded(reg_b, remote, cluster_b.bootstrap)
    assert sum(map(len, source.values())) == 600
    assert target == source  # offsets, keys, values and timestamps, record for record

    client_a, client_b = client(reg_a.url), client(reg_b.url)
    assert client_b.get_versions(f"{remote}-value") == [1, 2] and client_b.get_versions(f"{remote}-key") == [1]
    for version in (1, 2):  # same schema, different ids
        on_a, on_b = client_a.get_version(f"{topic}-value", version), client_b.get_version(f"{remote}-value", version)
        assert on_b.schema_id != on_a.schema_id
    # B's registry resolves A's ids to other schemas: the bytes copied as they are decode wrongly or fail there
    raw = consume_all(cluster_a.bootstrap, topic)[0][0].value
    try:
        wrong = decode(decoder(reg_b.url), remote, raw)
    except Exception:  # any failure shows it
        wrong = "failed"
    assert wrong != source[0][0][2]
    # rebuilt batches keep the source's codec, batch for batch (the producer sends a batch that
    # compression would not shrink uncompressed, so the source may hold codec 0 batches too)
    for p, codec in enumerate((3, 4)):
        on_a = [(c, n) for c, n, *_ in raw_batches(ClusterConfig("A", cluster_a.bootstrap), topic, p)]
        on_b = [(c, n) for c, n, *_ in raw_batches(ClusterConfig("B", cluster_b.bootstrap), remote, p)]
        assert on_b == on_a and codec in {c for c, _ in on_b}
    # verify: the bytes differ (other ids), the decoded records are equal
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    capsys.readouterr()
    assert main(["verify", str(path), "--topics", topic]) == 1
    assert "2 partitions audited, 2 with differences" in capsys.readouterr().out
    assert main(["verify", str(path), "--topics", topic, "--decode"]) == 0
    assert "2 partitions audited, 0 with differences" in capsys.readouterr().out


def bad_rows(reg: DevRegistry, topic: str) -> list[tuple]:
    """Good records around three that cannot be translated: magic byte 1, an unknown id, no frame at all."""
    good = avro_rows(reg, topic, 0, 6, V1)
    bad = [(b"k-magic", b"\x01\x00\x00\x00\x02xyz", None, TS0), (b"k-unknown", b"\x00\x00\x0f\x42\x3f\x02", None, TS0),
           (b"k-short", b"\x00", None, TS0)]
    return good[:2] + bad[:1] + good[2:4] + bad[1:] + good[4:]


@pytest.mark.parametrize("on_error", ["fail", "pass", "dead-letter"])
def test_untranslatable_records_follow_schemas_on_error(spark, cluster_a, cluster_b, registries, unique_name,
                                                        tmp_path, on_error):
    reg_a, reg_b = registries
    topic = f"{unique_name}-bad"
    create_topic(cluster_a.bootstrap, topic, 1)
    rows = bad_rows(reg_a, topic)
    produce(cluster_a.bootstrap, topic, rows, partition=0)
    dead_letters = f"{unique_name}-dlq"
    text = schema_text(cluster_a.bootstrap, cluster_b.bootstrap, reg_a, reg_b, topic, **{
        "schemas.on.error": on_error, "schemas.dead.letter.topic": dead_letters})
    check_schemas(load_text(text).enabled_flows)
    remote = f"A.{topic}"
    if on_error == "fail":
        with pytest.raises(SchemaError, match=r"schemas.on.error = fail.*magic byte 1.*partition=0 offset=2"):
            mirror_once(spark, text, tmp_path)
        copied = consume_all(cluster_b.bootstrap, remote, timeout=10)  # the flow stopped at the bad record
        assert sum(map(len, copied.values())) <= 2
        return
    mirror_once(spark, text, tmp_path)
    copied = consume_all(cluster_b.bootstrap, remote)[0]
    des = decoder(reg_b.url)
    good = [decode(des, remote, r.value) for r in copied if r.key not in (b"k-magic", b"k-unknown", b"k-short")]
    assert good == [{"id": i, "amount": i / 4} for i in range(6)]
    if on_error == "pass":
        assert [r.value for r in copied if r.key.startswith(b"k-")] == [row[1] for row in rows if row[0][:2] == b"k-"]
        assert [r.offset for r in copied] == list(range(9))
        return
    assert len(copied) == 6  # the three went to the dead-letter topic, with why and where from
    dead = consume_all(cluster_b.bootstrap, dead_letters)[0]
    assert [r.key for r in dead] == [b"k-magic", b"k-unknown", b"k-short"]
    assert [r.value for r in dead] == [row[1] for row in rows if row[0][:2] == b"k-"]
    reasons = [dict(r.headers)["mm2py.error"].decode() for r in dead]
    assert "magic byte 1" in reasons[0] and "unknown to the source registry" in reasons[1] and "shorter" in reasons[2]
    assert [dict(r.headers)["mm2py.offset"] for r in dead] == [b"2", b"5", b"6"]


def test_failover_on_a_translated_topic_reads_nothing_twice_and_misses_nothing(
        spark, cluster_a, cluster_b, registries, unique_name, tmp_path):
    """One record out for one record in, in exactly-once mode, with dead-lettered gaps: offsets translate
    exactly, so a group moved from A to B resumes where it stopped."""
    reg_a, reg_b = registries
    topic = f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, topic, 2)
    for p in range(2):
        rows = avro_rows(reg_a, topic, p * 1000, 200, V1) + bad_rows(reg_a, topic)[2:3] \
            + avro_rows(reg_a, topic, p * 1000 + 200, 200, V2)
        produce(cluster_a.bootstrap, topic, rows, partition=p, compression="lz4")
    text = schema_text(cluster_a.bootstrap, cluster_b.bootstrap, reg_a, reg_b, topic, **{
        "schemas.on.error": "dead-letter", "schemas.dead.letter.topic": f"{unique_name}-dlq"})
    text += "B.exactly.once.source.support = required\n"
    config = load_text(text)
    check_schemas(config.enabled_flows)
    mirror_once(spark, text, tmp_path)
    group = f"{unique_name}-g"
    # the group read 150 and 301 records on A and committed there (as a consumer would)
    stop_at = {0: 150, 1: 301}
    on_a = consume_all(cluster_a.bootstrap, topic)
    commit_offsets(cluster_a.bootstrap, group, {(topic, p): n for p, n in stop_at.items()})
    first = [r.value for p, n in stop_at.items() for r in on_a[p][:n]]
    apply_plan(config, plan_failover(config, group, "A", "B"))
    # ... and resumes on B from the offsets failover committed there
    resume = committed_offsets(cluster_b.bootstrap, group, f"A.{topic}", 2)
    rest = [r.value for p, records in consume_all(cluster_b.bootstrap, f"A.{topic}", isolation="read_committed").items()
            for r in records if r.offset >= resume[p]]
    on_a_decoder, on_b_decoder = decoder(reg_a.url), decoder(reg_b.url)
    ids = [decode(on_a_decoder, topic, v)["id"] for v in first if v[:1] == b"\x00"] \
        + [decode(on_b_decoder, f"A.{topic}", v)["id"] for v in rest]
    assert len(ids) == len(set(ids)), f"{len(ids) - len(set(ids))} records read twice"
    assert set(ids) == {p * 1000 + i for p in range(2) for i in range(400)}, "records missed"


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def kafkasql_pair(cluster_workdir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """Two clusters of this module's own (Apicurio's storage topics stay off the shared ones), and a
    registry keeping its schemas in a journal topic on the first."""
    with contextlib.ExitStack() as stack:
        started = stack.enter_context(own_clusters(cluster_workdir, {"pres-a": 32492 + PORT_OFFSET,
                                                                     "pres-b": 32592 + PORT_OFFSET}))
        a, b = started["pres-a"], started["pres-b"]
        workdir = tmp_path_factory.mktemp("kafkasql-registries")
        reg_a = devregistry.start_registry("pres-reg-a", 32481 + PORT_OFFSET, workdir=workdir,
                                           kafka_bootstrap=a.bootstrap)
        stack.callback(devregistry.stop_registry, "pres-reg-a", workdir)
        yield a, b, reg_a, workdir


def test_preserve_mirrors_the_registry_journal_and_keeps_ids(spark, kafkasql_pair, tmp_path):
    """schemas.mode = preserve: Apicurio's kafkasql journal is mirrored with the data; a read-only registry
    on B's copy serves A's ids, so records copied as they are decode on B."""
    a, b, reg_a, workdir = kafkasql_pair
    topic = "orders"
    create_topic(a.bootstrap, topic, 2)
    for p in range(2):
        produce(a.bootstrap, topic, avro_rows(reg_a, topic, 0, 50, V1) + avro_rows(reg_a, topic, 50, 50, V2),
                partition=p, compression="zstd")
    text = properties({"A": a.bootstrap, "B": b.bootstrap},
                      {"A->B": {"topics": f"{topic}, kafkasql-journal", "schemas.mode": "preserve"}},
                      "emit.checkpoints.enabled = false\n")
    check_schemas(load_text(text).enabled_flows)
    mirror_once(spark, text, tmp_path)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    configs = admin.describe_configs([ConfigResource("topic", "A.kafkasql-journal")])
    journal = {k: v.value for k, v in next(iter(configs.values())).result(30).items()}
    assert journal["retention.ms"] == "-1"  # Apicurio refuses a journal that may lose entries
    reg_b = devregistry.start_registry("pres-reg-b", 32581 + PORT_OFFSET, workdir=workdir,
                                       kafka_bootstrap=b.bootstrap, journal_topic="A.kafkasql-journal",
                                       read_only=True)
    try:
        source = decoded(reg_a, topic, a.bootstrap)
        wait_until(lambda: decoded(reg_b, f"A.{topic}", b.bootstrap) == source, 30,
                   message="B's registry serves A's ids")
        for version in (1, 2):
            on_a = client(reg_a.url).get_version(f"{topic}-value", version)
            assert client(reg_b.url).get_schema(on_a.schema_id).schema_str == on_a.schema.schema_str
    finally:
        devregistry.stop_registry("pres-reg-b", workdir)


def test_dev_registry_command_starts_lists_and_stops_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MM2PY_VAR_DIR", str(tmp_path))
    port = 32681 + PORT_OFFSET
    try:
        assert main(["dev-registry", "up", "R", "--port", str(port)]) == 0
        url = capsys.readouterr().out.strip()
        assert url == f"http://127.0.0.1:{port}/apis/ccompat/v7" and client(url).get_subjects() == []
        assert main(["dev-registry", "list"]) == 0
        assert "running" in capsys.readouterr().out
    finally:
        assert main(["dev-registry", "down", "R"]) == 0
    assert "R: stopped" in capsys.readouterr().out
    assert main(["dev-registry", "list"]) == 0 and "stopped" in capsys.readouterr().out
