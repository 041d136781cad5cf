"""Processes a test started and must stop: every one still running when the test ends is killed.

A replicator or a Spark job a test starts runs in a session of its own (its JVM and Python
workers in its process group). A test that fails before its own stop, or whose clean-up raises
first, would leave that group running into the next tests: a driver retrying against clusters
torn down, loading the cores every later test shares. ``track`` registers such a process; the
integration conftest's autouse fixture calls ``reap`` after each test, which SIGKILLs the group of
every registered process still alive and names them.
"""

from __future__ import annotations

import os
import signal
import subprocess

_TRACKED: list[tuple[subprocess.Popen, str]] = []


def track(proc: subprocess.Popen, what: str) -> subprocess.Popen:
    """Register ``proc`` (a session leader) as ``what``; returns it."""
    _TRACKED.append((proc, what))
    return proc


def reap() -> list[str]:
    """SIGKILL the process group of every tracked process still running; forget them all; the
    names of those killed."""
    killed = []
    for proc, what in _TRACKED:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            proc.wait(30)
            killed.append(f"{what} (pid {proc.pid})")
    _TRACKED.clear()
    return killed
