"""Issue 47: Python transforms on decoded Avro values in a ``schemas.mode = translate`` flow (real Apicurio).

A record transform (``tests.plugins.MaskAvroField``) and an Arrow batch transform
(``tests.plugins.MaskAvroFieldArrow``), each on its own topic, mask one field of Avro records
mirrored A->B. Decoded on B with B's registry, that field is masked and every other field, the
keys, headers, timestamps, order and counts per partition equal A's decoded with A's registry.
A record that is not Avro fails each link and, under ``errors.tolerance = all``, goes to the
dead-letter topic as A had it, an offset gap on B. ``mm2py verify --decode`` replays both
transforms and finds every partition equal.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.serialization import MessageField

from mm2py.cli import main
from mm2py.config import load_text
from mm2py.dev.registry import DevRegistry
from mm2py.schemas import frames
from mm2py.transforms.tolerance import create_dead_letter_topics
from tests.integration.mirror_helpers import mirror_once, properties
from tests.integration.schema_helpers import KEY, client, decode, decoder, encode, serializer, two_registries
from tests.kafkautil import TS0, consume_all, create_topic, produce

pytestmark = pytest.mark.integration

P = "org.apache.kafka.connect.transforms.predicates."
PARTITIONS = 3
CUSTOMER = ('{"type":"record","name":"Customer","namespace":"shop","fields":[{"name":"id","type":"long"},'
            '{"name":"email","type":"string"},{"name":"name","type":"string"}]}')
CUSTOMER_V2 = ('{"type":"record","name":"Customer","namespace":"shop","fields":[{"name":"id","type":"long"},'
               '{"name":"email","type":"string"},{"name":"name","type":"string"},'
               '{"name":"tier","type":"string","default":"basic"}]}')
# the transform each topic's link runs: (suffix of the topic, class)
VARIANTS = (("record", "tests.plugins.MaskAvroField"), ("arrow", "tests.plugins.MaskAvroFieldArrow"))
NOT_AVRO = b"plain text, no schema id"


@pytest.fixture(scope="module")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevRegistry, DevRegistry]]:
    with two_registries(tmp_path_factory.mktemp("registries")) as started:
        yield started


def customers(reg: DevRegistry, topic: str, partition: int, count: int) -> list[tuple]:
    """``count`` records: the first half of schema v1, the rest v2 (an evolution mid-partition)."""
    keys, v1, v2 = serializer(reg.url, KEY), serializer(reg.url, CUSTOMER), serializer(reg.url, CUSTOMER_V2)
    rows = []
    for i in range(count):
        n = partition * 1000 + i
        value = {"id": n, "email": f"c{n}@example.com", "name": f"name {n}"}
        if i >= count // 2:
            value["tier"] = "gold" if n % 2 else "basic"
        rows.append((encode(keys, topic, {"id": n}, MessageField.KEY), encode(v2 if "tier" in value else v1, topic,
                     value), [("trace", f"t{n}".encode())], TS0 + n))
    return rows


def decoded(reg: DevRegistry, topic: str, bootstrap: str) -> dict[int, list[tuple]]:
    """Per partition, in order, each Avro record's key and value decoded with ``reg``, headers and timestamp."""
    des = decoder(reg.url)
    return {p: [(decode(des, topic, r.key, MessageField.KEY), decode(des, topic, r.value), r.headers, r.timestamp)
                for r in records if r.value != NOT_AVRO]
            for p, records in consume_all(bootstrap, topic).items()}


def test_a_record_and_an_arrow_transform_mask_an_avro_field_decoded_on_b_with_bs_registry(
        spark, cluster_a, cluster_b, registries, unique_name, tmp_path, capsys):
    reg_a, reg_b = registries
    topics = {variant: f"{unique_name}-customers-{variant}" for variant, _ in VARIANTS}
    dead_letters = f"{unique_name}-dlq"
    for topic in topics.values():
        create_topic(cluster_a.bootstrap, topic, PARTITIONS)
        for p in range(PARTITIONS):
            rows = customers(reg_a, topic, p, 120)
            if p == 0:  # offset 60 of partition 0: no schema id; the link fails on it alone
                rows.insert(60, (rows[60][0], NOT_AVRO, [("trace", b"bad")], TS0))
            produce(cluster_a.bootstrap, topic, rows, partition=p, compression="lz4" if p == 1 else None)
    keys = {"topics": "|".join(topics.values()), "schemas.mode": "translate", "emit.checkpoints.enabled": "false",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dead_letters,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "transforms": ", ".join(variant for variant, _ in VARIANTS),
            "predicates": ", ".join(f"is_{variant}" for variant, _ in VARIANTS)}
    for variant, path in VARIANTS:  # each link on its own topic (never on heartbeats: they are not Avro)
        keys |= {f"transforms.{variant}.type": path, f"transforms.{variant}.field": "email",
                 f"transforms.{variant}.predicate": f"is_{variant}",
                 f"predicates.is_{variant}.type": P + "TopicNameMatches",
                 f"predicates.is_{variant}.pattern": f"A\\.{topics[variant]}"}
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys},
                      f"A.schema.registry.url = {reg_a.url}\nB.schema.registry.url = {reg_b.url}\n")
    create_dead_letter_topics(load_text(text).enabled_flows)
    mirror_once(spark, text, tmp_path / "mm2py")

    for variant, topic in topics.items():
        source, target = decoded(reg_a, topic, cluster_a.bootstrap), decoded(reg_b, f"A.{topic}", cluster_b.bootstrap)
        assert [len(source[p]) for p in range(PARTITIONS)] == [120] * PARTITIONS
        assert all(value["email"].endswith("@example.com") for p in source for _, value, _, _ in source[p])
        masked = {p: [(k, {**v, "email": "***"}, h, ts) for k, v, h, ts in rows] for p, rows in source.items()}
        assert target == masked, variant  # keys, every other field, headers, timestamps, order, counts
        assert {v.get("tier", "-") for _, v, _, _ in target[0]} == {"-", "gold", "basic"}, "both versions"
        # B's records name B's ids (A's name other schemas on B: the decoys), each version its own
        ids_a = {frames.schema_id(r.value) for r in consume_all(cluster_a.bootstrap, topic)[0] if r.value != NOT_AVRO}
        ids_b = {frames.schema_id(r.value) for r in consume_all(cluster_b.bootstrap, f"A.{topic}")[0]}
        assert len(ids_b) == 2 and ids_b.isdisjoint(ids_a), (variant, ids_a, ids_b)
        assert client(reg_b.url).get_versions(f"A.{topic}-value") == [1, 2]

    dead = consume_all(cluster_b.bootstrap, dead_letters)[0]
    assert sorted((r.value, r.headers) for r in dead) == [(NOT_AVRO, (("trace", b"bad"),))] * 2, "as A had it"

    path = tmp_path / "mm2.properties"
    path.write_text(text)
    capsys.readouterr()
    assert main(["verify", str(path), "--topics", "|".join(topics.values()), "--decode"]) == 0
    assert f"{2 * PARTITIONS} partitions audited, 0 with differences; 2 source records dropped" \
        in capsys.readouterr().out
