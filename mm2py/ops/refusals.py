"""Why a failover does not translate a group's committed offset: the source partition went back.

A partition's offset syncs describe the source log the flow copied. When that log went back
under the flow (mm2py.source.plan.resets) and the flow has not taken it up yet, a committed
offset of the log as it is now may name another record than the sync's: such an offset is
refused, with a reason naming the topic, the partition and the offsets, rather than translated
to a wrong record. Which offsets:
- a topic re-created on the source (a new topic id) not taken up: every offset (``REASON``);
- a log that ends below the record after the flow's recorded position (truncated or re-created):
  every offset; once taken up, the position is below the new log start;
- a log that diverged after an unclean leader election (mm2py.source.plan.divergence): the offsets
  at or past the divergence point only; below it both logs hold the same records, and those
  translate exactly.

Nothing here does I/O but ``diverged``, through the listing it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from mm2py.checkpoint.generations import REASON
from mm2py.errors import KafkaError
from mm2py.kafka.leader_epochs import EpochEnd
from mm2py.source.plan.divergence import DivergenceCheck
from mm2py.source.plan.resets import Reset
from mm2py.types import TP

log = structlog.get_logger(__name__)


TRUNCATED_REASON = ("source log of {topic}-{partition} ends at offset {end}, below the flow's mirrored position "
                    "{position} (truncated or re-created), and the flow has not taken it up yet (mm2py-ledger): "
                    "the committed offset {offset} would translate through the old log's syncs; not translated")


DIVERGED_REASON = ("source log diverged at offset {at} of {topic}-{partition} (unclean leader election: leader "
                   "epoch {copied} -> {leader}), below the flow's position {position}, and the flow has not taken "
                   "it up yet (mm2py-ledger): the committed offset {offset} is at or past it, and the syncs from "
                   "there point at records the source no longer holds; not translated")


class SourceEpochs(Protocol):
    """The source's log ends and leader epochs as the planner reads them (``SourceListing``)."""

    def list_offsets(self, tps: Iterable[TP], spec: str = "latest") -> dict[TP, int]: ...
    def leader_epochs(self, tps: list[TP]) -> dict[TP, int]: ...
    def epoch_ends(self, epochs: Mapping[TP, int]) -> dict[TP, EpochEnd]: ...


@dataclass(frozen=True)
class Standing:
    """What the flow and the source say of the committed partitions before any is translated.

    ``positions``: the flow's recorded positions; ``ends``: the source's log ends (empty when the
    source did not answer); ``diverged``: partitions whose log diverged below the position
    (``diverged``); ``untaken``: topics re-created on the source the flow has not taken up.
    """

    positions: Mapping[TP, int]
    ends: Mapping[TP, int]
    diverged: Mapping[TP, Reset] = field(default_factory=dict)
    untaken: frozenset[str] = frozenset()

    def refusal(self, topic: str, partition: int, offset: int) -> str | None:
        """Why ``offset`` of ``topic-partition`` is not translated, or None: it translates exactly.

        Below a divergence point both logs hold the same records, so the syncs there still hold.
        """
        tp = (topic, partition)
        if topic in self.untaken:
            return REASON
        end, position = self.ends.get(tp), self.positions.get(tp)
        if end is not None and position is not None and end < position + 1:
            return TRUNCATED_REASON.format(topic=topic, partition=partition, end=end, position=position + 1,
                                           offset=offset)
        cut = self.diverged.get(tp)
        if cut is not None and cut.diverged_at is not None and offset >= cut.diverged_at:
            return DIVERGED_REASON.format(at=cut.diverged_at, topic=topic, partition=partition,
                                          copied=cut.copied_epoch, leader=cut.leader_epoch,
                                          position=self.positions[tp] + 1, offset=offset)
        return None


@dataclass
class _Copied:
    """Positions and their leader epochs as ``DivergenceCheck`` reads them."""

    positions: dict[TP, int]
    epochs: dict[TP, int]


def diverged(listing: SourceEpochs, positions: dict[TP, int], epochs: dict[TP, int],
             tps: list[TP]) -> dict[TP, Reset]:
    """Partitions of ``tps`` whose source log diverged below the flow's position (the flow's own check,
    mm2py.source.plan.divergence); none when the source does not answer (the caller then has no log ends)."""
    begin = {tp: positions[tp] + 1 for tp in tps if tp in positions and tp in epochs}
    if not begin:
        return {}
    try:
        ends = listing.list_offsets(begin)  # its metadata answer gives each partition's leader epoch
        found = DivergenceCheck(listing, lambda: _Copied(positions, epochs)).find(begin, ends)
    except KafkaError as e:
        log.warning("source leader epochs unavailable; diverged logs not checked", error=str(e))
        return {}
    return {r.tp: r for r in found}
