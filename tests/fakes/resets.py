"""A planner rig with a ResetGuard over fakes: the ledger kept in memory, the source's topic ids by hand."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mm2py.formats import OffsetSync
from mm2py.source.plan.reset_guard import ResetGuard
from mm2py.stores.ledger import LedgerEntry, LedgerState
from mm2py.types import TP
from tests.fakes.planning import Rig, rig


class FakeLedger:
    def __init__(self, state: LedgerState | None = None):
        self.state = state or LedgerState()
        self.appended: list[tuple[list[LedgerEntry], dict[str, str]]] = []
        self.loads = 0

    def ensure_topic(self, admin: object) -> None:
        pass

    def load(self) -> LedgerState:
        self.loads += 1
        return LedgerState(list(self.state.entries), dict(self.state.topic_ids))

    def append(self, entries: Iterable[LedgerEntry] = (), topic_ids: Mapping[str, str] | None = None) -> None:
        entries = list(entries)
        self.appended.append((entries, dict(topic_ids or {})))
        self.state.entries.extend(entries)
        self.state.topic_ids.update(topic_ids or {})


class Guarded:
    """A planner rig with a ResetGuard over fakes; ``ids`` are the source's topic ids now."""

    def __init__(self, source: dict[str, int], policy: str = "continue", ledger: FakeLedger | None = None,
                 stored: dict[TP, int] | None = None, extra: str = ""):
        self.r: Rig = rig(source, stored=stored, extra=extra)
        self.ids: dict[str, str] = {t: f"{t}-1" for t in source}
        self.ledger = ledger or FakeLedger()
        self.saved: list[dict[TP, int]] = []
        self.syncs: list[OffsetSync] = []
        self.guard = ResetGuard(self.r.flow.name, policy, ledger=self.ledger, source=self.r.src, target=self.r.dst,
                                remote_topic=lambda t: f"A.{t}",
                                topic_ids=lambda topics: {t: self.ids[t] for t in topics if t in self.ids},
                                save_positions=lambda p: self.saved.append(dict(p)),
                                write_syncs=lambda s: self.syncs.extend(s), sleep=lambda _: None)
        self.r.planner.resets = self.guard


def advance(g: Guarded, start: dict) -> dict:
    end = g.r.planner.latest_offsets(start, None)
    g.r.planner.ranges(start, end)
    return end
