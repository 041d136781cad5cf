"""One Spark copy task: the ranges of a micro-batch that one Python worker copies.

Raw batches by default (``mm2py.source.copier``); topics whose remote topic has fewer
partitions take the record path (``mm2py.source.rehash``). Clients come from the worker's
kept ones (``mm2py.worker``): the source's fetches with the replication consumer's settings
(``source.consumer``), the target's writes with the data producer's (``target.producer``).
"""

from __future__ import annotations

from mm2py.config.model import ClusterConfig
from mm2py.kafka.admin import principal_of
from mm2py.source.copier import Copier, CopySettings
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.source.rehash import RehashCopier
from mm2py.worker import task_clients

# kafka-python drops a connection whose answer is larger than its limit; fetches answer up to
# fetch.max.bytes and, per partition, at least one whole batch (KIP-74)
RECEIVE_LIMIT = 256 << 20


def receive_limit(settings: CopySettings) -> int:
    return max(RECEIVE_LIMIT, settings.fetch_max_bytes + settings.partition_max_bytes + (16 << 20))


def copy_ranges(
    source: ClusterConfig,
    target: ClusterConfig,
    ranges: list[PartitionRange],
    settings: CopySettings,
    client_id: str,
) -> list[RangeResult]:
    """Mirror every range in ``ranges``; return what was done per range."""
    hashed = [r for r in ranges if r.target_partitions]  # partition.mismatch = hash
    raw = [r for r in ranges if not r.target_partitions]
    results: list[RangeResult] = []
    with task_clients(source, target, client_id, settings.request_timeout_ms,
                      receive_max_bytes=receive_limit(settings)) as (src, dst):
        if hashed:
            results += RehashCopier(src, dst, target, hashed, settings, client_id).run()
        if raw:
            principals = (principal_of(source.consumer), principal_of(target.producer))
            results += Copier(src, dst, raw, settings, principals).run()
    return results
