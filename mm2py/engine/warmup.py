"""The Python workers' warm-up, run in a thread beside the driver's start-up work."""

from __future__ import annotations

import threading
from collections.abc import Callable


class WorkerWarmup:
    """``warm_python_workers`` in a thread, beside the wait for remote topics and the queries' start.

    Waiting for the remote topics (``TargetPreparation``), starting the queries and their first
    plans (planner processes, the first offset listings) take seconds on the driver while the
    warm-up's tasks start workers on the executors: they overlap. A micro-batch's tasks
    submitted before the warm-up's end wait for its slots (Spark's scheduler is FIFO), so the
    first copy tasks still find warm workers. ``finish`` waits for it and raises its error.
    ``warm`` does the warm-up (``warm_python_workers`` on the session); the constructor does
    nothing else.
    """

    def __init__(self, warm: Callable[[], None]):
        self.warm = warm
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mm2py-warm-workers", daemon=True)

    def _run(self) -> None:
        try:
            self.warm()
        except BaseException as e:  # handed to finish()
            self.error = e

    def start(self) -> WorkerWarmup:
        self._thread.start()
        return self

    def finish(self, stop: threading.Event) -> None:
        """Wait for the warm-up (or ``stop``); raise its error unless stopping."""
        while self._thread.is_alive() and not stop.is_set():
            self._thread.join(0.2)
        if self.error is not None and not stop.is_set():
            raise self.error
