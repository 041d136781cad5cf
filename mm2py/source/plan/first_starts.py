"""Where a partition new to a run starts: after its recorded position, else by ``auto.offset.reset``.

Invariant: every first start is an exact record position, never a boundary of a range this
flow copied: DeleteRecords (a Kafka Streams repartition purge) leaves the log start inside a
batch, and MM2 records positions inside batches; the copy takes that batch from the start on.
"""

from __future__ import annotations

from collections.abc import Mapping

from mm2py.source.plan.listing import OffsetLister
from mm2py.source.ranges import tp_key
from mm2py.types import TP


def first_starts(tps: list[TP], stored: Mapping[TP, int], reset: str, offsets: OffsetLister,
                 log_starts: Mapping[TP, int] | None = None) -> dict[str, int]:
    """The first start of each of ``tps``, by Spark key; every one is exact.

    ``stored``: the positions recorded on the target; ``reset``: ``auto.offset.reset``;
    ``log_starts``: the source's log starts read just before (by the catalogue's sizing), used
    for ``earliest`` so that only partitions without one are asked (ListOffsets).
    """
    starts: dict[str, int] = {}
    missing = []
    spec = "latest" if reset == "latest" else "earliest"
    known = log_starts if log_starts and spec == "earliest" else {}
    for tp in tps:
        if tp in stored:
            starts[tp_key(*tp)] = stored[tp] + 1
        elif tp in known:
            starts[tp_key(*tp)] = known[tp]
        else:
            missing.append(tp)
    if missing:
        for tp, offset in offsets.list_offsets(missing, spec).items():
            starts[tp_key(*tp)] = offset
    return starts
