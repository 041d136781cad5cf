"""Apache MirrorMaker 2's configurations the bench knows: the sweep's variants, and the best one recorded.

``bench.mm2_sweep`` tries each of ``VARIANTS`` and records the best in ``bench/mm2-sweep.json``;
``bench.run`` gives MM2 (and mm2py, the same file) that variant's lines (``variant_of``, ``lines_of``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "mm2-sweep.json"
# the base tuning (16 tasks, each consumer fetching up to 64 MB) needs more than 2 GB of heap:
# with 2 GB a warm-up run of b died of OutOfMemoryError in its tasks
DEFAULT_HEAP = "3g"
# Connect's worker gives source tasks' producers max.in.flight.requests.per.connection = 1
IN_FLIGHT_5 = "tgt.producer.max.in.flight.requests.per.connection = 5"


@dataclass(frozen=True)
class Variant:
    lines: tuple[str, ...]
    heap: str = DEFAULT_HEAP
    doc: str = ""


VARIANTS: dict[str, Variant] = {
    "base": Variant((), doc="tasks.max = partitions, linger.ms 20, batch.size 512 KiB, 64 MiB fetches, "
                            "Connect's 1 request in flight"),
    "inflight5": Variant((IN_FLIGHT_5,), doc="base, 5 requests in flight"),
    "tasks4": Variant(("tasks.max = 4", IN_FLIGHT_5), doc="inflight5 with tasks.max 4"),
    "tasks4-2g": Variant(("tasks.max = 4", IN_FLIGHT_5), heap="2g", doc="tasks4 with a 2 GB heap"),
    "linger0": Variant((IN_FLIGHT_5, "tgt.producer.linger.ms = 0"), doc="inflight5, no linger"),
    "fetch-defaults": Variant((IN_FLIGHT_5, "{src}.consumer.fetch.max.bytes = 52428800",
                               "{src}.consumer.max.partition.fetch.bytes = 1048576",
                               "{src}.consumer.max.poll.records = 500"),
                              doc="inflight5 with the consumer's default fetch sizes"),
}


def variant_of(tool: str, steady: bool) -> tuple[str, Variant]:
    """The variant ``tool`` names (``mm2@name``), or for plain ``mm2`` the sweep's best for the workload."""
    name = tool.partition("@")[2] or best_for(steady)
    if name not in VARIANTS:
        raise SystemExit(f"unknown MM2 variant {name!r}; known: {', '.join(VARIANTS)}")
    return name, VARIANTS[name]


def lines_of(variant: Variant, source_alias: str) -> list[str]:
    return [line.replace("{src}", source_alias) for line in variant.lines]


def best_for(steady: bool) -> str:
    """The recorded sweep's best variant for a steady (latency) or catch-up (throughput) workload."""
    if not RESULTS.exists():
        return "base"
    recorded = json.loads(RESULTS.read_text())
    return recorded["best"]["steady" if steady else "catch-up"]
