"""One Spark copy task: the ranges of a micro-batch that one Python worker copies.

Raw batches by default (``mm2py.source.copier``); topics whose remote topic has fewer
partitions take the record path (``mm2py.source.rehash``). Clients come from the worker's
kept ones (``mm2py.worker``): the source's fetches with the replication consumer's settings
(``source.consumer``), the target's writes with the data producer's (``target.producer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import structlog

from mm2py.config.model import ClusterConfig
from mm2py.kafka.admin import principal_of
from mm2py.kafka.wire import RawClient
from mm2py.schemas.copier import TranslatingCopier
from mm2py.schemas.settings import SchemaSettings
from mm2py.source.copier import Copier, CopySettings, ProducerState
from mm2py.source.producer_slot import ProducerSlot
from mm2py.source.provenance import ProducerIds, Provenance
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.source.rehash import RehashCopier
from mm2py.source.tail import TailWindow
from mm2py.source.transactional import ExactlyOnce, TaskTransaction
from mm2py.stores.positions import PositionStore
from mm2py.types import TP
from mm2py.worker import kept_state, kept_writer, task_clients

log = structlog.get_logger(__name__)

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
    exactly_once: ExactlyOnce | None = None,
    slice_index: int = 0,
    schemas: SchemaSettings | None = None,
    retry: bool = False,
    provenance: Provenance | None = None,
    tail: TailWindow | None = None,
) -> list[RangeResult]:
    """Mirror every range in ``ranges``; return what was done per range.

    ``exactly_once``: the task is transaction ``slice_index`` of its micro-batch
    (``mm2py.source.transactional``): its positions and syncs are committed with its data.
    ``schemas``: a ``schemas.mode = translate`` flow's, whose ranges take the record-rewriting copier.
    ``retry``: Spark runs the task again; in exactly-once mode its earlier attempt may have
    committed before it died, so after fencing it the ranges start after the committed positions.
    ``provenance``: the flow is on an identity cycle (mm2py.source.provenance); batches first
    written on the target stay behind, others are written with producer ids registered for their origin.
    ``tail``: at-least-once ranges copy what arrives after them while it is open (mm2py.source.tail).
    """
    hashed = [r for r in ranges if r.target_partitions]  # partition.mismatch = hash
    raw = [r for r in ranges if not r.target_partitions]
    if exactly_once is not None and hashed:
        raise ValueError("partition.mismatch = hash has no exactly-once mode (refused at start)")
    results: list[RangeResult] = []
    principals = (principal_of(source.consumer), principal_of(target.producer))
    with task_clients(source, target, client_id, settings.request_timeout_ms,
                      receive_max_bytes=receive_limit(settings)) as (src, dst):
        if hashed:
            results += RehashCopier(src, dst, target, hashed, settings, client_id).run()
        if raw and exactly_once is None:
            origins = None if provenance is None else _kept_producer_ids(provenance, dst, target, settings).for_task
            results += _copier(src, dst, target, raw, settings, principals, client_id, schemas,
                               provenance=provenance, producer_for=origins,
                               tail=None if provenance is not None else tail).run()
        elif raw and exactly_once is not None:
            sink = (kept_writer(exactly_once.source_syncs, exactly_once.timeout_ms / 1000)
                    if exactly_once.source_syncs is not None else None)
            txn = TaskTransaction(dst, exactly_once, slice_index, principal=principals[1], source_syncs=sink,
                                  produce_timeout_ms=settings.produce_timeout_ms)
            producer = txn.begin()
            try:
                done: list[RangeResult] = []
                if retry:
                    raw, done = after_committed(raw, PositionStore(target, exactly_once.source_alias,
                                                                   timeout_ms=settings.request_timeout_ms).load())
                results += done
                if raw:
                    origins = None
                    if provenance is not None:
                        ids = _kept_producer_ids(provenance, dst, target, settings)
                        ids.register(producer.producer_id, provenance.source)
                        origins = transaction_origin(provenance, producer)
                    results += _copier(src, dst, target, raw, settings, principals, client_id, schemas,
                                       producer, provenance=provenance, producer_for=origins).run()
                txn.commit(results)
            except BaseException:
                txn.abort()
                raise
    return results


def _copier(src: RawClient, dst: RawClient, target: ClusterConfig, ranges: list[PartitionRange],
            settings: CopySettings, principals: tuple[str | None, str | None], client_id: str,
            schemas: SchemaSettings | None, producer: ProducerState | None = None, *,
            provenance: Provenance | None = None,
            producer_for: Callable[[str], tuple[int, int]] | None = None,
            tail: TailWindow | None = None) -> Copier:
    """The raw copier, or for a ``schemas.mode = translate`` flow the one rewriting schema ids.

    Idempotent (at-least-once) copiers share this worker's producer id for ``target``
    (mm2py.source.producer_slot); transactional ones have their own, provenance its registered ones.
    """
    slot = None
    if producer is None and provenance is None:
        slot = kept_state(("producer", target.alias, target.bootstrap_servers), ProducerSlot)
    if schemas is not None and schemas.translates:
        if provenance is not None:
            raise ValueError("schemas.mode = translate has no provenance mode (refused at start)")
        return TranslatingCopier(src, dst, ranges, settings, principals, producer, target=target, schemas=schemas,
                                 client_id=client_id, tail=tail, producer_slot=slot)
    return Copier(src, dst, ranges, settings, principals, producer, provenance, producer_for,
                  tail=tail, producer_slot=slot)


def _kept_producer_ids(provenance: Provenance, dst: RawClient, target: ClusterConfig,
                       settings: CopySettings) -> ProducerIds:
    """This worker's producer ids for the flow ``provenance`` stands for, kept across its tasks."""
    key = ("provenance", provenance.source, target.alias, target.bootstrap_servers)
    writer = kept_writer(target, settings.request_timeout_ms / 1000)
    ids = kept_state(key, lambda: ProducerIds(f"{provenance.source}->{provenance.home}", dst.init_producer_id,
                                              writer))
    ids.init = dst.init_producer_id  # the kept client may have been replaced after a failed task
    return ids


def transaction_origin(provenance: Provenance, producer: ProducerState) -> Callable[[str], tuple[int, int]]:
    """Exactly-once: the transaction's producer id stands for the flow's source.

    A transaction has one producer id. A batch of a third origin (left in the source's log by an
    earlier topology: start-up refuses one that would bring new ones) is written as the source's
    own, with a warning naming its origin.
    """

    def producer_for(origin: str) -> tuple[int, int]:
        if origin != provenance.source:
            log.warning("a batch first written on another cluster is written as the source's own: an "
                        "exactly-once transaction has one producer id", flow=f"{provenance.source}->{provenance.home}",
                        origin=origin)
        return producer.producer_id, producer.epoch

    return producer_for


def after_committed(ranges: list[PartitionRange], committed: Mapping[TP, int]) -> tuple[list[PartitionRange],
                                                                                           list[RangeResult]]:
    """``ranges`` starting after the ``committed`` positions, and results for those already wholly committed."""
    left: list[PartitionRange] = []
    done: list[RangeResult] = []
    for r in ranges:
        start = committed.get((r.topic, r.partition), -1) + 1
        if start >= r.end:
            done.append(RangeResult(r.topic, r.partition, r.start, r.end, start))
        elif start > r.start:
            left.append(replace(r, start=start, exact=True))
        else:
            left.append(r)
    return left, done
