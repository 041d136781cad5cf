"""What a running replicator says about its flows, read from its metrics endpoint.

The clusters tell how far each flow got; only the replicator process knows whether a flow
is running, stalled (an outage it is riding through) or failed, since when and why. It
publishes that as ``mm2py_flow_state``, ``mm2py_flow_state_since_seconds`` and
``mm2py_flow_reason_info`` (``mm2py.metrics``), which ``mm2py status`` reads here.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class FlowHealth:
    state: str  # running, stalled or failed
    since: float  # epoch seconds
    reason: str = ""
    # the completeness audit (mm2py.audit): (remote topic, partition, missing, duplicates) per partition
    audit: tuple[tuple[str, int, int, int], ...] = ()
    # schemas.on.error (mm2py.schemas): untranslatable records per action (pass, dead-letter)
    schema_errors: tuple[tuple[str, int], ...] = ()


def replicator_health(port: int, host: str = "127.0.0.1", timeout: float = 2.0) -> dict[str, FlowHealth] | None:
    """Per flow name (``A->B``): its state in the replicator serving metrics there; None if none answers."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as response:
            text = response.read().decode("utf-8", "replace")
    except (OSError, urllib.error.URLError):
        return None
    return parse_health(text)


def parse_health(text: str) -> dict[str, FlowHealth]:
    states: dict[str, str] = {}
    since: dict[str, float] = {}
    reasons: dict[str, str] = {}
    audit: dict[str, dict[tuple[str, int], list[int]]] = {}
    schema_errors: dict[str, dict[str, int]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if "source" not in labels or "target" not in labels:
                continue
            flow = f"{labels['source']}->{labels['target']}"
            if sample.name == "mm2py_flow_state" and sample.value == 1:
                states[flow] = labels["state"]
            elif sample.name == "mm2py_flow_state_since_seconds":
                since[flow] = sample.value
            elif sample.name == "mm2py_flow_reason_info" and sample.value == 1:
                reasons[flow] = labels["reason"]
            elif sample.name in ("mm2py_audit_missing_records", "mm2py_audit_duplicate_records"):
                counts = audit.setdefault(flow, {}).setdefault((labels["topic"], int(labels["partition"])), [0, 0])
                counts[sample.name == "mm2py_audit_duplicate_records"] = int(sample.value)
            elif sample.name == "mm2py_schema_untranslatable_records":
                actions = schema_errors.setdefault(flow, {})
                actions[labels["action"]] = actions.get(labels["action"], 0) + int(sample.value)
    return {flow: FlowHealth(state, since.get(flow, 0.0), reasons.get(flow, ""),
                             tuple((t, p, m, d) for (t, p), (m, d) in sorted(audit.get(flow, {}).items())),
                             tuple(sorted(schema_errors.get(flow, {}).items())))
            for flow, state in states.items()}
