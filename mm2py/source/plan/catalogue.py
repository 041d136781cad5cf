"""Which source topics a flow mirrors, and their remote topics made ready on the target."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import structlog

from mm2py.config.filters import TopicFilter, TopicFilterInterface
from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError, missing_acl
from mm2py.kafka.admin import Admin
from mm2py.metadata.sync import MetadataSync
from mm2py.policy import ReplicationPolicy
from mm2py.routing import refuse_clashes
from mm2py.source.plan.deletes import orphaned_remote_topics
from mm2py.source.plan.listing import OffsetLister
from mm2py.source.plan.mismatch import Action, on_fewer_partitions
from mm2py.source.ranges import tp_key
from mm2py.topology import LoopGuard
from mm2py.types import TP

log = structlog.get_logger(__name__)

# Limits and sizes of every mirrored topic are read again this often (new topics at once).
SIZES_SECONDS = 600
# remote topics created per CreateTopics request
CREATE_AT_ONCE = 100


class TopicCatalogue:
    """The mirrored source topics of one flow, with what planning needs to know of each.

    ``refresh_topics`` lists the source, keeps the topics the policy and filters mirror, and
    makes their remote topics ready on the target; between refreshes it only runs the metadata
    sync that is due. ``stored`` returns the positions recorded on the target (needed only to
    decide whether a smaller remote topic is this flow's own); ``log_sizes`` returns the bytes
    on the source's disk per partition of the given topics. Neither is called by the constructor,
    which does no I/O.

    Invariants:
    - a source topic is in ``partitions`` only once its remote topic exists with at least the
      source's partition count, or (``partition.mismatch = hash``, a smaller remote topic that
      is not this flow's) ``rehash`` holds the remote topic's partition count;
    - a remote topic is grown only if it is this flow's own (mm2py.source.plan.mismatch);
    - a remote topic is deleted only with ``sync.topic.deletes.enabled``, only if the policy traces
      it to this flow's source, and only once its source topic is gone (mm2py.source.plan.deletes);
    - the configs of remote topics written by key hash are left alone (their limits are not read);
    - the source is listed at most every ``refresh.topics.interval.seconds`` (once per run when
      ``refresh.topics.enabled`` is false), unless a refresh is forced;
    - a topic's remote max.message.bytes and bytes per offset are read when it is first mirrored
      or its partition count changes, at a forced refresh, and every ``SIZES_SECONDS``.
    - ``take_log_starts`` hands over log starts read by the sizing since its last call, at most once.
    """

    def __init__(self, flow: FlowConfig, policy: ReplicationPolicy, topic_filter: TopicFilterInterface, src: Admin,
                 dst: Admin, metadata: MetadataSync, *, stored: Callable[[], dict[TP, int]],
                 log_sizes: Callable[[set[str]], dict[TP, int]], guard: LoopGuard | None = None,
                 offsets: OffsetLister | None = None):
        self.flow = flow
        self.guard = guard or LoopGuard(flow.name)
        self.policy = policy
        self.filter = topic_filter
        self.src = src
        self.dst = dst
        self.metadata = metadata
        self.stored = stored
        self.log_sizes = log_sizes
        self.offsets = offsets or src  # the source's earliest and latest offsets, for the sizes
        self.partitions: dict[str, int] = {}  # mirrored source topic -> partition count
        # source topic -> partitions of a remote topic someone else made smaller (mm2py.source.plan.mismatch)
        self.rehash: dict[str, int] = {}
        self.max_batch_bytes: dict[str, int] = {}  # remote topic -> its max.message.bytes
        # per partition: bytes on the source's disk per offset, so micro-batches are sized in
        # bytes (a compressed 100-byte record may take 15 bytes, an uncompressed 1 KiB one 1 KiB)
        self.bytes_per_offset: dict[str, float] = {}
        self._created: set[str] = set()  # remote topics this flow created in this run
        # told of each source topic whose remote topic it created again (mm2py.source.plan.reset_guard)
        self.on_remote_lost: Callable[[str], None] | None = None
        self._reported_missing: set[str] = set()
        self._refreshed_at = 0.0
        self._sized_at = 0.0  # when every topic's limits and sizes were last read
        self._log_starts: dict[TP, int] = {}  # read by the last sizing, not yet taken (``take_log_starts``)

    def remote_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.flow.source.alias, topic)

    def mirrored(self, topic: str) -> bool:
        """Whether this flow mirrors a source topic: filters, policy, and no loop round a blind cycle."""
        return self._selected(topic) and self.guard.loop_for(topic) is None

    def _selected(self, topic: str) -> bool:
        return self.policy.should_replicate_topic(
            topic, self.flow.target.alias, self.filter, self.flow.selection.heartbeats_replication_enabled)

    def all_partitions(self) -> list[TP]:
        return [(t, p) for t, n in sorted(self.partitions.items()) for p in range(n)]

    def refresh_topics(self, *, force: bool = False) -> None:
        """Find source topics to mirror and make their remote topics ready on the target."""
        due = self.flow.selection.refresh_topics_enabled and (
            time.monotonic() - self._refreshed_at >= self.flow.selection.refresh_topics_interval_seconds
        )
        if not (force or due or not self._refreshed_at):
            self._sync_metadata()
            return
        source_topics = self.src.topics()
        self._report_invisible(source_topics)
        looping = self.guard.held_back(t for t in source_topics if self._selected(t))
        for topic, cycle in sorted(looping.items()):
            log.error(self.guard.describe(topic, cycle), flow=self.flow.name, topic=topic, cycle="->".join(cycle))
        wanted = self._wanted(source_topics)
        target_topics = self.dst.topics()
        for topic, count in sorted(wanted.items()):
            remote = self.remote_topic(topic)
            have = target_topics.get(remote)
            if have is not None and have < count:
                self._fewer_partitions(topic, remote, have, count)
        self._create_missing(wanted, target_topics)
        if self.flow.metadata.sync_topic_deletes_enabled:
            self._delete_orphans(source_topics, target_topics)
        gone = set(self.partitions) - set(wanted)
        for topic in sorted(gone):
            log.warning("source topic no longer mirrored", flow=self.flow.name, topic=topic)
        for topic in sorted(set(wanted) - set(self.partitions)):
            log.info("mirroring topic", flow=self.flow.name, topic=topic, partitions=wanted[topic],
                     remote=self.remote_topic(topic))
        # limits and sizes of topics already known are read again only when forced (a stall) or
        # every SIZES_SECONDS: at thousands of partitions they cost more than the rest of a refresh
        now = time.monotonic()
        whole = force or now - self._sized_at >= SIZES_SECONDS
        changed = {t for t, n in wanted.items() if self.partitions.get(t) != n}
        self.partitions = wanted
        self._refreshed_at = now
        if whole or changed:
            self._read_batch_limits(None if whole else changed)
            self._estimate_sizes(None if whole else changed)
        if whole:
            self._sized_at = now
        self._sync_metadata()

    def create_remote_topics(self) -> None:
        """Create the missing remote topics of the source topics this flow mirrors; nothing else.

        The planner's first refresh would create them (``refresh_topics``); called before it, while
        Spark starts, it leaves that refresh only topics that appeared since. ``partitions`` is left
        as it is: a topic is planned only after a refresh.
        """
        self._create_missing(self._wanted(self.src.topics()), self.dst.topics())

    def _wanted(self, source_topics: Mapping[str, int]) -> dict[str, int]:
        """The source topics this flow mirrors, with their partition counts (one remote topic each)."""
        wanted = {t: n for t, n in source_topics.items() if self.mirrored(t)}
        refuse_clashes(self.flow.name, wanted, self.remote_topic)
        return wanted

    def _create_missing(self, wanted: Mapping[str, int], target_topics: Mapping[str, int]) -> None:
        """Create the remote topic of each topic of ``wanted`` (name -> partitions) not in ``target_topics``."""
        missing = [t for t in sorted(wanted) if self.remote_topic(t) not in target_topics]
        if not missing:
            return
        configs = self.metadata.new_topic_configs(missing)
        rf = self.flow.metadata.replication_factor
        brokers = self.dst.broker_count()
        if rf > brokers:
            log.warning("replication.factor capped", flow=self.flow.name, topics=len(missing),
                        configured=rf, brokers=brokers)
            rf = brokers
        self._create([(self.remote_topic(t), wanted[t], rf, configs.get(t)) for t in missing])
        if self.on_remote_lost is not None:  # mirrored before: deleted on the target
            for t in missing:
                if t in self.partitions or self._mirrored_before(t):
                    self.on_remote_lost(t)

    def _create(self, specs: list[tuple[str, int, int, Mapping[str, str] | None]]) -> None:
        """Create remote topics, ``CREATE_AT_ONCE`` per request (one round trip each, not one per topic)."""
        for i in range(0, len(specs), CREATE_AT_ONCE):
            chunk = specs[i:i + CREATE_AT_ONCE]
            self._created.update(name for name, _, _, _ in chunk)
            created = self.dst.create_topics(chunk)
            for name, count, _, config in chunk:
                if created[name]:
                    log.info("created remote topic", flow=self.flow.name, topic=name, partitions=count,
                             configs=config)
            # missing when listed, there now: created meanwhile by another client (the driver's
            # TargetPreparation, at start), maybe still electing leaders
            self.dst.wait_for_leaders({name: count for name, count, _, _ in chunk if not created[name]})

    def take_log_starts(self) -> dict[TP, int]:
        """The log starts the sizing read since the last call, handed over once (then forgotten).

        A run's first plan starts partitions without a recorded position at their log start; the
        refresh just before it read those starts to size the partitions, so the plan need not ask
        every partition again.
        """
        out, self._log_starts = self._log_starts, {}
        return out

    def deleted_on_source(self, topic: str | None) -> bool:
        """After an error about ``topic``: True if it was deleted from the source, now no longer mirrored.

        A topic deleted between two refreshes fails the offset listing; a fresh refresh drops it
        (and, with sync.topic.deletes.enabled, its remote topic) so the flow goes on.
        """
        if topic is None or topic not in self.partitions:
            return False
        self.refresh_topics(force=True)
        return topic not in self.partitions

    def _report_invisible(self, listed: dict[str, int]) -> None:
        """Name every topic the config spells out that the source does not list.

        MM2 passes over such topics in silence. A missing DESCRIBE ACL hides a topic from the
        listing: that is an error (logged at each refresh, naming the ACL). The broker answers
        the same for a topic that does not exist, so as not to tell. Where the principal may
        look, a topic that does not exist (yet, or a typo) is a warning, once.
        """
        # only the default filter knows names it expects; a user class is asked about listed names only
        spelled = self.filter.named_topics() if isinstance(self.filter, TopicFilter) else ()
        named = [t for t in spelled if t not in listed]
        if not named:
            return
        try:
            invisible = self.src.invisible_topics(named)
        except KafkaError as e:
            log.warning("could not describe configured topics", flow=self.flow.name, topics=named, error=str(e))
            return
        for topic, why in sorted(invisible.items()):
            if why == "unauthorized":
                error = missing_acl("DESCRIBE", "TOPIC", topic, cluster=self.flow.source.alias,
                                    principal=self.src.principal, topic=topic)
                log.error("configured topic is not mirrored: the source hides it (or it does not exist): "
                          + str(error), flow=self.flow.name, topic=topic, cluster=self.flow.source.alias)
            elif topic not in self._reported_missing:
                log.warning("configured topic does not exist on the source (yet); it is mirrored once created",
                            flow=self.flow.name, topic=topic, cluster=self.flow.source.alias)
                self._reported_missing.add(topic)

    def _read_batch_limits(self, topics: set[str] | None = None) -> None:
        """Each remote topic's max.message.bytes (of ``topics``, default all): the copier stalls a
        partition at a larger batch."""
        remotes = [self.remote_topic(t) for t in self.partitions
                   if t not in self.rehash and (topics is None or t in topics)]
        if not remotes:
            return
        try:
            configs = self.dst.topic_configs(remotes)
        except KafkaError as e:
            log.warning("could not read the remote topics' max.message.bytes; the target's refusal will tell",
                        flow=self.flow.name, error=str(e))
            return
        for topic, entries in configs.items():
            value = next((e.value for e in entries if e.name == "max.message.bytes"), None)
            if value is not None:
                self.max_batch_bytes[topic] = int(value)

    def _sync_metadata(self) -> None:
        # hash-written topics are someone else's: their configs and ACLs are left alone
        self.metadata.maybe_run(t for t in self.partitions if t not in self.rehash)

    def _fewer_partitions(self, topic: str, remote: str, have: int, count: int) -> None:
        ours = topic not in self.rehash and (
            remote in self._created or topic in self.partitions or self._mirrored_before(topic))
        if on_fewer_partitions(self.flow, topic, remote, have, count, ours=ours) is Action.GROW:
            self.dst.create_partitions(remote, count)
            log.info("added partitions", flow=self.flow.name, topic=remote, before=have, after=count)
            return
        if self.rehash.get(topic) != have:
            log.warning("remote topic has fewer partitions than its source: writing by key hash, "
                        "without offset syncs (no source offset has one target offset)",
                        flow=self.flow.name, topic=remote, source_partitions=count, target_partitions=have)
        self.rehash[topic] = have

    def _mirrored_before(self, topic: str) -> bool:
        """Whether this flow recorded positions of ``topic``: in ``error`` mode only, as hash mode records them too."""
        return self.flow.delivery.partition_mismatch == "error" and any(t == topic for t, _ in self.stored())

    def _delete_orphans(self, source_topics: dict[str, int], target_topics: dict[str, int]) -> None:
        for remote in orphaned_remote_topics(
            self.policy, self.flow.source.alias, self.flow.target.alias, self.filter, source_topics,
            target_topics, self.flow.selection.heartbeats_replication_enabled,
        ):
            self.dst.delete_topic(remote)
            log.warning("deleted remote topic: its source topic is gone (sync.topic.deletes.enabled)",
                        flow=self.flow.name, topic=remote)

    def _estimate_sizes(self, topics: set[str] | None = None) -> None:
        """Bytes per offset of each partition (of ``topics``, default all), from the source's log sizes."""
        tps = [tp for tp in self.all_partitions() if topics is None or tp[0] in topics]
        if not tps:
            return
        try:
            sizes = self.log_sizes({t for t, _ in tps})
            first = self.offsets.list_offsets(tps, "earliest")
            last = self.offsets.list_offsets(tps, "latest")
        except Exception as e:  # sizing is an optimisation; plan with the default
            log.warning("could not size source partitions; planning with a default", flow=self.flow.name,
                        error=str(e))
            return
        self._log_starts.update(first)
        for tp in tps:
            count = last.get(tp, 0) - first.get(tp, 0)
            if count > 0 and sizes.get(tp):
                self.bytes_per_offset[tp_key(*tp)] = max(1.0, sizes[tp] / count)
