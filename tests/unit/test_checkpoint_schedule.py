"""MM2's checkpoint intervals: group listing refresh and group offset sync cadence."""

from __future__ import annotations

from mm2py.checkpoint.schedule import GroupListing, sync_due


def test_sync_runs_once_per_sync_interval_whatever_the_emit_interval() -> None:
    # emit every 10 s, sync every 60 s: one pass in six syncs
    due = [t for t in range(1000, 1030) if sync_due(t, 10, 60)]
    assert len(due) == 5 and all(b - a == 6 for a, b in zip(due, due[1:], strict=False))
    # a sync interval at or below the emit interval syncs every pass, as MM2's task would
    assert all(sync_due(t, 60, 60) for t in range(100, 110))
    assert all(sync_due(t, 60, 1) for t in range(100, 110))


def test_groups_are_listed_again_only_after_the_refresh_interval() -> None:
    now = [0.0]
    calls = []

    def groups() -> list[str]:
        calls.append(now[0])
        return [f"g{len(calls)}"]

    listing = GroupListing(True, 600, clock=lambda: now[0])
    assert listing.current(groups) == ("g1",)
    now[0] = 599
    assert listing.current(groups) == ("g1",)
    now[0] = 600
    assert listing.current(groups) == ("g2",) and calls == [0.0, 600]


def test_with_refresh_disabled_groups_are_listed_once() -> None:
    now = [0.0]
    listing = GroupListing(False, 1, clock=lambda: now[0])
    assert listing.current(lambda: ["a"]) == ("a",)
    now[0] = 10_000
    assert listing.current(lambda: ["a", "b"]) == ("a",)
