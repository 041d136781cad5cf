"""Offset maps ``{topic: {partition: offset}}`` as Flink, Beam and custom consumers keep them.

Reading validates the shape; writing emits the same shape with target topic names. Partitions
are JSON object keys, so they are strings on the wire and ints inside.
"""

from __future__ import annotations

import json
from typing import IO

from mm2py.errors import Mm2pyError
from mm2py.ops.failover import Plan
from mm2py.types import TP


def read_offset_map(stream: IO[str]) -> dict[TP, int]:
    try:
        data = json.load(stream)
    except json.JSONDecodeError as e:
        raise Mm2pyError(f"offsets file is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise Mm2pyError("offsets file: expected an object {topic: {partition: offset}}")
    out: dict[TP, int] = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise Mm2pyError(f"offsets file: {topic!r} must map partitions to offsets")
        for partition, offset in parts.items():
            try:
                p, o = int(partition), int(offset)
            except (TypeError, ValueError):
                raise Mm2pyError(f"offsets file: {topic}[{partition!r}] = {offset!r} is not an integer") from None
            if isinstance(offset, bool) or o < 0 or p < 0:
                raise Mm2pyError(f"offsets file: {topic}[{partition}] = {offset!r} is not a valid offset")
            out[(topic, p)] = o
    return out


def plan_to_map(plan: Plan) -> dict[str, dict[str, int]]:
    """Target topic -> partition -> translated offset; refuses when any partition has none."""
    missing = [f"{p.source_topic}-{p.partition}" for p in plan.partitions if p.target_offset is None]
    if missing:
        raise Mm2pyError(f"no translated offset for {', '.join(missing)}; use --to-time to place them by time")
    out: dict[str, dict[str, int]] = {}
    for p in plan.partitions:
        assert p.target_offset is not None
        out.setdefault(p.target_topic, {})[str(p.partition)] = p.target_offset
    return out
