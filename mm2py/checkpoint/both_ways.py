"""Offset translation for a two-cluster identity cycle: a group moves from X to Y on the same topic.

With provenance (mm2py.source.provenance), X's partition holds X's own records and Y's (copied by
Y->X), Y's holds Y's own and X's (copied by X->Y), each cluster in its own interleaving. A group
that read X below ``upstream`` resumes on Y at the first record it has not read, of either kind::

    resume = min(forward(upstream), backward(upstream))

- ``forward``: where X->Y put the first of X's records at or after ``upstream`` (its syncs);
  past everything it mirrored, and when X->Y had processed all of X while X took no new write
  during the read, Y's log end (anything of X's still to come lands after it);
- ``backward``: the first of Y's records Y->X put at or after ``upstream`` on X (its syncs,
  downstream to upstream); past everything it copied, Y->X's next offset (its position + 1).

Invariants:
- nothing is missed: each term is at most the Y offset of the first unread record of its kind;
- positions are read before syncs, and syncs are written before positions (mm2py.source.plan.commit),
  so every record a position counts has its sync in the index read after it;
- exact (nothing read twice) where both clusters order the records around ``upstream`` alike: a
  group caught up while both flows had caught up (the usual failover), or writes paused for longer
  than the replication lag. Elsewhere the records the clusters ordered differently are read again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mm2py.checkpoint.state import SyncLog
from mm2py.checkpoint.translation import SyncIndex
from mm2py.config.model import FlowConfig
from mm2py.kafka.admin import Admin
from mm2py.stores.positions import PositionStore
from mm2py.types import TP


@dataclass(frozen=True)
class BothWays:
    """The indexes and log facts of one translation pass (X->Y ``forward``, Y->X ``backward``)."""

    forward: SyncIndex
    backward: SyncIndex
    caught_up: Mapping[TP, int]  # partitions X->Y had wholly processed, quiet: Y's log end
    reverse_next: Mapping[TP, int]  # Y->X's next offset per partition (its position + 1)

    def translate(self, topic: str, partition: int, upstream: int) -> int | None:
        """Where a group at ``upstream`` on X resumes on Y; None when nothing of X's is known there."""
        tp = (topic, partition)
        ahead = self.forward.translate(topic, partition, upstream)
        last = self.forward.last(topic, partition)
        if tp in self.caught_up and (last is None or upstream >= last[0]):
            ahead = max(ahead or 0, self.caught_up[tp])
        back = self.backward.first_upstream_at(topic, partition, upstream)
        last = self.backward.last(topic, partition)
        if tp in self.reverse_next and (last is None or upstream >= last[1]):
            back = max(back or 0, self.reverse_next[tp])
        if ahead is None or back is None:
            return ahead
        return min(ahead, back)

    @classmethod
    def read(cls, flow: FlowConfig, reverse: FlowConfig, forward: SyncLog, backward: SyncLog, src: Admin,
             dst: Admin, tps: list[TP]) -> BothWays:
        """Read the facts for ``tps`` of ``flow``'s source, in the order the invariants need."""
        timeout = flow.admin_timeout_ms
        ends = src.list_offsets(tps, "latest") if tps else {}
        target_ends = dst.list_offsets(tps, "latest") if tps else {}
        positions = PositionStore(flow.target, flow.source.alias, timeout_ms=timeout).load()
        reverse_positions = PositionStore(reverse.target, reverse.source.alias, timeout_ms=timeout).load()
        forward_index, backward_index = forward.refresh(), backward.refresh()
        again = src.list_offsets(tps, "latest") if tps else {}
        caught_up = {tp: target_ends[tp] for tp in tps
                     if again.get(tp) == ends.get(tp) and positions.get(tp, -1) + 1 >= ends.get(tp, 0)}
        return cls(forward_index, backward_index, caught_up,
                   {tp: offset + 1 for tp, offset in reverse_positions.items()})
