"""TargetPreparation: remote topics made while Spark starts, never in the way of the flows' start."""

from __future__ import annotations

import threading

from structlog.testing import capture_logs

from mm2py.config import load_text
from mm2py.config.model import FlowConfig
from mm2py.engine.prepare import TargetPreparation

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
