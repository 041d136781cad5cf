"""The source connector's Spark offsets: a plain JSON dict, parsed into ``Offsets``.

The dict::

    {"p": {"orders:0": 1200, ...},     # next source offset to plan, per partition
     "exact": ["orders:0", ...],       # starts that are exact record positions (see ranges.py)
     "new": {"refunds:0": 0},          # start of partitions first seen in this batch (exact
                                       # record positions, like every first start)
     "r": {"orders:1": [800, true]},   # restarts (offset, exact) of partitions whose last copy
                                       # stopped short (mm2py.source.plan.stalls)
     "rn": 7}                          # a count of restarts, so that a retry with no new data
                                       # still differs from the last offsets and Spark runs it

Keys are ``topic:partition`` (``mm2py.source.ranges.tp_key``). Spark stores the dict in its
checkpoint, so its format outlives any one version: "r" and "rn" appear only when needed,
and offsets written without them read as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Offsets:
    """The parsed form of the source connector's Spark offset dict."""

    positions: dict[str, int]
    exact: frozenset[str]
    new: dict[str, int]
    restart: dict[str, tuple[int, bool]] = field(default_factory=dict)
    restart_count: int = 0

    @classmethod
    def parse(cls, raw: dict) -> Offsets:
        restart = {k: (int(v[0]), bool(v[1])) for k, v in raw.get("r", {}).items()}
        return cls(dict(raw.get("p", {})), frozenset(raw.get("exact", ())), dict(raw.get("new", {})), restart,
                   int(raw.get("rn", 0)))

    def to_json(self) -> dict:
        out: dict[str, object] = {"p": self.positions, "exact": sorted(self.exact), "new": self.new}
        if self.restart:  # absent unless needed: offsets without it stay as they always were
            out["r"] = {k: [offset, exact] for k, (offset, exact) in sorted(self.restart.items())}
            out["rn"] = self.restart_count
        return out

    def start_of(self, key: str) -> int | None:
        return self.positions.get(key, self.new.get(key))
