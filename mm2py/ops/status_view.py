"""The text ``mm2py status`` prints: a table per flow, and rates between two readings (``--watch``).

``mm2py.commands.status`` and the demo (``mm2py.dev.demo``) both show flows with ``render``.
"""

from __future__ import annotations

import time

from mm2py.ops.status import FlowStatus

RateKey = tuple[str, str]


def _age(seconds: float | None) -> str:
    return "never" if seconds is None else f"{seconds:.1f}s ago"


def _eta(lag: int, rate: float | None) -> str:
    if lag == 0:
        return "caught up"
    if not rate or rate <= 0:
        return "-"
    left = lag / rate
    return f"{left:.0f}s" if left < 120 else f"{left / 60:.1f}m"


def render(flows: list[FlowStatus], rates: dict[RateKey, float] | None = None) -> str:
    """A table per flow; ``rates`` (records/s per flow and topic) adds rate and time-left columns."""
    lines = []
    for f in flows:
        if f.replicator_state is not None:
            since = time.strftime("%H:%M:%S", time.localtime(f.replicator_since or 0))
            why = f": {f.replicator_reason}" if f.replicator_reason else ""
            lines.append(f"flow {f.flow}: replicator {f.replicator_state.upper()} since {since}{why}")
        if f.replicator_audit:
            missing = sum(a[2] for a in f.replicator_audit)
            lines.append(f"flow {f.flow}: audit {missing:,} records missing on the target, "
                         f"{sum(a[3] for a in f.replicator_audit):,} duplicates"
                         + "".join(f"; {t} partition {p}: {m:,} missing" for t, p, m, _ in f.replicator_audit if m))
        if f.replicator_schema_errors:
            lines.append(f"flow {f.flow}: schemas: untranslatable records " + ", ".join(
                f"{count:,} {'written as they were' if action == 'pass' else 'dead-lettered'}"
                for action, count in f.replicator_schema_errors))
        for e in f.ledger[-5:]:  # the newest cases the ledger holds (all in --json)
            lines.append(f"flow {f.flow}: ledger: {e['kind']} {e['topic']} partition {e['partition']}: "
                         f"source {e['source_old']} -> {e['source_new']}, action {e['action']}")
        if f.error:
            lines.append(f"flow {f.flow}: UNAVAILABLE: {f.error}")
            continue
        lines.append(f"flow {f.flow}   lag {f.lag_records:,} records, {f.lag_seconds:.1f}s   "
                     f"last checkpoint {_age(f.last_checkpoint_age_s)}   last heartbeat {_age(f.last_heartbeat_age_s)}")
        head = f"  {'topic':<32} {'remote topic':<34} {'parts':>5} {'source end':>12} {'mirrored':>12} " \
               f"{'lag':>10} {'lag s':>7}"
        if rates is not None:
            head += f" {'rec/s':>9} {'left':>9}"
        lines.append(head)
        for t in f.topics:
            row = (f"  {t.topic:<32} {t.remote_topic:<34} {t.partitions:>5} {t.source_end:>12,} {t.mirrored:>12,} "
                   f"{t.lag_records:>10,} {t.lag_seconds:>7.1f}")
            if rates is not None:
                rate = rates.get((f.flow, t.topic))
                row += f" {'-' if rate is None else f'{rate:,.0f}':>9} {_eta(t.lag_records, rate):>9}"
            lines.append(row)
        if not f.topics:
            lines.append("  (no topic matches this flow's filters)")
    return "\n".join(lines)


def rates_between(before: list[FlowStatus], after: list[FlowStatus], seconds: float) -> dict[RateKey, float]:
    old = {(f.flow, t.topic): t.mirrored for f in before for t in f.topics}
    return {(f.flow, t.topic): max(t.mirrored - old[(f.flow, t.topic)], 0) / seconds
            for f in after for t in f.topics if (f.flow, t.topic) in old and seconds > 0}
