"""Spark Structured Streaming checkpoints: the Kafka source's offsets, read and rewritten.

``offsets/N`` holds a version line (``v1``), a metadata JSON line, then one line per source; a
Kafka source's line is ``{"topic": {"partition": offset}}``, another source's is whatever it wrote.
``commits/N`` exists once batch N completed. Spark resumes after the latest offsets batch when its
commit exists, else re-runs it from the batch before. ``write_resume`` appends a new batch M (one past
the latest offsets file) with the translated offsets and its commit, so Spark starts at M + 1 from
exactly those offsets; files already there are never changed (no ``.crc`` is written for new files).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from mm2py.errors import Mm2pyError
from mm2py.types import TP


@dataclass(frozen=True)
class SparkBatch:
    batch_id: int
    lines: tuple[str, ...]  # the whole offsets file: version, metadata, one line per source
    kafka_lines: tuple[int, ...]  # indexes into ``lines`` of the Kafka sources
    latest_id: int  # the newest offsets file, committed or not
    note: str  # which batch was used, and why

    @property
    def offsets(self) -> dict[TP, int]:
        out: dict[TP, int] = {}
        for i in self.kafka_lines:
            for topic, parts in json.loads(self.lines[i]).items():
                out.update({(topic, int(p)): int(o) for p, o in parts.items()})
        return out


def _ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(n) for n in os.listdir(directory) if n.isdigit())


def _kafka_line(line: str) -> bool:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(data, dict) and bool(data) and all(
        isinstance(v, dict) and all(k.lstrip("-").isdigit() and isinstance(o, int) for k, o in v.items())
        for v in data.values())


def read_batch(checkpoint: Path) -> SparkBatch:
    """The offsets Spark resumes from: the newest batch whose commit exists."""
    planned, committed = _ids(checkpoint / "offsets"), _ids(checkpoint / "commits")
    if not planned:
        raise Mm2pyError(f"{checkpoint}: no offsets/N files: not a started Structured Streaming checkpoint")
    latest = planned[-1]
    done = [b for b in planned if b in set(committed)]
    if latest in committed:
        use, note = latest, f"batch {latest} (committed)"
    elif done:
        use = done[-1]
        note = (f"batch {use} (committed); batch {latest} was planned but not committed, and Spark "
                f"re-runs it from batch {use}'s offsets")
    else:
        raise Mm2pyError(f"{checkpoint}: batch {latest} was never committed and there is no batch before it; "
                         "the query starts from its startingOffsets: nothing to translate")
    lines = tuple((checkpoint / "offsets" / str(use)).read_text().splitlines())
    if not lines or lines[0] != "v1":
        raise Mm2pyError(f"{checkpoint}/offsets/{use}: unsupported offset log version {lines[:1]}")
    kafka = tuple(i for i in range(2, len(lines)) if _kafka_line(lines[i]))
    if not kafka:
        raise Mm2pyError(f"{checkpoint}/offsets/{use}: no Kafka source offsets in it")
    return SparkBatch(use, lines, kafka, latest, note)


def last_write_age(checkpoint: Path, now: float | None = None) -> float:
    """Seconds since any offsets/commits file was written."""
    stamps = [p.stat().st_mtime for d in ("offsets", "commits") if (checkpoint / d).is_dir()
              for p in (checkpoint / d).iterdir()]
    return (now if now is not None else time.time()) - max(stamps, default=0.0)


def resume_lines(batch: SparkBatch, translated: dict[TP, int], rename: dict[str, str]) -> tuple[str, ...]:
    """The batch's offsets file with each Kafka source line renamed and translated."""
    lines = list(batch.lines)
    for i in batch.kafka_lines:
        out: dict[str, dict[str, int]] = {}
        for topic, parts in json.loads(lines[i]).items():
            remote = rename[topic]
            out[remote] = {p: translated[(remote, int(p))] for p in parts}
        lines[i] = json.dumps(out, separators=(",", ":"))
    return tuple(lines)


def write_resume(checkpoint: Path, batch: SparkBatch, lines: tuple[str, ...]) -> int:
    """Append offsets/M and commits/M (M = latest + 1); returns M."""
    new = batch.latest_id + 1
    commit = (checkpoint / "commits" / str(batch.batch_id))
    commit_text = commit.read_text() if commit.exists() else 'v1\n{"nextBatchWatermarkMs":0}'
    for sub, text in (("offsets", "\n".join(lines)), ("commits", commit_text)):
        path = checkpoint / sub / str(new)
        if path.exists():
            raise Mm2pyError(f"{path} exists: the query wrote a batch meanwhile")
        tmp = checkpoint / sub / f".{new}.mm2py.tmp"
        tmp.write_text(text)
        tmp.rename(path)
    return new
