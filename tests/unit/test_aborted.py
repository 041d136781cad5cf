"""Leaving out aborted transactional data as read_committed does, and nothing else."""

from __future__ import annotations

from mm2py.kafka.batches import ATTR_CONTROL, ATTR_TRANSACTIONAL, BatchView
from mm2py.source.copy.aborted import AbortedFilter


def batch(offset: int, producer_id: int, *, control: bool = False, count: int = 1) -> BatchView:
    attributes = ATTR_TRANSACTIONAL | (ATTR_CONTROL if control else 0)
    return BatchView(start=0, size=100, base_offset=offset, magic=2, attributes=attributes,
                     last_offset_delta=count - 1, producer_id=producer_id, record_count=count)


def test_one_producer_commits_after_an_abort_and_its_data_stays():
    # pid 7: committed [0, 10) + marker 10, aborted [11, 21) + marker 21, committed [22, 32) + marker 32
    log = [batch(0, 7, count=10), batch(10, 7, control=True), batch(11, 7, count=10), batch(21, 7, control=True),
           batch(22, 7, count=10), batch(32, 7, control=True)]
    f = AbortedFilter(((7, 11),))
    assert [b.base_offset for b in log if not f.left_out(b)] == [0, 22]


def test_interleaved_producers_only_the_aborted_ones_go():
    # pid 1 aborts [0..] while pid 2 commits batches between them
    log = [batch(0, 1), batch(1, 2), batch(2, 1), batch(3, 2, control=True), batch(4, 1, control=True),
           batch(5, 1), batch(6, 1, control=True)]
    f = AbortedFilter(((1, 0),))
    assert [b.base_offset for b in log if not f.left_out(b)] == [1, 5]


def test_fetch_starting_inside_an_aborted_transaction():
    # the fetch begins at 50, the aborted transaction of pid 3 began at 40
    log = [batch(50, 3, count=5), batch(55, 3, control=True), batch(56, 3)]
    f = AbortedFilter(((3, 40),))
    assert [b.base_offset for b in log if not f.left_out(b)] == [56]
