"""One measured run of a tool on a workload (bench.run), and how a set of runs is judged.

Invariant: a RunResult holds what one run measured and what landed; ``verdict`` is the one
wording of a set of runs' check (bench.landed's), used by every table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.landed import verdict_of


@dataclass
class RunResult:
    tool: str
    workload: str
    pair: int
    records: int
    bytes: int
    startup_s: float
    mirror_s: float
    records_per_s: float
    mb_per_s: float
    cpu_s: float
    cpu_s_per_gb: float
    peak_rss_mb: float
    latency_ms: dict[str, float] = field(default_factory=dict)
    cpu_by_kind: dict[str, float] = field(default_factory=dict)
    # CPU seconds per GB the source and target brokers spent over the same run: on a small
    # machine they share the cores with the replicator, and bound how fast any of them can go
    broker_cpu_s_per_gb: dict[str, float] = field(default_factory=dict)
    # what landed (bench.landed, after the tool stopped): records read back from the target and
    # compared, extra copies of source records there (at-least-once), and the partitions whose
    # records are not the source's ("topic:partition", the first 20 of them)
    verified_records: int = 0
    duplicates: int = 0
    differences: int = 0
    differing: list[str] = field(default_factory=list)
    verify_s: float = 0.0
    # how the tool's clients reached both clusters: plaintext or tls (bench.security's MODES)
    security: str = "plaintext"
    # the chain every replicator ran (bench.variants' TRANSFORMS): none (the raw path) or filter
    transforms: str = "none"

    def verdict(self) -> str:
        return verdict([self])


def cpu_per_gb(before: dict[str, float], after: dict[str, float], gb: float) -> dict[str, float]:
    """CPU seconds each broker used between two ``Brokers.cpu()`` per GB moved; empty when nothing moved."""
    return {role: round((after[role] - used) / gb, 1) for role, used in before.items()} if gb else {}


def verdict(runs: list[RunResult]) -> str:
    """``ok`` when every run landed an exact copy, else duplicates and differing partitions summed."""
    return verdict_of(sum(r.duplicates for r in runs), sum(r.differences for r in runs))
