"""What a reused Spark Python worker keeps from one task to the next: clients, state, a gc freeze.

Python workers are reused (spark.python.worker.reuse) and a steady flow runs a task per
micro-batch. Kept clients spare every task the connection, TLS/SASL and ApiVersions round
trips and new frame buffers (mm2py.kafka.fastio). PySpark's daemon runs a full
``gc.collect()`` after every task; what is still alive after a task is almost all long-lived
(pyspark, pyarrow and kafka-python modules, kept clients), so ``settle`` moves it to the
permanent generation that collections skip (``gc.freeze``).

Invariants:
- a worker runs one task at a time, so a kept client is never shared by two tasks at once;
- a task that fails drops the clients it used: their connections may hold answers nobody
  will read, and the next task starts clean;
- nothing is frozen without a full collection just before, so no garbage is frozen;
- a freeze happens again only once enough objects have outlived collections since the last
  one (a worker that starts running another connector's tasks, or makes new clients);
- dropping a kept client thaws, so that the next collection can free its reference cycles.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import TypeVar

from mm2py.config.model import ClusterConfig
from mm2py.kafka.compacted import RecordWriter
from mm2py.kafka.wire import RawClient, settings_of

# Objects in the oldest collected generation that make a new freeze worth its full collection.
REFREEZE_OBJECTS = 20_000

# Whether this process froze, kept here: gc.get_freeze_count() walks the whole permanent
# generation, which costs as much as the collections the freeze saves.
_frozen = False

_kept: dict[tuple, RawClient] = {}

T = TypeVar("T")


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


def _key(cluster: ClusterConfig, role: str, client_id: str, timeout_ms: int, receive_max_bytes: int) -> tuple:
    settings = tuple(sorted(settings_of(cluster, role).items()))
    return (cluster.alias, cluster.bootstrap_servers, role, settings, client_id, timeout_ms, receive_max_bytes)


def _client(cluster: ClusterConfig, role: str, client_id: str, timeout_ms: int, receive_max_bytes: int) -> RawClient:
    key = _key(cluster, role, client_id, timeout_ms, receive_max_bytes)
    client = _kept.get(key)
    if client is None:
        client = _kept[key] = RawClient(cluster, client_id=client_id, timeout_ms=timeout_ms, role=role,
                                        receive_max_bytes=receive_max_bytes)
    return client


def _drop(client: RawClient) -> None:
    for key, kept in list(_kept.items()):
        if kept is client:
            del _kept[key]
    with contextlib.suppress(Exception):
        client.close()
    thaw()  # the client was frozen with the worker's long-lived objects


@contextlib.contextmanager
def task_clients(
    source: ClusterConfig, target: ClusterConfig, client_id: str, timeout_ms: int, *, receive_max_bytes: int = 256 << 20
) -> Iterator[tuple[RawClient, RawClient]]:
    """The (source, target) clients of one task: kept ones when this worker has them.

    The source's fetches are the replication consumer's (``source.consumer``), the target's
    writes the data producer's (``target.producer``): their settings, client.id first, win over
    ``client_id``.
    """
    src = _client(source, "consumer", client_id, timeout_ms, receive_max_bytes)
    try:
        dst = _client(target, "producer", client_id, timeout_ms, receive_max_bytes)
    except BaseException:
        _drop(src)
        raise
    try:
        yield src, dst
    except BaseException:
        _drop(src)
        _drop(dst)
        raise


Lent = tuple[tuple[RawClient, RawClient], tuple[tuple, tuple]]  # (source, target) clients, and their keys


def lend_clients(source: ClusterConfig, target: ClusterConfig, client_id: str, timeout_ms: int, *,
                 receive_max_bytes: int = 256 << 20) -> Lent:
    """(source, target) clients taken out of the kept ones, for a copier that outlives its task
    (mm2py.source.copy.resident): no task of this worker gets them until ``give_back``."""
    src, dst = (_client(cluster, role, client_id, timeout_ms, receive_max_bytes)
                for cluster, role in ((source, "consumer"), (target, "producer")))
    keys = (_key(source, "consumer", client_id, timeout_ms, receive_max_bytes),
            _key(target, "producer", client_id, timeout_ms, receive_max_bytes))
    for key in keys:
        del _kept[key]
    return (src, dst), keys


def give_back(lent: Lent, *, failed: bool) -> None:
    """Lent clients kept again, or closed when their copy failed or a task made new ones meanwhile."""
    for client, key in zip(*lent, strict=True):
        if failed or key in _kept:
            _drop(client)
        else:
            _kept[key] = client


_writers: dict[tuple, RecordWriter] = {}


def kept_writer(cluster: ClusterConfig, timeout_s: float) -> RecordWriter:
    """A record writer (acks=all) on ``cluster`` with its producer settings, kept across tasks."""
    key = (cluster.alias, cluster.bootstrap_servers, tuple(sorted(cluster.producer.items())), timeout_s)
    writer = _writers.get(key)
    if writer is None:
        writer = _writers[key] = RecordWriter(cluster, timeout_s)
    return writer


_states: dict[tuple, object] = {}


def kept_state(key: tuple, make: Callable[[], T]) -> T:
    """What a connector's task keeps for the next task in this worker: ``make()`` the first time.

    ``key`` names everything the state is derived from (clusters and topics), so a task of
    another flow, or of the same flow over other clusters, never sees it.
    """
    state = _states.get(key)
    if state is None:
        state = _states[key] = make()
    return state  # type: ignore[return-value]
