"""Builds a flow's ``BatchPlanner`` with its real collaborators: clients, stores, ledger, guards.

``planner_for`` creates the clients and asks nothing yet; the Spark adapter (connectors/source.py)
calls it on the driver, on first use, and the start-up's target preparation (mm2py.engine.prepare)
before Spark starts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from mm2py.config.filters import topic_filter_for
from mm2py.config.model import FlowConfig
from mm2py.flowspec import FlowSpec
from mm2py.formats import OffsetSync
from mm2py.kafka.admin import Admin
from mm2py.metadata.sync import MetadataSync
from mm2py.source.plan.catalogue import TopicCatalogue
from mm2py.source.plan.divergence import DivergenceCheck
from mm2py.source.plan.listing import SourceListing
from mm2py.source.plan.planner import BatchPlanner
from mm2py.source.plan.reset_guard import ResetGuard
from mm2py.source.plan.sizing import BatchSizer
from mm2py.source.plan.stalls import StallBook
from mm2py.source.provenance import RegistryTail
from mm2py.stores.ledger import Ledger
from mm2py.stores.positions import PositionStore, PositionTail
from mm2py.types import TP


def planner_for(spec: FlowSpec, settle: Callable[[set[TP]], None] | None = None) -> BatchPlanner:
    """The planner of ``spec``'s flow with its real collaborators (clients are created, nothing is asked yet);
    ``settle``: ends the copiers that outlive their tasks before a reset is acted on (``ResetGuard``)."""
    flow, policy, guard = spec.flow, spec.policy, spec.guard
    src = Admin(flow.source, timeout_ms=flow.admin_timeout_ms)
    dst = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
    store = PositionStore(flow.target, flow.source.alias, timeout_ms=flow.admin_timeout_ms)
    listing = SourceListing(flow)
    # the sync and the catalogue name topics for each other, and the catalogue reads the planner's
    # recorded positions: the callables below are first called after all three are built
    catalogue: TopicCatalogue
    planner: BatchPlanner
    metadata = MetadataSync(flow, src, dst, lambda topic: catalogue.remote_topic(topic),
                            lambda topic: catalogue.mirrored(topic))
    catalogue = TopicCatalogue(flow, policy, topic_filter_for(flow), src, dst, metadata,
                               stored=lambda: planner.recorded(), log_sizes=listing.log_sizes,
                               guard=guard, offsets=listing)
    ledger = Ledger(flow.target, flow.source.alias, flow.name, timeout_s=flow.admin_timeout_ms / 1000)
    tail = PositionTail(store, dst)  # the positions, and the leader epoch of each (mm2py.source.plan.divergence)
    resets = ResetGuard(flow.name, flow.delivery.source_reset_policy, ledger=ledger,
                        source=listing, target=dst, remote_topic=lambda topic: catalogue.remote_topic(topic),
                        topic_ids=listing.topic_ids, save_positions=store.save, write_syncs=reset_sync_writer(flow),
                        recreate_remote=lambda topic: catalogue.refresh_topics(force=True),
                        source_partitions=src.topics, divergence=DivergenceCheck(listing, lambda: tail),
                        settle=settle)
    catalogue.on_remote_lost = resets.remote_lost
    planner = BatchPlanner(flow, catalogue=catalogue, source=src, target=dst, store=store, resets=resets,
                           stalls=StallBook(flow.name, tail),
                           sizer=BatchSizer(flow.copy.max_batch_bytes, flow.copy.batch_duration_ms / 1000),
                           registry=RegistryTail(flow.source, flow.admin_timeout_ms / 1000)
                           if guard.provenance else None, offsets=listing)
    return planner


def reset_sync_writer(flow: FlowConfig) -> Callable[[Sequence[OffsetSync]], None] | None:
    """Writes the syncs a reset starts a partition's new runs with (syncs topic and history); None without syncs."""
    if not flow.checkpoints.emit_offset_syncs_enabled:
        return None
    from mm2py.source.sync_history import history_for
    from mm2py.source.sync_writer import OffsetSyncWriter

    writer = OffsetSyncWriter(flow)
    history = history_for(flow) if flow.checkpoints.offset_syncs_history_enabled else None

    def write(syncs: Sequence[OffsetSync]) -> None:
        if history is not None:
            history.cover({s.topic for s in syncs})
        writer.write(syncs, syncs if history is not None else ())

    return write
