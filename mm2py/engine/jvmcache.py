"""A class-data-sharing archive for the Spark driver JVM, made by the first run and used by the next.

Loading, verifying and linking Spark's classes is most of what the driver JVM does before the
first micro-batch: a JDK dynamic CDS archive (JEP 350) maps them ready-made instead
(docs/design.md has the measurement).

The archive is made by a JVM started with ``-XX:ArchiveClassesAtExit`` when it exits, so the
first run on a machine makes it and later ones map it. The file name carries everything the
archive depends on (Java, PySpark and the JVM options); a JVM that cannot use an archive (a
changed class path, a damaged file) ignores it and starts as it would without.

Invariants:
- at most one JVM writes an archive at a time (an exclusive lock file naming the writer);
- an archive becomes visible under its final name only after its writer exited, and only if
  a JVM starts with it (a writer killed mid-dump leaves a file that would crash every JVM);
- only the archive of a run that copied (its first micro-batch completed, ``worked``) is kept:
  a JVM archives the classes it loaded, so a run that ended at start-up (a bad config, an
  outage) would leave a small archive that every later run maps and then loads the rest from
  jars; such an archive is dropped and the next run writes one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import pyspark

from mm2py.cds import QUIET, enabled, java_binary, java_identity, lock_holder, lock_is_live, take_lock, usable
from mm2py.engine.sparkhome import PACKAGE, cache_root

WORKED = "worked"  # the lock's mark: the writer's run copied (DriverArchive.worked)


def archive_path(jvm_options: str, spark_home: str) -> Path:
    parts = [java_identity(java_binary()), pyspark.__version__, str(PACKAGE), spark_home, jvm_options]
    tag = hashlib.sha1("\n".join(parts).encode())
    return cache_root() / "jvm" / f"spark-driver-{tag.hexdigest()[:12]}.jsa"


class DriverArchive:
    """Chooses the CDS option of one driver JVM and, for the run that writes it, tracks the writer."""

    def __init__(self, jvm_options: str, spark_home: str):
        self.final = archive_path(jvm_options, spark_home)
        self.partial = self.final.with_suffix(".partial")
        self.lock = self.final.with_suffix(".lock")
        self.writing = False
        self.jvm_pid: int | None = None

    def option(self) -> str:
        """``-XX:SharedArchiveFile=...`` once an archive exists, else the option that writes one (or "")."""
        if not enabled():
            return ""
        self.promote_finished()
        if self.final.exists():
            return f"-XX:SharedArchiveFile={self.final} {QUIET}"
        if not take_lock(self.lock, os.getpid()):  # another run writes it, or the cache is read-only
            return ""
        self.writing = True
        return f"-XX:ArchiveClassesAtExit={self.partial} {QUIET}"

    def started(self, jvm_pid: int | None) -> None:
        """Name the JVM that writes the archive at its exit (it outlives this process's last word)."""
        if self.writing and jvm_pid:
            self.jvm_pid = jvm_pid
            self.lock.write_text(str(jvm_pid))

    def worked(self) -> None:
        """The run copied: the archive its JVM writes at exit holds the classes of real work, keep it."""
        if self.writing:  # a JVM PySpark did not launch got no archive option: its lock is dropped
            with contextlib.suppress(OSError):
                self.lock.write_text(f"{self.jvm_pid or os.getpid()} {WORKED}")
            self.writing = False  # once

    def promote_finished(self) -> None:
        held = lock_holder(self.lock)
        if held is None or lock_is_live(self.lock):
            return
        marks = held[1]
        with contextlib.suppress(OSError):
            if (WORKED in marks and self.partial.exists() and self.partial.stat().st_size > 0
                    and not self.final.exists() and usable(self.partial)):
                self.partial.rename(self.final)
            self.partial.unlink(missing_ok=True)
            self.lock.unlink()
