"""Raw clients a Spark Python worker keeps from one task to the next.

Python workers are reused (spark.python.worker.reuse) and a steady flow runs a task per
micro-batch, about every second. Fresh clients per task paid for connecting, TLS/SASL and
ApiVersions each time, and faulted in new frame buffers (mm2py.kafka.fastio) for every
micro-batch; kept clients reuse both.

Invariants:
- a worker runs one task at a time, so a kept client is never shared by two tasks at once;
- a task that fails drops the clients it used: their connections may hold answers nobody
  will read, and the next task starts clean.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mm2py.config.model import ClusterConfig
from mm2py.engine import workergc
from mm2py.kafka.wire import RawClient

_kept: dict[tuple, RawClient] = {}


def _key(cluster: ClusterConfig, client_id: str, timeout_ms: int) -> tuple:
    return (cluster.alias, cluster.bootstrap_servers, tuple(sorted(cluster.client.items())), client_id, timeout_ms)


def _client(cluster: ClusterConfig, client_id: str, timeout_ms: int) -> RawClient:
    key = _key(cluster, client_id, timeout_ms)
    client = _kept.get(key)
    if client is None:
        client = _kept[key] = RawClient(cluster, client_id=client_id, timeout_ms=timeout_ms)
    return client


def _drop(client: RawClient) -> None:
    for key, kept in list(_kept.items()):
        if kept is client:
            del _kept[key]
    with contextlib.suppress(Exception):
        client.close()
    workergc.thaw()  # the client was frozen with the worker's long-lived objects


@contextlib.contextmanager
def task_clients(
    source: ClusterConfig, target: ClusterConfig, client_id: str, timeout_ms: int
) -> Iterator[tuple[RawClient, RawClient]]:
    """The (source, target) clients of one task: kept ones when this worker has them."""
    src = _client(source, client_id, timeout_ms)
    try:
        dst = _client(target, client_id, timeout_ms)
    except BaseException:
        _drop(src)
        raise
    try:
        yield src, dst
    except BaseException:
        _drop(src)
        _drop(dst)
        raise


def close_all() -> None:
    """Close every kept client (tests, and a worker shutting down)."""
    for client in list(_kept.values()):
        _drop(client)
