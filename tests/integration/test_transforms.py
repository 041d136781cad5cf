"""MM2's connector transforms on real clusters, with Apache MirrorMaker 2 as the reference.

The same MM2 file runs twice on the same data: mm2py mirrors A->B, Apache MM2 (the jars the
project fetches) mirrors A->C. Both remote topics must hold the same records, partition by
partition, in the same order: what each transform and predicate does is what MM2 does.
A RegexRouter renames the remote topic in both; MM2 creates the policy's name (``A.<topic>``) and
sends to the routed one, which an MM2 operator must create: the test creates it on C.

A Python transform (``tests.plugins.MaskDigits``) has no MM2 to compare with: its reference is
the class itself, run here on every record of A; B must hold what it returns, record for record.

A TimestampRouter sends each record to its window topic in both; MM2 does not create those (nor
routed names), so the test creates them on C; mm2py creates them on B as it creates remote topics.
"""

from __future__ import annotations

import re
import time

import pytest

from bench.rolling_restart import Mm2
from mm2py.config import load_text
from mm2py.errors import ConfigError, TransformFailedError
from mm2py.kafka.admin import Admin
from mm2py.ops.status import flow_status
from mm2py.transforms import Record as Rec
from mm2py.transforms import check_flows
from tests.integration.mirror_helpers import card_records, mirror_once, properties, wait_for
from tests.integration.target_checks import MM2_WORKER, assert_verify_replays
from tests.kafkautil import Record, consume_all, create_topic, end_offsets, list_topics, produce
from tests.plugins import MaskDigits

pytestmark = pytest.mark.integration

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
PARTITIONS = 3


def chain_keys(orders: str, audit: str) -> dict[str, str]:
    """Route ``A.<orders>`` to ``<orders>.from-A``; drop test records, the audit topic, unflagged records
    and tombstones; strip two headers; mark records that had a secret, and append a second ``id``
    header (InsertHeader: null, as MM2 copies)."""
    return {
        "transforms": "route, dropTests, markSecret, tagId, strip, dropAudit, dropUnflagged, dropTombstones",
        "transforms.route.type": T + "RegexRouter", "transforms.route.regex": f"A\\.({orders})",
        "transforms.route.replacement": "$1.from-A",
        "transforms.dropTests.type": T + "Filter", "transforms.dropTests.predicate": "isTest",
        "transforms.markSecret.type": T + "InsertHeader", "transforms.markSecret.predicate": "hasSecret",
        "transforms.markSecret.header": "had-secret", "transforms.markSecret.value.literal": "null",
        "transforms.tagId.type": T + "InsertHeader", "transforms.tagId.header": "id",
        "transforms.tagId.value.literal": "null",
        "transforms.strip.type": T + "DropHeaders", "transforms.strip.headers": "secret,trace",
        "transforms.dropAudit.type": T + "Filter", "transforms.dropAudit.predicate": "isAudit",
        "transforms.dropUnflagged.type": T + "Filter", "transforms.dropUnflagged.predicate": "isFlagged",
        "transforms.dropUnflagged.negate": "true",
        "transforms.dropTombstones.type": T + "Filter", "transforms.dropTombstones.predicate": "isTombstone",
        "predicates": "isTest, hasSecret, isAudit, isFlagged, isTombstone",
        "predicates.isTest.type": P + "HasHeaderKey", "predicates.isTest.name": "test-record",
        "predicates.hasSecret.type": P + "HasHeaderKey", "predicates.hasSecret.name": "secret",
        "predicates.isAudit.type": P + "TopicNameMatches", "predicates.isAudit.pattern": f"A\\.{audit}",
        "predicates.isFlagged.type": P + "HasHeaderKey", "predicates.isFlagged.name": "keep",
        "predicates.isTombstone.type": P + "RecordIsTombstone",
    }


def records(n: int) -> list[tuple]:
    """Keyed records with a mix of headers; every 7th a tombstone, half of those flagged to keep.

    Timestamps are recent: older ones would be deleted by the brokers' time retention.
    """
    now = int(time.time() * 1000)
    out = []
    for i in range(n):
        headers = [("id", b"%d" % i)]
        if i % 5 == 0:
            headers.append(("test-record", b"1"))
        if i % 3 == 0:
            headers += [("secret", b"s%d" % i), ("trace", None)]
        value: bytes | None = b"v%d" % i
        if i % 7 == 0:
            value = None
            if i % 2 == 0:
                headers.append(("keep", b"1"))
        elif i % 2 == 0:
            headers.append(("keep", b"1"))
        out.append((b"k%d" % (i % 40), value, headers, now + i))
    return out


def shape(got: dict[int, list[Record]]) -> dict[int, list[tuple]]:
    return {p: [(r.key, r.value, r.headers, r.timestamp) for r in rs] for p, rs in sorted(got.items()) if rs}


def test_filter_drop_headers_insert_header_and_predicates_match_apache_mm2(spark, cluster_a, cluster_b, cluster_c,
                                                                          unique_name, tmp_path):
    topic, audit = f"{unique_name}-orders", f"{unique_name}-audit"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    create_topic(cluster_a.bootstrap, audit, 1)
    produce(cluster_a.bootstrap, topic, records(600))
    produce(cluster_a.bootstrap, audit, records(50))
    keys = {"topics": f"{topic}, {audit}", "emit.checkpoints.enabled": "false", **chain_keys(topic, audit)}

    # mm2py: A->B
    text_b = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys})
    mirror_once(spark, text_b, tmp_path / "mm2py")
    # Apache MM2: A->C, the same keys
    config_c = tmp_path / "mm2-c.properties"
    worker = MM2_WORKER + "refresh.topics.interval.seconds = 5\noffset.flush.interval.ms = 2000\n"
    config_c.write_text(properties({"A": cluster_a.bootstrap, "C": cluster_c.bootstrap}, {"A->C": keys}, worker))
    remote = f"{topic}.from-A"  # RegexRouter's name for A.<topic>
    assert f"A.{topic}" not in list_topics(cluster_b.bootstrap), "mm2py creates the routed topic only"
    ours = shape(consume_all(cluster_b.bootstrap, remote))
    create_topic(cluster_c.bootstrap, remote, PARTITIONS)  # MM2 creates A.<topic> only, and sends to this one
    mm2 = Mm2(config_c, tmp_path / "mm2.log").start()
    try:
        # wait for MM2's copy to hold as many records per partition as mm2py's, then a little longer
        # for any it would add beyond them
        counts = {p: len(rs) for p, rs in ours.items()}

        def mm2_copied() -> bool:
            ends = end_offsets(cluster_c.bootstrap, remote) if remote in list_topics(cluster_c.bootstrap) else {}
            return all(ends.get(p, 0) >= n for p, n in counts.items())
        wait_for(mm2_copied, 240, "Apache MM2 copying as many records as mm2py kept", mm2)
        time.sleep(5)
    finally:
        mm2.stop()

    theirs = shape(consume_all(cluster_c.bootstrap, remote))
    kept = sum(map(len, ours.values()))
    assert 0 < kept < 600, kept
    assert ours == theirs, "mm2py's transforms give what Apache MM2's give, record for record"
    flat = [r for rs in ours.values() for r in rs]
    assert not any(h[0] in ("secret", "trace", "test-record") for r in flat for h in r[2])
    assert all(r[1] is not None and ("keep", b"1") in r[2] for r in flat)
    # InsertHeader appends: the source's id stays first, the inserted one (no value) follows
    assert all([h for h in r[2] if h[0] == "id"][1:] == [("id", None)] for r in flat)
    marked = [r for r in flat if ("had-secret", None) in r[2]]
    assert marked and all(int(r[2][0][1]) % 3 == 0 for r in marked), "marked where the secret header was"
    # the audit topic: every record dropped by both
    assert sum(end_offsets(cluster_b.bootstrap, f"A.{audit}").values()) == 0
    assert sum(end_offsets(cluster_c.bootstrap, f"A.{audit}").values()) == 0
    print(f"transforms: {kept} of 600 records kept on B and on C, equal per partition")
    assert_verify_replays(load_text(text_b).enabled_flows[0], {topic: 600 - kept, audit: 50})


def test_insert_header_with_a_value_fails_apache_mm2_and_mm2py_refuses_it(cluster_a, cluster_c, unique_name,
                                                                         tmp_path):
    """Connect parses ``value.literal`` to a typed value that MM2's ByteArrayConverter refuses: MM2's
    task fails on the first record and copies nothing; mm2py refuses the key at start."""
    topic = f"{unique_name}-tagged"
    create_topic(cluster_a.bootstrap, topic, 1)
    produce(cluster_a.bootstrap, topic, records(10))
    keys = {"topics": topic, "emit.checkpoints.enabled": "false", "transforms": "tag",
            "transforms.tag.type": T + "InsertHeader", "transforms.tag.header": "mirrored-by",
            "transforms.tag.value.literal": "mm2"}
    with pytest.raises(ConfigError, match="transforms.tag.value.literal.*ByteArrayConverter"):
        check_flows(load_text(properties({"A": cluster_a.bootstrap, "B": "b:9092"}, {"A->B": keys})).enabled_flows,
                    lambda f: False)
    config_c = tmp_path / "mm2-c.properties"
    worker = MM2_WORKER + "refresh.topics.interval.seconds = 5\n"
    config_c.write_text(properties({"A": cluster_a.bootstrap, "C": cluster_c.bootstrap}, {"A->C": keys}, worker))
    log = tmp_path / "mm2.log"
    mm2 = Mm2(config_c, log).start()
    try:
        wait_for(lambda: "Invalid schema type for ByteArrayConverter: STRING" in log.read_text(errors="replace"),
                 240, "Apache MM2's task failing on the inserted header", mm2)
    finally:
        mm2.stop()
    remote = f"A.{topic}"
    copied = sum(end_offsets(cluster_c.bootstrap, remote).values()) if remote in list_topics(cluster_c.bootstrap) else 0
    assert copied == 0


def test_a_python_transform_gives_on_b_what_it_gives_on_a_records(spark, cluster_a, cluster_b, unique_name,
                                                                  tmp_path):
    topic = f"{unique_name}-cards"
    create_topic(cluster_a.bootstrap, topic, PARTITIONS)
    produce(cluster_a.bootstrap, topic, card_records(900))
    config = {"keep": "4", "by": "mm2py"}
    keys = {"topics": topic, "emit.checkpoints.enabled": "false", "transforms": "mask",
            "transforms.mask.type": "tests.plugins.MaskDigits",
            **{f"transforms.mask.{k}": v for k, v in config.items()}}
    mirror_once(spark, properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys}),
                tmp_path / "mm2py")

    remote = f"A.{topic}"
    mask = MaskDigits(config)
    expected: dict[int, list[tuple]] = {}
    for p, rs in sorted(consume_all(cluster_a.bootstrap, topic).items()):
        outs = [mask(remote, Rec(r.offset, r.timestamp, r.key, r.value, tuple(r.headers))) for r in rs]
        expected[p] = [(o.key, o.value, list(o.headers), o.timestamp) for o in outs if o is not None]
    got = {p: [(r.key, r.value, list(r.headers), r.timestamp) for r in rs]
           for p, rs in sorted(consume_all(cluster_b.bootstrap, remote).items())}
    kept = sum(map(len, expected.values()))
    assert 700 < kept < 900, kept
    assert {p: rs for p, rs in got.items() if rs} == {p: rs for p, rs in expected.items() if rs}
    assert all(v[-4:].isdigit() and not any(48 <= b <= 57 for b in v[:-4])
               for rs in got.values() for _k, v, _h, _t in rs)
    print(f"python transform: {kept} of 900 records kept on B, each what MaskDigits gives on A")
    flow = load_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys}))
    assert_verify_replays(flow.enabled_flows[0], {topic: 900 - kept})


def test_a_python_transform_raising_stops_the_flow_naming_the_record(spark, cluster_a, cluster_b, unique_name,
                                                                     tmp_path):
    topic = f"{unique_name}-cards"
    create_topic(cluster_a.bootstrap, topic, 1)
    produce(cluster_a.bootstrap, topic, card_records(40))
    keys = {"topics": topic, "emit.checkpoints.enabled": "false", "transforms": "mask",
            "transforms.mask.type": "tests.plugins.MaskDigits", "transforms.mask.fail.offset": "25"}
    with pytest.raises(TransformFailedError, match=(
            rf"flow A->B: transform 'mask' \(tests.plugins.MaskDigits\) raised ValueError: cannot mask "
            rf"b'order 25 card .*' on the record at topic {topic} partition 0 offset 25 \(remote topic A.{topic}\)")):
        mirror_once(spark, properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys}),
                    tmp_path / "mm2py")
    ids = [int(dict(r.headers)["id"]) for rs in consume_all(cluster_b.bootstrap, f"A.{topic}").values() for r in rs]
    assert all(i < 25 for i in ids), "nothing from the failing record on: it is never skipped"


def test_timestamp_router_writes_the_window_topics_apache_mm2_writes(spark, cluster_a, cluster_b, cluster_c,
                                                                     unique_name, tmp_path):
    """Records of 3 hours, interleaved, to ``${topic}-${timestamp}`` (``yyyyMMddHH``): a Filter before the
    router sees the remote name, an InsertHeader after it sees the window name (TopicNameMatches)."""
    topic, hour = f"{unique_name}-events", 3600_000
    create_topic(cluster_a.bootstrap, topic, PARTITIONS, {"retention.ms": "604800123"})
    now = int(time.time() * 1000)
    base = now - now % hour
    produce(cluster_a.bootstrap, topic, [(b"k%d" % (i % 40), b"v%d" % i,
                                          [("id", b"%d" % i)] + ([("drop", b"1")] if i % 9 == 0 else []),
                                          base - (i % 3) * hour + i) for i in range(300)])
    windows = [f"A.{topic}-{time.strftime('%Y%m%d%H', time.gmtime((base - k * hour) / 1000))}" for k in range(3)]
    keys = {"topics": topic, "emit.checkpoints.enabled": "false", "transforms": "dropSome, byHour, markNewest",
            "transforms.dropSome.type": T + "Filter", "transforms.dropSome.predicate": "isDrop",
            "transforms.byHour.type": T + "TimestampRouter", "transforms.byHour.topic.format": "${topic}-${timestamp}",
            "transforms.byHour.timestamp.format": "yyyyMMddHH", "transforms.byHour.predicate": "isEvents",
            "transforms.markNewest.type": T + "InsertHeader", "transforms.markNewest.predicate": "isNewest",
            "transforms.markNewest.header": "newest-hour", "transforms.markNewest.value.literal": "null",
            "predicates": "isDrop, isEvents, isNewest", "predicates.isDrop.type": P + "HasHeaderKey",
            # heartbeats stay unrouted: MM2's producer would wait on a window topic of them nobody created
            "predicates.isEvents.type": P + "TopicNameMatches", "predicates.isEvents.pattern": re.escape(f"A.{topic}"),
            "predicates.isDrop.name": "drop", "predicates.isNewest.type": P + "TopicNameMatches",
            "predicates.isNewest.pattern": re.escape(windows[0])}

    text_b = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": keys})
    mirror_once(spark, text_b, tmp_path / "mm2py")
    flow = load_text(text_b).enabled_flows[0]
    on_b = Admin(flow.target).topics()
    assert all(on_b.get(w) == PARTITIONS for w in windows), on_b
    assert sum(end_offsets(cluster_b.bootstrap, f"A.{topic}").values()) == 0, "the remote topic itself stays empty"
    [configs] = Admin(flow.target).topic_configs([windows[1]]).values()
    assert {e.name: e.value for e in configs}["retention.ms"] == "604800123", "created as the remote topic is"
    # the test's topic's row (earlier tests' flows into A leave a heartbeats topic there, mirrored too)
    [row] = [t for t in flow_status(flow).topics if t.topic == topic]
    assert row.remote_topic == f"A.{topic}-${{timestamp}}" and row.lag_records == 0, row

    config_c = tmp_path / "mm2-c.properties"
    worker = MM2_WORKER + "refresh.topics.interval.seconds = 5\noffset.flush.interval.ms = 2000\n"
    config_c.write_text(properties({"A": cluster_a.bootstrap, "C": cluster_c.bootstrap}, {"A->C": keys}, worker))
    for w in windows:  # MM2 creates A.<topic> only and sends to the window topics
        create_topic(cluster_c.bootstrap, w, PARTITIONS)
    ours = {w: shape(consume_all(cluster_b.bootstrap, w)) for w in windows}
    mm2 = Mm2(config_c, tmp_path / "mm2.log").start()
    try:
        def mm2_copied() -> bool:
            return all(end_offsets(cluster_c.bootstrap, w).get(p, 0) >= len(rs)
                       for w in windows for p, rs in ours[w].items())
        wait_for(mm2_copied, 240, "Apache MM2 copying as many records per window as mm2py", mm2)
        time.sleep(5)
    finally:
        mm2.stop()
    theirs = {w: shape(consume_all(cluster_c.bootstrap, w)) for w in windows}
    kept = {w: sum(map(len, ours[w].values())) for w in windows}
    assert all(kept.values()) and sum(kept.values()) == 300 - len(range(0, 300, 9)), kept
    assert ours == theirs, "mm2py's window topics hold what Apache MM2's hold, per partition, in order"
    marked = {w: all(("newest-hour", None) in r[2] for rs in ours[w].values() for r in rs) for w in windows}
    assert marked == {windows[0]: True, windows[1]: False, windows[2]: False}, "the link after sees the window"
    print(f"timestamp router: {kept} records per window on B and on C, equal per partition")
