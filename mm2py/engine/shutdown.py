"""How a run stops on SIGINT or SIGTERM: in order on the first signal, at once on a second.

Spark's JVM and its Python workers ignore both signals (mm2py.engine.sparkhome,
mm2py.connectors.daemon), so whoever signals (mm2py alone, its process group as Ctrl-C does, or
every process of a systemd unit) only this process acts on it.

Invariants:
- the first signal sets ``stop`` and raises the run's stop flag (mm2py.source.copy.stop_flag) and does
  nothing else: the driver's main thread then lets the running micro-batches commit, stops the
  queries and Spark, and the process exits 0;
- a second signal, or ``timeout_s`` plus ``GRACE_S`` after the first, ends the process at once:
  Spark's JVM is killed (its Python workers end with it) and the process exits non-zero; what
  was not committed is copied again on the next start (at-least-once, never a loss);
- the handler runs in the main thread between bytecodes: it only sets flags, touches one file,
  and starts a timer.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import structlog

from mm2py.source.copy.stop_flag import StopFlag

log = structlog.get_logger(__name__)

# after shutdown.timeout.ms, how long stopping the queries and Spark may take before the forced end
GRACE_S = 3.0


class Shutdown:
    """The run's stop. Constructor does no I/O; ``handle`` is the SIGINT/SIGTERM handler."""

    def __init__(self, flag: StopFlag, timeout_s: float, *, on_first: Callable[[], None] = lambda: None,
                 end: Callable[[int], None] = os._exit, kill: Callable[[int, int], None] = os.kill):
        self.flag = flag
        self.timeout_s = timeout_s
        self.on_first = on_first  # quietens what dies noisily once stopping (the JVM's console, py4j)
        self.end = end
        self.kill = kill
        self.stop = threading.Event()
        self.jvm_pid: int | None = None  # Spark's JVM, once started
        self.signalled_at: float | None = None
        self._timer: threading.Timer | None = None

    def handle(self, signum: int, _frame: object = None) -> None:
        name = signal.Signals(signum).name
        if self.stop.is_set():
            self.force(f"second {name}", 128 + signum)
            return
        self.signalled_at = time.monotonic()
        self.flag.raise_()
        self.stop.set()
        self.on_first()
        log.info("shutting down: running micro-batches commit first (a second signal stops at once)", signal=name,
                 timeout_s=self.timeout_s)
        self._timer = threading.Timer(self.timeout_s + GRACE_S, self.force, ("shutdown.timeout.ms passed", 1))
        self._timer.daemon = True
        self._timer.start()

    def force(self, why: str, code: int) -> None:
        """End the process now: Spark's JVM first, so no worker outlives it."""
        log.warning("stopping at once; what was not committed is copied again on the next start", why=why)
        if self.jvm_pid is not None:
            with contextlib.suppress(OSError):
                self.kill(self.jvm_pid, signal.SIGKILL)
        self.end(code)

    def seconds(self) -> float | None:
        """Seconds since the first signal (None without one)."""
        return None if self.signalled_at is None else round(time.monotonic() - self.signalled_at, 2)

    def done(self) -> None:
        """The orderly stop finished: the forced end is off."""
        if self._timer is not None:
            self._timer.cancel()


@contextlib.contextmanager
def signals_to(handler: Callable[[int, object], None]) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` inside the block; the previous handlers come back after it."""
    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, before in previous.items():
            signal.signal(s, before)
