"""MM2 config resolution: precedence, scoping, defaults, validation, YAML."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from mm2py.config import load, load_text, parse_cluster_key, parse_flow_key
from mm2py.config.keys import ALL_KEYS, FLOW_KEYS, Scope
from mm2py.config.model import FlowConfig, MirrorMakerConfig, flow_field_paths
from mm2py.errors import ConfigError, ConfigProblem

BASE = """
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
"""
AB = BASE + "A->B.enabled = true\n"


def flow(cfg: MirrorMakerConfig, name: str) -> FlowConfig:
    return next(f for f in cfg.flows if f.name == name)


def problems(text: str, fmt: str = "properties") -> list[ConfigProblem]:
    with pytest.raises(ConfigError) as err:
        load_text(text, source="mm2.cfg", fmt=fmt)  # type: ignore[arg-type]
    return err.value.problems


def keyed(text: str) -> dict[str | None, ConfigProblem]:
    return {p.key: p for p in problems(text)}


# -- defaults and precedence -------------------------------------------------------------


def test_defaults_are_mm2s():
    f = flow(load_text(AB), "A->B")
    assert f.enabled and f.selection.topics == (".*",)
    assert f.selection.topics_exclude == (r".*[\-\.]internal", r".*\.replica", "__.*")
    assert f.selection.groups == (".*",) and f.selection.groups_exclude == ("console-consumer-.*", "connect-.*", "__.*")
    assert f.naming.replication_policy_class == "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
    assert (f.naming.replication_policy_separator, f.naming.internal_topic_separator_enabled) == (".", True)
    assert (f.metadata.replication_factor, f.heartbeats.heartbeats_topic_replication_factor) == (2, 3)
    assert (f.checkpoints.checkpoints_topic_replication_factor,
            f.checkpoints.offset_syncs_topic_replication_factor) == (3, 3)
    assert (f.checkpoints.offset_lag_max, f.heartbeats.emit_heartbeats_interval_seconds) == (100, 1.0)
    assert (f.selection.refresh_topics_interval_seconds,
            f.checkpoints.emit_checkpoints_interval_seconds) == (600.0, 60.0)
    assert f.checkpoints.sync_group_offsets_enabled is False and f.checkpoints.offset_syncs_topic_location == "source"
    assert (f.metadata.use_defaults_from, f.delivery.exactly_once_support,
            f.delivery.auto_offset_reset) == ("target", "requested", "earliest")
    assert (f.admin_timeout_ms, f.copy.consumer_poll_timeout_ms, f.copy.tasks_max) == (60000, 1000, None)
    assert "min\\.insync\\.replicas" in f.metadata.config_properties_exclude


def test_every_flow_field_has_exactly_one_key():
    declared = [k.field for k in ALL_KEYS if k.field]
    assert len(declared) == len(set(declared))
    # derived, not keys: the delivery mode comes from two keys (mm2py.config.delivery)
    # every setting of FlowConfig's sections and its own, by path ("copy.tail_ms"): its default
    defaults = flow_field_paths()
    fields = set(defaults) - {"delivery.exactly_once", "delivery.exactly_once_key"}
    assert set(declared) == fields
    for key in FLOW_KEYS:
        assert key.scope is Scope.FLOW and key.doc
        assert key.default == defaults[key.field]


def test_key_spellings_that_differ_from_field_names():
    cfg = load_text(AB + "replication.policy.internal.topic.separator.enabled = false\n"
                    "offset-syncs.topic.location = TARGET\nemit.offset-syncs.enabled = false\n"
                    "offset-syncs.topic.replication.factor = 1\n")
    f = flow(cfg, "A->B")
    assert f.naming.internal_topic_separator_enabled is False and f.checkpoints.offset_syncs_topic_location == "target"
    assert f.checkpoints.emit_offset_syncs_enabled is False and f.checkpoints.offset_syncs_topic_replication_factor == 1


def test_typed_values():
    f = flow(load_text(AB + "tasks.max = 4\nemit.heartbeats.interval.seconds = 0.5\nsync.topic.acls.enabled = FALSE\n"
                       "partition.mismatch = hash\nmax.batch.bytes = 1048576\ntrigger.interval.ms = 0\n"
                       "topics =  a ,b,, c \nexactly.once.support = Disabled\n"), "A->B")
    assert (f.copy.tasks_max, f.heartbeats.emit_heartbeats_interval_seconds,
            f.metadata.sync_topic_acls_enabled) == (4, 0.5, False)
    assert (f.delivery.partition_mismatch, f.copy.max_batch_bytes, f.copy.trigger_interval_ms) == ("hash", 1048576, 0)
    assert f.selection.topics == ("a", "b", "c") and f.delivery.exactly_once_support == "disabled"


def test_empty_topics_list_mirrors_nothing():
    assert flow(load_text(AB + "topics =\n"), "A->B").selection.topics == ()


def test_flow_scope_beats_top_level():
    cfg = load_text(BASE + "A->B.enabled = true\nB->A.enabled = true\ntopics = x.*\n"
                    "A->B.topics = orders, payments\nreplication.factor = 1\nB->A.replication.factor = 3\n")
    assert flow(cfg, "A->B").selection.topics == ("orders", "payments")
    assert flow(cfg, "B->A").selection.topics == ("x.*",)
    assert (flow(cfg, "A->B").metadata.replication_factor, flow(cfg, "B->A").metadata.replication_factor) == (1, 3)


def test_cluster_scoped_flow_setting_has_no_effect_and_is_warned():
    with capture_logs() as logs:
        cfg = load_text(AB + "A.topics = only-this\n")
    assert flow(cfg, "A->B").selection.topics == (".*",)
    assert "topics" not in cfg.clusters["A"].client
    assert cfg.unknown_keys == ("A.topics",)
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert warning["keys"] == ["A.topics"] and "->" in warning["hint"]


def test_deprecated_blacklist_names_are_read_but_lose_to_the_new_names():
    cfg = load_text(BASE + "A->B.enabled = true\nB->A.enabled = true\ntopics.blacklist = secret.*\n"
                    "B->A.topics.exclude = x\nB->A.topics.blacklist = y\ngroups.blacklist = g.*\n")
    assert flow(cfg, "A->B").selection.topics_exclude == ("secret.*",)
    assert flow(cfg, "B->A").selection.topics_exclude == ("x",)
    assert flow(cfg, "A->B").selection.groups_exclude == ("g.*",) and cfg.unknown_keys == ()


def test_raw_holds_top_level_and_own_flow_keys_prefix_stripped():
    cfg = load_text(BASE + "A->B.enabled = true\nB->A.enabled = true\ntopics = t\nA->B.topics = u\n"
                    "A->B.custom.plugin.key = v\nB->A.other = w\nA.security.protocol = SSL\n")
    raw = flow(cfg, "A->B").raw
    assert raw["topics"] == "u" and raw["custom.plugin.key"] == "v" and raw["enabled"] == "true"
    assert raw["clusters"] == "A, B"
    assert "other" not in raw and not any(k.startswith(("A.", "B.", "A->", "B->")) for k in raw)


# -- flows ---------------------------------------------------------------------------------


def test_flows_default_disabled_and_heartbeat_only_reverse_flow_kept():
    cfg = load_text(AB)
    assert [f.name for f in cfg.enabled_flows] == ["A->B"]
    assert [(f.name, f.enabled) for f in cfg.flows] == [("A->B", True), ("B->A", False)]


def test_reverse_flow_dropped_when_its_heartbeats_are_off():
    assert [f.name for f in load_text(AB + "B->A.emit.heartbeats.enabled = false\n").flows] == ["A->B"]
    assert [f.name for f in load_text(AB + "emit.heartbeats.enabled = false\n").flows] == ["A->B"]


def test_hub_keeps_only_enabled_flows_and_their_reverses():
    cfg = load_text("clusters = A, B, K\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
                    "K.bootstrap.servers = k:1\nA->K.enabled = true\nB->K.enabled = true\n")
    assert [(f.name, f.enabled) for f in cfg.flows] == [
        ("A->K", True), ("B->K", True), ("K->A", False), ("K->B", False)]


def test_top_level_enabled_enables_every_pair():
    cfg = load_text(BASE + "enabled = true\nB->A.enabled = false\n")
    assert [(f.name, f.enabled) for f in cfg.flows] == [("A->B", True), ("B->A", False)]


def test_flows_into_limits_targets():
    cfg = load_text("clusters = A, B, K\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\n"
                    "K.bootstrap.servers = k:1\nA->K.enabled = true\nB->K.enabled = true\nK->A.enabled = true\n")
    assert [f.name for f in cfg.flows_into(("A",))] == ["K->A"]
    assert [f.name for f in cfg.flows_into(("K", "B"))] == ["A->K", "B->K"]
    assert len(cfg.flows_into(None)) == len(cfg.flows_into(())) == 3
    assert cfg.flows_into(("nowhere",)) == ()


def test_unused_cluster_needs_no_bootstrap():
    cfg = load_text("clusters = A, B, C\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n")
    assert cfg.clusters["C"].bootstrap_servers == "" and len(cfg.flows) == 2


def test_aliases_with_dots_and_dashes():
    cfg = load_text("clusters = us-east.prod, eu\nus-east.prod.bootstrap.servers = u:1\neu.bootstrap.servers = e:1\n"
                    "us-east.prod->eu.enabled = true\nus-east.prod->eu.topics = t\n")
    f = flow(cfg, "us-east.prod->eu")
    assert f.enabled and f.selection.topics == ("t",) and f.source.bootstrap_servers == "u:1"


def test_parse_flow_and_cluster_keys():
    assert parse_flow_key("A->B.topics") == ("A", "B", "topics")
    assert parse_flow_key("A->B.consumer.auto.offset.reset", ["A", "B"]) == ("A", "B", "consumer.auto.offset.reset")
    assert parse_flow_key("x.y->z.enabled", ["x.y", "z"]) == ("x.y", "z", "enabled")
    assert parse_flow_key("A.topics") is None and parse_flow_key("A->B") is None
    assert parse_cluster_key("A.consumer.x", ["A", "B"]) == ("A", "consumer.x")
    assert parse_cluster_key("A.b.c", ["A", "A.b"]) == ("A.b", "c")
    assert parse_cluster_key("C.x", ["A"]) is None


# -- clusters and client settings --------------------------------------------------------


def test_client_settings_scoped_per_cluster_and_client_type():
    cfg = load_text(AB + "security.protocol = SSL\n"
                    "A.security.protocol = SASL_PLAINTEXT\nA.consumer.fetch.max.bytes = 5\n"
                    "A.producer.linger.ms = 7\nconsumer.max.poll.records = 9\nA.admin.retries = 2\n")
    a, b = cfg.clusters["A"], cfg.clusters["B"]
    assert a.client["security.protocol"] == "SASL_PLAINTEXT" and b.client["security.protocol"] == "SSL"
    assert a.consumer["fetch.max.bytes"] == "5" and "fetch.max.bytes" not in a.producer
    assert a.producer["linger.ms"] == "7" and a.consumer["max.poll.records"] == "9"
    assert b.consumer["max.poll.records"] == "9" and "max.poll.records" not in b.client
    assert a.admin == {"security.protocol": "SASL_PLAINTEXT", "retries": "2"}
    assert a.consumer["security.protocol"] == "SASL_PLAINTEXT"
    assert "bootstrap.servers" not in a.client and a.bootstrap_servers == "a:9092"
    assert cfg.unknown_keys == ()


def test_client_layers_weakest_first():
    cfg = load_text(AB + "ssl.key.password = top\nconsumer.ssl.key.password = top-consumer\n"
                    "consumer.client.rack = r1\nA.client.rack = r2\nA.consumer.client.rack = r3\n"
                    "B.ssl.key.password = b\n")
    a, b = cfg.clusters["A"], cfg.clusters["B"]
    assert a.consumer["ssl.key.password"] == "top-consumer" and a.producer["ssl.key.password"] == "top"
    assert b.consumer["ssl.key.password"] == "b", "the cluster's own setting beats any top-level one"
    assert (a.consumer["client.rack"], a.producer["client.rack"], b.consumer["client.rack"]) == ("r3", "r2", "r1")


def test_only_mm2_client_settings_reach_clusters_from_top_level():
    cfg = load_text(AB + "sasl.mechanism = PLAIN\nclient.id = mm2\nlinger.ms = 5\n")
    assert cfg.clusters["B"].client == {"sasl.mechanism": "PLAIN"}
    assert cfg.unknown_keys == ("linger.ms",)


def test_bootstrap_servers_are_trimmed_and_top_level_is_a_fallback():
    cfg = load_text("clusters = A, B\nbootstrap.servers = shared:1\nA.bootstrap.servers =  a:1 , a:2 \n"
                    "A->B.enabled = true\n")
    assert cfg.clusters["A"].bootstrap_servers == "a:1,a:2"
    assert cfg.clusters["B"].bootstrap_servers == "shared:1"


def test_worker_settings_under_an_alias_are_accepted_but_not_client_settings():
    cfg = load_text(AB + "B.offset.storage.topic = x\nB.exactly.once.source.support = enabled\n")
    assert cfg.clusters["B"].client == {} and cfg.unknown_keys == ()


def test_auto_offset_reset_precedence():
    # MM2 4.3: the replication consumer's setting; a top-level consumer.* reaches no client (and is warned)
    with capture_logs() as logs:
        assert flow(load_text(AB + "consumer.auto.offset.reset = latest\n"),
                    "A->B").delivery.auto_offset_reset == "earliest"
    assert "consumer.auto.offset.reset" in next(e["settings"] for e in logs if "settings" in e)
    cfg = load_text(BASE + "A->B.enabled = true\nB->A.enabled = true\nA.consumer.auto.offset.reset = latest\n")
    assert (flow(cfg, "A->B").delivery.auto_offset_reset,
            flow(cfg, "B->A").delivery.auto_offset_reset) == ("latest", "earliest")
    assert flow(load_text(AB + "A->B.consumer.auto.offset.reset = LATEST\n"),
                "A->B").delivery.auto_offset_reset == "latest"
    cfg = load_text(AB + "A.consumer.auto.offset.reset = earliest\nA->B.consumer.auto.offset.reset = latest\n")
    assert flow(cfg, "A->B").delivery.auto_offset_reset == "earliest", "A.consumer.* beats A->B.consumer.* in MM2"
    cfg = load_text(AB + "A.consumer.auto.offset.reset = earliest\nA->B.source.consumer.auto.offset.reset = latest\n")
    assert flow(cfg, "A->B").delivery.auto_offset_reset == "latest"


def test_java_policy_class_names_and_python_paths_accepted():
    java = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
    cfg = load_text(BASE + f"A->B.enabled = true\nB->A.enabled = true\nreplication.policy.class = {java}\n"
                    "B->A.replication.policy.class = tests.plugins.FromSuffix\n")
    assert flow(cfg, "A->B").naming.replication_policy_class == java
    assert flow(cfg, "B->A").naming.replication_policy_class == "tests.plugins.FromSuffix"


def test_empty_or_malformed_policy_class_rejected():
    found = keyed(AB + "replication.policy.class =\nB->A.replication.policy.class = not a class\n")
    assert "empty" in found["replication.policy.class"].message
    assert "'not a class'" in found["B->A.replication.policy.class"].message


def test_spark_and_metrics_port():
    cfg = load_text(AB + "spark.master = local[2]\nspark.executor.memory = 2g \nmetrics.port = 9404\n")
    assert cfg.spark == {"spark.master": "local[2]", "spark.executor.memory": "2g"}
    assert cfg.metrics_port == 9404 and cfg.source_path == "<text>"


def test_spark_speculation_is_refused_naming_its_line():
    text = AB + "spark.speculation = true\n"
    found = keyed(text)["spark.speculation"]
    assert "speculative copy task" in found.message and found.line == text.count("\n")
    assert load_text(AB + "spark.speculation = false\n").spark == {"spark.speculation": "false"}


def test_resident_copiers_are_unset_by_default_and_follow_the_setting():
    assert flow(load_text(AB), "A->B").copy.resident_enabled is None  # on with a local master only
    assert flow(load_text(AB + "A->B.copy.resident.enabled = true\n"), "A->B").copy.resident_enabled is True
    assert flow(load_text(AB + "copy.resident.enabled = false\n"), "A->B").copy.resident_enabled is False


# -- unknown keys --------------------------------------------------------------------------


def test_unknown_keys_are_listed_in_one_warning_not_fatal():
    accepted = ("offset.flush.interval.ms = 1000\nkey.converter = x\nvalue.converter.schemas.enable = false\n"
                "dedicated.mode.enable.internal.rest = true\nconfig.storage.replication.factor = 1\n"
                "topic.filter.class = org.apache.kafka.connect.mirror.DefaultTopicFilter\n"
                "emit.heartbeats.something = 1\nreplication.policy.future = 2\nsource.cluster.alias = A\n"
                "ssl.truststore.location = /t\nsasl.mechanism = PLAIN\nsecurity.protocol = SSL\n"
                "A->B.consumer.fetch.min.bytes = 1\nA->B.source.consumer.check.crcs = true\n")
    with capture_logs() as logs:
        cfg = load_text(AB + accepted + "mystery.knob = 3\nA->B.typo.enabeld = true\nC.bootstrap.servers = c:1\n")
    assert cfg.unknown_keys == ("mystery.knob", "A->B.typo.enabeld", "C.bootstrap.servers")
    warnings = [e for e in logs if e["log_level"] == "warning"]
    assert len(warnings) == 1 and warnings[0]["keys"] == list(cfg.unknown_keys)


def test_a_filter_class_that_cannot_be_loaded_is_refused_naming_key_and_line():
    # mm2py loads filter classes (mm2py.config.filters); a Java one it cannot is no longer swallowed with a warning
    (problem,) = problems(AB + "topic.filter.class = com.example.MyFilter\n")
    assert (problem.key, problem.line) == ("topic.filter.class", 6)
    assert "com.example.MyFilter" in problem.message and "Python port" in problem.message


# -- validation ----------------------------------------------------------------------------


def test_every_problem_reported_at_once_with_key_and_line():
    text = ("clusters = A, B\n"                 # 1
            "A.bootstrap.servers = a:9092\n"    # 2
            "A->B.enabled = true\n"             # 3
            "A->C.enabled = true\n"             # 4
            "refresh.topics.interval.seconds = soon\n"  # 5
            "A->B.topics = ([\n"                # 6
            "emit.heartbeats.enabled = yes\n"   # 7
            "replication.factor = 0\n"          # 8
            "sync.topic.acls.interval.seconds = -1\n"  # 9
            "use.defaults.from = nowhere\n"     # 10
            "A->B.tasks.max = 1_000\n")         # 11
    found = problems(text)
    assert [(p.key, p.line) for p in found] == [
        ("B.bootstrap.servers", 3),
        ("A->C.enabled", 4),
        ("refresh.topics.interval.seconds", 5),
        ("A->B.topics", 6),
        ("emit.heartbeats.enabled", 7),
        ("replication.factor", 8),
        ("sync.topic.acls.interval.seconds", 9),
        ("use.defaults.from", 10),
        ("A->B.tasks.max", 11),
    ]
    assert all(p.source == "mm2.cfg" for p in found)
    by_key = {p.key: p.message for p in found}
    assert "'C'" in by_key["A->C.enabled"] and "'soon'" in by_key["refresh.topics.interval.seconds"]
    assert "'yes'" in by_key["emit.heartbeats.enabled"] and "at least 1" in by_key["replication.factor"]
    assert "'-1'" in by_key["sync.topic.acls.interval.seconds"] and "source, target" in by_key["use.defaults.from"]
    assert "'(['" in by_key["A->B.topics"] and "A->B" in by_key["B.bootstrap.servers"]
    with pytest.raises(ConfigError) as err:
        load_text(text, source="mm2.cfg")
    message = str(err.value)
    assert message.startswith("invalid configuration (9 problems)")
    assert "mm2.cfg:5, key 'refresh.topics.interval.seconds'" in message


def test_missing_clusters():
    [problem] = problems("A.bootstrap.servers = a:1\n")
    assert problem.key == "clusters" and "missing" in problem.message


def test_bad_aliases():
    found = problems("clusters = A, B/C\nA.bootstrap.servers = a:1\n")
    assert [(p.key, p.line) for p in found] == [("clusters", 1)] and "'B/C'" in found[0].message
    assert "no cluster" in problems("clusters = ,\n")[0].message


def test_self_flow_and_single_cluster():
    found = keyed(BASE + "A->A.enabled = true\n")
    assert "itself" in found["A->A.enabled"].message
    found = keyed("clusters = A\nA.bootstrap.servers = a:1\nenabled = true\nA->B.enabled = true\n")
    assert "only A" in found["enabled"].message and "'B'" in found["A->B.enabled"].message


def test_bootstrap_reported_once_per_cluster():
    text = "clusters = A, B, C\nC.bootstrap.servers = c:1\nA->B.enabled = true\nA->C.enabled = true\n"
    found = problems(text)
    assert [(p.key, p.line) for p in found] == [("A.bootstrap.servers", 3), ("B.bootstrap.servers", 3)]


def test_invalid_enabled_auto_offset_reset_and_metrics_port():
    found = keyed(AB + "B->A.enabled = maybe\nA.consumer.auto.offset.reset = none\n"
                  "consumer.auto.offset.reset = latest \nmetrics.port = 70000\n")
    assert set(found) == {"B->A.enabled", "A.consumer.auto.offset.reset", "metrics.port"}
    assert "earliest, latest" in found["A.consumer.auto.offset.reset"].message
    assert "at most 65535" in found["metrics.port"].message


def test_numbers_parse_as_java_does():
    found = keyed(AB + "offset.lag.max = 1e3\nrefresh.groups.interval.seconds = nan\nadmin.timeout.ms = 0x10\n")
    assert set(found) == {"offset.lag.max", "refresh.groups.interval.seconds", "admin.timeout.ms"}


def test_malformed_escape_is_a_config_error_with_line():
    [problem] = problems(AB + "topics = \\u00\n")
    assert (problem.key, problem.line) == ("topics", 6)


# -- YAML and files ---------------------------------------------------------------------------

PROPS = BASE + "A->B.enabled = true\nA->B.topics = a, b\nreplication.factor = 1\nA.consumer.client.rack = r\n"
NESTED = """
clusters: A, B
A:
  bootstrap.servers: a:9092
  consumer: {client.rack: r}
B:
  bootstrap.servers: b:9092
A->B:
  enabled: true
  topics: [a, b]
replication:
  factor: 1
"""
FLAT = """
clusters: [A, B]
A.bootstrap.servers: a:9092
B.bootstrap.servers: b:9092
A->B.enabled: true
A->B.topics: a, b
replication.factor: 1
A.consumer.client.rack: r
"""


def test_yaml_flat_and_nested_equal_properties(tmp_path: Path):
    nested_file = tmp_path / "mm2.yaml"
    nested_file.write_text(NESTED)
    flat_file = tmp_path / "mm2.YML"
    flat_file.write_text(FLAT)
    expected = dataclasses.replace(load_text(PROPS), source_path=None)
    for cfg in (load(nested_file), load(flat_file), load_text(FLAT, fmt="yaml")):
        assert dataclasses.replace(cfg, source_path=None) == expected
    assert load(nested_file).source_path == str(nested_file)


def test_yaml_scalars_are_read_as_written():
    cfg = load_text("clusters: A, B\nA.bootstrap.servers: a\nB.bootstrap.servers: b\n"
                    "A->B: {enabled: True, tasks.max: 2, topics: ~}\nemit.heartbeats.interval.seconds: 1.5\n",
                    fmt="yaml")
    f = flow(cfg, "A->B")
    assert (f.enabled, f.copy.tasks_max, f.selection.topics,
            f.heartbeats.emit_heartbeats_interval_seconds) == (True, 2, (), 1.5)


def test_yaml_merge_keys():
    text = ("defaults: &d {enabled: true, topics: x}\nclusters: A, B\nA.bootstrap.servers: a\n"
            "B.bootstrap.servers: b\nA->B:\n  <<: *d\n  topics: y\n")
    f = flow(load_text(text, fmt="yaml"), "A->B")
    assert f.enabled and f.selection.topics == ("y",)


def test_yaml_errors_name_the_line():
    found = problems("clusters: A, B\nA.bootstrap.servers: a\nB.bootstrap.servers: b\n"
                     "A->B.enabled: true\nA->B:\n  tasks.max: many\n", fmt="yaml")
    assert [(p.key, p.line, p.source) for p in found] == [("A->B.tasks.max", 6, "mm2.cfg")]


def test_yaml_shape_problems():
    found = problems("clusters: A\nA:\n  x: [{a: 1}]\n  y: [\"a,b\"]\n[k]: v\n", fmt="yaml")
    assert [(p.key, p.line) for p in found] == [("A.x", 3), ("A.y", 4), (None, 5)]
    assert problems("- a\n- b\n", fmt="yaml")[0].message == "expected a mapping of keys"
    assert problems("a: [b\n", fmt="yaml")[0].line == 2


def test_load_reads_latin1_files_like_java_and_skips_a_bom(tmp_path: Path):
    latin = tmp_path / "mm2.properties"
    latin.write_bytes(AB.encode() + "A.client.rack = caf\xe9\n".encode("latin-1"))
    assert load(latin).clusters["A"].client["client.rack"] == "café"
    bom = tmp_path / "bom.properties"
    bom.write_bytes(b"\xef\xbb\xbf" + AB.encode())
    assert load(bom).enabled_flows


def test_load_missing_file_and_unknown_format(tmp_path: Path):
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "absent.properties")
    with pytest.raises(ValueError, match="toml"):
        load_text(AB, fmt="toml")  # type: ignore[arg-type]


def test_examples_load():
    examples = sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.properties"))
    assert examples
    for path in examples:
        cfg = load(path)
        assert cfg.enabled_flows and cfg.unknown_keys == (), path


def test_exactly_once_modes_from_mm2s_worker_key_and_the_connector_key() -> None:
    base = ("clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            "C.bootstrap.servers = c:9092\nA->B.enabled = true\nA->C.enabled = true\n")

    def modes(extra: str) -> dict[str, tuple[str, str | None]]:
        return {f.name: (f.delivery.exactly_once, f.delivery.exactly_once_key)
                for f in load_text(base + extra).enabled_flows}

    assert modes("") == {"A->B": ("off", None), "A->C": ("off", None)}
    assert modes("B.exactly.once.source.support = enabled\n") == {
        "A->B": ("enabled", "B.exactly.once.source.support"), "A->C": ("off", None)}
    assert modes("exactly.once.source.support = required\n")["A->C"] == ("required", "exactly.once.source.support")
    assert modes("B.exactly.once.source.support = preparing\n")["A->B"] == ("off", None)
    assert modes("A->B.exactly.once.support = required\n")["A->B"] == ("required", "A->B.exactly.once.support")
    assert modes("exactly.once.support = enabled\n")["A->C"] == ("enabled", "exactly.once.support")
    # MM2's 'requested' follows the worker key; 'disabled' wins over it
    assert modes("exactly.once.support = requested\nB.exactly.once.source.support = enabled\n")["A->B"][0] == \
        "enabled"
    assert modes("A->B.exactly.once.support = disabled\nB.exactly.once.source.support = required\n")["A->B"][0] \
        == "off"


def test_exactly_once_required_with_hash_partitioning_is_refused_naming_key_and_line() -> None:
    text = ("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            "A->B.enabled = true\nA->B.exactly.once.support = required\nA->B.partition.mismatch = hash\n")
    with pytest.raises(ConfigError) as err:
        load_text(text, source="mm2.properties")
    message = str(err.value)
    assert "mm2.properties:5" in message and "A->B.exactly.once.support" in message and "hash" in message


def test_continuous_copy_with_exactly_once_is_accepted() -> None:
    head = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
    for eos in ("A->B.exactly.once.support = required\n", "B.exactly.once.source.support = enabled\n"):
        flow = load_text(head + "A->B.copy.continuous.enabled = true\n" + eos).flows[0]
        assert flow.copy.continuous_enabled and flow.delivery.exactly_once != "off"
    load_text(head + "A->B.copy.continuous.enabled = true\n")  # at-least-once: copy intervals


def test_exactly_once_source_support_preparing_warns_that_flows_are_at_least_once() -> None:
    import structlog

    text = ("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            "A->B.enabled = true\nB.exactly.once.source.support = preparing\n")
    with structlog.testing.capture_logs() as logs:
        load_text(text)
    [warned] = [e for e in logs if e["log_level"] == "warning"]
    assert "at-least-once" in warned["not_supported"]["B.exactly.once.source.support"]


def test_a_policy_class_that_cannot_load_is_refused_with_key_and_line() -> None:
    text = ("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
            "A->B.enabled = true\nA->B.replication.policy.class = no_such_module.Policy\n")
    with pytest.raises(ConfigError) as err:
        load_text(text, source="mm2.properties")
    assert "mm2.properties:5" in str(err.value) and "A->B.replication.policy.class" in str(err.value)
    assert "no_such_module" in str(err.value)
