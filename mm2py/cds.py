"""What every class-data-sharing (CDS) archive of ours needs: the JVM it is for, a check that a JVM
maps it, and one writer at a time.

A JDK dynamic CDS archive (JEP 350) holds the classes a JVM loaded, ready to map, so that the next
JVM on the same class path skips loading, verifying and linking them. A JVM that cannot use an
archive (another JDK, a changed class path) ignores it and starts as it would without; a
truncated one crashes it, which is why an archive is published only after ``usable`` says so.
The Spark driver's archive (mm2py.engine.jvmcache) and the dev brokers' (mm2py.dev.brokercds)
build on this.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

DISABLE_ENV = "MM2PY_JVM_CDS"  # "0" turns every archive off (e.g. to compare start-up with and without)
# classes the archive cannot hold (signed jars, old class files) are warned about on stdout when it
# is written; an archive the JVM cannot use is too. Neither is the operator's concern.
QUIET = "-Xlog:cds*=error"
# a writer holding the lock longer than this is taken for a reused pid: another may write
STALE_LOCK_SECONDS = 24 * 3600


def enabled() -> bool:
    return os.environ.get(DISABLE_ENV) != "0"


def java_binary() -> str | None:
    """The java binary Spark's launcher runs: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else None


def java_identity(java: str | None) -> str:
    """A java binary and its mtime: a changed JDK gets archives of its own."""
    if java is None:
        return "no java"
    try:
        return f"{java}:{os.stat(java).st_mtime_ns}"
    except OSError:
        return java


def usable(archive: Path, java: str | None = None) -> bool:
    """True when ``java`` (default: ``java_binary()``) starts with ``archive`` mapped.

    A writer killed while dumping leaves a truncated archive, and a JVM that maps one dies of
    SIGBUS (exit 134) instead of ignoring it, as it ignores a mismatched one: checked on this
    JDK 17 with the first 160 MB of a 168 MB archive. Starting ``java -version`` with it tells.
    """
    java = java or java_binary()
    if java is None:
        return False
    try:
        # a crashing JVM writes hs_err_pid*.log into its working directory: not into the operator's
        run = subprocess.run([java, f"-XX:SharedArchiveFile={archive}", QUIET, "-XX:ErrorFile=/dev/null",
                              "-version"], capture_output=True, timeout=60, cwd=tempfile.gettempdir())
    except (OSError, subprocess.SubprocessError):
        return False
    return run.returncode == 0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        pass
    return True


def lock_holder(lock: Path) -> tuple[int, list[str]] | None:
    """The pid a lock file names and its marks, or None when there is no lock (or it is unreadable)."""
    try:
        writer, *marks = lock.read_text().split() or ["0"]
        return int(writer), marks
    except (OSError, ValueError):
        return None


def lock_is_live(lock: Path) -> bool:
    """The lock's writer still runs and the lock is not older than ``STALE_LOCK_SECONDS``."""
    held = lock_holder(lock)
    if held is None or not held[0] or not alive(held[0]):
        return False
    try:
        return time.time() - lock.stat().st_mtime <= STALE_LOCK_SECONDS
    except OSError:
        return False


def take_lock(lock: Path, owner: int) -> bool:
    """Create ``lock`` naming ``owner``; False if another writer holds it or the folder is read-only."""
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except OSError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(str(owner))
    return True
