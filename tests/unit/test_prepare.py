"""TargetPreparation: remote topics made while Spark starts, never in the way of the flows' start."""

from __future__ import annotations

import threading

from structlog.testing import capture_logs

from mm2py.config import load_text
from mm2py.config.model import FlowConfig
from mm2py.engine.prepare import TargetPreparation
from mm2py.flowspec import FlowSpec

TWO = ("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
       "A->B.enabled = true\nB->A.enabled = true\n")


def flows() -> tuple[FlowConfig, ...]:
    return load_text(TWO).enabled_flows


def test_every_flow_is_prepared_and_a_failure_is_named_not_raised():
    seen: list[str] = []

    def prepare(flow: FlowConfig) -> None:
        seen.append(flow.name)
        if flow.name == "A->B":
            raise RuntimeError("cluster B: not authorized: missing ACL ALLOW CREATE")

    with capture_logs() as logs:
        prep = TargetPreparation(flows(), prepare).start()
        assert prep.wait(threading.Event(), 10)
    assert seen == ["A->B", "B->A"], "one flow's failure does not keep the next from being prepared"
    [failed] = [e for e in logs if e["log_level"] == "info"]
    assert failed["flow"] == "A->B" and "missing ACL ALLOW CREATE" in failed["error"]
    assert prep.seconds is not None
    assert prep.prepared == {"B->A"}, "only a flow whose clusters answered counts as reached"


def test_wait_ends_at_its_limit_or_at_stop_while_a_cluster_does_not_answer():
    release = threading.Event()
    prep = TargetPreparation(flows(), lambda flow: release.wait(30)).start()
    try:
        assert prep.wait(threading.Event(), 0.3) is False
        stop = threading.Event()
        stop.set()
        assert prep.wait(stop, 30) is False
    finally:
        release.set()
    assert prep.wait(threading.Event(), 10) is True


ONE_WAY = ("clusters = A, B, C\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
           "C.bootstrap.servers = c:9092\nA->B.enabled = true\nA->B.topics = orders\n"
           "heartbeats.topic.replication.factor = 1\ncheckpoints.topic.replication.factor = 1\n")


def test_heartbeats_topics_are_prepared_before_any_flow_and_a_failure_is_named_not_raised():
    config = load_text(ONE_WAY)
    steps: list[str] = []

    def beat_target(flow: FlowConfig) -> None:
        steps.append(f"heartbeats on {flow.target.alias}")
        if flow.target.alias == "B":
            raise RuntimeError("cluster B: topic heartbeats: not authorized")

    with capture_logs() as logs:
        prep = TargetPreparation(config.enabled_flows, lambda flow: steps.append(f"flow {flow.name}"),
                                 heartbeats=config.heartbeat_flows(None), prepare_heartbeats=beat_target).start()
        assert prep.wait(threading.Event(), 10)
    # B->A beats make A's heartbeats topic, which A->B lists when it prepares its remote topics
    assert sorted(steps[:2]) == ["heartbeats on A", "heartbeats on B"] and steps[2:] == ["flow A->B"]
    [failed] = [e for e in logs if e["log_level"] == "info"]
    assert failed["cluster"] == "B" and "not authorized" in failed["error"]
    assert prep.prepared == {"A->B"}, "a heartbeats topic is not a flow's preparation"


def test_heartbeat_flows_are_the_flows_into_the_served_clusters_enabled_or_not():
    config = load_text(ONE_WAY)
    assert {f.name for f in config.heartbeat_flows(None)} == {"A->B", "B->A"}, "B->A beats only, as MM2's herder"
    assert {f.name for f in config.heartbeat_flows(("A",))} == {"B->A"}
    assert config.heartbeat_flows(("C",)) == ()


class FakeAdmin:
    """Topics of one cluster in memory: what ``ensure_compacted_topic`` asks and creates."""

    def __init__(self, topics: dict[str, int] | None = None):
        self.existing = dict(topics or {})
        self.created: list[tuple[str, int, int, dict]] = []

    def topics(self) -> dict[str, int]:
        return dict(self.existing)

    def broker_count(self) -> int:
        return 1

    def create_topic(self, name: str, partitions: int, rf: int, configs: dict) -> None:
        self.created.append((name, partitions, rf, configs))
        self.existing[name] = partitions


def test_the_internal_topics_are_made_as_their_connectors_make_them(monkeypatch):
    from mm2py.checkpoint.task import ensure_checkpoints_topic
    from mm2py.heartbeat import emitter

    [flow] = load_text(ONE_WAY).enabled_flows
    target = FakeAdmin({"orders": 1})
    assert ensure_checkpoints_topic(flow, target) == "A.checkpoints.internal"
    ensure_checkpoints_topic(flow, target)  # made once
    monkeypatch.setattr(emitter, "Admin", lambda cluster, timeout_ms: target)
    emitter.HeartbeatEmitter(FlowSpec.alone(flow)).ensure_topic()
    compact = {"cleanup.policy": "compact"}
    assert target.created == [("A.checkpoints.internal", 1, 1, compact), ("heartbeats", 1, 1, compact)]


def test_a_flow_prepares_the_topics_of_the_connectors_it_runs(monkeypatch):
    from mm2py.engine import prepare as module

    made: list[str] = []

    class Planner:
        def prepare_target(self) -> None:
            made.append("remote topics")

    class SyncWriter:
        def __init__(self, flow: FlowConfig):
            pass

        def ensure_topic(self) -> None:
            made.append("offset syncs")

    class Emitter:
        def __init__(self, spec: FlowSpec):
            pass

        def ensure_topic(self) -> None:
            made.append("heartbeats")

    monkeypatch.setattr(module, "planner_for", lambda spec: Planner())
    monkeypatch.setattr(module, "OffsetSyncWriter", SyncWriter)
    monkeypatch.setattr(module, "ensure_checkpoints_topic", lambda flow: made.append("checkpoints"))
    monkeypatch.setattr(module, "HeartbeatEmitter", Emitter)

    def prepared(extra: str, *, checkpoints: bool = True) -> list[str]:
        made.clear()
        [flow] = load_text(ONE_WAY + extra).enabled_flows
        module.prepare_flow_target(FlowSpec.alone, checkpoints=checkpoints)(flow)
        module.prepare_heartbeats_topic(flow)
        return list(made)

    assert prepared("") == ["remote topics", "offset syncs", "checkpoints", "heartbeats"]
    assert prepared("", checkpoints=False) == ["remote topics", "offset syncs", "heartbeats"], \
        "a run that stops once caught up runs no checkpoint connector"
    assert prepared("emit.checkpoints.enabled = false\nemit.heartbeats.enabled = false\n") == [
        "remote topics", "offset syncs"]
    assert prepared("emit.offset-syncs.enabled = false\n") == ["remote topics", "heartbeats"], \
        "without syncs the checkpoint connector does not run"
