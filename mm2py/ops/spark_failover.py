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
from mm2py.ops.spark_checkpoint import SparkBatch, last_write_age, read_batch, resume_lines, write_resume

QUIET_SECONDS = 120.0  # a checkpoint written more recently than this belongs to a running query


@dataclass(frozen=True)
class SparkPlan:
    checkpoint: Path
    batch: SparkBatch
    plan: Plan


def plan_spark(config: MirrorMakerConfig, checkpoint: Path, from_alias: str, to_alias: str,
               to_time_ms: int | None = None, back: bool = False) -> SparkPlan:
    batch = read_batch(checkpoint)
    if back:
        flow = find_flow(config, to_alias, from_alias)
        rows = inverse_committed(flow, batch.offsets)
    else:
        flow = find_flow(config, from_alias, to_alias)
        src = Admin(flow.source, timeout_ms=min(flow.admin_timeout_ms, 15000))
        spec = FlowSpec.resolve(config, flow)
        rows = translate_committed(config, spec, src, batch.offsets)
        if to_time_ms is not None:
            rows = place_by_time(config, spec, rows, to_time_ms, every_remote=False)
    return SparkPlan(checkpoint, batch, Plan(f"spark checkpoint {checkpoint}", from_alias, to_alias, tuple(rows)))


def apply_spark(sp: SparkPlan, force: bool = False, quiet_seconds: float = QUIET_SECONDS) -> int:
    """Write the resume batch; refuses while the checkpoint is fresh (unless ``force``) or a row has no offset."""
    age = last_write_age(sp.checkpoint)
    if age < quiet_seconds and not force:
        raise Mm2pyError(f"{sp.checkpoint} was written {age:.0f}s ago: the query looks alive; stop it first "
                         "(or --force)")
    missing = [f"{p.source_topic}-{p.partition}" for p in sp.plan.partitions if p.target_offset is None]
    if missing:
        raise Mm2pyError(f"no translated offset for {', '.join(missing)}; use --to-time to place them by time")
    translated = {(p.target_topic, p.partition): p.target_offset for p in sp.plan.partitions
                  if p.target_offset is not None}
    rename = {p.source_topic: p.target_topic for p in sp.plan.partitions}
    unknown = {t for t, _ in sp.batch.offsets} - set(rename)
    if unknown:
        raise Mm2pyError(f"topics {sorted(unknown)} are not mirrored by this flow; nothing written")
    return write_resume(sp.checkpoint, sp.batch, resume_lines(sp.batch, translated, rename))
