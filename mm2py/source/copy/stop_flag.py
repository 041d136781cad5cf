"""The run's stop flag: how the driver tells running copy tasks and planners that the run is stopping.

The driver raises it (creates a file in a folder private to the run) on its first SIGINT or
SIGTERM. Copy tasks then end their tails where they stand (mm2py.source.copy.tail) and planners plan
no further micro-batch, so the running micro-batch commits what the target acknowledged and the
queries stop between triggers: a clean stop copies nothing twice.

Invariants:
- the flag only shortens tails and withholds new plans: a planned range is still copied to its
  end, so a micro-batch that commits has the meaning it always had;
- an executor that cannot see the file (a Spark cluster on other hosts) tails to its window's
  end as before; the driver's stop waits for that within ``shutdown.timeout.ms``;
- reading it costs one ``stat`` at most every ``CHECK_SECONDS``: a copy loop may ask at every turn.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

CHECK_SECONDS = 0.05
FILE_NAME = "stop"


class StopFlag:
    """A flag shared through the file system; picklable (a path), sent with tasks and readers."""

    def __init__(self, path: str | None):
        self.path = path  # None: no flag (a run that cannot be stopped early, or a unit test)
        self._raised = False
        self._checked_at = float("-inf")

    @classmethod
    def in_folder(cls, folder: str) -> StopFlag:
        return cls(str(Path(folder) / FILE_NAME))

    def raise_(self) -> None:
        """Raise the flag for every process that watches it (idempotent)."""
        if self.path is not None:
            Path(self.path).touch()
        self._raised = True

    def raised(self) -> bool:
        """True once the flag was raised; checks the file at most every ``CHECK_SECONDS``."""
        if self._raised or self.path is None:
            return self._raised
        now = time.monotonic()
        if now - self._checked_at >= CHECK_SECONDS:
            self._checked_at = now
            self._raised = os.path.exists(self.path)
        return self._raised

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"])  # type: ignore[misc]
