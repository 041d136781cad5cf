"""Cheap garbage collection between the tasks of a reused Spark Python worker.

PySpark's daemon runs a full ``gc.collect()`` after every task of a reused worker. A worker
holds about 110,000 long-lived container objects (pyspark, pyarrow, numpy and kafka-python
modules), and with the copier streaming gigabytes through the CPU caches each full
collection took 50-90 ms: 4.5 CPU-seconds over the 74 tasks of the 5 GB catch-up benchmark,
a seventh of the replicator's CPU (timed by wrapping ``gc.collect`` in the workers).

After a task, what is still alive is almost all long-lived. ``gc.freeze()`` moves it to the
permanent generation that collections skip; objects made later are collected as before
(0.46 CPU-seconds in total for the same run).

Invariants:
- nothing is frozen without a full collection just before, so no garbage is frozen;
- a freeze happens again only once enough objects have outlived collections since the last
  one (a worker that starts running another connector's tasks, or makes new clients);
- code that drops long-lived objects which may hold reference cycles (a kept client of a
  failed task) calls ``thaw`` so that the next collection can free them.
"""

from __future__ import annotations

import gc

# Objects in the oldest collected generation that make a new freeze worth its full collection.
REFREEZE_OBJECTS = 20_000

# Whether this process froze, kept here: gc.get_freeze_count() walks the whole permanent
# generation, 17 ms per call in a worker (as much as the collections the freeze saves).
_frozen = False


def settle() -> None:
    """Call at the end of a task: freeze what survived it when enough has accumulated."""
    global _frozen
    if not _frozen or len(gc.get_objects(generation=2)) >= REFREEZE_OBJECTS:
        gc.collect()
        gc.freeze()
        _frozen = True


def thaw() -> None:
    """Let collections see frozen objects again, until the next ``settle``."""
    global _frozen
    gc.unfreeze()
    _frozen = False
