"""Failover and failback of a Spark Structured Streaming query's Kafka offsets (its checkpoint).

The checkpoint's last committed batch is one more map of committed offsets: it goes through the
group failover's translation (``translate_committed`` / ``inverse_committed``), and the query's
resume batch is written with the translated offsets under the target topic names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mm2py.config.model import MirrorMakerConfig
from mm2py.errors import Mm2pyError
from mm2py.flowspec import FlowSpec
from mm2py.kafka.admin import Admin
from mm2py.ops.failover import (
    Plan,
    find_flow,
    inverse_committed,
    place_by_time,
    translate_committed,
)
from mm2py.ops.spark_checkpoint import INITIAL, SparkBatch, last_write_age, read_batch, resume_lines, write_resume

QUIET_SECONDS = 120.0  # a checkpoint written more recently than this belongs to a running query


@dataclass(frozen=True)
class SparkPlan:
    checkpoint: Path
    batch: SparkBatch
    plan: Plan
    rerun: Plan | None = None  # the planned, uncommitted batch's end offsets, translated the same way


def plan_spark(config: MirrorMakerConfig, checkpoint: Path, from_alias: str, to_alias: str,
               to_time_ms: int | None = None, back: bool = False) -> SparkPlan:
    batch = read_batch(checkpoint)
    flow = find_flow(config, to_alias, from_alias) if back else find_flow(config, from_alias, to_alias)
    src = None if back else Admin(flow.source, timeout_ms=min(flow.admin_timeout_ms, 15000))
    spec = None if back else FlowSpec.resolve(config, flow)

    def plan(b: SparkBatch) -> Plan:
        if src is None or spec is None:
            rows = inverse_committed(flow, b.offsets)
        else:
            rows = translate_committed(config, spec, src, b.offsets)
            if to_time_ms is not None:
                rows = place_by_time(config, spec, rows, to_time_ms, every_remote=False)
        which = "initial offsets" if b.batch_id == INITIAL else f"batch {b.batch_id}"
        return Plan(f"spark checkpoint {checkpoint} {which}", from_alias, to_alias, tuple(rows))

    return SparkPlan(checkpoint, batch, plan(batch), plan(batch.rerun) if batch.rerun is not None else None)


def apply_spark(sp: SparkPlan, force: bool = False, quiet_seconds: float = QUIET_SECONDS) -> int:
    """Write the resume batch; refuses while the checkpoint is fresh (unless ``force``) or a row has no offset."""
    age = last_write_age(sp.checkpoint)
    if age < quiet_seconds and not force:
        raise Mm2pyError(f"{sp.checkpoint} was written {age:.0f}s ago: the query looks alive; stop it first "
                         "(or --force)")
    plans = [sp.plan] if sp.rerun is None else [sp.plan, sp.rerun]
    missing = sorted({f"{p.source_topic}-{p.partition}" for plan in plans for p in plan.partitions
                      if p.target_offset is None})
    if missing:
        raise Mm2pyError(f"no translated offset for {', '.join(missing)}; use --to-time to place them by time")
    unknown = {t for t, _ in sp.batch.offsets} - {p.source_topic for p in sp.plan.partitions}
    if unknown:
        raise Mm2pyError(f"topics {sorted(unknown)} are not mirrored by this flow; nothing written")
    lines = _lines(sp.batch, sp.plan)
    rerun = _lines(sp.batch.rerun, sp.rerun) if sp.batch.rerun is not None and sp.rerun is not None else None
    return write_resume(sp.checkpoint, sp.batch, lines, rerun)


def _lines(batch: SparkBatch, plan: Plan) -> tuple[str, ...]:
    translated = {(p.target_topic, p.partition): p.target_offset for p in plan.partitions
                  if p.target_offset is not None}
    return resume_lines(batch, translated, {p.source_topic: p.target_topic for p in plan.partitions})
