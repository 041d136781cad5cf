"""What a bench run landed on the target, compared record by record with the source.

``check_landed`` compares each source topic with its remote topic partition by partition, with
``mm2py.ops.digest``: a count and a SHA-256 over every record's key, value, headers and
timestamp, read in offset order with ``read_committed`` (offsets are left out: they differ
between clusters; aborted records and transaction markers are not read). A partition whose
digests differ and whose target holds more records is read again record by record: if the
target is the source's records in their order with some of them repeated (at-least-once
delivery after a retry or a restart), the extra records count as duplicates only; anything
else (a record missing, changed, reordered or foreign) makes the partition a difference.
"""

from __future__ import annotations

import hashlib
import struct
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from mm2py.config.model import ClusterConfig
from mm2py.kafka.admin import Admin
from mm2py.kafka.clientconf import rdkafka_config
from mm2py.ops.digest import Normalize, PartitionCheck, PartitionDigest, digest_ranges

# topics are read this many at a time (each reading opens its own consumer): 500 one-partition
# topics take seconds, not minutes; a topic's partitions are read in up to this many groups too
WORKERS = 8
READ_TIMEOUT = 1800  # seconds for one group of partitions: b's 5 GB at full scale is read in ~1 min


@dataclass(frozen=True)
class Landed:
    """Source against target over every compared partition."""

    records_source: int
    records_target: int
    # extra records on the target: per partition where the target has more, target - source, summed
    duplicates: int
    # "topic:partition" (the source topic's name) of each partition whose records are not the
    # source's, or not all of them, in order (repeats of them aside)
    differing_partitions: tuple[str, ...]
    partitions: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """The target holds exactly the source's records: no difference and no duplicate."""
        return not self.differing_partitions and not self.duplicates

    @property
    def complete(self) -> bool:
        """Every source record landed unchanged and in order; duplicates (at-least-once) allowed."""
        return not self.differing_partitions

    def verdict(self) -> str:
        """``ok``, or ``N dup / M diff`` (M differing partitions)."""
        return verdict_of(self.duplicates, len(self.differing_partitions))


def verdict_of(duplicates: int, differences: int) -> str:
    """The one wording of a check's outcome: ``ok``, or ``N dup / M diff``."""
    return "ok" if not (duplicates or differences) else f"{duplicates} dup / {differences} diff"


def only_repeats(source: Sequence[bytes], target: Sequence[bytes]) -> bool:
    """Whether ``target`` is ``source`` in order with some of its records repeated, and nothing else.

    Greedy matching decides whether ``source`` is a subsequence of ``target``; every target record
    left unmatched must then be a copy of some source record (not a foreign or changed one).
    """
    known, matched, extra = set(source), 0, []
    for record in target:
        if matched < len(source) and record == source[matched]:
            matched += 1
        else:
            extra.append(record)
    return matched == len(source) and all(record in known for record in extra)


def tally(checks: Iterable[PartitionCheck], repeats_only: Iterable[tuple[str, int]] = (),
          seconds: float = 0.0) -> Landed:
    """A ``Landed`` from per-partition digests; ``repeats_only``: the partitions (topic, partition)
    whose differing digests ``only_repeats`` explained."""
    explained = set(repeats_only)
    records_source = records_target = duplicates = partitions = 0
    differing: list[str] = []
    for check in checks:
        partitions += 1
        records_source += check.source.count
        records_target += check.target.count
        duplicates += max(0, check.target.count - check.source.count)
        if check.ok:
            continue
        if check.target.count > check.source.count and (check.topic, check.partition) in explained:
            continue
        differing.append(f"{check.topic}:{check.partition}")
    return Landed(records_source, records_target, duplicates, tuple(differing), partitions, round(seconds, 2))


def fingerprints(cluster: ClusterConfig, topic: str, partition: int, start: int, end: int,
                 normalize: Normalize | None = None, timeout: float = READ_TIMEOUT) -> list[bytes]:
    """One SHA-256 per record of ``topic``'s ``partition`` in ``[start, end)``, over what
    ``mm2py.ops.digest`` digests (key, value, headers, timestamp), read read_committed."""
    conf = rdkafka_config(cluster.bootstrap_servers, cluster.consumer, cluster.alias)
    conf.update({"group.id": "mm2py-bench-landed", "enable.auto.commit": False,
                 "isolation.level": "read_committed", "auto.offset.reset": "error"})
    consumer = Consumer(conf)
    out: list[bytes] = []
    try:
        if end <= start:
            return out
        consumer.assign([TopicPartition(topic, partition, start)])
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError(f"reading {topic}:{partition} of {cluster.alias} took over {timeout:.0f} s")
            for msg in consumer.consume(10000, timeout=0.5):
                if msg.error():
                    raise RuntimeError(f"{cluster.alias} {topic}:{partition}: {msg.error().str()}")
                if msg.offset() >= end:
                    continue
                key, value, headers = msg.key(), msg.value(), msg.headers() or ()
                if normalize is not None:
                    key, value, headers = normalize(key, value, headers)
                h = hashlib.sha256()
                for data in (key, value, *(x for name, v in headers for x in (name.encode(), v))):
                    h.update(b"\xff\xff\xff\xff" if data is None else struct.pack(">i", len(data)) + data)
                h.update(struct.pack(">q", msg.timestamp()[1]))
                out.append(h.digest())
            # transaction markers leave the position past the last record
            if consumer.position([TopicPartition(topic, partition)])[0].offset >= end:
                return out
    finally:
        consumer.close()


def _decoder(cluster: ClusterConfig) -> Normalize:
    from mm2py.schemas.decode import RecordDecoder

    return RecordDecoder(cluster.alias, cluster.schema_registry).record


def check_landed(source: ClusterConfig, target: ClusterConfig, pairs: list[tuple[str, str]],
                 decode: bool = False, workers: int = WORKERS) -> Landed:
    """Compare each ``(source topic, remote topic)`` of ``pairs`` partition by partition (module doc).

    Every partition of either side is compared, whole (log start to end); a partition only one
    side has counts as empty on the other. ``decode``: Avro values are compared by their decoded
    content, each side read with its own ``schema_registry`` (schema ids differ after translation).
    Topics, and groups of a big topic's partitions, are read ``workers`` at a time.
    """
    started = time.monotonic()
    sides = {"source": source, "target": target}
    ranges: dict[str, dict[str, dict[int, tuple[int, int]]]] = {}
    for role, cluster in sides.items():
        admin = Admin(cluster)
        counts = admin.topics()
        names = [s if role == "source" else r for s, r in pairs]
        tps = [(t, p) for t in names for p in range(counts.get(t, 0))]
        starts, ends = admin.list_offsets(tps, "earliest"), admin.list_offsets(tps, "latest")
        ranges[role] = {t: {p: (starts[(t, p)], ends[(t, p)]) for tt, p in tps if tt == t} for t in names}
    # units of work: one side's topic, or a group of a many-partition topic's partitions
    units: list[tuple[str, str, dict[int, tuple[int, int]]]] = []
    for role, by_topic in ranges.items():
        for topic, parts in by_topic.items():
            keys = sorted(parts)
            group = max(1, -(-len(keys) // workers) if len(pairs) < workers else len(keys))
            units += [(role, topic, {p: parts[p] for p in keys[i:i + group]}) for i in range(0, len(keys), group)]

    def digest(unit: tuple[str, str, dict[int, tuple[int, int]]]) -> tuple[str, str, dict[int, PartitionDigest]]:
        role, topic, parts = unit
        cluster = sides[role]
        return role, topic, digest_ranges(cluster, topic, parts, timeout=READ_TIMEOUT,
                                          normalize=_decoder(cluster) if decode else None)

    digests: dict[tuple[str, str], dict[int, PartitionDigest]] = {}
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for role, topic, found in pool.map(digest, units):
            digests.setdefault((role, topic), {}).update(found)
    empty = PartitionDigest(0, hashlib.sha256().hexdigest())
    checks: list[PartitionCheck] = []
    for s, r in pairs:
        src, dst = digests.get(("source", s), {}), digests.get(("target", r), {})
        checks += [PartitionCheck(s, p, src.get(p, empty), dst.get(p, empty)) for p in sorted(set(src) | set(dst))]
    remote = dict(pairs)
    suspects = [c for c in checks if not c.ok and c.target.count > c.source.count]

    def explained(check: PartitionCheck) -> bool:
        s, r, p = check.topic, remote[check.topic], check.partition
        return only_repeats(
            fingerprints(source, s, p, *ranges["source"][s].get(p, (0, 0)), _decoder(source) if decode else None),
            fingerprints(target, r, p, *ranges["target"][r].get(p, (0, 0)), _decoder(target) if decode else None))

    with ThreadPoolExecutor(max(1, min(workers, len(suspects) or 1))) as pool:
        repeats = [(c.topic, c.partition) for c, yes in zip(suspects, pool.map(explained, suspects), strict=True)
                   if yes]
    return tally(checks, repeats, time.monotonic() - started)
