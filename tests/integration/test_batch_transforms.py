"""An Arrow batch transform (``tests.plugins.MaskDigitsArrow``) on real clusters.

Its reference is the class itself, run here on each partition of A as one batch (a batch
transform is row-wise, so any batching gives the same): B must hold what it returns, record for
record, per partition, with the record links after it applied; the records it fails on, under
``errors.tolerance = all``, in the dead-letter topic as A had them; ``mm2py verify`` equal.
"""

from __future__ import annotations

import pytest

from mm2py.config import load_text
from mm2py.transforms import Record as Rec
from mm2py.transforms.batch import from_arrow, to_arrow
from mm2py.transforms.tolerance import create_dead_letter_topics
from tests.integration.mirror_helpers import card_records, mirror_once, properties
from tests.integration.target_checks import assert_verify_replays
from tests.kafkautil import consume_all, create_topic, produce
from tests.plugins import MaskDigitsArrow

pytestmark = pytest.mark.integration

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
PARTITIONS = 3
FAILING = (5, 77)  # source offsets the transform raises on, in every partition


def test_an_arrow_batch_transform_gives_on_b_what_it_gives_on_a_records(spark, cluster_a, cluster_b, unique_name,
                                                                         tmp_path):
    topic, dead_letters = f"{unique_name}-cards", f"{unique_name}-dlq"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    produce(cluster_a.bootstrap, topic, card_records(900))
    config = {"keep": "4", "fail.offset": ",".join(map(str, FAILING))}
    # the mask runs on the cards topic only (not on heartbeats), then a record link marks what it passed
    keys = {"topics": topic, "emit.checkpoints.enabled": "false", "transforms": "mask, mark",
            "transforms.mask.type": "tests.plugins.MaskDigitsArrow",
            **{f"transforms.mask.{k}": v for k, v in config.items()},
            "transforms.mask.predicate": "cards", "predicates": "cards",
            "predicates.cards.type": P + "TopicNameMatches", "predicates.cards.pattern": r"A\..*-cards",
            "transforms.mark.type": T + "InsertHeader", "transforms.mark.header": "masked",
            "transforms.mark.value.literal": "null",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dead_letters,
            "errors.deadletterqueue.topic.replication.factor": "1"}
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys})
    flow = load_text(text).enabled_flows[0]
    create_dead_letter_topics([flow])
    mirror_once(spark, text, tmp_path / "mm2py")

    remote = f"A.{topic}"
    mask = MaskDigitsArrow({"keep": "4"})  # without fail.offset: what it gives the records it passes
    source = consume_all(cluster_a.bootstrap, topic)
    expected: dict[int, list[tuple]] = {}
    for p, rs in sorted(source.items()):
        ok = [r for r in rs if r.offset not in FAILING]
        batch = to_arrow([Rec(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in ok])
        expected[p] = [(o.key, o.value, [*o.headers, ("masked", None)], o.timestamp)
                       for o in from_arrow(mask(remote, batch))]
    got = {p: [(r.key, r.value, list(r.headers), r.timestamp) for r in rs]
           for p, rs in sorted(consume_all(cluster_b.bootstrap, remote).items())}
    kept = sum(map(len, expected.values()))
    assert 650 < kept < 900 - PARTITIONS * len(FAILING), kept
    assert {p: rs for p, rs in got.items() if rs} == {p: rs for p, rs in expected.items() if rs}
    assert all(v[-4:].isdigit() and not any(48 <= b <= 57 for b in v[:-4])
               for rs in got.values() for _k, v, _h, _t in rs)
    # exactly the failing rows of each batch left out, as A had them; the rest of their batches kept
    dead = sorted((r.key, r.value, r.headers) for rs in consume_all(cluster_b.bootstrap, dead_letters).values()
                  for r in rs)
    assert dead == sorted((r.key, r.value, r.headers) for rs in source.values() for r in rs if r.offset in FAILING)
    print(f"arrow batch transform: {kept} of 900 records kept on B, {len(dead)} dead-lettered")
    assert_verify_replays(flow, {topic: 900 - kept})

