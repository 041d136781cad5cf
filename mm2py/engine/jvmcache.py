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
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pyspark

from mm2py.engine.sparkhome import PACKAGE, cache_root

DISABLE_ENV = "MM2PY_JVM_CDS"  # "0" turns the archive off (e.g. to compare start-up with and without)
# a writer holding the lock longer than this is taken for a reused pid: another run may write
STALE_LOCK_SECONDS = 24 * 3600
# classes the archive cannot hold (signed jars, old class files) are warned about on stdout at
# the writer's exit; an archive the JVM cannot use is too. Neither is the operator's concern.
QUIET = "-Xlog:cds*=error"
WORKED = "worked"  # the lock's mark: the writer's run copied (DriverArchive.worked)


def _java() -> str | None:
    """The java binary Spark's launcher runs: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else None


def _java_identity() -> str:
    """That binary and its mtime: a changed JDK gets an archive of its own."""
    java = _java()
    if java is None:
        return "no java"
    try:
        return f"{java}:{os.stat(java).st_mtime_ns}"
    except OSError:
        return java


def archive_path(jvm_options: str, spark_home: str) -> Path:
    parts = [_java_identity(), pyspark.__version__, str(PACKAGE), spark_home, jvm_options]
    tag = hashlib.sha1("\n".join(parts).encode())
    return cache_root() / "jvm" / f"spark-driver-{tag.hexdigest()[:12]}.jsa"


def usable(archive: Path) -> bool:
    """True when a JVM starts with ``archive`` mapped.

    A writer killed while dumping leaves a truncated archive, and a JVM that maps one dies of
    SIGBUS (exit 134) instead of ignoring it, as it ignores a mismatched one: checked on this
    JDK 17 with the first 160 MB of a 168 MB archive. Starting ``java -version`` with it tells.
    """
    java = _java()
    if java is None:
        return False
    try:
        # a crashing JVM writes hs_err_pid*.log into its working directory: not into the operator's
        run = subprocess.run([java, f"-XX:SharedArchiveFile={archive}", QUIET, "-XX:ErrorFile=/dev/null",
                              "-version"], capture_output=True, timeout=60, cwd=tempfile.gettempdir())
    except (OSError, subprocess.SubprocessError):
        return False
    return run.returncode == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        pass
    return True


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
        if os.environ.get(DISABLE_ENV) == "0":
            return ""
        self.promote_finished()
        if self.final.exists():
            return f"-XX:SharedArchiveFile={self.final} {QUIET}"
        try:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except OSError:  # another run writes it, or the cache is read-only: start without
            return ""
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        self.writing = True
        return f"-XX:ArchiveClassesAtExit={self.partial} {QUIET}"

    def started(self, jvm_pid: int | None) -> None:
        """Name the JVM that writes the archive at its exit (it outlives this process's last word)."""
        if self.writing and jvm_pid:
            self.jvm_pid = jvm_pid
            self.lock.write_text(str(jvm_pid))

    def worked(self) -> None:
        """The run copied: the archive its JVM writes at exit holds the classes of real work, keep it."""
        if self.writing and self.jvm_pid:
            with contextlib.suppress(OSError):
                self.lock.write_text(f"{self.jvm_pid} {WORKED}")
            self.writing = False  # once

    def promote_finished(self) -> None:
        try:
            writer_text, *marks = self.lock.read_text().split() or ["0"]
            writer = int(writer_text)
            stale = time.time() - self.lock.stat().st_mtime > STALE_LOCK_SECONDS
        except (OSError, ValueError):
            return
        if writer and _alive(writer) and not stale:
            return
        with contextlib.suppress(OSError):
            if (WORKED in marks and self.partial.exists() and self.partial.stat().st_size > 0
                    and not self.final.exists() and usable(self.partial)):
                self.partial.rename(self.final)
            self.partial.unlink(missing_ok=True)
            self.lock.unlink()
