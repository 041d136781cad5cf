"""A class-data-sharing archive for the dev brokers' JVMs, dumped from the first broker that answers.

A dev broker spends most of its start-up CPU loading, verifying and linking Kafka's classes; a
dynamic CDS archive (mm2py.cds) maps them ready-made (docs/design.md has the measurement). The
Spark driver's archive is written at its JVM's exit; a broker's cannot wait for that, because
dev brokers live as long as a demo or a test run, or end with SIGKILL. So the first broker
started without an archive runs with ``-XX:+RecordDynamicDumpInfo``, and once it answers,
the process that started it dumps the archive with ``jcmd <pid> VM.cds dynamic_dump``.

Invariants:
- one writer at a time, machine-wide: an exclusive lock file naming the writing process, taken
  over only when that process is gone;
- the archive appears under its final name whole (dumped to a partial file of the writer's own,
  published by rename) and only after a JVM started with it (``mm2py.cds.usable``);
- its name carries what it depends on, the java binary and the jars folder; a broker whose JVM
  cannot map it (other JVM options) starts as it would without;
- ``MM2PY_JVM_CDS=0`` turns the archive off.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

from mm2py.cds import QUIET, enabled, java_identity, lock_is_live, take_lock, usable

log = logging.getLogger(__name__)
DUMP_TIMEOUT = 120.0


def broker_java() -> str | None:
    """The java binary dev brokers run: the one on PATH."""
    java = shutil.which("java")
    return os.path.realpath(java) if java else None


class BrokerArchive:
    """Chooses the CDS options of one broker JVM; for the broker that writes the archive, dumps it."""

    def __init__(self, libs: Path, java: str | None):
        self.java = java
        tag = hashlib.sha1(f"{java_identity(java)}\n{libs}".encode()).hexdigest()[:12]
        self.final = libs.parent / "jvm" / f"broker-{tag}.jsa"
        self.partial = self.final.with_suffix(f".{os.getpid()}.partial")
        self.lock = self.final.with_suffix(".lock")
        self.writing = False

    def mapping(self) -> tuple[str, ...]:
        """The options that map the archive when there is one (for any JVM on the jars), else none."""
        if enabled() and self.java is not None and self.final.exists():
            return (f"-XX:SharedArchiveFile={self.final}", QUIET)
        return ()

    def options(self) -> tuple[str, ...]:
        """For a broker: map the archive, or record what the dump needs (this process then writes it)."""
        mapped = self.mapping()
        if mapped or not enabled() or self.java is None or not self._jcmd().exists():
            return mapped
        if self.lock.exists() and not lock_is_live(self.lock):  # its writer died
            with contextlib.suppress(OSError):
                self.lock.unlink()
        if not take_lock(self.lock, os.getpid()):  # another process writes it, or the cache is read-only
            return ()
        self.writing = True
        return ("-XX:+RecordDynamicDumpInfo",)

    def dump(self, pid: int) -> bool:
        """Dump the classes broker ``pid`` loaded, check and publish the archive, release the lock."""
        if not self.writing:
            return False
        try:
            self.partial.unlink(missing_ok=True)
            run = subprocess.run([str(self._jcmd()), str(pid), "VM.cds", "dynamic_dump", str(self.partial)],
                                 capture_output=True, text=True, timeout=DUMP_TIMEOUT)
            if run.returncode == 0 and self.partial.exists() and usable(self.partial, self.java):
                self.partial.rename(self.final)
                return True
            log.debug("broker class archive not written: %s", (run.stdout + run.stderr).strip()[-300:])
            return False
        except (OSError, subprocess.SubprocessError) as e:
            log.debug("broker class archive not written: %s", e)
            return False
        finally:
            self.release()

    def release(self) -> None:
        """Give up writing (the broker did not start); the next broker start may write."""
        if self.writing:
            self.writing = False
            with contextlib.suppress(OSError):
                self.partial.unlink(missing_ok=True)
                self.lock.unlink()

    def _jcmd(self) -> Path:
        assert self.java is not None
        return Path(self.java).parent / "jcmd"
