"""Issue 5: the metrics endpoint of a running replicator, scraped over HTTP."""

from __future__ import annotations

import time

import pytest

from mm2py.config import load_text
from tests.integration.metrics_helpers import free_port, scrape, total
from tests.integration.mirror_helpers import Replicator, properties, wait_for
from tests.integration.target_checks import assert_verify_replays, verify_left_out
from tests.kafkautil import consume_all, create_topic, produce

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lane_layout.py: a long lane, for balance
P = "kafka_connect_mirror_mirrorsourceconnector_"


T = "org.apache.kafka.connect.transforms."
MINUTES, PER_MINUTE = 4, 40  # history of the filtered topic: minutes, records per minute and partition
FAILING = ("41", "87")  # offsets of the filtered topic MaskDigits raises on, in each partition: kept records


def filtered_history(bootstrap: str, topic: str) -> None:
    """``MINUTES`` past minutes of records on 3 partitions, one produce call per minute and partition (so
    no batch spans two minutes); every 4th record carries header ``drop``."""
    minute = int(time.time() // 60 * 60 * 1000)
    for k in range(MINUTES):
        for p in range(3):
            produce(bootstrap, topic, [(None, b"f%d" % j, [("drop", b"1")] if j % 4 == 0 else None,
                                        minute - (MINUTES - k) * 60_000 + 1000 + j) for j in range(PER_MINUTE)],
                    partition=p)


def test_metrics_endpoint_counts_latency_lag_and_heartbeats(cluster_a, cluster_b, unique_name, tmp_path):
    """A->B copies raw batches; B->A filters a topic (issue 47): its transform counts and its audit, where
    the records the Filter dropped are dropped, never missing. A Python transform after the Filter
    raises on two records per partition: with ``errors.tolerance = all`` they go to the dead-letter
    topic on A with Connect's context headers, counted failed, never missing."""
    topic, filtered = f"{unique_name}-t", f"{unique_name}-f"
    create_topic(cluster_a.bootstrap, topic, 2)
    create_topic(cluster_b.bootstrap, filtered, 3)
    filtered_history(cluster_b.bootstrap, filtered)
    port = free_port()
    config = tmp_path / "mm2.properties"
    dead_letters = f"{unique_name}-dlq"
    drop = {"topics": filtered, "transforms": "dropMarked, mask", "transforms.dropMarked.type": T + "Filter",
            "transforms.dropMarked.predicate": "marked",
            "predicates.marked.type": T + "predicates.HasHeaderKey", "predicates.marked.name": "drop",
            # kept records of the two audited minutes (offsets 40..119 of each partition) fail; the
            # predicate keeps MaskDigits off B.heartbeats, which the flow mirrors too (as MM2 does)
            "transforms.mask.type": "tests.plugins.MaskDigits", "transforms.mask.fail.offset": ",".join(FAILING),
            "transforms.mask.predicate": "isFiltered", "predicates": "marked, isFiltered",
            "predicates.isFiltered.type": T + "predicates.TopicNameMatches",
            "predicates.isFiltered.pattern": f"B\\.{filtered}",
            "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dead_letters,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true"}
    config.write_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                                 {"A->B": {"topics": topic}, "B->A": drop},
                                 f"metrics.port = {port}\nemit.checkpoints.enabled = false\n"
                                 "audit.interval.seconds = 2\n"))
    rep = Replicator(config, tmp_path / "replicator.log").start()
    try:
        wait_for(lambda: scrape(port), 120, "metrics endpoint up", rep)
        produce(cluster_a.bootstrap, topic, [(b"k%d" % i, b"v" * 100, None, None) for i in range(300)])
        remote = f"A.{topic}"  # MM2 tags its metrics with the remote topic
        wait_for(lambda: total(scrape(port), P + "record_count", remote) == 300, 120, "300 records counted", rep)
        got = scrape(port)
        assert total(got, P + "byte_count", remote) > 300 * 100
        assert total(got, "mm2py_replication_latency_ms", remote, quantile="0.99") > 0
        assert total(got, P + "record_age_ms_max", remote) >= 0
        wait_for(lambda: (m := scrape(port)) and any(n == "mm2py_lag_records" and ("topic", remote) in ls
                                                     for n, ls in m) and total(m, "mm2py_lag_records", remote) == 0,
                 60, "lag refreshed to 0 after catch-up", rep)
        wait_for(lambda: any(n == "mm2py_heartbeat_age_seconds" and ("source", "A") in ls and v < 30
                             for (n, ls), v in scrape(port).items()), 60, "heartbeat age on A->B", rep)

        # B->A's Filter: every 4th record dropped, counted per transform and remote topic
        remote_f, flow = f"B.{filtered}", {"source": "B", "target": "A", "transform": "dropMarked"}
        records, dropped = 3 * MINUTES * PER_MINUTE, 3 * MINUTES * PER_MINUTE // 4
        wait_for(lambda: total(scrape(port), "mm2py_transform_records_in_total", remote_f, **flow) == records, 120,
                 f"{records} records through the Filter", rep)
        got = scrape(port)
        assert total(got, "mm2py_transform_records_dropped_total", remote_f, **flow) == dropped
        assert total(got, "mm2py_transform_records_out_total", remote_f, **flow) == records - dropped
        assert total(got, "mm2py_transform_records_failed_total", remote_f, **flow) == 0
        mask = {**flow, "transform": "mask"}
        failed = 3 * len(FAILING)
        assert total(got, "mm2py_transform_records_in_total", remote_f, **mask) == records - dropped
        assert total(got, "mm2py_transform_records_failed_total", remote_f, **mask) == failed
        assert total(got, "mm2py_transform_records_out_total", remote_f, **mask) == records - dropped - failed
        assert total(got, P + "record_count", remote_f, source="B") == records - dropped - failed
        dead = consume_all(cluster_a.bootstrap, dead_letters)
        heads = [(dict(r.headers), r.value) for rs in dead.values() for r in rs]
        got_dead = sorted((h["__connect.errors.partition"], v, h["__connect.errors.offset"]) for h, v in heads)
        assert got_dead == sorted((b"%d" % p, b"f%d" % (int(o) % PER_MINUTE), o.encode())
                                  for p in range(3) for o in FAILING), "the source's records, as they were"
        assert all(h["__connect.errors.stage"] == b"TRANSFORMATION" and h["__connect.errors.topic"] == filtered.encode()
                   and h["__connect.errors.exception.class.name"] == b"builtins.ValueError" for h, _v in heads)
        assert not any(n.startswith("mm2py_transform_") and ("topic", remote) in ls for n, ls in got), \
            "A->B has no transforms: its topic is counted by none"
        # the audit compares the minutes between the oldest and the newest: the Filter dropped 10 of each
        # minute's 40 per partition there; RecordsMissing's series stays 0
        audited = 3 * (MINUTES - 2) * PER_MINUTE
        wait_for(lambda: total(scrape(port), "mm2py_audit_target_records", remote_f, source="B")
                 == audited * 3 // 4 - failed, 60, "the audit of the filtered topic", rep)
        got = scrape(port)
        assert total(got, "mm2py_audit_source_records", remote_f, source="B") == audited * 3 // 4 - failed
        assert total(got, "mm2py_audit_dropped_records", remote_f, source="B") == audited // 4
        assert total(got, "mm2py_audit_failed_records", remote_f, source="B") == failed
        assert total(got, "mm2py_audit_missing_records", remote_f, source="B") == 0
        assert total(got, "mm2py_audit_duplicate_records", remote_f, source="B") == 0
        # mm2py verify: equal once the positions cover every record, the dropped and failed ones left out
        flow_ba = next(f for f in load_text(config.read_text()).enabled_flows if f.name == "B->A")
        wait_for(lambda: verify_left_out(flow_ba, [filtered])[1].get(filtered) == dropped + failed, 60,
                 "verify covering every record of the filtered topic", rep)
        assert_verify_replays(flow_ba, {filtered: dropped + failed})
    finally:
        assert rep.stop() == 0, rep.tail()
