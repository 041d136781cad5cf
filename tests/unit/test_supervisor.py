"""What a failed query of a flow leads to: a restart after a backoff, or the flow's end."""

from __future__ import annotations

from mm2py.engine.supervisor import State, Supervisor, Verdict, classify
from mm2py.errors import (
    AuthorizationError,
    ClusterUnreachableError,
    DataLossError,
    EngineTimeoutError,
    KafkaError,
    Mm2pyError,
    RecordTooLargeError,
    from_task_failure,
)
from tests.fakes.clock import Clock


def test_outages_are_retried_and_what_waiting_cannot_fix_is_not() -> None:
    leader_moved = KafkaError("FENCED_LEADER_EPOCH", cluster="A", retriable=True)
    assert classify(leader_moved, ever_ran=True) is Verdict.RETRY
    assert classify(ClusterUnreachableError("no broker answered", cluster="B"), ever_ran=True) is Verdict.RETRY
    assert classify(Mm2pyError("Python worker exited unexpectedly"), ever_ran=True) is Verdict.RETRY
    for fatal in (AuthorizationError("missing ACL", cluster="A"), RecordTooLargeError("too large", cluster="B"),
                  DataLossError("truncated", cluster="A")):
        assert classify(fatal, ever_ran=True) is Verdict.FATAL


def test_a_cluster_that_never_answered_is_a_configuration_problem() -> None:
    assert classify(ClusterUnreachableError("no broker answered", cluster="B"), ever_ran=False) is Verdict.FATAL
    assert classify(Mm2pyError("something in Spark"), ever_ran=False) is Verdict.FATAL
    assert classify(KafkaError("NOT_LEADER", cluster="A", retriable=True), ever_ran=False) is Verdict.RETRY


def test_spark_missing_its_own_python_processes_is_retried_even_before_the_first_run() -> None:
    error = from_task_failure("heartbeat A->B", "Python worker failed to connect back.\n\tat org.apache.spark...")
    assert isinstance(error, EngineTimeoutError) and str(error) == \
        "heartbeat A->B failed: Python worker failed to connect back."
    planner = from_task_failure("source A->B", "Traceback ...\npyspark.errors.exceptions.base.PySparkRuntimeError: "
                                "[CANNOT_OPEN_SOCKET] Can not open socket: timed out")
    assert isinstance(planner, EngineTimeoutError)
    assert classify(error, ever_ran=False) is Verdict.RETRY
    assert type(from_task_failure("flow A->B", "something else in Spark")) is Mm2pyError


def test_backoff_doubles_up_to_its_ceiling_and_progress_resets_it() -> None:
    clock = Clock(100.0)
    sup = Supervisor(initial_backoff=1, max_backoff=8, clock=clock, wall=clock)
    sup.add("A->B")
    waits = []
    for _ in range(6):
        h = sup.failed("A->B", KafkaError("down", cluster="B", retriable=True), ever_ran=True)
        waits.append(h.retry_at - clock.now)
    assert waits == [1, 2, 4, 8, 8, 8]
    assert h.state is State.STALLED and h.since == 100.0 and "down" in h.reason
    clock.now = 200.0
    sup.progressed("A->B")
    assert sup.health["A->B"].state is State.RUNNING and sup.health["A->B"].since == 200.0
    h = sup.failed("A->B", KafkaError("down", cluster="B", retriable=True), ever_ran=True)
    assert h.retry_at - clock.now == 1


def test_one_failed_flow_leaves_the_others_alive() -> None:
    sup = Supervisor()
    sup.add("A->B")
    sup.add("B->A")
    sup.failed("A->B", AuthorizationError("missing ACL", cluster="A"), ever_ran=True)
    assert sup.health["A->B"].state is State.FAILED and sup.alive()
    sup.failed("B->A", RecordTooLargeError("too large", cluster="A"), ever_ran=True)
    assert not sup.alive()


def test_heartbeats_alone_keep_no_process_up() -> None:
    sup = Supervisor()
    sup.add("A->B")
    sup.add("B->A", mirrors=False)  # the reverse of A->B, for heartbeats only
    sup.failed("A->B", AuthorizationError("missing ACL", cluster="A"), ever_ran=True)
    assert not sup.alive()


def test_state_changes_are_logged_once_not_per_attempt() -> None:
    import structlog

    sup = Supervisor()
    sup.add("A->B")
    with structlog.testing.capture_logs() as logs:
        for _ in range(5):
            sup.failed("A->B", KafkaError("down", cluster="B", retriable=True), ever_ran=True)
        sup.progressed("A->B")
        sup.progressed("A->B")
    assert [e["event"] for e in logs] == ["flow stalled; restarting it until the cluster answers again",
                                          "flow resumed"]


def test_health_travels_through_the_metrics_endpoint_format() -> None:
    from prometheus_client import generate_latest

    from mm2py.metrics import Metrics
    from mm2py.ops.replicator import parse_health

    clock = Clock(100.0)
    sup = Supervisor(clock=clock, wall=clock)
    sup.add("A->B")
    sup.add("B->A")
    metrics = Metrics()
    sup.failed("A->B", KafkaError("no broker answered", cluster="B", retriable=True), ever_ran=True)
    metrics.observe_health(sup.health.values())
    health = parse_health(generate_latest(metrics.registry).decode())
    assert health["A->B"].state == "stalled" and health["A->B"].since == 100.0
    assert "no broker answered" in health["A->B"].reason
    assert health["B->A"].state == "running" and health["B->A"].reason == ""
    sup.progressed("A->B")
    metrics.observe_health(sup.health.values())
    health = parse_health(generate_latest(metrics.registry).decode())
    assert health["A->B"].state == "running" and health["A->B"].reason == "", "the old reason is withdrawn"
