"""Batch transforms (mm2py.transforms.BatchTransform): a source batch's records as one Arrow batch or DataFrame."""

from __future__ import annotations

import re

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from mm2py.errors import TransformFailedError
from mm2py.kafka.batches import Record
from mm2py.transforms import BATCH_SCHEMA, LinkFailed, TransformError, chain_for
from mm2py.transforms.tolerance import ErrorPolicy
from tests.fakes.batches import transformed_copy

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
ARROW = "tests.plugins.MaskDigitsArrow"


def card(offset: int, value: bytes | None = None, headers: tuple = ()) -> Record:
    value = b"order %d card 4111222233334444" % offset if value is None else value
    return Record(offset, 1000 + offset, b"k%d" % offset, value, headers)


def masked(r: Record) -> Record:
    return Record(r.offset, r.timestamp, r.key, b"order %s card ************4444" % (b"*" * len(str(r.offset))),
                  r.headers)


def cards() -> list[Record]:
    """Ten records: a tombstone at 2 and a DROP at 5, which MaskDigitsArrow drops."""
    out = [card(i, headers=(("h", b"%d" % i),)) for i in range(10)]
    out[2], out[5] = Record(2, 1002, b"k2", None, ()), card(5, b"DROP 5")
    return out


def test_an_arrow_transform_drops_and_changes_rows_as_one_batch_and_alone_alike() -> None:
    chain = chain_for({"transforms": "mask", "transforms.mask.type": ARROW})
    records = cards()
    expected = [None if r.offset in (2, 5) else masked(r) for r in records]
    assert chain.run("A.t", records) == expected
    assert [chain.apply("A.t", r) for r in records] == expected, "row-wise: a batch of one gives the same"
    assert chain.replay_all("A.t", records, False) == [(e, False) for e in expected]


def test_a_chain_mixes_record_and_batch_links_in_order_predicate_per_row_with_exact_tallies() -> None:
    # strip the header "x"; mask only rows with a "card" header; then drop tombstones
    chain = chain_for({"transforms": "strip, mask, dead", "transforms.strip.type": T + "DropHeaders",
                       "transforms.strip.headers": "x", "transforms.mask.type": ARROW,
                       "transforms.mask.predicate": "isCard", "transforms.dead.type": T + "Filter",
                       "transforms.dead.predicate": "tomb", "predicates": "isCard, tomb",
                       "predicates.isCard.type": P + "HasHeaderKey", "predicates.isCard.name": "card",
                       "predicates.tomb.type": P + "RecordIsTombstone"})
    records = [card(0, headers=(("card", b""), ("x", b"1"))), card(1, headers=(("x", b"1"),)),
               card(2, b"DROP 2", (("card", b""),)), Record(3, 1003, b"k3", None, ()),
               card(4, headers=(("card", b""),))]
    counts: dict[str, list[int]] = {}
    out = chain.run("A.t", records, chain.tallies(counts))
    assert out == [masked(card(0, headers=(("card", b""),))), card(1), None, None, masked(records[4])]
    # mask: 5 in, rows 1 and 3 pass untouched (no "card" header), 2 dropped (DROP); dead: the tombstone 3
    assert counts == {"strip": [5, 5, 0, 0], "mask": [5, 4, 1, 0], "dead": [4, 3, 1, 0]}


def test_a_failing_batch_fails_exactly_the_records_that_fail_alone_and_tolerance_leaves_gaps() -> None:
    chain = chain_for({"transforms": "mask", "transforms.mask.type": ARROW, "transforms.mask.fail.offset": "3,7"})
    records = [card(i) for i in range(10)]
    counts: dict[str, list[int]] = {}
    out = chain.run("A.t", records, chain.tallies(counts))
    assert [i for i, o in enumerate(out) if isinstance(o, LinkFailed)] == [3, 7]
    assert [o for o in out if not isinstance(o, LinkFailed)] == [masked(r) for r in records if r.offset not in (3, 7)]
    assert counts == {"mask": [10, 8, 0, 2]}
    with pytest.raises(LinkFailed, match=r"'mask' \(tests.plugins.MaskDigitsArrow\) raised ValueError") as e:
        chain.replay_all("A.t", records, False)
    assert e.value.offset == 3
    assert [failing for _, failing in chain.replay_all("A.t", records, True)] == [i in (3, 7) for i in range(10)]


def test_the_copy_names_the_failing_record_or_leaves_offset_gaps_under_tolerance_all() -> None:
    raw = {"transforms": "mask", "transforms.mask.type": ARROW, "transforms.mask.fail.offset": "3,7"}
    with pytest.raises(TransformFailedError, match=r"flow A->B: transform 'mask' \(tests.plugins.MaskDigitsArrow\) "
                       r"raised ValueError: .* at topic t partition 2 offset 3 \(remote topic A.t\)"):
        transformed_copy(raw, ErrorPolicy())
    part = transformed_copy(raw, ErrorPolicy(tolerate=True))
    [(_payload, pending)] = part.queue
    assert pending.offsets == (0, 1, 2, 4, 5, 6, 8, 9) and part.dropped == 2
    assert part.result().transformed == (("mask", 10, 8, 0, 2),)


class Renumber:
    """Arrow transforms breaking the contract, one per ``what``."""

    batch_format = "arrow"

    def __init__(self, config: dict[str, str]) -> None:
        self.what = config["what"]

    def __call__(self, topic: str, batch: pa.RecordBatch) -> object:
        offsets = batch.schema.get_field_index("offset")
        if self.what == "table":
            return pa.Table.from_batches([batch])
        if self.what == "new-offset":
            return batch.set_column(offsets, "offset", pc.add(batch.column("offset"), 100))
        if self.what == "reorder":
            return batch.take(pa.array(range(batch.num_rows - 1, -1, -1)))
        if self.what == "added":
            return pa.RecordBatch.from_pylist([*batch.to_pylist(), batch.to_pylist()[-1]], schema=BATCH_SCHEMA)
        if self.what == "schema":
            return batch.set_column(batch.schema.get_field_index("value"), "value",
                                    pc.cast(batch.column("value"), pa.string()))
        if self.what == "null-timestamp":
            return batch.set_column(1, "timestamp", pa.nulls(batch.num_rows, pa.int64()))
        return batch


@pytest.mark.parametrize(("what", "why"), [
    ("table", "returned Table, not a pyarrow.RecordBatch"),
    ("new-offset", r"returned offsets \[100\] that are not the input's \[0\] in order: a batch transform drops"),
    ("reorder", r"returned offsets \[5, 4, 3, 2, 1, ...\] that are not the input's \[0, 1, 2, 3, 4, ...\] in "
                "order: .* on the batch of offsets 0 to 5, but on none of its records alone"),
    ("added", r"returned offsets \[0, 0\] that are not the input's \[0\] in order"),
    ("schema", r"returned a batch of schema \(offset: int64, timestamp: int64, key: binary, value: string"),
    ("null-timestamp", "null offset, timestamp"),
])
def test_a_batch_that_breaks_the_contract_fails_every_record_naming_why(what: str, why: str) -> None:
    chain = chain_for({"transforms": "r", "transforms.r.type": f"{__name__}.Renumber", "transforms.r.what": what})
    out = chain.run("A.t", [card(i) for i in range(6)])
    assert all(isinstance(o, LinkFailed) for o in out), out
    assert str(out[0]).startswith(f"transform 'r' ({__name__}.Renumber) ") and re.search(why, str(out[0])), out[0]


class BatchOnly:
    """Not row-wise: fails on any batch of more than one row."""

    batch_format = "arrow"

    def __init__(self, config: dict[str, str]) -> None:
        pass

    def __call__(self, topic: str, batch: pa.RecordBatch) -> pa.RecordBatch:
        if batch.num_rows > 1:
            raise RuntimeError("too many")
        return batch


def test_a_batch_failing_where_no_row_fails_alone_fails_every_record_naming_the_batch() -> None:
    chain = chain_for({"transforms": "b", "transforms.b.type": f"{__name__}.BatchOnly"})
    out = chain.run("A.t", [card(4), card(5), card(6)])
    assert all(isinstance(o, LinkFailed) for o in out)
    assert ("raised RuntimeError: too many on the batch of offsets 4 to 6, but on none of its records alone: "
            "a batch transform must be row-wise") in str(out[0])


class PandasUpper:
    """pandas batch transform: values upper-cased, a header added, rows whose key is ``k1`` dropped."""

    batch_format = "pandas"

    def __init__(self, config: dict[str, str]) -> None:
        pass

    def __call__(self, topic: str, df: pd.DataFrame) -> pd.DataFrame:
        df = df[df.key != b"k1"].copy()
        df["value"] = df["value"].map(lambda v: None if v is None else v.upper())
        df["headers"] = df["headers"].map(lambda hs: [*hs, {"key": "topic", "value": topic.encode()}])
        return df


def test_a_pandas_transform_gets_and_returns_a_dataframe() -> None:
    chain = chain_for({"transforms": "up", "transforms.up.type": f"{__name__}.PandasUpper"})
    records = [card(0, b"abc", (("h", None),)), card(1), Record(2, 1002, None, None, ())]
    assert chain.run("A.t", records) == [
        Record(0, 1000, b"k0", b"ABC", (("h", None), ("topic", b"A.t"))), None,
        Record(2, 1002, None, None, (("topic", b"A.t"),))]


def test_a_batch_format_mm2py_does_not_know_is_refused_at_start() -> None:
    with pytest.raises(TransformError, match=r"transforms.p.type.*batch_format = 'polars': 'arrow' or 'pandas'"):
        chain_for({"transforms": "p", "transforms.p.type": f"{__name__}.Polars"})


class Polars:
    batch_format = "polars"

    def __init__(self, config: dict[str, str]) -> None:
        pass

    def __call__(self, topic: str, batch: object) -> object:
        return batch
