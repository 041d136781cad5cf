"""deploy/prometheus/mm2py-rules.yaml checked by promtool on series scraped from mm2py's registry.

Each scenario feeds a ``Metrics`` as the replicator does (health, batches, status, checkpoint
freshness, audit), scrapes it, and holds the scrape as promtool input series: a healthy flow
fires nothing; each trouble fires its alert after its ``for:``, with its labels and annotations.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest

from mm2py.audit.buckets import AuditFinding
from mm2py.config import load_text
from mm2py.dev import prometheus as prom
from mm2py.engine.supervisor import Health, State
from mm2py.freshness import GroupFreshness
from mm2py.metrics import Metrics
from mm2py.ops.status import FlowStatus, TopicStatus

pytestmark = pytest.mark.skipif(prom.binaries() is None, reason="promtool not installed (make prometheus)")

FLOW = load_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
                 "A->B.enabled = true\n").enabled_flows[0]
ALERTS = ("FlowStalled", "FlowFailed", "LagHigh", "LatencyHigh", "CheckpointStale", "HeartbeatStale",
          "RecordsMissing", "SourceReset", "MetricsAbsent")
STEPS = 20  # minutes held
AB = {"source": "A", "target": "B"}


def replicator(*, state: State = State.RUNNING, lag_s: float = 0.0, latency_ms: int = 400, heartbeat_age: float = 1.0,
               checkpoint_age: float = 20.0, behind: int = 0, missing: int = 0,
               ledger: tuple[str, ...] = ()) -> tuple[str, float]:
    """What a replicator in that condition serves, and when it was scraped."""
    now = time.time()
    m = Metrics(process=False)
    m.observe_health([Health("A->B", state, now - 30, "" if state is State.RUNNING else "broker down [cluster=B]")])
    m.observe_connectors([("A->B", kind, state.value) for kind in ("source", "checkpoint", "heartbeat")])
    m.observe_progress("A->B")
    now_ms = int(now * 1000)
    m.observe_batch(FLOW, [SimpleNamespace(topic="orders", partition=0, records=100, bytes=10_000,
                                           max_timestamp=now_ms - latency_ms, fetched_ms=now_ms - latency_ms + 5,
                                           acked_ms=now_ms)], commit_seconds=0.01)
    lags = ((0, int(lag_s * 100), lag_s),)
    m.observe_status([FlowStatus("A->B", [TopicStatus("orders", "A.orders", 1, 1000, 1000 - lags[0][1], lags[0][1],
                                                      lag_s, lags)], 5.0, heartbeat_age,
                                   ledger=tuple({"kind": kind} for kind in ledger))])
    m.observe_checkpoint_pass(FLOW, 0.2, [("billing", "A.orders", 0, 10, 10, False)])
    m.observe_freshness([GroupFreshness("A->B", "billing", int((now - checkpoint_age) * 1000),
                                        (("A.orders", 0, behind),))])
    m.observe_audit("A->B", [AuditFinding("A->B", "A.orders", 0, 1000, 1000 - missing, missing, 0, 10)])
    return generate_latest(m.registry).decode(), now


def scenario(name: str, *, frozen: bool = False, expect: dict[str, tuple[str, dict[str, str]]] | None = None,
             quiet_at: str = "15m", only: tuple[str, ...] = ALERTS, **condition: object) -> dict:
    """A promtool test: ``expect`` alert -> (eval time, labels); the other alerts of ``only`` quiet at ``quiet_at``."""
    text, at = replicator(**condition)  # type: ignore[arg-type]
    expect = expect or {}
    tests = []
    for alert in only:
        if alert in expect:
            when, labels = expect[alert]
            tests.append({"eval_time": when, "alertname": alert, "exp_alerts": [prom.expected_alert(alert, labels)]})
        else:
            tests.append({"eval_time": quiet_at, "alertname": alert, "exp_alerts": []})
    return {"name": name, "interval": "1m",
            "input_series": prom.promtool_series(text, steps=STEPS, frozen=frozen, at=at), "alert_rule_test": tests}


def run(tests: list[dict], tmp_path: Path) -> None:
    result = prom.run_promtool_tests(tests, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_healthy_replicator_fires_nothing(tmp_path):
    run([scenario("healthy")], tmp_path)


def test_stalled_and_failed_flows(tmp_path):
    run([
        scenario("stalled", state=State.STALLED, frozen=True, quiet_at="1m",
                 expect={"FlowStalled": ("3m", AB)}),
        scenario("stalled, still pending", state=State.STALLED, frozen=True, quiet_at="1m", only=("FlowStalled",)),
        # a failed flow is FlowFailed, not also FlowStalled when its progress stops (its heartbeats stop too)
        scenario("failed", state=State.FAILED, frozen=True, quiet_at="10m", only=("FlowFailed", "FlowStalled"),
                 expect={"FlowFailed": ("2m", AB)}),
    ], tmp_path)


def test_lag_latency_checkpoint_heartbeat_and_missing_records(tmp_path):
    topic = {**AB, "topic": "A.orders"}
    run([
        scenario("lag", lag_s=900, expect={"LagHigh": ("11m", topic)}),
        scenario("latency", latency_ms=60_000, expect={"LatencyHigh": ("11m", topic)}),
        scenario("checkpoint stale", frozen=True, checkpoint_age=400, behind=25, quiet_at="1m",
                 expect={"CheckpointStale": ("6m", {**AB, "group": "billing"})}),
        # an idle group: old checkpoint, nothing behind
        scenario("idle group", frozen=False, checkpoint_age=4000, behind=0),
        scenario("heartbeat stale", frozen=True, heartbeat_age=90, quiet_at="1m",
                 expect={"HeartbeatStale": ("3m", AB)}),
        scenario("missing", missing=12, expect={"RecordsMissing": ("3m", {**topic, "partition": "0"})}),
    ], tmp_path)


def resets_at(series: list[dict], kind: str, before: int, at_step: int) -> list[dict]:
    """``series`` with the ``kind`` resets counter at ``before`` until step ``at_step``, one more from then on."""
    out = []
    for s in series:
        if s["series"].startswith("mm2py_source_resets_total{") and f'kind="{kind}"' in s["series"]:
            s = {**s, "values": f"{before}x{at_step - 1} {before + 1}x{STEPS - at_step}"}
        out.append(s)
    return out


def test_source_reset_fires_when_the_ledger_gains_an_event_and_not_for_old_ones(tmp_path):
    text, at = replicator(ledger=("gap",))
    held = prom.promtool_series(text, steps=STEPS, at=at)
    assert any(s["series"].startswith("mm2py_source_resets_total{") and 'kind="recreated"' in s["series"]
               for s in held), "the scrape serves a counter per kind, zeros included"
    quiet = [{"eval_time": t, "alertname": "SourceReset", "exp_alerts": []} for t in ("1m", "10m", "19m")]
    run([
        # a replicator (re)started over a ledger holding an old gap: the counter starts at 1 and stays
        {"name": "old ledger events", "interval": "1m", "input_series": held, "alert_rule_test": quiet},
        {"name": "a topic re-created at minute 5", "interval": "1m",
         "input_series": resets_at(held, "recreated", 0, 5), "alert_rule_test": [
             {"eval_time": "4m", "alertname": "SourceReset", "exp_alerts": []},
             {"eval_time": "7m", "alertname": "SourceReset",
              "exp_alerts": [prom.expected_alert("SourceReset", {**AB, "kind": "recreated"})]},
             # the increase leaves the 30-minute window: quiet again
             {"eval_time": "40m", "alertname": "SourceReset", "exp_alerts": []}]},
        {"name": "another gap at minute 3", "interval": "1m", "input_series": resets_at(held, "gap", 1, 3),
         "alert_rule_test": [{"eval_time": "6m", "alertname": "SourceReset",
                              "exp_alerts": [prom.expected_alert("SourceReset", {**AB, "kind": "gap"})]},
                             *[{"eval_time": "6m", "alertname": a, "exp_alerts": []}
                               for a in ALERTS if a not in ("SourceReset", "MetricsAbsent")]]},
    ], tmp_path)


def test_metrics_absent(tmp_path):
    down = {"series": 'up{instance="127.0.0.1:9404",job="mm2py"}', "values": f"0x{STEPS}"}
    run([
        {"name": "endpoint down", "interval": "1m", "input_series": [down], "alert_rule_test": [
            {"eval_time": "4m", "alertname": "MetricsAbsent", "exp_alerts": []},
            {"eval_time": "6m", "alertname": "MetricsAbsent", "exp_alerts": [prom.expected_alert(
                "MetricsAbsent", {"job": "mm2py", "instance": "127.0.0.1:9404"})]}]},
        {"name": "no target at all", "interval": "1m",
         "input_series": [{"series": 'other{job="else"}', "values": f"1x{STEPS}"}], "alert_rule_test": [
            {"eval_time": "6m", "alertname": "MetricsAbsent",
             "exp_alerts": [prom.expected_alert("MetricsAbsent", {"job": "mm2py"})]}]},
    ], tmp_path)


def test_every_alert_has_for_severity_and_runbook():
    rules = prom.rules_by_alert()
    assert set(rules) == set(ALERTS)
    for name, rule in rules.items():
        assert rule.get("for"), name
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["annotations"]["runbook"].startswith(f"README.md#watching-mm2py {name}:"), name
