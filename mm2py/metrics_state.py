"""What ``mm2py.metrics.Metrics`` keeps between scrapes: per partition, per flow, and sample windows.

Names of MM2's metric groups and labels live here too, shared by the reporting side and the scrape.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"
LABELS = ["source", "target", "topic", "partition"]
FLOW_LABELS = ["source", "target"]
GROUP_LABELS = ["source", "target", "group", "topic", "partition"]
RATE_WINDOW = 30.0  # seconds of micro-batches behind record_rate / byte_rate
WINDOW = 60.0  # seconds of samples behind _min/_max/_avg and the quantiles (MM2: 2 x 30 s)
MAX_SAMPLES = 1024
COMMITS = 128  # micro-batch commits behind the offset-commit times
STATES = ("running", "stalled", "failed")
CONNECTORS = {"source": "MirrorSourceConnector", "checkpoint": "MirrorCheckpointConnector",
              "heartbeat": "MirrorHeartbeatConnector"}


def window_stats(samples: Iterable[float]) -> dict[str, float]:
    """min, max, avg, p50, p99 of ``samples``; NaN each when there are none."""
    values = sorted(samples)
    if not values:
        return dict.fromkeys(("min", "max", "avg", "p50", "p99"), math.nan)

    def pick(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]
    return {"min": values[0], "max": values[-1], "avg": statistics.fmean(values), "p50": pick(0.5),
            "p99": pick(0.99)}


class Samples:
    """Timed samples of one figure: the last value and the ones of the last ``WINDOW`` seconds."""

    def __init__(self) -> None:
        self.last: float | None = None
        self._items: deque[tuple[float, float]] = deque(maxlen=MAX_SAMPLES)

    def add(self, at: float, value: float) -> None:
        self.last = value
        self._items.append((at, value))

    def stats(self, now: float) -> dict[str, float]:
        while self._items and self._items[0][0] < now - WINDOW:
            self._items.popleft()
        return window_stats(v for _, v in self._items)


@dataclass
class PartitionState:
    source_topic: str
    records: int = 0
    bytes: int = 0
    first_batch: float | None = None  # monotonic
    batches: deque[tuple[float, int, int]] = field(default_factory=deque)  # (monotonic, records, bytes)
    age: Samples = field(default_factory=Samples)
    latency: Samples = field(default_factory=Samples)
    last_mirrored: float | None = None  # wall-clock seconds records were last mirrored
    lag_records: int | None = None
    lag_seconds: float | None = None
    schema_errors: dict[str, int] = field(default_factory=dict)  # schemas.on.error action -> records

    def rates(self, now: float) -> tuple[float, float]:
        while self.batches and self.batches[0][0] < now - RATE_WINDOW:
            self.batches.popleft()
        if self.first_batch is None:
            return 0.0, 0.0
        span = max(min(RATE_WINDOW, now - self.first_batch), 1.0)
        return sum(b[1] for b in self.batches) / span, sum(b[2] for b in self.batches) / span


@dataclass
class FlowState:
    state: str = "running"
    since: float = 0.0
    reason: str = ""
    connectors: dict[str, str] = field(default_factory=dict)  # kind -> state
    last_progress: float | None = None  # wall clock of the source query's last progress report
    phases: dict[str, int] = field(default_factory=dict)  # that report's Spark phase durations, ms
    last_commit: float | None = None  # wall clock of the last micro-batch committed
    commits: deque[float] = field(default_factory=lambda: deque(maxlen=COMMITS))  # seconds each
    heartbeat_at: float | None = None  # wall-clock timestamp of the newest heartbeat on the target
    status_at: float | None = None  # wall clock of the last successful read of the clusters
    fetched_bytes: int = 0
    produced_bytes: int = 0
    # source partitions found gone back or with a gap, per kind, as the flow's ledger counts them
    ledger: dict[str, int] = field(default_factory=dict)
