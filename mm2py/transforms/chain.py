"""A flow's transform chain: the record contract, the links in order, and how a record runs through them.

Invariants: links run in the order ``transforms`` lists them; a link with a predicate runs only
where the predicate holds (``negate`` inverts it); a record dropped by a link reaches no later link.
A batch link (``Link.batch``, ``mm2py.transforms.batch``) gets the records that reach it and its
predicate holds on as one batch (``Chain.run``); alone, a record is a batch of one (``Chain.apply``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from mm2py.errors import ConfigError, ConfigProblem
from mm2py.kafka.batches import Record as Record  # re-exported: the record a RecordTransform gets

Transform = Callable[[str, Record], Record | None]
Predicate = Callable[[str, Record], bool]


class RecordTransform(Protocol):
    """A Python transform, named ``transforms.<name>.type = mypkg.module.ClassName``.

    Construction: ``ClassName(config)``, ``config`` a ``dict[str, str]`` of the link's own keys
    without ``transforms.<name>.`` and without ``type``, ``predicate`` and ``negate``
    (``transforms.mask.keep = 4`` gives ``{"keep": "4"}``); values as the file has them, stripped.
    Raise to refuse the keys: the start stops naming ``transforms.<name>.type``. mm2py constructs
    it at start (to check it) and again in every copy task (it is never pickled).

    Call: ``transform(topic, record)`` for each record of a topic the link may touch (its
    predicate, if any, held), in source order per partition. ``topic`` is the remote topic name
    (``A.orders``, as Connect's transforms see it); ``record`` a frozen ``mm2py.transforms.Record``
    (``offset``, ``timestamp`` ms, ``key`` and ``value`` bytes or None, ``headers`` a tuple of
    ``(str, bytes | None)``). Return the record, changed with ``dataclasses.replace`` (key, value,
    headers, timestamp; the offset is the source's whatever it returns), or None to drop it.

    Promises: a pure function of the record, no state across records and no I/O; a task retried
    or a flow restarted hands the same records again. An exception, or a return that is not a
    ``Record`` or None, fails the flow naming it, the transform and the record (flow, topic,
    partition, offset): the record is never skipped.

    Decoded values: a class with ``decoded = True`` is called ``transform(topic, record, value)``
    with the Avro value decoded with the source registry (a dict) and returns the new value or None
    (``mm2py.transforms.DecodedTransform``; only in a ``schemas.mode = translate`` flow).
    """

    def __call__(self, topic: str, record: Record) -> Record | None: ...


class LinkFailed(Exception):
    """A Python transform raised or returned what is not a record; ``link`` its name, ``path`` its class;
    ``offset`` the record's source offset where the raiser knows it (``Chain.replay_all``)."""

    def __init__(self, link: str, path: str, reason: str):
        self.link, self.path, self.reason = link, path, reason
        self.offset: int | None = None
        super().__init__(f"transform {link!r} ({path}) {reason}")


class TransformError(ConfigError):
    """A transform or predicate key mm2py cannot honour; ``key`` as the flow sees it (``transforms.x.type``)."""

    def __init__(self, key: str, message: str):
        self.key = key
        self.reason = message
        super().__init__(ConfigProblem(key, message))


# a batch link over records: per record, in order, the record it made, None (dropped) or its failure
BatchRun = Callable[[str, Sequence[Record]], list["Record | LinkFailed | None"]]


@dataclass(frozen=True)
class Link:
    """One transform of a chain, with its predicate (None: every record) and ``negate``.

    ``batch``: set for a batch transform (``BatchLink.run``); ``transform`` is then the same
    transform over a batch of one record.
    """

    name: str
    transform: Transform
    predicate: Predicate | None = None
    negate: bool = False
    topic_only: bool = False  # the predicate looks at the topic alone (decidable per topic)
    batch: BatchRun | None = None

    def applies(self, topic: str, record: Record) -> bool:
        if self.predicate is None:
            return True
        return self.predicate(topic, record) != self.negate


@dataclass(frozen=True)
class Chain:
    """A flow's transforms in order. Picklable only through ``chain_for`` (rebuilt from the flow's keys)."""

    links: tuple[Link, ...] = ()

    def for_topic(self, topic: str) -> Chain:
        """The links that may touch records of remote topic ``topic`` (topic-decided predicates resolved)."""
        probe = Record(0, 0, None, b"", ())
        return Chain(tuple(link for link in self.links if not link.topic_only or link.applies(topic, probe)))

    def tallies(self, counts: dict[str, list[int]]) -> list[list[int]]:
        """Per link, in order, its ``[in, out, dropped, failed]`` in ``counts`` (by link name, made at 0
        where missing): resolved once per batch, then handed to ``apply`` for each of its records."""
        return [counts.setdefault(link.name, [0, 0, 0, 0]) for link in self.links]

    def apply(self, topic: str, record: Record, tallies: list[list[int]] | None = None) -> Record | None:
        """``record`` through every link (None: dropped).

        ``tallies`` (``Chain.tallies``), when given, counts per link ``[in, out, dropped, failed]``: a
        record is *in* where it reaches the link (no earlier link dropped it), then exactly one of out
        (passed on: the predicate did not hold, or a record came back), dropped (None) or failed
        (``LinkFailed``, re-raised), so in = out + dropped + failed.
        """
        current: Record | None = record
        for i, link in enumerate(self.links):
            if current is None:
                return None
            tally = tallies[i] if tallies is not None else None
            if tally is not None:
                tally[0] += 1
            if link.applies(topic, current):
                try:
                    current = link.transform(topic, current)
                except LinkFailed:
                    if tally is not None:
                        tally[3] += 1
                    raise
            if tally is not None:
                tally[1 if current is not None else 2] += 1
        return current

    def run(self, topic: str, records: Sequence[Record],
            tallies: list[list[int]] | None = None) -> list[Record | LinkFailed | None]:
        """Per record of ``records`` (one source batch's, in offset order): the record the chain kept,
        None (dropped) or the ``LinkFailed`` of the link that failed on it (reaching no later link).

        Record links run per record (``apply``); a batch link once over the records that reach it and
        on which its predicate holds, the others passing it untouched. ``tallies`` as in ``apply``.
        """
        out: list[Record | LinkFailed | None] = list(records)
        start = 0
        while start < len(self.links):
            if self.links[start].batch is not None:
                self._run_batch(start, topic, out, tallies)
                start += 1
                continue
            end = next((i for i in range(start, len(self.links)) if self.links[i].batch is not None), len(self.links))
            part, part_tallies = Chain(self.links[start:end]), tallies[start:end] if tallies is not None else None
            out = [part._caught(topic, r, part_tallies) if isinstance(r, Record) else r for r in out]
            start = end
        return out

    def _caught(self, topic: str, record: Record, tallies: list[list[int]] | None) -> Record | LinkFailed | None:
        try:
            return self.apply(topic, record, tallies)
        except LinkFailed as e:
            return e

    def _run_batch(self, i: int, topic: str, out: list[Record | LinkFailed | None],
                   tallies: list[list[int]] | None) -> None:
        """Batch link ``i`` over the records of ``out`` that reach it, in place."""
        link, batch = self.links[i], self.links[i].batch
        assert batch is not None, "called for a batch link"
        alive = [(j, r) for j, r in enumerate(out) if isinstance(r, Record)]
        touched = [(j, r) for j, r in alive if link.applies(topic, r)]
        if touched:
            results = batch(topic, [r for _, r in touched])
            assert len(results) == len(touched), "a batch link gives one outcome per record"
            for (j, _), result in zip(touched, results, strict=True):
                out[j] = result
        if tallies is not None:
            tally = tallies[i]
            tally[0] += len(alive)
            for j, _ in alive:
                tally[1 if isinstance(out[j], Record) else 3 if isinstance(out[j], LinkFailed) else 2] += 1

    def replay_all(self, topic: str, records: Sequence[Record], tolerate: bool) -> list[tuple[Record | None, bool]]:
        """What the copy made of each of ``records``: (the record kept, or None, and whether a link failed on it).

        A failure is left out only where the flow tolerates it (``errors.tolerance = all``: the copy
        dead-lettered or skipped it); otherwise the first ``LinkFailed`` is raised (its ``offset`` the
        record's), as the copy fails on it.
        Batch links are row-wise (``BatchTransform``), so any grouping of the records gives what the
        copy's source batches gave.
        """
        outs = self.run(topic, records)
        failed = next(((rec, out) for rec, out in zip(records, outs, strict=True) if isinstance(out, LinkFailed)),
                      None)
        if failed is not None and not tolerate:
            failed[1].offset = failed[0].offset
            raise failed[1]
        return [(None, True) if isinstance(out, LinkFailed) else (out, False) for out in outs]
