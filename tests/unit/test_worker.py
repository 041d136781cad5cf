import gc
import weakref

import pytest

from mm2py import worker


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


@pytest.fixture
def thawed():
    worker.thaw()
    yield
    worker.thaw()


def _cycle() -> weakref.ref:
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_settle_collects_garbage_cycles_before_freezing_the_survivors(thawed):
    dead = _cycle()
    alive = Node()
    worker.settle()
    assert dead() is None, "a garbage cycle left for a freeze would never be freed"
    assert gc.get_freeze_count() > 0
    assert not any(o is alive for o in gc.get_objects(generation=2)), "survivors are frozen"


def test_settle_does_not_refreeze_for_a_few_new_objects(thawed):
    worker.settle()
    frozen = gc.get_freeze_count()
    kept = [Node() for _ in range(10)]
    worker.settle()
    # frozen objects may die (the count then drops); none may be added
    assert gc.get_freeze_count() <= frozen
    tracked = {id(o) for o in gc.get_objects()}
    assert all(id(node) in tracked for node in kept), "the new objects stay visible to collections"


def test_thaw_lets_a_collection_free_a_frozen_cycle_that_died(thawed):
    holder = [Node(), Node()]
    holder[0].other, holder[1].other = holder[1], holder[0]
    dead = weakref.ref(holder[0])
    worker.settle()
    holder.clear()
    gc.collect()
    assert dead() is not None, "frozen: a collection does not see it"
    worker.thaw()
    gc.collect()
    assert dead() is None


class FakeClient:
    def __init__(self, cluster, **kwargs) -> None:
        self.cluster, self.closed = cluster, False

    def close(self) -> None:
        self.closed = True


def test_lent_clients_leave_the_kept_ones_until_given_back(monkeypatch, thawed):
    from mm2py.config.model import ClusterConfig

    monkeypatch.setattr(worker, "RawClient", FakeClient)
    monkeypatch.setattr(worker, "_kept", {})
    a, b = ClusterConfig("A", "a:9092"), ClusterConfig("B", "b:9092")
    lent = worker.lend_clients(a, b, "task", 1000)
    (src, dst), _ = lent
    assert worker._kept == {}, "a lent client is no task's meanwhile"
    worker.give_back(lent, failed=False)
    assert set(worker._kept.values()) == {src, dst} and not src.closed
    again = worker.lend_clients(a, b, "task", 1000)
    assert again[0] == (src, dst), "the kept clients are lent again"
    worker.give_back(again, failed=True)
    assert worker._kept == {} and src.closed and dst.closed
