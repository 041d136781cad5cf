"""One Spark copy task: the ranges of a micro-batch that one Python worker copies.

Raw batches by default (``mm2py.source.copy.copier``); topics whose remote topic has fewer
partitions take the record path (``mm2py.source.copy.rehash``), and so do topics a
``TimestampRouter`` routes (``mm2py.source.copy.time_routing``). Clients come from the worker's
kept ones (``mm2py.worker``): the source's fetches with the replication consumer's settings
(``source.consumer``), the target's writes with the data producer's (``target.producer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial

import structlog

from mm2py.config.model import ClusterConfig
from mm2py.flowspec import FlowSpec
from mm2py.kafka.admin import Admin
from mm2py.kafka.admin_errors import principal_of
from mm2py.kafka.wire import RawClient
from mm2py.schemas.settings import SchemaSettings
from mm2py.source.copy.copier import Copier
from mm2py.source.copy.copy_mode import PLAIN, CopyMode
from mm2py.source.copy.copy_settings import CopySettings, ProducerState
from mm2py.source.copy.dead_letters import DeadLetters
from mm2py.source.copy.exactly_once import spec_for
from mm2py.source.copy.interval_commits import TransactionPeriods
from mm2py.source.copy.producer_slot import ProducerSlot
from mm2py.source.copy.record_sender import RecordSender
from mm2py.source.copy.rehash import RehashWriter
from mm2py.source.copy.resident_task import ResidentLease, handed_over, run_resident
from mm2py.source.copy.tail import TailWindow
from mm2py.source.copy.time_routing import TimeRoutingWriter, WindowOutput
from mm2py.source.copy.transactional import ExactlyOnce, TaskTransaction
from mm2py.source.copy.transforming import TransformingWriter
from mm2py.source.copy.translating_writer import TranslatingWriter
from mm2py.source.copy.window_topics import WindowTopics
from mm2py.source.provenance import ProducerIds, Provenance
from mm2py.source.ranges import PartitionRange, RangeResult
from mm2py.stores.positions import PositionStore
from mm2py.transforms import chain_for, transform_keys
from mm2py.transforms.decoded import SourceRegistry
from mm2py.transforms.timestamp_router import TimestampRouter, timestamp_router_of
from mm2py.transforms.tolerance import ErrorPolicy, error_policy
from mm2py.types import TP
from mm2py.worker import kept_state, kept_writer, lend_clients, task_clients

log = structlog.get_logger(__name__)

# kafka-python drops a connection whose answer is larger than its limit; fetches answer up to
# fetch.max.bytes and, per partition, at least one whole batch (KIP-74)
RECEIVE_LIMIT = 256 << 20


def receive_limit(settings: CopySettings) -> int:
    return max(RECEIVE_LIMIT, settings.fetch_max_bytes + settings.partition_max_bytes + (16 << 20))


@dataclass(frozen=True)
class CopySpec:
    """A flow's copy path, resolved once on the driver and sent whole with every task (picklable).

    ``exactly_once``: the flow's transactions (mm2py.source.copy.transactional), None at-least-once;
    ``schemas``: a ``schemas.mode = translate`` flow's, whose ranges take the translating writer;
    ``transforms``: the keys the flow's transform chain is built from on the executor (a chain
    holds functions, the keys pickle); ``errors``: what a record a transform fails on does.
    """

    source: ClusterConfig
    target: ClusterConfig
    settings: CopySettings
    exactly_once: ExactlyOnce | None = None
    schemas: SchemaSettings | None = None
    transforms: tuple[tuple[str, str], ...] = ()  # the flow's transform keys (mm2py.transforms.transform_keys)
    errors: ErrorPolicy = ErrorPolicy()  # what a record a transform fails on does (errors.tolerance)
    replication_factor: int = 1  # the flow's, for topics a copy makes (a TimestampRouter's window topics)

    @classmethod
    def for_flow(cls, spec: FlowSpec) -> CopySpec:
        """The copy path of ``spec``'s flow: fetch and produce settings of its replication consumer and
        data producer (mm2py.config.clients), its transactions (None: at-least-once), schema translation."""
        flow = spec.flow
        return cls(flow.source, flow.target, CopySettings.for_flow(flow), spec_for(flow),
                   SchemaSettings.for_flow(spec), transform_keys(flow.raw), error_policy(flow.raw),
                   flow.metadata.replication_factor)

    @property
    def principals(self) -> tuple[str | None, str | None]:
        """The source's and target's principals, named in a missing-ACL error."""
        return principal_of(self.source.consumer), principal_of(self.target.producer)


@dataclass(frozen=True)
class TaskRun:
    """What differs between the copy tasks of one flow.

    ``slice_index``: in exactly-once mode the task is transaction ``slice_index`` of its
    micro-batch; ``retry``: Spark runs the task again, and its earlier attempt may have committed
    before it died, so after fencing it the ranges start after the committed positions;
    ``provenance``: the flow is on an identity cycle (mm2py.source.provenance): batches first
    written on the target stay behind, others are written with producer ids registered for their
    origin; ``tail``: ranges copy what arrives after them while it is open, and progress is
    recorded as the target acknowledges it (mm2py.source.copy.tail), or, exactly-once, committed in
    a transaction every period (mm2py.source.copy.interval_commits).
    """

    client_id: str
    slice_index: int = 0
    retry: bool = False
    provenance: Provenance | None = None
    tail: TailWindow | None = None
    # a flow with copy.resident.enabled (mm2py.source.copy.resident_task): every task releases the
    # copiers holding its partitions first; ``resident_copies``: a tailing task copies as one
    resident: ResidentLease | None = None
    resident_copies: bool = False


def copy_ranges(spec: CopySpec, ranges: list[PartitionRange], run: TaskRun) -> list[RangeResult]:
    """Mirror every range in ``ranges``; return what was done per range."""
    hashed = [r for r in ranges if r.target_partitions]  # partition.mismatch = hash
    router = timestamp_router_of(dict(spec.transforms)) if spec.transforms else None
    routed = [r for r in ranges if router is not None and not r.target_partitions and router.routes(r.target_topic)]
    raw = [r for r in ranges if not r.target_partitions and r not in routed]
    if spec.exactly_once is not None and (hashed or routed):
        raise ValueError("partition.mismatch = hash and TimestampRouter have no exactly-once mode (refused at start)")
    results: list[RangeResult] = []
    settings = spec.settings
    if run.resident is not None:
        raw, results = handed_over(run.resident, raw)
        if (run.resident_copies and not hashed and not routed and spec.exactly_once is None and run.provenance is None
                and run.tail is not None):
            return results + _resident(spec, raw, run, run.resident)
    with task_clients(spec.source, spec.target, run.client_id, settings.request_timeout_ms,
                      receive_max_bytes=receive_limit(settings)) as (src, dst):
        if hashed:
            writer = RehashWriter(RecordSender(spec.target, run.client_id, settings.produce_timeout_ms))
            results += Copier(src, dst, hashed, settings, CopyMode(writer=writer)).run()
        if routed:
            assert router is not None
            results += Copier(src, dst, routed, settings, CopyMode(spec.principals, writer=_time_router(spec, run,
                                                                                                         router))).run()
        if raw and spec.exactly_once is None:
            provenance = run.provenance
            origins = None if provenance is None else _kept_producer_ids(provenance, dst, spec).for_task
            results += _copier((src, dst), spec, raw, run, CopyMode(producer_for=origins)).run()
        elif raw:
            results += _transactional((src, dst), spec, raw, run)
    return results


def _resident(spec: CopySpec, ranges: list[PartitionRange], run: TaskRun, lease: ResidentLease) -> list[RangeResult]:
    """``ranges`` copied by a resident copier over clients lent to it (mm2py.source.copy.resident)."""
    assert run.tail is not None
    lent = lend_clients(spec.source, spec.target, f"{run.client_id}-resident", spec.settings.request_timeout_ms,
                        receive_max_bytes=receive_limit(spec.settings))
    return run_resident(lease, run.tail, lent,
                        lambda window: _copier(lent[0], spec, ranges, replace(run, tail=window)))


def _transactional(clients: tuple[RawClient, RawClient], spec: CopySpec, ranges: list[PartitionRange],
                   run: TaskRun) -> list[RangeResult]:
    """``ranges`` copied in the task's transaction, committed with their positions and syncs."""
    exactly_once = spec.exactly_once
    assert exactly_once is not None
    src, dst = clients
    sink = (kept_writer(exactly_once.source_syncs, exactly_once.timeout_ms / 1000)
            if exactly_once.source_syncs is not None else None)
    txn = TaskTransaction(dst, exactly_once, run.slice_index, principal=spec.principals[1], source_syncs=sink)
    producer = txn.begin()  # fences every earlier holder of the slice's id
    # a copy interval (mm2py.source.copy.continuous): a transaction per commit period
    periods = TransactionPeriods(txn, exactly_once.commit_ms / 1000) if run.tail is not None else None
    window = TailWindow(run.tail.until, run.tail.stop, periods) if run.tail is not None else None
    results: list[RangeResult] = []
    try:
        if run.retry:
            ranges, results = after_committed(ranges, PositionStore(
                spec.target, exactly_once.source_alias, timeout_ms=spec.settings.request_timeout_ms).load(),
                                              tails=window is not None)
        if ranges:
            origins = None
            if run.provenance is not None:
                ids = _kept_producer_ids(run.provenance, dst, spec)
                ids.register(producer.producer_id, run.provenance.source)
                origins = transaction_origin(run.provenance, producer)
            mode = CopyMode(producer=producer, producer_for=origins)
            results += _copier(clients, spec, ranges, replace(run, tail=window), mode).run()
        if periods is None:
            txn.commit(results)
        else:  # the copier committed the last period at its end
            periods.finish()
    except BaseException:
        txn.abort()
        raise
    return results


def _copier(clients: tuple[RawClient, RawClient], spec: CopySpec, ranges: list[PartitionRange], run: TaskRun,
            mode: CopyMode = PLAIN) -> Copier:
    """The raw copier; with transforms the one running the chain; for a ``schemas.mode = translate`` flow
    the one rewriting schema ids, after the chain if any (its decoded links read the source registry).

    ``mode`` gives the task transaction's producer and the origins' producer ids, if any; the
    principals, provenance, tail and kept producer id come from ``spec`` and ``run`` here.
    Idempotent (at-least-once) copiers share this worker's producer id for the target
    (mm2py.source.copy.producer_slot); transactional ones have their own, provenance its registered ones.
    A provenance copier never tails.
    """
    src, dst = clients
    target, settings, schemas, provenance = spec.target, spec.settings, spec.schemas, run.provenance
    slot = None
    if mode.producer is None and provenance is None:
        slot = kept_state(("producer", target.alias, target.bootstrap_servers), ProducerSlot)
    mode = replace(mode, principals=spec.principals, provenance=provenance,
                   tail=run.tail if provenance is None else None, producer_slot=slot)
    chain = chain_for(dict(spec.transforms), SourceRegistry(schemas.source_alias, schemas.source_registry,
                                                            schemas.carries_schemas)
                      if schemas is not None and schemas.translates else None) if spec.transforms else None
    letters = partial(DeadLetters, target, client_id=run.client_id, produce_timeout_ms=settings.produce_timeout_ms)
    writer: TransformingWriter | None = None
    if schemas is not None and schemas.translates:
        if provenance is not None:
            raise ValueError("schemas.mode = translate has no provenance mode (refused at start)")
        writer = TranslatingWriter(settings.coalesce_bytes, schemas=schemas, letters=letters, chain=chain,
                                   errors=spec.errors)
    elif chain is not None:
        writer = TransformingWriter(chain, settings.coalesce_bytes, f"{spec.source.alias}->{target.alias}",
                                    spec.errors, letters(spec.errors.dead_letter_topic)
                                    if spec.errors.dead_letter_topic else None)
    return Copier(src, dst, ranges, settings, replace(mode, writer=writer))


def _time_router(spec: CopySpec, run: TaskRun, router: TimestampRouter) -> TimeRoutingWriter:
    """The writer of the flow's time-routed topics (``mm2py.source.copy.time_routing``)."""
    target, settings = spec.target, spec.settings
    chain = chain_for(dict(spec.transforms))
    letters = (DeadLetters(target, spec.errors.dead_letter_topic, run.client_id, settings.produce_timeout_ms)
               if spec.errors.dead_letter_topic else None)
    base = TransformingWriter(chain, 0, f"{spec.source.alias}->{target.alias}", spec.errors, letters)
    output = WindowOutput(RecordSender(target, f"{run.client_id}-windows", settings.produce_timeout_ms),
                          WindowTopics(Admin(target, timeout_ms=settings.request_timeout_ms), spec.replication_factor))
    return TimeRoutingWriter(chain, router, output, base)


def _kept_producer_ids(provenance: Provenance, dst: RawClient, spec: CopySpec) -> ProducerIds:
    """This worker's producer ids for the flow ``provenance`` stands for, kept across its tasks."""
    target = spec.target
    key = ("provenance", provenance.source, target.alias, target.bootstrap_servers)
    writer = kept_writer(target, spec.settings.request_timeout_ms / 1000)
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


def after_committed(ranges: list[PartitionRange], committed: Mapping[TP, int], *,
                    tails: bool = False) -> tuple[list[PartitionRange], list[RangeResult]]:
    """``ranges`` starting after the ``committed`` positions, and results for those already wholly committed
    (``tails``: a copy interval's, which go on from there as empty ranges instead)."""
    left: list[PartitionRange] = []
    done: list[RangeResult] = []
    for r in ranges:
        start = committed.get((r.topic, r.partition), -1) + 1
        if start >= r.end and tails:
            left.append(replace(r, start=start, end=start, exact=True))
        elif start >= r.end:
            done.append(RangeResult(r.topic, r.partition, r.start, r.end, start))
        elif start > r.start:
            left.append(replace(r, start=start, exact=True))
        else:
            left.append(r)
    return left, done
