"""How a micro-batch's byte budget is shared among the partitions with a backlog.

Invariant: under a budget each partition with a backlog gets a share in proportion to it, at
least one offset, so none starves; without a budget, or with all of it fitting, every
partition is planned to its end. The work is over the partitions with a backlog only: those
with none keep their start and cost nothing here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


def share_budget(begin: Mapping[str, int], lag: Mapping[str, int], size: Callable[[str], float],
                 max_bytes: int | None) -> tuple[dict[str, int], float, float]:
    """The new ends of the partitions with a backlog, the bytes they plan, and all the backlog's bytes.

    ``begin``: each partition's start; ``lag``: offsets behind its end (only those above 0 are
    read); ``size``: estimated source bytes per offset of a partition. Partitions absent from
    the answer end where they begin.
    """
    moving = {k: n for k, n in lag.items() if n > 0}
    per_offset = {k: size(k) for k in moving}
    total = sum(n * per_offset[k] for k, n in moving.items())
    if not max_bytes or total <= max_bytes:
        return {k: begin[k] + n for k, n in moving.items()}, total, total
    share = max_bytes / total
    ends = {k: begin[k] + max(1, int(n * share)) for k, n in moving.items()}
    return ends, sum((ends[k] - begin[k]) * per_offset[k] for k in moving), total
