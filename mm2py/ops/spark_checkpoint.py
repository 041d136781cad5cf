"""Spark Structured Streaming checkpoints: the Kafka source's offsets, read and rewritten.

``offsets/N`` holds a version line (``v1``), a metadata JSON line, then one line per source; a
Kafka source's line is ``{"topic": {"partition": offset}}``, another source's is whatever it wrote.
``commits/N`` exists once batch N completed. Spark resumes after the latest offsets batch when its
commit exists, else re-runs it (same batch id, from the batch before's offsets to its own).

``write_resume`` keeps Spark's rule on the other cluster:
- latest batch committed: it appends batch M (one past the latest) with the translated offsets and
  its commit, so Spark starts at M + 1 from exactly those offsets; no file already there changes;
- latest batch L planned but not committed: it rewrites ``offsets/L-1`` and ``offsets/L`` in place
  with both translated, so Spark re-runs batch L under its own id over the same records. A sink
  that committed L before the stop (a file sink's ``_spark_metadata/L``) skips it again: nothing
  twice. The originals are kept beside them as ``.N.before-failover`` and the stale ``.N.crc``
  checksums removed (Hadoop reads a file without one unchecked; a wrong one fails the read).
- batch 0 planned and never committed: Spark re-runs it from each Kafka source's initial offsets
  (``sources/<i>/0``: a NUL byte, ``v1``, the JSON), so those are rewritten the same way as
  ``offsets/L-1`` above (source ``i`` is line ``i + 2`` of an offsets file).
No ``.crc`` is written for new files.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from mm2py.errors import Mm2pyError
from mm2py.types import TP

INITIAL = -1  # SparkBatch.batch_id of the sources' initial offsets, which batch 0 starts from
_INITIAL_HEAD = "\0v1\n"  # what precedes the JSON in sources/<i>/0
_FIRST_SOURCE_LINE = 2  # offsets/N: version, metadata, then one line per source


@dataclass(frozen=True)
class SparkBatch:
    batch_id: int
    lines: tuple[str, ...]  # the whole offsets file: version, metadata, one line per source
    kafka_lines: tuple[int, ...]  # indexes into ``lines`` of the Kafka sources
    latest_id: int  # the newest offsets file, committed or not
    note: str  # which batch was used, and why
    rerun: SparkBatch | None = None  # the latest batch when it was planned and not committed

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
    if latest in committed:
        return _offsets_file(checkpoint, latest, latest, f"batch {latest} (committed)")
    rerun = _offsets_file(checkpoint, latest, latest, "planned, not committed")
    if latest == 0:
        return _initial_offsets(checkpoint, rerun)
    use = latest - 1  # Spark's rule: the re-run starts at offsets/L-1, whatever commits/ holds
    if use not in planned:
        raise Mm2pyError(f"{checkpoint}: batch {latest} was planned but not committed, and offsets/{use}, "
                         "which Spark re-runs it from, is missing")
    state = "committed" if use in committed else "no commit either: Spark does not re-run it"
    note = (f"batch {use} ({state}); batch {latest} was planned but not committed, and Spark re-runs it "
            f"from batch {use}'s offsets")
    return _offsets_file(checkpoint, use, latest, note, rerun)


def _initial_offsets(checkpoint: Path, first: SparkBatch) -> SparkBatch:
    """Batch 0 was planned and never committed: Spark re-runs it from the sources' initial offsets."""
    lines = list(first.lines)
    for i in first.kafka_lines:
        path = checkpoint / "sources" / str(i - _FIRST_SOURCE_LINE) / "0"
        text = path.read_text() if path.is_file() else ""
        if not text.startswith(_INITIAL_HEAD) or not _kafka_line(text[len(_INITIAL_HEAD):]):
            raise Mm2pyError(f"{checkpoint}: batch {first.batch_id} was never committed and {path} holds no "
                             "Kafka initial offsets to re-run it from")
        lines[i] = text[len(_INITIAL_HEAD):].strip()
    note = (f"the sources' initial offsets (sources/*/0); batch {first.batch_id} was planned but never "
            "committed, and Spark re-runs it from them")
    return SparkBatch(INITIAL, tuple(lines), first.kafka_lines, first.latest_id, note, first)


def _offsets_file(checkpoint: Path, n: int, latest: int, note: str, rerun: SparkBatch | None = None) -> SparkBatch:
    lines = tuple((checkpoint / "offsets" / str(n)).read_text().splitlines())
    if not lines or lines[0] != "v1":
        raise Mm2pyError(f"{checkpoint}/offsets/{n}: unsupported offset log version {lines[:1]}")
    kafka = tuple(i for i in range(2, len(lines)) if _kafka_line(lines[i]))
    if not kafka:
        raise Mm2pyError(f"{checkpoint}/offsets/{n}: no Kafka source offsets in it")
    return SparkBatch(n, lines, kafka, latest, note, rerun)


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


def write_resume(checkpoint: Path, batch: SparkBatch, lines: tuple[str, ...],
                 rerun_lines: tuple[str, ...] | None = None) -> int:
    """Write what the query resumes from (module docstring); returns the appended batch M, or the
    batch L Spark re-runs."""
    if batch.rerun is not None:
        if rerun_lines is None:
            raise ValueError("the planned batch's offsets are needed too")
        if batch.batch_id == INITIAL:
            for i in batch.kafka_lines:
                _rewrite(checkpoint / "sources" / str(i - _FIRST_SOURCE_LINE), 0, _INITIAL_HEAD + lines[i])
        else:
            _rewrite(checkpoint / "offsets", batch.batch_id, "\n".join(lines))
        _rewrite(checkpoint / "offsets", batch.rerun.batch_id, "\n".join(rerun_lines))
        return batch.rerun.batch_id
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


def _rewrite(directory: Path, n: int, text: str) -> None:
    """``directory/n`` replaced by ``text`` (atomically), its original kept, its stale checksum removed."""
    path, keep = directory / str(n), directory / f".{n}.before-failover"
    if not keep.exists():
        keep.write_bytes(path.read_bytes())
    tmp = directory / f".{n}.mm2py.tmp"
    tmp.write_text(text)
    tmp.rename(path)
    (directory / f".{n}.crc").unlink(missing_ok=True)
