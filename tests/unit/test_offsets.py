"""Exact translation from complete syncs, against MM2's OffsetSyncStoreTest scenarios."""

from __future__ import annotations

import random

from mm2py.checkpoint.translation import SyncIndex
from mm2py.formats import OffsetSync


def index(*pairs: tuple[int, int]) -> SyncIndex:
    idx = SyncIndex()
    for up, down in pairs:
        idx.add(OffsetSync("t", 0, up, down))
    return idx


def test_linear_run_translates_exactly():
    idx = index((0, 0), (1000, 1000))  # one run of 1000 records, end sync at 1000
    assert [idx.translate("t", 0, u) for u in (0, 1, 500, 999, 1000, 5000)] == [0, 1, 500, 999, 1000, 1000]


def test_gaps_translate_to_next_mirrored_record():
    # upstream 0..9 mirrored to 100..109; 10 was a transaction marker; 11..20 to 110..119
    idx = index((0, 100), (11, 110), (21, 120))
    assert idx.translate("t", 0, 10) == 110, "a committed offset at a marker resumes at the next record"
    assert idx.translate("t", 0, 9) == 109 and idx.translate("t", 0, 11) == 110
    assert idx.translate("t", 0, 21) == 120 and idx.translate("t", 0, 25) == 120


def test_compacted_records_each_synced():
    idx = index((5, 0), (7, 1), (9, 2), (10, 3))  # surviving offsets 5, 7, 9
    assert [idx.translate("t", 0, u) for u in (5, 6, 7, 8, 9, 10)] == [0, 1, 1, 2, 2, 3]


def test_before_first_sync_unknown_and_unknown_partition():
    idx = index((100, 0), (200, 100))
    assert idx.translate("t", 0, 99) is None
    assert idx.translate("t", 1, 150) is None


def test_past_offset_translation_keeps_every_sync():
    """MM2 testPastOffsetTranslation: far-behind groups still translate (MM2 keeps only 64 syncs)."""
    idx = SyncIndex()
    down = 0
    for up in range(0, 100_000, 10):  # 10,000 runs, each broken by a one-offset gap
        idx.add(OffsetSync("t", 0, up, down))
        down += 9
    assert idx.count("t", 0) == 10_000
    assert idx.translate("t", 0, 15) == 14
    assert idx.translate("t", 0, 19) == 18, "offset 19 was a gap: resume at the next run"
    assert idx.translate("t", 0, 50_003) == 5000 * 9 + 3


def test_randomly_spaced_syncs_agree_with_a_record_level_model():
    """MM2 testRandomlySpacedSyncs, checked against the true mapping of every offset."""
    rng = random.Random(7)
    mapping: dict[int, int] = {}
    idx = SyncIndex()
    up = down = 0
    last = None
    for _ in range(300):
        up += rng.choice([0, 0, 1, 3])  # gaps of missing upstream offsets
        n = rng.randint(1, 50)
        idx.add(OffsetSync("t", 0, up, down))
        for i in range(n):
            mapping[up + i] = down + i
        up, down = up + n, down + n
        last = (up, down)
    idx.add(OffsetSync("t", 0, *last))
    mirrored = sorted(mapping)
    for u in range(mirrored[0], up + 5):
        nxt = next((mapping[m] for m in mirrored if m >= u), down)
        assert idx.translate("t", 0, u) == nxt, u


def test_inverse_maps_downstream_back_for_failback():
    idx = index((0, 100), (11, 110), (21, 120))
    assert [idx.inverse("t", 0, d) for d in (100, 109, 110, 119, 120, 130)] == [0, 9, 11, 20, 21, 21]
    assert idx.inverse("t", 0, 99) is None
    for u in range(0, 21):
        d = idx.translate("t", 0, u)
        assert idx.translate("t", 0, idx.inverse("t", 0, d)) == d


def test_a_recopy_supersedes_what_the_earlier_copy_synced_from_its_start_on():
    # an exactly-once attempt copied upstream 100..199 to 100..199 (sync at its end: 200 -> 200), wrote
    # its syncs, then aborted; the retry copied 100..299 after the aborted records and the marker
    idx = index((0, 0), (100, 100), (200, 200), (100, 201), (300, 401))
    assert idx.count("t", 0) == 3, "the aborted attempt's syncs at or above 100 are gone"
    assert idx.translate("t", 0, 50) == 50
    assert idx.translate("t", 0, 150) == 251
    assert idx.translate("t", 0, 250) == 351, "no cap at the aborted attempt's end sync"
    assert idx.translate("t", 0, 300) == 401
    assert idx.inverse("t", 0, 251) == 150


def test_trim_forgets_only_syncs_of_records_gone_from_the_source():
    idx = index((0, 100), (11, 110), (21, 120), (40, 139), (60, 159))
    idx.add(OffsetSync("u", 0, 0, 0))
    kept = {u: idx.translate("t", 0, u) for u in range(25, 70)}
    assert idx.trim({("t", 0): 25}) == 2, "(0,100) and (11,110) map only offsets below the log start"
    assert idx.count("t", 0) == 3 and idx.count("u", 0) == 1, "a partition without a log start is left alone"
    assert {u: idx.translate("t", 0, u) for u in range(25, 70)} == kept, "offsets still in the log translate as before"
    assert idx.trim({("t", 0): 21}) == 0 and idx.trim({("t", 0): 5}) == 0, "the newest sync at the start stays"
    assert idx.trim({("t", 0): 1000}) == 2 and idx.translate("t", 0, 1000) == 159



def test_identity_active_active_resumes_at_the_first_record_not_read_of_either_cluster():
    from mm2py.checkpoint.both_ways import BothWays

    # B: b0 b1 a0 a1 b2 a2 (offsets 0-5); A: a0 a1 b0 b1 a2 b2
    forward, backward = SyncIndex(), SyncIndex()  # A->B: A offsets to B; B->A: B offsets to A
    # as the copiers write them: a run, the skipped stretch mapped flat onto the next run, the next run
    for up, down in ((0, 2), (2, 5), (4, 5), (5, 6)):  # a0 a1 -> B2 B3; b0 b1 skipped; a2 (A4) -> B5
        forward.add(OffsetSync("t", 0, up, down))
    for up, down in ((0, 2), (2, 5), (4, 5), (5, 6)):  # b0 b1 -> A2 A3; a0 a1 skipped; b2 (B4) -> A5
        backward.add(OffsetSync("t", 0, up, down))
    quiet = BothWays(forward, backward, {("t", 0): 6}, {("t", 0): 6})
    got = {o: quiet.translate("t", 0, o) for o in range(7)}
    # at 4 the group read a0 a1 b0 b1 on A: on B it resumes at b2 (4), then a2, none twice, none missed;
    # at 6 it read everything: B's end. Where the clusters ordered records differently it reads some again.
    assert got == {0: 0, 1: 0, 2: 0, 3: 1, 4: 4, 5: 4, 6: 6}
    busy = BothWays(forward, backward, {}, {})  # A->B behind, or A took writes meanwhile
    assert busy.translate("t", 0, 6) == 5 and busy.translate("t", 0, 4) == 4, "without positions: a2 read again"
    assert backward.first_upstream_at("t", 0, 0) == 0 and backward.first_upstream_at("u", 0, 0) is None
    alone = BothWays(forward, SyncIndex(), {}, {})
    assert alone.translate("t", 0, 4) == 5, "nothing of B's reached A: forward alone"
