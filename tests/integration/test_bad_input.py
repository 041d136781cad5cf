"""Issue 5, bad input: each case gives a clear message and loses no record.

Config mistakes are refused before Spark starts (line numbers: tests/unit/test_config.py has
the full matrix; here the CLI end to end). Cluster trouble is met on real brokers: nothing
answering, a wrong SASL password, missing ACLs (a SASL cluster with the standard
authorizer), a batch larger than the remote topic takes, records deleted by retention before
they were mirrored, and the remote topic deleted while the flow runs.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
)

from mm2py.config import load_text
from mm2py.dev import cluster as devcluster
from mm2py.engine.driver import Engine
from mm2py.errors import AuthenticationError, AuthorizationError, ClusterUnreachableError, Mm2pyError
from mm2py.flowspec import FlowSpec
from mm2py.kafka.admin import Admin
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.task import CopySpec, TaskRun, copy_ranges
from mm2py.source.plan.wiring import planner_for
from mm2py.source.ranges import PartitionRange
from mm2py.stores.positions import PositionStore
from tests.conftest import PORT_OFFSET
from tests.integration.mirror_helpers import REPO, mirror_once, properties
from tests.kafkautil import consume_all, create_topic, delete_topic, end_offsets, list_topics, produce, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]  # tests/lane_layout.py: a long lane, for balance

ACL_PORT = 30850 + PORT_OFFSET
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ALICE = {"alice": "alice-secret"}


def values(records: dict) -> dict[int, list[bytes]]:
    return {p: [r.value for r in rs] for p, rs in records.items()}


def errors_logged(logs: list[dict]) -> list[dict]:
    return [entry for entry in logs if entry.get("log_level") == "error"]


# -- configuration ------------------------------------------------------------------------


def run_cli(config: Path, text: str) -> subprocess.CompletedProcess[str]:
    config.write_text(text)
    return subprocess.run([sys.executable, "-m", "mm2py", "run", str(config)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def test_cli_refuses_malformed_file_and_unknown_alias_naming_lines(tmp_path):
    config = tmp_path / "mm2.properties"
    base = "clusters = A, B\nA.bootstrap.servers = 127.0.0.1:1\nB.bootstrap.servers = 127.0.0.1:2\n"
    malformed = run_cli(config, base + "A->B.enabled = true\ntopics = \\u00zz\n")
    assert malformed.returncode == 2, malformed.stderr
    assert f"{config}:5, key 'topics': malformed \\uxxxx escape" in malformed.stderr

    unknown = run_cli(config, base + "A->B.enabled = true\nA->C.enabled = true\nA->B.topics = ([\n")
    assert unknown.returncode == 2, unknown.stderr
    assert "(2 problems)" in unknown.stderr, "every problem at once"
    assert f"{config}:5, key 'A->C.enabled'" in unknown.stderr and "'C'" in unknown.stderr
    assert f"{config}:6, key 'A->B.topics'" in unknown.stderr
    assert "Spark" not in malformed.stderr + unknown.stderr  # refused before a session was built


# -- clusters that cannot be used ----------------------------------------------------------


def test_unreachable_bootstrap_is_a_clear_error_within_admin_timeout(spark, cluster_b, unique_name, tmp_path):
    dead = "127.0.0.1:9"  # discard port: nothing listens
    text = properties({"A": dead, "B": cluster_b.bootstrap}, {"A->B": {"topics": unique_name}},
                      "admin.timeout.ms = 4000\n")
    started = time.monotonic()
    with pytest.raises(ClusterUnreachableError) as err:
        Admin(load_text(text).clusters["A"], timeout_ms=4000).topics()
    assert time.monotonic() - started < 4 + 10, "the admin timeout bounds the wait"
    assert "cluster=A" in str(err.value) and dead in str(err.value)

    started = time.monotonic()
    with pytest.raises(Mm2pyError) as err:
        mirror_once(spark, text, tmp_path, timeout=120)
    assert time.monotonic() - started < 100, "a flow fails, it does not hang"
    message = str(err.value)
    assert "cluster=A" in message and dead in message, message


@pytest.fixture(scope="module")
def acl_cluster(cluster_workdir: Path) -> Iterator[devcluster.DevCluster]:
    """A SASL_PLAINTEXT cluster with the standard authorizer: ``admin`` is a super user, ``alice`` is not."""
    try:
        yield devcluster.start_cluster("faults-acl", ACL_PORT, workdir=cluster_workdir,
                                       listeners_security="SASL_PLAINTEXT", sasl_users=ALICE,
                                       extra_properties={"authorizer.class.name": STANDARD_AUTHORIZER})
    finally:
        with contextlib.suppress(Exception):
            devcluster.stop_cluster("faults-acl", cluster_workdir)


def sasl_lines(alias: str, user: str, password: str) -> str:
    jaas = (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{user}" '
            f'password="{password}";')
    return (f"{alias}.security.protocol = SASL_PLAINTEXT\n{alias}.sasl.mechanism = PLAIN\n"
            f"{alias}.sasl.jaas.config = {jaas}\n")


def allow(cluster: devcluster.DevCluster, resource: ResourceType, name: str, *operations: AclOperation) -> None:
    admin = AdminClient(cluster.rdkafka_config())
    bindings = [AclBinding(resource, name, ResourcePatternType.LITERAL, "User:alice", "*", op,
                           AclPermissionType.ALLOW) for op in operations]
    for future in admin.create_acls(bindings).values():
        future.result(30)


def test_wrong_sasl_password_names_the_cluster_within_admin_timeout(spark, acl_cluster, cluster_b, unique_name,
                                                                     tmp_path):
    text = (properties({"A": acl_cluster.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": unique_name}},
                       "admin.timeout.ms = 5000\n") + sasl_lines("A", "alice", "not-her-password"))
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as err:
        Admin(load_text(text).clusters["A"], timeout_ms=5000).topics()
    assert time.monotonic() - started < 5 + 10
    assert "authentication failed" in str(err.value) and "cluster=A" in str(err.value)

    # a reader of an internal topic (positions, as `status` reads them on the target) says so too, at once
    started = time.monotonic()
    with pytest.raises(AuthenticationError) as err:
        PositionStore(load_text(text).clusters["A"], "B", timeout_ms=60000).load()
    assert time.monotonic() - started < 10, "named within seconds, not at the 60 s timeout"
    assert "authentication failed" in str(err.value) and "cluster=A" in str(err.value), str(err.value)

    with pytest.raises(AuthenticationError) as err:
        mirror_once(spark, text, tmp_path, timeout=120)
    assert "authentication failed" in str(err.value) and "cluster=A" in str(err.value), str(err.value)


def test_missing_read_acl_on_source_topic_is_named(spark, acl_cluster, cluster_b, unique_name, tmp_path):
    admin_conf = acl_cluster.rdkafka_config()
    create_topic(acl_cluster.bootstrap, unique_name, 1, client=admin_conf)
    produce(acl_cluster.bootstrap, unique_name, [(None, b"v%d" % i, None, None) for i in range(10)],
            client=admin_conf)
    # alice sees the topic (DESCRIBE) and may write offset syncs, but may not READ the topic
    allow(acl_cluster, ResourceType.TOPIC, unique_name, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)
    allow(acl_cluster, ResourceType.TOPIC, "mm2-offset-syncs.B.internal", AclOperation.ALL)
    allow(acl_cluster, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE)
    text = (properties({"A": acl_cluster.bootstrap, "B": cluster_b.bootstrap},
                       {"A->B": {"topics": unique_name, "sync.topic.acls.enabled": "false"}})
            + sasl_lines("A", "alice", ALICE["alice"]))
    with pytest.raises(AuthorizationError) as err:
        mirror_once(spark, text, tmp_path, timeout=180)
    message = str(err.value)
    assert f"missing ACL ALLOW READ on TOPIC '{unique_name}' for User:alice" in message, message
    assert "cluster=A" in message and err.value.topic == unique_name
    assert "Traceback" not in message and "\n" not in message, "one line, not Spark's stack trace"

    # the CLI, running continuously, ends with that line and exit 1 (above it, Spark's own log of the failure)
    config = tmp_path / "mm2.properties"
    config.write_text(text)
    cli = subprocess.run([sys.executable, "-m", "mm2py", "run", str(config)], capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    assert cli.returncode == 1, cli.stderr[-2000:]
    last = cli.stderr.strip().splitlines()[-1]
    assert last.startswith("mm2py: error: source A->B failed: not authorized: missing ACL ALLOW READ on TOPIC "
                           f"'{unique_name}' for User:alice"), cli.stderr[-2000:]
    # alice may write MM2's syncs topic but not create mm2py's history beside it: named once, not fatal
    assert "offset-sync history off" in cli.stderr and ("missing ACL ALLOW CREATE on TOPIC "
                                                       "'mm2-offset-syncs-history.B.internal'") in cli.stderr
    # nothing counts as mirrored: the next run, with the ACL, copies everything
    assert PositionStore(load_text(text).clusters["B"], "A").load().get((unique_name, 0)) is None
    allow(acl_cluster, ResourceType.TOPIC, unique_name, AclOperation.READ)
    mirror_once(spark, text, tmp_path / "again")
    assert values(consume_all(cluster_b.bootstrap, f"A.{unique_name}")) == {0: [b"v%d" % i for i in range(10)]}


def test_missing_write_acl_on_remote_topic_is_named(spark, acl_cluster, cluster_a, unique_name, tmp_path):
    admin_conf = acl_cluster.rdkafka_config()
    create_topic(cluster_a.bootstrap, unique_name, 1)
    produce(cluster_a.bootstrap, unique_name, [(None, b"v%d" % i, None, None) for i in range(10)])
    remote = f"A.{unique_name}"
    create_topic(acl_cluster.bootstrap, remote, 1, client=admin_conf)
    # alice may read and write mm2py's own topics on B, and see the remote topic, but not write it;
    # A.heartbeats too: A holds a heartbeats topic once any run beat into A, and the flow mirrors it
    for topic in ("mm2-offsets.A.internal", "heartbeats", "A.heartbeats", "A.checkpoints.internal",
                  "mm2py-ledger.A.internal"):
        allow(acl_cluster, ResourceType.TOPIC, topic, AclOperation.ALL)
    allow(acl_cluster, ResourceType.TOPIC, remote, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS)
    allow(acl_cluster, ResourceType.GROUP, "mm2py-positions-A", AclOperation.ALL)
    allow(acl_cluster, ResourceType.GROUP, "mm2py-stalls-A", AclOperation.ALL)
    allow(acl_cluster, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE, AclOperation.CREATE)
    text = (properties({"A": cluster_a.bootstrap, "B": acl_cluster.bootstrap},
                       {"A->B": {"topics": unique_name, "sync.topic.acls.enabled": "false",
                                 "sync.topic.configs.enabled": "false"}})
            + sasl_lines("B", "alice", ALICE["alice"]))
    with pytest.raises(AuthorizationError) as err:
        mirror_once(spark, text, tmp_path, timeout=180)
    message = str(err.value)
    assert f"missing ACL ALLOW WRITE on TOPIC '{remote}' for User:alice" in message, message
    assert "cluster=B" in message


def test_named_topic_hidden_by_a_missing_describe_acl_is_named(acl_cluster, cluster_a, cluster_b, unique_name):
    """A topic the principal may not DESCRIBE is left out of every listing; MM2 skips it silently."""
    hidden, absent = f"{unique_name}-hidden", f"{unique_name}-absent"
    create_topic(acl_cluster.bootstrap, hidden, 1, client=acl_cluster.rdkafka_config())
    text = (properties({"A": acl_cluster.bootstrap, "B": cluster_b.bootstrap},
                       {"A->B": {"topics": f"{hidden}, other-.*"}})
            + sasl_lines("A", "alice", ALICE["alice"]))
    catalogue = planner_for(FlowSpec.alone(load_text(text).enabled_flows[0])).catalogue
    with structlog.testing.capture_logs() as logs:
        catalogue.refresh_topics(force=True)
        catalogue.refresh_topics(force=True)
    errors = [e for e in errors_logged(logs) if e.get("topic") == hidden]
    assert len(errors) == 2, "named at every refresh"
    assert (f"missing ACL ALLOW DESCRIBE on TOPIC '{hidden}' for User:alice" in errors[0]["event"]
            and errors[0]["cluster"] == "A"), errors
    assert not catalogue.partitions

    # where nothing hides topics, a named topic that does not exist is a warning, once, and not created
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": absent}})
    catalogue = planner_for(FlowSpec.alone(load_text(text).enabled_flows[0])).catalogue
    with structlog.testing.capture_logs() as logs:
        catalogue.refresh_topics(force=True)
        catalogue.refresh_topics(force=True)
    warnings = [e for e in logs if e.get("topic") == absent and e.get("log_level") == "warning"]
    assert len(warnings) == 1 and "does not exist" in warnings[0]["event"], logs
    assert not errors_logged(logs)
    assert absent not in list_topics(cluster_a.bootstrap), "asking by name did not create it"


def test_missing_describe_acl_on_group_is_named(acl_cluster, unique_name):
    group = f"{unique_name}-g"
    text = (properties({"A": acl_cluster.bootstrap, "B": "127.0.0.1:9"}, {"A->B": {}})
            + sasl_lines("A", "alice", ALICE["alice"]))
    with pytest.raises(AuthorizationError) as err:
        Admin(load_text(text).clusters["A"], timeout_ms=10000).group_offsets(group)
    assert err.value.operation == "DESCRIBE" and err.value.resource_type == "GROUP"
    assert err.value.resource_name == group and err.value.principal == "User:alice"
    assert f"missing ACL ALLOW DESCRIBE on GROUP '{group}' for User:alice" in str(err.value)


# -- data the target or the source cannot give ---------------------------------------------


def set_topic_config(bootstrap: str, topic: str, key: str, value: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def test_record_larger_than_target_allows_stalls_only_its_partition(spark, cluster_a, cluster_b, unique_name,
                                                                     tmp_path):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(cluster_a.bootstrap, topic, 3)
    # the remote topic takes at most 4000-byte batches (configs not synced, so it stays so)
    create_topic(cluster_b.bootstrap, remote, 3, {"max.message.bytes": "4000"})
    small = [(b"k", b"s%03d" % i, None, None) for i in range(20)]
    for p in (0, 2):
        produce(cluster_a.bootstrap, topic, small, partition=p)
    produce(cluster_a.bootstrap, topic, small[:10], partition=1)
    produce(cluster_a.bootstrap, topic, [(b"k", b"B" * 20000, None, None)], partition=1)  # offset 10
    produce(cluster_a.bootstrap, topic, small[10:], partition=1)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                      {"A->B": {"topics": topic, "sync.topic.configs.enabled": "false"}})

    with structlog.testing.capture_logs() as logs:
        mirror_once(spark, text, tmp_path / "one")  # ends: the stuck partition is left behind
    got = values(consume_all(cluster_b.bootstrap, remote))
    assert got[0] == got[2] == [v for _, v, _, _ in small], "the other partitions went on"
    assert got.get(1, []) == [v for _, v, _, _ in small[:10]], "stopped right before the big batch"
    stalled = [e for e in errors_logged(logs) if e.get("partition") == 1 and "stalled" in e["event"]]
    assert stalled, errors_logged(logs)
    report = stalled[0]
    assert report["topic"] == topic and report["offset"] == 10 and report["remote_topic"] == remote
    assert report["batch_bytes"] > 20000 and report["target_max_message_bytes"] == 4000
    assert "max.message.bytes" in report["event"]
    stored = PositionStore(load_text(text).clusters["B"], "A").load()
    assert stored[(topic, 1)] == 9 and stored[(topic, 0)] == 19

    # the operator raises the limit: the partition resumes where it stopped, nothing lost or doubled
    set_topic_config(cluster_b.bootstrap, remote, "max.message.bytes", "100000")
    mirror_once(spark, text, tmp_path / "two")
    got = values(consume_all(cluster_b.bootstrap, remote))
    assert got[1] == [v for _, v, _, _ in small[:10]] + [b"B" * 20000] + [v for _, v, _, _ in small[10:]]
    assert got[0] == got[2] == [v for _, v, _, _ in small]


def test_records_deleted_before_mirrored_are_reported_and_the_rest_goes_on(spark, cluster_a, cluster_b,
                                                                          unique_name, tmp_path):
    topic = unique_name
    create_topic(cluster_a.bootstrap, topic, 2)
    produce(cluster_a.bootstrap, topic, [(None, b"a%d" % i, None, None) for i in range(50)], partition=0)
    produce(cluster_a.bootstrap, topic, [(None, b"x%d" % i, None, None) for i in range(5)], partition=1)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    mirror_once(spark, text, tmp_path / "one")
    produce(cluster_a.bootstrap, topic, [(None, b"a%d" % i, None, None) for i in range(50, 120)], partition=0)
    produce(cluster_a.bootstrap, topic, [(None, b"x%d" % i, None, None) for i in range(5, 10)], partition=1)
    # retention (here: delete-records) takes offsets below 80 before the flow got to them
    admin = AdminClient({"bootstrap.servers": cluster_a.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, 0, 80)]).values():
        future.result(30)

    with structlog.testing.capture_logs() as logs:
        mirror_once(spark, text, tmp_path / "two")
    lost = [e for e in errors_logged(logs) if "deleted before they were mirrored" in e["event"]]
    assert [(e["topic"], e["partition"], e["lost_from"], e["lost_to"]) for e in lost] == [(topic, 0, 50, 80)]
    got = values(consume_all(cluster_b.bootstrap, f"A.{topic}"))
    assert got[0] == [b"a%d" % i for i in [*range(50), *range(80, 120)]]
    assert got[1] == [b"x%d" % i for i in range(10)]


def test_remote_topic_deleted_while_running_is_recreated_without_loss(spark, cluster_a, cluster_b, unique_name,
                                                                      tmp_path):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(cluster_a.bootstrap, topic, 2)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    config = load_text(text)
    engine = Engine(config, spark, str(tmp_path / "ckpt"))
    stop = threading.Event()
    runner = threading.Thread(target=engine.wait, args=(stop,), daemon=True)
    with structlog.testing.capture_logs() as logs:
        engine.start(config.enabled_flows)
        try:
            runner.start()
            produce(cluster_a.bootstrap, topic, [(b"%d" % i, b"before%d" % i, None, None) for i in range(40)])
            wait_until(lambda: sum(end_offsets(cluster_b.bootstrap, remote).values()) >= 40, 120,
                       message="first records mirrored")
            delete_topic(cluster_b.bootstrap, remote)
            wait_until(lambda: remote not in list_topics(cluster_b.bootstrap), 60, message="remote topic deleted")
            after = [(b"%d" % i, b"after%d" % i, None, None) for i in range(40)]
            produce(cluster_a.bootstrap, topic, after)

            def all_after_arrived() -> bool:
                if remote not in list_topics(cluster_b.bootstrap):
                    return False
                got = {r.value for rs in consume_all(cluster_b.bootstrap, remote).values() for r in rs}
                return {v for _, v, _, _ in after} <= got

            wait_until(all_after_arrived, 180, message="remote topic re-created with every later record")
        finally:
            stop.set()
            engine.stop()
    got = [r.value for rs in consume_all(cluster_b.bootstrap, remote).values() for r in rs]
    assert sorted(v for v in got if v.startswith(b"after")) == sorted(v for _, v, _, _ in after), "no duplicates"
    assert any(remote in str(e.get("reason", "")) for e in errors_logged(logs)), errors_logged(logs)


def test_too_large_batch_in_a_running_flow_reports_every_micro_batch_and_resumes(spark, cluster_a, cluster_b,
                                                                                unique_name, tmp_path):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(cluster_a.bootstrap, topic, 2)
    create_topic(cluster_b.bootstrap, remote, 2, {"max.message.bytes": "4000"})
    produce(cluster_a.bootstrap, topic, [(None, b"B" * 20000, None, None)], partition=1)
    produce(cluster_a.bootstrap, topic, [(None, b"after", None, None)], partition=1)
    config = load_text(properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                                  {"A->B": {"topics": topic, "sync.topic.configs.enabled": "false"}}))
    engine = Engine(config, spark, str(tmp_path / "ckpt"))
    stop = threading.Event()
    runner = threading.Thread(target=engine.wait, args=(stop,), daemon=True)

    def stalled_reports() -> list[dict]:
        return [e for e in errors_logged(logs) if e.get("partition") == 1 and "stalled" in e["event"]]

    with structlog.testing.capture_logs() as logs:
        engine.start(config.enabled_flows)
        try:
            runner.start()
            for i in range(3):  # partition 0 keeps flowing meanwhile
                produce(cluster_a.bootstrap, topic, [(None, b"p0-%d" % i, None, None)], partition=0)
                wait_until(lambda i=i: end_offsets(cluster_b.bootstrap, remote).get(0, 0) >= i + 1, 60,
                           message=f"record {i} of partition 0 mirrored")
            wait_until(lambda: len(stalled_reports()) >= 2, 60, message="the stall reported again")
            assert end_offsets(cluster_b.bootstrap, remote).get(1, 0) == 0
            set_topic_config(cluster_b.bootstrap, remote, "max.message.bytes", "100000")
            wait_until(lambda: end_offsets(cluster_b.bootstrap, remote).get(1, 0) >= 2, 90,
                       message="partition 1 resumed after the limit was raised")
        finally:
            stop.set()
            engine.stop()
    assert values(consume_all(cluster_b.bootstrap, remote)) == {
        0: [b"p0-0", b"p0-1", b"p0-2"], 1: [b"B" * 20000, b"after"]}
    report = stalled_reports()[0]
    assert report["offset"] == 0 and report["target_max_message_bytes"] == 4000 and report["batch_bytes"] > 20000


def test_target_refusing_a_partitions_first_batch_lets_nothing_after_it_land(cluster_a, cluster_b, unique_name):
    """The remote topic's limit dropped after planning (the range carries no limit): the broker refuses.

    A producer id new to a partition would take any sequence, so a batch sent behind the refused
    first one could land ahead of it; the copier keeps a partition's first batch alone in flight.
    """
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(cluster_a.bootstrap, topic, 1)
    create_topic(cluster_b.bootstrap, remote, 1, {"max.message.bytes": "4000"})
    produce(cluster_a.bootstrap, topic, [(b"k", b"B" * 20000, None, None)], partition=0)  # offset 0
    for i in range(5):  # five more batches, one record each
        produce(cluster_a.bootstrap, topic, [(b"k", b"s%d" % i, None, None)], partition=0)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    clusters = load_text(text).clusters
    ranges = [PartitionRange(topic, 0, 0, 6, remote)]  # max_batch_bytes unknown: only the broker can tell

    [result] = copy_ranges(CopySpec(clusters["A"], clusters["B"], CopySettings()), ranges, TaskRun("refused-first"))

    assert (result.stall_offset, result.next_offset) == (0, 0)
    assert "too large" in result.stall_reason and result.stall_bytes > 20000
    assert end_offsets(cluster_b.bootstrap, remote) == {0: 0}, "nothing after the refused batch landed"
    assert result.records == 0 and result.syncs == ()

    set_topic_config(cluster_b.bootstrap, remote, "max.message.bytes", "100000")
    [again] = copy_ranges(CopySpec(clusters["A"], clusters["B"], CopySettings()), ranges, TaskRun("refused-first-2"))
    assert again.stall_offset == -1 and again.next_offset == 6
    assert values(consume_all(cluster_b.bootstrap, remote)) == {0: [b"B" * 20000] + [b"s%d" % i for i in range(5)]}


def test_exactly_once_required_without_a_transactional_id_acl_is_named(spark, acl_cluster, cluster_a, unique_name,
                                                                        tmp_path):
    create_topic(cluster_a.bootstrap, unique_name, 1)
    produce(cluster_a.bootstrap, unique_name, [(None, b"v%d" % i, None, None) for i in range(10)])
    remote = f"A.{unique_name}"
    # alice may do everything a flow into B needs except use transactional ids; A.heartbeats too:
    # the run's start makes A's heartbeats topic (B->A beats), which A->B then mirrors
    for topic in ("mm2-offsets.A.internal", "heartbeats", "A.heartbeats", "A.checkpoints.internal",
                  "mm2py-ledger.A.internal", remote):
        allow(acl_cluster, ResourceType.TOPIC, topic, AclOperation.ALL)
    allow(acl_cluster, ResourceType.GROUP, "mm2py-positions-A", AclOperation.ALL)
    allow(acl_cluster, ResourceType.GROUP, "mm2py-stalls-A", AclOperation.ALL)
    allow(acl_cluster, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE, AclOperation.CREATE,
          AclOperation.IDEMPOTENT_WRITE)
    text = (properties({"A": cluster_a.bootstrap, "B": acl_cluster.bootstrap},
                       {"A->B": {"topics": unique_name, "sync.topic.acls.enabled": "false",
                                 "sync.topic.configs.enabled": "false", "admin.timeout.ms": "15000"}})
            + sasl_lines("B", "alice", ALICE["alice"]))
    config = tmp_path / "mm2.properties"
    config.write_text(text + "B.exactly.once.source.support = required\n")
    cli = subprocess.run([sys.executable, "-m", "mm2py", "run", str(config)], capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    assert cli.returncode == 1, cli.stderr[-2000:]
    last = cli.stderr.strip().splitlines()[-1]
    assert "exactly-once delivery is required (B.exactly.once.source.support = required)" in last, last
    assert "missing ACL ALLOW WRITE and DESCRIBE on TRANSACTIONAL_ID prefix 'mm2py-A->B-' for User:alice" in last
    assert ("kafka-acls --add --allow-principal User:alice --operation Write --operation Describe "
            "--transactional-id 'mm2py-A->B-' --resource-pattern-type prefixed") in last, last
    # nothing was written: no remote records, no positions
    assert remote not in list_topics(acl_cluster.bootstrap, client=acl_cluster.rdkafka_config()) or \
        sum(end_offsets(acl_cluster.bootstrap, remote, client=acl_cluster.rdkafka_config()).values()) == 0
    assert PositionStore(load_text(text).clusters["B"], "A").load() == {}

    # 'enabled' instead: one WARNING naming why, and the flow mirrors at-least-once
    with structlog.testing.capture_logs() as logs:
        mirror_once(spark, text + "B.exactly.once.source.support = enabled\n", tmp_path / "enabled")
    [warning] = [e for e in logs if e.get("log_level") == "warning" and "exactly-once" in e["event"]]
    assert "runs at-least-once" in warning["event"] and "TRANSACTIONAL_ID" in warning["reason"], warning
    assert values(consume_all(acl_cluster.bootstrap, remote, client=acl_cluster.rdkafka_config())) == {
        0: [b"v%d" % i for i in range(10)]}
