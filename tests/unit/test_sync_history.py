"""The offset-sync history's retention, and the incremental sync and checkpoint logs, on fakes of our interfaces."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mm2py.checkpoint.state import CheckpointLog, SyncLog
from mm2py.formats import Checkpoint, OffsetSync
from mm2py.kafka.compacted import Entry
from mm2py.kafka.resources import TopicConfigEntry
from mm2py.source.sync_history import FLOOR_MS, FOREVER, SyncHistory, retention_needed

DAY = 24 * 3600 * 1000


def entries(retention_ms: int, policy: str = "delete") -> list[TopicConfigEntry]:
    return [TopicConfigEntry("retention.ms", str(retention_ms), False),
            TopicConfigEntry("cleanup.policy", policy, False)]


def test_retention_covers_the_longest_source_topic_and_never_less_than_kafkas_default() -> None:
    assert retention_needed({}) == FLOOR_MS
    assert retention_needed({"a": entries(DAY)}) == FLOOR_MS
    assert retention_needed({"a": entries(DAY), "b": entries(30 * DAY)}) == 30 * DAY
    assert retention_needed({"a": entries(DAY), "b": entries(-1)}) == FOREVER
    assert retention_needed({"a": entries(DAY, "compact,delete")}) == FOREVER


class Clusters:
    """Fakes of the source's and the syncs cluster's admin: topic configs in dicts."""

    def __init__(self, source: Mapping[str, list[TopicConfigEntry]]):
        self.source = dict(source)
        self.created: dict[str, dict[str, str]] = {}
        self.altered: list[dict] = []
        self.described: list[set[str]] = []

    def topics(self) -> set[str]:
        return set(self.created)

    def broker_count(self) -> int:
        return 1

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     config: Mapping[str, str] | None = None) -> bool:
        assert (partitions, replication_factor) == (1, 1)
        self.created[name] = dict(config or {})
        return True

    def topic_configs(self, topics: Iterable[str]) -> dict[str, list[TopicConfigEntry]]:
        topics = set(topics)
        self.described.append(topics)
        if topics <= set(self.created):
            return {t: [TopicConfigEntry(k, v, False) for k, v in self.created[t].items()] for t in topics}
        return {t: self.source[t] for t in topics}

    def alter_topic_configs(self, changes: Mapping[str, Mapping[str, str | None]]) -> None:
        self.altered.append({t: dict(c) for t, c in changes.items()})
        for t, c in changes.items():
            self.created[t].update({k: v for k, v in c.items() if v is not None})


def test_history_is_created_then_raised_for_a_longer_topic_and_never_lowered() -> None:
    fake = Clusters({"short": entries(DAY), "long": entries(30 * DAY), "forever": entries(-1)})
    history = SyncHistory(fake, fake, "mm2-offset-syncs-history.B.internal", 3)
    history.cover(["short"])
    assert fake.created == {"mm2-offset-syncs-history.B.internal": {"cleanup.policy": "delete",
                                                                    "retention.ms": str(FLOOR_MS)}}
    history.cover(["short"])  # nothing new: no call at all
    assert fake.described == [{"short"}]
    history.cover(["short", "long"])
    assert fake.altered == [{"mm2-offset-syncs-history.B.internal": {"retention.ms": str(30 * DAY)}}]
    history.cover(["forever"])
    history.cover(["short"])
    assert fake.altered[-1] == {"mm2-offset-syncs-history.B.internal": {"retention.ms": "-1"}}
    assert len(fake.altered) == 2


def test_an_existing_history_keeps_its_longer_retention() -> None:
    fake = Clusters({"t": entries(DAY)})
    fake.created["h"] = {"cleanup.policy": "delete", "retention.ms": "-1"}
    history = SyncHistory(fake, fake, "h", 3)
    history.cover(["t"])
    assert fake.altered == [] and history.retention_ms == FOREVER


class Tail:
    """A fake ``TopicTail``: a list of records that grows, polled from where it stood."""

    def __init__(self, topic: str):
        self.topic = topic
        self.log: list[tuple[bytes, bytes]] = []
        self.next_offset = 0
        self.records_read = 0

    def append(self, *syncs: OffsetSync) -> None:
        self.log += [(s.key_bytes(), s.value_bytes()) for s in syncs]

    def poll(self) -> tuple[list[Entry], bool]:
        restarted = len(self.log) < self.next_offset
        start = 0 if restarted else self.next_offset
        out = [(i, k, v) for i, (k, v) in enumerate(self.log) if i >= start]
        self.next_offset = len(self.log)
        self.records_read += len(out)
        return out, restarted


def sync(up: int, down: int, partition: int = 0) -> OffsetSync:
    return OffsetSync("t", partition, up, down)


def test_history_survives_compaction_of_the_syncs_topic_and_passes_read_only_what_is_new() -> None:
    history, syncs = Tail("history"), Tail("syncs")
    history.append(sync(0, 7), sync(100, 108))  # the run starts (a marker shifts the second run)
    syncs.append(sync(0, 7), sync(100, 107), sync(100, 108), sync(200, 208))
    syncs.log = syncs.log[-1:]  # compaction: only the newest sync of the partition survives
    log = SyncLog(history, syncs)  # type: ignore[arg-type]
    index = log.refresh()
    assert [index.translate("t", 0, u) for u in (0, 50, 100, 150, 200)] == [7, 57, 108, 158, 208]
    assert log.records_read == 3
    syncs.append(sync(200, 208), sync(300, 308))  # the run goes on: nothing new in the history
    log.refresh()
    assert log.records_read == 3 + 2  # the second pass read only what was appended
    assert index.translate("t", 0, 250) == 258


def test_syncs_only_mm2_wrote_apply_after_mm2py_history() -> None:
    """MM2 took the flow over at 150 and copied it again from there: its syncs supersede ours above 150."""
    history, syncs = Tail("history"), Tail("syncs")
    ours = (sync(0, 0), sync(200, 200))
    history.append(*ours)
    syncs.append(*ours, sync(150, 400), sync(300, 550))
    index = SyncLog(history, syncs).refresh()  # type: ignore[arg-type]
    assert [index.translate("t", 0, u) for u in (100, 150, 250)] == [100, 400, 500]


def test_a_recreated_syncs_topic_starts_the_log_over() -> None:
    history, syncs = Tail("history"), Tail("syncs")
    history.append(sync(0, 0), sync(100, 100))
    syncs.append(sync(0, 0), sync(100, 100))
    log = SyncLog(history, syncs)  # type: ignore[arg-type]
    log.refresh()
    history.log, syncs.log = [], []
    history.append(sync(0, 50))
    syncs.append(sync(0, 50))
    index = log.refresh()
    assert index.count("t", 0) == 1 and index.translate("t", 0, 150) == 50  # nothing of the old topic


def test_checkpoint_log_keeps_the_newest_per_key_and_what_the_pass_wrote() -> None:
    tail = Tail("checkpoints")
    cp = Checkpoint("g", "A.t", 0, 10, 12, "")
    tail.log.append((cp.key_bytes(), cp.value_bytes()))
    log = CheckpointLog(tail)  # type: ignore[arg-type]
    assert log.refresh() == {("g", "A.t", 0): cp}
    newer = Checkpoint("g", "A.t", 0, 20, 22, "")
    log.add([newer])
    assert log.refresh()[("g", "A.t", 0)] == newer and tail.records_read == 1


def test_a_range_past_skipped_records_and_others_records_is_bridged_from_the_last_guess():
    from mm2py.source.sync_history import bridged

    # the last range expected its next record (upstream 5147) at 6068; the next range's first copied
    # record is 6061 upstream, at 6183 downstream: 5147-6060 went home, others wrote 6068-6182
    assert bridged([(6061, 6183), (6070, 6192)], (5147, 6068)) == [(5147, 6183), (6061, 6183), (6070, 6192)]
    assert bridged([(5147, 6070)], (5147, 6068)) == [(5147, 6070)], "only others' records: a plain run start"
    assert bridged([(5150, 6068)], (5147, 6068)) == [(5150, 6068)], "only skipped records: a plain run start"
    assert bridged([(1, 2)], None) == [(1, 2)]


def test_a_malformed_sync_after_good_ones_of_its_partition_is_skipped() -> None:
    """A key read before is not decoded again: a value too short for it still fails as from_record says."""
    history, syncs = Tail("history"), Tail("syncs")
    syncs.append(sync(0, 10), sync(5, 15, partition=1))
    good_key = sync(0, 0).key_bytes()
    syncs.log.append((good_key, b"\x00" * 8))  # a value of half a sync
    syncs.append(sync(100, 110), sync(50, 60))  # the last one starts a re-copy below 100
    index = SyncLog(history, syncs).refresh()  # type: ignore[arg-type]
    assert index.count("t", 0) == 2 and index.translate("t", 0, 20) == 30  # (0, 10), (50, 60)
    assert index.translate("t", 1, 5) == 15
    assert index.translate("t", 0, 100) == 60  # what the copy synced at 100 no longer counts
