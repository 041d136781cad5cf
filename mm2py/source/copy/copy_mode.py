"""How one copier writes its ranges, beyond the flow's copy settings (mm2py.source.copy.copier).

The flow's fetch and produce settings are its ``CopySettings``; what differs between the copiers
of one flow (a task's transaction, provenance, tailing, the worker's kept producer id, the
writer) is one ``CopyMode``, so the copier takes its clients, ranges, settings and mode.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mm2py.source.copy.batch_writer import BatchWriter
from mm2py.source.copy.copy_settings import ProducerState
from mm2py.source.copy.producer_slot import ProducerSlot
from mm2py.source.copy.tail import TailWindow
from mm2py.source.provenance import Provenance


@dataclass(frozen=True)
class CopyMode:
    """One copier's way of writing; the default copies raw batches with an idempotent producer id of its own.

    ``principals``: the source's and target's, named in a missing-ACL error;
    ``producer``: the task transaction's producer (mm2py.source.copy.transactional), None for an
    idempotent one (the worker's kept one from ``producer_slot``, else one of the copier's own);
    ``provenance`` and ``producer_for``: the origin of each batch, and the (producer id, epoch) an
    origin is written with (mm2py.source.provenance); ``tail``: partitions past their planned end
    copy what arrives while it is open (mm2py.source.copy.tail); ``writer``: how owned batches are
    queued (None: raw batches re-stamped, mm2py.source.copy.batch_writer).
    """

    principals: tuple[str | None, str | None] = (None, None)
    producer: ProducerState | None = None
    provenance: Provenance | None = None
    producer_for: Callable[[str], tuple[int, int]] | None = None
    tail: TailWindow | None = None
    producer_slot: ProducerSlot | None = None
    writer: BatchWriter | None = None


PLAIN = CopyMode()
