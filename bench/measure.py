"""Measuring a replicator process tree: CPU seconds and peak resident memory."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import psutil


@dataclass
class TreeSample:
    cpu_seconds: float = 0.0
    peak_rss: int = 0
    samples: int = 0
    # CPU seconds by kind of process (the JVM, Spark's Python daemon and workers, ...): where it goes
    cpu_by_kind: dict[str, float] = field(default_factory=dict)
    # the largest RSS (bytes) seen of each kind's processes together
    peak_rss_by_kind: dict[str, int] = field(default_factory=dict)


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
        self._kind: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.result.cpu_seconds = sum(self._cpu.values())
        for pid, cpu in self._cpu.items():
            kind = self._kind.get(pid, "?")
            self.result.cpu_by_kind[kind] = round(self.result.cpu_by_kind.get(kind, 0.0) + cpu, 1)

    def cpu_by_kind_now(self) -> dict[str, float]:
        """CPU seconds used so far by kind of process (as of the last sample): for windows within a run."""
        out: dict[str, float] = {}
        for pid, cpu in list(self._cpu.items()):
            kind = self._kind.get(pid, "?")
            out[kind] = out.get(kind, 0.0) + cpu
        return out

    def _procs(self) -> list[psutil.Process]:
        try:
            return [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = 0
            by_kind: dict[str, int] = {}
            for proc in self._procs():
                try:
                    with proc.oneshot():
                        t = proc.cpu_times()
                        # own time only: reaped children would otherwise count twice
                        self._cpu[proc.pid] = t.user + t.system
                        # a launcher script execs its program under the same pid: name it again
                        if self._kind.get(proc.pid, "sh") in ("sh", "bash"):
                            self._kind[proc.pid] = process_kind(proc.cmdline())
                        used = proc.memory_info().rss
                        rss += used
                        by_kind[self._kind[proc.pid]] = by_kind.get(self._kind[proc.pid], 0) + used
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            self.result.peak_rss = max(self.result.peak_rss, rss)
            for kind, used in by_kind.items():
                self.result.peak_rss_by_kind[kind] = max(self.result.peak_rss_by_kind.get(kind, 0), used)
            self.result.samples += 1
            self._stop.wait(self.interval)


def process_kind(cmdline: list[str]) -> str:
    """A short name for a replicator process: what its command line runs."""
    if not cmdline:
        return "?"
    exe = cmdline[0].rsplit("/", 1)[-1]
    if exe == "java":
        return "jvm:" + next((a.rsplit(".", 1)[-1] for a in cmdline[1:] if not a.startswith("-") and "." in a
                              and "/" not in a), "?")
    if "-m" in cmdline[:-1]:
        return "python:" + cmdline[cmdline.index("-m") + 1]
    return exe


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def now_ms() -> int:
    return int(time.time() * 1000)
