"""The planner's collaborators as fakes over in-memory topics, offsets and positions, and ``rig``
that builds a planner and catalogue on them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mm2py.config import load_text
from mm2py.config.filters import TopicFilter
from mm2py.config.model import FlowConfig
from mm2py.flow_policy import policy_for
from mm2py.kafka.resources import TopicConfigEntry
from mm2py.source.plan.catalogue import TopicCatalogue
from mm2py.source.plan.planner import BatchPlanner
from mm2py.source.plan.sizing import BatchSizer
from mm2py.source.plan.stalls import StallBook
from mm2py.types import TP
from tests.fakes.clock import Clock

AB = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"



def flow_of(extra: str = "") -> FlowConfig:
    return load_text(AB + extra).enabled_flows[0]


class FakeAdmin:
    """The few Admin methods the planner and the catalogue use, over in-memory topics and offsets."""

    def __init__(self, name: str, events: list[tuple], topics: dict[str, int] | None = None):
        self.name, self.events = name, events
        self.counts = dict(topics or {})
        self.earliest: dict[TP, int] = {}
        self.latest: dict[TP, int] = {}
        self.configs: dict[str, list[TopicConfigEntry]] = {}
        self.invisible: dict[str, str] = {}
        self.principal = None
        self.created: list[tuple[str, int, int, dict]] = []
        self.grown: list[tuple[str, int]] = []
        self.deleted: list[str] = []

    def topics(self) -> dict[str, int]:
        self.events.append((self.name, "topics"))
        return dict(self.counts)

    def list_offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]:
        tps = list(tps)
        self.events.append((self.name, "list_offsets", spec, tuple(tps)))
        offsets = self.latest if spec == "latest" else self.earliest
        return {tp: offsets.get(tp, 0) for tp in tps}

    def create_topics(self, specs: list) -> dict[str, bool]:
        self.events.append((self.name, "create_topics", tuple(name for name, _, _, _ in specs)))
        out = {}
        for name, partitions, replication_factor, config in specs:
            self.events.append((self.name, "create_topic", name))
            self.created.append((name, partitions, replication_factor, dict(config or {})))
            out[name] = name not in self.counts
            self.counts[name] = partitions
        return out

    def wait_for_leaders(self, wanted: dict[str, int]) -> None:
        self.events.append((self.name, "wait_for_leaders", tuple(sorted(wanted.items()))))

    def broker_count(self) -> int:
        return 3

    def topic_configs(self, topics: Iterable[str]) -> dict[str, list[TopicConfigEntry]]:
        return {t: self.configs.get(t, []) for t in topics}

    def invisible_topics(self, names: Iterable[str]) -> dict[str, str]:
        return {n: self.invisible[n] for n in names if n in self.invisible}

    def create_partitions(self, name: str, total: int) -> None:
        self.grown.append((name, total))
        self.counts[name] = total

    def delete_topic(self, name: str) -> None:
        self.deleted.append(name)
        del self.counts[name]


class FakeStore:
    def __init__(self, events: list[tuple], positions: dict[TP, int] | None = None):
        self.events, self.positions = events, dict(positions or {})
        self.loads = 0

    def load(self) -> dict[TP, int]:
        self.loads += 1
        self.events.append(("store", "load"))
        return dict(self.positions)

    def ensure_topic(self, admin: FakeAdmin) -> None:
        self.events.append(("store", "ensure_topic", admin.name))


class FakeMetadata:
    def __init__(self) -> None:
        self.synced: list[list[str]] = []

    def new_topic_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        return {t: {} for t in topics}

    def maybe_run(self, mirrored_topics: Iterable[str], now: float | None = None) -> None:
        self.synced.append(sorted(mirrored_topics))


class FakeTail:
    def __init__(self) -> None:
        self.positions: dict[TP, int] = {}
        self.reads = 0

    def refresh(self) -> dict[TP, int]:
        self.reads += 1
        return self.positions



@dataclass
class Rig:
    flow: FlowConfig
    events: list[tuple]
    src: FakeAdmin
    dst: FakeAdmin
    store: FakeStore
    tail: FakeTail
    clock: Clock
    catalogue: TopicCatalogue
    planner: BatchPlanner


def rig(source: dict[str, int], *, target: dict[str, int] | None = None, extra: str = "",
        stored: dict[TP, int] | None = None,
        log_sizes: Callable[[set[str]], dict[TP, int]] = lambda topics: {}) -> Rig:
    flow = flow_of(extra)
    events: list[tuple] = []
    src, dst = FakeAdmin("src", events, source), FakeAdmin("dst", events, target)
    store, tail, clock = FakeStore(events, stored), FakeTail(), Clock()
    planner: BatchPlanner
    selected = TopicFilter(flow.selection.topics, flow.selection.topics_exclude)
    catalogue = TopicCatalogue(flow, policy_for(flow), selected, src, dst, FakeMetadata(),
                               stored=lambda: planner.recorded(), log_sizes=log_sizes)
    planner = BatchPlanner(flow, catalogue=catalogue, source=src, target=dst, store=store,
                           stalls=StallBook(flow.name, tail, clock=clock),
                           sizer=BatchSizer(flow.copy.max_batch_bytes, flow.copy.batch_duration_ms / 1000))
    return Rig(flow, events, src, dst, store, tail, clock, catalogue, planner)
