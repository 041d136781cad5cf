"""Finding partitions whose last micro-batch stopped short, from the positions on the target.

Spark moves a source's offsets to the ends the planner chose, whatever the tasks copied. A
copy task may stop a partition early on purpose (mm2py.source.copier: a batch the target
refuses as too large, a remote topic deleted meanwhile); the next micro-batch must then
start where the copy stopped, not at Spark's offset, or the records in between are lost.

The sink records where each partition really got to (``mm2-offsets.{source}.internal`` on the
target), and the planner runs in another process (Spark's Python source runner), so the
positions topic is the one channel both see. ``PositionTail`` follows it incrementally: one
ListOffsets request and the few records the last micro-batch wrote, per micro-batch.

Invariants:
- reads go to the topic's end as it is when asked; the sink's writes for a micro-batch are
  acknowledged (acks=all) before that micro-batch ends, hence before the next is planned;
- a partition is re-planned only from a position the sink recorded, or from the start of the
  range that stopped short: never past what was copied.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlannedRange:
    """A range the planner handed to Spark: where it began, where it should end."""

    begin: int
    end: int
    exact: bool


def short_ranges(planned: dict[str, PlannedRange], recorded: dict[str, int | None]) -> dict[str, PlannedRange]:
    """Ranges whose copy stopped before their end, and where to start them again.

    ``recorded`` is the last mirrored offset of each planned partition (None when none is
    recorded). The restart is the recorded position + 1 (an exact record position) when it
    lies inside the range, else the range's own start.
    """
    out = {}
    for key, r in planned.items():
        last = recorded.get(key)
        copied_to = last + 1 if last is not None else None
        if copied_to is not None and copied_to >= r.end:
            continue
        if copied_to is not None and copied_to > r.begin:
            out[key] = PlannedRange(copied_to, r.end, True)
        else:
            out[key] = r
    return out
