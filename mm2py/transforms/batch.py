"""Python batch transforms (``BatchTransform``): a partition's records as one Arrow batch, through vectorised code.

A class declares it works on batches with a class attribute ``batch_format = "arrow"`` (it gets and
returns a ``pyarrow.RecordBatch``) or ``"pandas"`` (a ``pandas.DataFrame``); it is named and
configured as a record transform (``transforms.<name>.type = mypkg.Class`` and its keys).

Invariants:
- the batch a transform gets holds, in offset order, the records of one source batch of one
  partition that reach its link and on which its predicate holds (``BATCH_SCHEMA``); the rows the
  predicate does not hold on pass it untouched;
- what it returns is checked whole before any record of it is used: the schema, no null offset,
  timestamp, headers list or header key, and offsets a subsequence of the input's, in order (a row
  may be dropped or changed, never added, reordered or renumbered); anything else is ``LinkFailed``;
- a batch transform is row-wise: what it gives a row depends on that row and the topic alone, so
  a batch gives, row for row, what each of its rows gives alone. mm2py relies on it twice: a batch
  that fails is run again one row at a time, so exactly the records it fails on alone fail (the
  others pass as they would), and ``verify`` and the audit replay records in batches of their own
  (a consumer sees no source batch boundaries). A batch that fails while none of its rows fails
  alone breaks that promise: every record of it fails, naming the batch;
- the transform is built from the link's keys at start and in every copy task, never pickled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from mm2py.transforms.chain import LinkFailed, Record

ARROW, PANDAS = "arrow", "pandas"
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
BATCH_SCHEMA = pa.schema([("offset", pa.int64()), ("timestamp", pa.int64()), ("key", pa.binary()),
                          ("value", pa.binary()), ("headers", pa.list_(HEADER))])


class BatchTransform(Protocol):
    """A Python batch transform, named ``transforms.<name>.type = mypkg.module.ClassName``.

    ``batch_format``: ``"arrow"`` or ``"pandas"``. Construction as ``RecordTransform``:
    ``ClassName(config)``, the link's own keys as strings; raise to refuse them.

    Call: ``transform(topic, batch)``, ``topic`` the remote topic name, ``batch`` a
    ``pyarrow.RecordBatch`` of ``BATCH_SCHEMA`` (offset int64, timestamp int64 ms, key and value
    binary or null, headers list<struct<key: string, value: binary>>), or with ``"pandas"`` the
    same columns as a ``pandas.DataFrame`` (``RecordBatch.to_pandas()``: bytes, None, lists of
    ``{"key", "value"}`` dicts). Return the same kind of batch and schema: rows left out are
    dropped records; key, value, headers and timestamp may change; offsets must stay the input's,
    in order. A DataFrame is converted with ``RecordBatch.from_pandas(df, schema=BATCH_SCHEMA,
    preserve_index=False)``.

    Promises: row-wise (a row's output depends on that row and the topic alone: a batch gives what
    each row gives alone), pure, no I/O, no state across calls. An exception or a return that is
    not a batch of the contract fails the records (the flow, or ``errors.tolerance = all``).
    """

    batch_format: ClassVar[str]

    def __call__(self, topic: str, batch: Any) -> Any: ...


def to_arrow(records: Sequence[Record]) -> pa.RecordBatch:
    """``records`` as one ``BATCH_SCHEMA`` batch, in their order."""
    bounds = [0]
    for r in records:
        bounds.append(bounds[-1] + len(r.headers))
    headers = pa.StructArray.from_arrays([pa.array([h[0] for r in records for h in r.headers], pa.string()),
                                          pa.array([h[1] for r in records for h in r.headers], pa.binary())],
                                         fields=list(HEADER))
    return pa.RecordBatch.from_arrays([
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp for r in records], pa.int64()),
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.ListArray.from_arrays(pa.array(bounds, pa.int32()), headers, type=pa.list_(HEADER)),
    ], schema=BATCH_SCHEMA)


def from_arrow(batch: pa.RecordBatch) -> list[Record]:
    """The rows of a checked ``BATCH_SCHEMA`` batch (no null headers list) as records."""
    lists = batch.column("headers")
    bounds = lists.offsets.to_pylist()  # of a sliced array: into its parent's values, which flatten() starts at
    flat = lists.flatten()
    pairs = list(zip(flat.field("key").to_pylist(), flat.field("value").to_pylist(), strict=True))
    first = bounds[0] if bounds else 0
    headers = [tuple(pairs[bounds[i] - first:bounds[i + 1] - first]) for i in range(len(batch))]
    columns = [batch.column(name).to_pylist() for name in ("offset", "timestamp", "key", "value")]
    return [Record(offset, timestamp, key, value, hs)
            for offset, timestamp, key, value, hs in zip(*columns, headers, strict=True)]


class BatchLink:
    """A ``BatchTransform`` as a chain link (``Link.batch`` is ``run``); called per record, a batch of one.

    ``name`` the link, ``path`` the class, ``transform`` its instance, ``kind`` its ``batch_format``.
    """

    def __init__(self, name: str, path: str, transform: BatchTransform, kind: str):
        self.name, self.path, self.transform, self.kind = name, path, transform, kind

    def __call__(self, topic: str, record: Record) -> Record | None:
        """``record`` alone through the transform (the chain's per-record form); raises ``LinkFailed``."""
        [out] = self.run(topic, [record])
        if isinstance(out, LinkFailed):
            raise out
        return out

    def run(self, topic: str, records: Sequence[Record]) -> list[Record | LinkFailed | None]:
        """Per record of ``records``, in order: what the transform made of it, None (dropped) or the failure."""
        try:
            return self._whole(topic, records)
        except LinkFailed as e:
            if len(records) == 1:
                return [e]
            failure = e
        alone = [self.run(topic, [r])[0] for r in records]
        if any(isinstance(out, LinkFailed) for out in alone):
            return alone
        whole = LinkFailed(self.name, self.path, f"{failure.reason} on the batch of offsets {records[0].offset} to "
                           f"{records[-1].offset}, but on none of its records alone: a batch transform must be "
                           "row-wise (mm2py.transforms.BatchTransform)")
        whole.__cause__ = failure.__cause__
        return [whole] * len(records)

    def _fail(self, reason: str) -> LinkFailed:
        return LinkFailed(self.name, self.path, reason)

    def _whole(self, topic: str, records: Sequence[Record]) -> list[Record | LinkFailed | None]:
        batch = to_arrow(records)
        try:
            out = self.transform(topic, batch.to_pandas() if self.kind == PANDAS else batch)
        except Exception as e:
            raise self._fail(f"raised {type(e).__name__}: {e}") from e
        got = self._checked(self._as_arrow(out), records)
        return [got.get(r.offset) for r in records]

    def _as_arrow(self, out: object) -> pa.RecordBatch:
        if self.kind == ARROW:
            if not isinstance(out, pa.RecordBatch):
                raise self._fail(f"returned {type(out).__name__}, not a pyarrow.RecordBatch")
            return out
        import pandas as pd  # only pandas batch transforms convert

        if not isinstance(out, pd.DataFrame):
            raise self._fail(f"returned {type(out).__name__}, not a pandas.DataFrame")
        try:
            return pa.RecordBatch.from_pandas(out, schema=BATCH_SCHEMA, preserve_index=False)
        except (pa.ArrowException, ValueError, TypeError, KeyError) as e:
            raise self._fail(f"returned a DataFrame that is not of the batch schema: {type(e).__name__}: {e}") from e

    def _checked(self, out: pa.RecordBatch, records: Sequence[Record],
                 schema: pa.Schema = BATCH_SCHEMA) -> dict[int, Record]:
        """``out``'s records by offset, once it keeps the contract (``LinkFailed`` otherwise); ``schema`` the
        batch's it was given (``BATCH_SCHEMA``, or with decoded values ``mm2py.transforms.decoded``)."""
        if not out.schema.equals(schema):
            got = ", ".join(f"{f.name}: {f.type}" for f in out.schema)
            raise self._fail(f"returned a batch of schema ({got}), not the input's")
        headers = out.column("headers")
        if (out.column("offset").null_count or out.column("timestamp").null_count or headers.null_count
                or pc.list_flatten(headers).field("key").null_count):
            raise self._fail("returned a batch with a null offset, timestamp, headers list or header key")
        offsets = out.column("offset").to_pylist()
        inputs = iter(r.offset for r in records)
        if not all(any(o == i for i in inputs) for o in offsets):  # each found after the one before it
            raise self._fail(f"returned offsets {_span(offsets)} that are not the input's {_span(records)} "
                             "in order: a batch transform drops or changes rows, never adds, reorders or "
                             "renumbers them")
        return {r.offset: r for r in from_arrow(out)}


def _span(items: Sequence[int] | Sequence[Record]) -> str:
    offsets = [i.offset if isinstance(i, Record) else i for i in items]
    return f"[{', '.join(map(str, offsets[:5]))}{', ...' if len(offsets) > 5 else ''}]"
