"""Measuring a replicator process tree: CPU seconds and peak resident memory."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psutil


@dataclass
class TreeSample:
    cpu_seconds: float = 0.0
    peak_rss: int = 0
    samples: int = 0


class TreeSampler:
    """Samples a process and all its descendants every ``interval`` seconds, in a thread.

    CPU is summed per process from its last reading, so children that exit between samples
    lose at most one interval of CPU; peak RSS is the largest sum of the tree's RSS seen.
    """

    def __init__(self, pid: int, interval: float = 0.25):
        self.root = psutil.Process(pid)
        self.interval = interval
        self.result = TreeSample()
        self._cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.result.cpu_seconds = sum(self._cpu.values())

    def _procs(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = 0
            for proc in self._procs():
                try:
                    with proc.oneshot():
                        t = proc.cpu_times()
                        # own time only: reaped children would otherwise count twice
                        self._cpu[proc.pid] = t.user + t.system
                        rss += proc.memory_info().rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self.result.peak_rss = max(self.result.peak_rss, rss)
            self.result.samples += 1
            self._stop.wait(self.interval)


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def now_ms() -> int:
    return int(time.time() * 1000)
