"""Where a query's Spark tasks ran on a standalone cluster: the driver's event log and the executors' logs.

The event log (``spark.eventLog.enabled``, uncompressed) names each job's stages and the query
that ran them (its job description holds the query name); the driver flushes it at every job
start, so a running job's stages can be read while it runs. Each executor's stderr (under its
worker's work dir, ``worker-<i>/app-*/<executor id>/stderr``) says which task it runs now.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

RUNNING = re.compile(r"Running task (\d+)\.(\d+) in stage (\d+)\.\d+ \(TID (\d+)\)")
ENDED = re.compile(r"(?:Finished|Exception in|Killed|Executor killed) task \d+\.\d+ in stage \d+\.\d+ \(TID (\d+)\)")


@dataclass(frozen=True)
class TaskEnd:
    """One attempt of a task, as the driver's event log recorded its end."""

    stage: int
    index: int
    attempt: int
    executor: str
    speculative: bool
    reason: str  # Success, ExecutorLostFailure, ...


def event_spark_conf(events: Path) -> dict[str, str]:
    """The spark.* keys that make the driver write an uncompressed event log into ``events``."""
    events.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false"}


def _events(events: Path) -> list[dict]:
    out = []
    # Spark 4 writes a directory per application (rolling event logs), earlier versions a file
    for path in sorted(p for p in events.rglob("*") if p.is_file()):
        for line in path.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # the last line of a log still being written
                continue
    return out


def query_stages(events: Path, query: str) -> set[int]:
    """The stages of every job the query named ``query`` ran so far."""
    stages: set[int] = set()
    for event in _events(events):
        if event.get("Event") == "SparkListenerJobStart" and any(
                query in str(v) for v in (event.get("Properties") or {}).values()):
            stages.update(event.get("Stage IDs", []))
    return stages


def running_tasks(worker_dir: Path, stages: set[int]) -> set[int]:
    """Task ids of ``stages`` an executor of this worker started and has not ended."""
    started: set[int] = set()
    ended: set[int] = set()
    for log in worker_dir.glob("app-*/*/stderr"):
        text = log.read_text(errors="replace")
        started.update(int(m[4]) for m in RUNNING.finditer(text) if int(m[3]) in stages)
        ended.update(int(m[1]) for m in ENDED.finditer(text))
    return started - ended


def executors_of(worker_dir: Path) -> set[str]:
    """The executor ids a worker ran (one work dir each)."""
    return {p.name for p in worker_dir.glob("app-*/*") if p.is_dir()}


def task_ends(events: Path, stages: set[int]) -> list[TaskEnd]:
    """Every ended attempt of a task of ``stages``, in the order the driver saw them end."""
    out = []
    for event in _events(events):
        if event.get("Event") != "SparkListenerTaskEnd" or event.get("Stage ID") not in stages:
            continue
        info = event["Task Info"]
        out.append(TaskEnd(event["Stage ID"], info["Index"], info["Attempt"], str(info["Executor ID"]),
                           bool(info.get("Speculative")), str(event["Task End Reason"]["Reason"])))
    return out


def rescheduled(ends: list[TaskEnd], lost_executors: set[str]) -> list[tuple[TaskEnd, TaskEnd]]:
    """(lost attempt, later successful attempt of the same task on another executor) pairs."""
    pairs = []
    for lost in ends:
        if lost.executor in lost_executors and lost.reason != "Success":
            later = [e for e in ends if (e.stage, e.index) == (lost.stage, lost.index) and e.attempt > lost.attempt
                     and e.reason == "Success" and e.executor not in lost_executors]
            if later:
                pairs.append((lost, later[0]))
    return pairs
