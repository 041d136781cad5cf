"""MM2 config resolution: precedence, scoping, defaults, validation, YAML."""

from __future__ import annotations

import pytest

from mm2py.config import load, load_text
from mm2py.errors import ConfigError

BASE = """
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
"""


def flow(cfg, name):  # noqa: ANN001, ANN201
    return next(f for f in cfg.flows if f.name == name)


def test_defaults_are_mm2s():
    f = flow(load_text(BASE + "A->B.enabled = true\n"), "A->B")
    assert f.enabled and f.topics == (".*",)
    assert f.topics_exclude == (r".*[\-\.]internal", r".*\.replica", "__.*")
    assert f.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    assert (f.replication_factor, f.offset_lag_max, f.emit_heartbeats_interval_seconds) == (2, 100, 1.0)
    assert (f.refresh_topics_interval_seconds, f.emit_checkpoints_interval_seconds) == (600.0, 60.0)
    assert f.sync_group_offsets_enabled is False and f.offset_syncs_topic_location == "source"
    assert f.auto_offset_reset == "earliest"


def test_flow_scope_beats_top_level():
    cfg = load_text(BASE + "A->B.enabled = true\nB->A.enabled = true\ntopics = x.*\n"
                    "A->B.topics = orders, payments\nreplication.factor = 1\n")
    assert flow(cfg, "A->B").topics == ("orders", "payments")
    assert flow(cfg, "B->A").topics == ("x.*",)
    assert flow(cfg, "B->A").replication_factor == 1


def test_flows_default_disabled_and_heartbeat_only_reverse_flow_kept():
    cfg = load_text(BASE + "A->B.enabled = true\n")
    assert [f.name for f in cfg.enabled_flows] == ["A->B"]
    assert [(f.name, f.enabled) for f in cfg.flows] == [("A->B", True), ("B->A", False)]


def test_client_settings_scoped_per_cluster_and_client_type():
    cfg = load_text(BASE + "A->B.enabled = true\nsecurity.protocol = SSL\n"
                    "A.security.protocol = SASL_PLAINTEXT\nA.consumer.fetch.max.bytes = 5\n"
                    "A.producer.linger.ms = 7\nconsumer.max.poll.records = 9\nA.consumer.auto.offset.reset = latest\n")
    a, b = cfg.clusters["A"], cfg.clusters["B"]
    assert a.client["security.protocol"] == "SASL_PLAINTEXT" and b.client["security.protocol"] == "SSL"
    assert a.consumer["fetch.max.bytes"] == "5" and "fetch.max.bytes" not in a.producer
    assert a.producer["linger.ms"] == "7" and a.consumer["max.poll.records"] == "9"
    assert a.consumer["security.protocol"] == "SASL_PLAINTEXT"
    assert flow(cfg, "A->B").auto_offset_reset == "latest"


def test_java_policy_class_names_accepted():
    cfg = load_text(BASE + "A->B.enabled = true\n"
                    "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy\n")
    assert flow(cfg, "A->B").replication_policy_class.endswith("IdentityReplicationPolicy")


def test_every_problem_reported_at_once_with_key_and_line():
    text = ("clusters = A, B\n"                 # 1
            "A.bootstrap.servers = a:9092\n"    # 2
            "A->B.enabled = true\n"             # 3
            "A->C.enabled = true\n"             # 4
            "refresh.topics.interval.seconds = soon\n"  # 5
            "A->B.topics = ([\n"                # 6
            "emit.heartbeats.enabled = yes\n")  # 7
    with pytest.raises(ConfigError) as err:
        load_text(text, source="mm2.properties")
    problems = {(p.key, p.line) for p in err.value.problems}
    assert ("A->C.enabled", 4) in problems
    assert ("refresh.topics.interval.seconds", 5) in problems
    assert ("A->B.topics", 6) in problems
    assert ("emit.heartbeats.enabled", 7) in problems
    assert ("B.bootstrap.servers", None) in problems
    message = str(err.value)
    assert "'C'" in message and "mm2.properties:5" in message and "'soon'" in message


def test_missing_clusters_and_self_flow():
    with pytest.raises(ConfigError, match="clusters"):
        load_text("A.bootstrap.servers = a:1\n")
    with pytest.raises(ConfigError, match="itself"):
        load_text(BASE + "A->A.enabled = true\n")


def test_unknown_keys_are_listed_not_fatal():
    cfg = load_text(BASE + "A->B.enabled = true\nmystery.knob = 3\noffset.flush.interval.ms = 1000\n")
    assert cfg.unknown_keys == ("mystery.knob",)


def test_flows_into_limits_targets():
    cfg = load_text(BASE + "A->B.enabled = true\nB->A.enabled = true\n")
    assert [f.name for f in cfg.flows_into(("A",))] == ["B->A"]
    assert len(cfg.flows_into(None)) == 2


def test_yaml_flat_and_nested_equal_properties(tmp_path):
    props = load_text(BASE + "A->B.enabled = true\nA->B.topics = a, b\nreplication.factor = 1\n")
    nested = tmp_path / "mm2.yaml"
    nested.write_text(
        "clusters: A, B\nA:\n  bootstrap.servers: a:9092\nB:\n  bootstrap.servers: b:9092\n"
        "A->B:\n  enabled: true\n  topics: [a, b]\nreplication.factor: 1\n")
    flat = load_text("clusters: [A, B]\nA.bootstrap.servers: a:9092\nB.bootstrap.servers: b:9092\n"
                     "A->B.enabled: true\nA->B.topics: a, b\nreplication.factor: 1\n", fmt="yaml")
    from_file = load(nested)
    assert flow(from_file, "A->B") == flow(props, "A->B") == flow(flat, "A->B")


def test_yaml_errors_name_the_line():
    with pytest.raises(ConfigError) as err:
        load_text("clusters: A, B\nA.bootstrap.servers: a\nB.bootstrap.servers: b\n"
                  "A->B.enabled: true\nA->B.tasks.max: many\n", source="mm2.yaml", fmt="yaml")
    assert "mm2.yaml:5" in str(err.value) and "A->B.tasks.max" in str(err.value)


def test_examples_load():
    from pathlib import Path
    for path in sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.properties")):
        assert load(path).enabled_flows, path
