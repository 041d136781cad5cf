"""Spark checkpoint offsets: which batch Spark resumes from, and the batch written to resume on B."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mm2py.errors import Mm2pyError
from mm2py.ops.spark_checkpoint import last_write_age, read_batch, resume_lines, write_resume

META = '{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{"spark.sql.shuffle.partitions":"200"}}'


def batch(cp: Path, n: int, offsets: dict, commit: bool = True) -> None:
    (cp / "offsets").mkdir(parents=True, exist_ok=True)
    (cp / "commits").mkdir(exist_ok=True)
    (cp / "offsets" / str(n)).write_text(f"v1\n{META}\n{json.dumps(offsets)}")
    if commit:
        (cp / "commits" / str(n)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_latest_committed_batch(tmp_path):
    batch(tmp_path, 0, {"orders": {"0": 5, "1": 6}})
    batch(tmp_path, 1, {"orders": {"0": 9, "1": 10}})
    b = read_batch(tmp_path)
    assert (b.batch_id, b.latest_id) == (1, 1) and b.offsets == {("orders", 0): 9, ("orders", 1): 10}


def test_planned_uncommitted_batch_uses_the_one_before(tmp_path):
    batch(tmp_path, 0, {"orders": {"0": 5}})
    batch(tmp_path, 1, {"orders": {"0": 9}}, commit=False)
    b = read_batch(tmp_path)
    assert (b.batch_id, b.latest_id) == (0, 1) and "not committed" in b.note
    assert b.offsets == {("orders", 0): 5}


def test_a_rerun_starts_at_the_batch_before_even_without_its_commit(tmp_path):
    """Spark re-runs the latest planned batch L from ``offsets/L-1`` whatever ``commits/`` holds (a
    job stopped while its JVM still wrote can leave commits/L-1 missing): so does the failover."""
    batch(tmp_path, 0, {"orders": {"0": 5}})
    batch(tmp_path, 1, {"orders": {"0": 9}}, commit=False)
    batch(tmp_path, 2, {"orders": {"0": 12}}, commit=False)
    b = read_batch(tmp_path)
    assert (b.batch_id, b.latest_id, b.offsets) == (1, 2, {("orders", 0): 9})
    assert b.rerun is not None and b.rerun.batch_id == 2 and "no commit either" in b.note


def test_a_rerun_without_the_batch_before_refuses(tmp_path):
    batch(tmp_path, 0, {"orders": {"0": 5}})
    batch(tmp_path, 2, {"orders": {"0": 12}}, commit=False)
    with pytest.raises(Mm2pyError, match="offsets/1.*missing"):
        read_batch(tmp_path)


def test_nothing_committed_without_initial_offsets_refuses(tmp_path):
    batch(tmp_path, 0, {"orders": {"0": 5}}, commit=False)
    with pytest.raises(Mm2pyError, match="never committed.*sources/0/0"):
        read_batch(tmp_path)


def test_an_uncommitted_batch_0_reruns_from_the_sources_initial_offsets_rewritten_in_place(tmp_path):
    """Spark re-runs batch 0 from ``sources/<i>/0``: both it and ``offsets/0`` are translated."""
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "0").write_text(f'v1\n{META}\n{{"logOffset":3}}\n{{"orders":{{"0":9,"2":8}}}}')
    (tmp_path / "commits").mkdir()
    initial = tmp_path / "sources" / "1" / "0"
    initial.parent.mkdir(parents=True)
    initial.write_bytes(b'\0v1\n{"orders":{"0":0,"2":1}}')
    (tmp_path / "sources" / "1" / ".0.crc").write_bytes(b"crc\0stale")
    b = read_batch(tmp_path)
    assert b.offsets == {("orders", 0): 0, ("orders", 2): 1} and "initial offsets" in b.note
    assert b.rerun is not None and b.rerun.offsets == {("orders", 0): 9, ("orders", 2): 8}
    rename = {"orders": "A.orders"}
    start = resume_lines(b, {("A.orders", 0): 0, ("A.orders", 2): 0}, rename)
    end = resume_lines(b.rerun, {("A.orders", 0): 7, ("A.orders", 2): 6}, rename)
    assert write_resume(tmp_path, b, start, end) == 0
    assert initial.read_bytes() == b'\0v1\n{"A.orders":{"0":0,"2":0}}', "the header Spark reads kept"
    assert not (tmp_path / "sources" / "1" / ".0.crc").exists()
    assert (tmp_path / "sources" / "1" / ".0.before-failover").read_bytes() == b'\0v1\n{"orders":{"0":0,"2":1}}'
    after = read_batch(tmp_path)
    assert after.offsets == {("A.orders", 0): 0, ("A.orders", 2): 0}
    assert after.rerun is not None and after.rerun.offsets == {("A.orders", 0): 7, ("A.orders", 2): 6}
    assert (tmp_path / "offsets" / "0").read_text().splitlines()[2] == '{"logOffset":3}', "other sources alone"


def test_resume_batch_renames_translates_and_keeps_the_rest(tmp_path):
    batch(tmp_path, 0, {"orders": {"0": 5, "2": 7}})
    batch(tmp_path, 1, {"orders": {"0": 9, "2": 8}})
    b = read_batch(tmp_path)
    lines = resume_lines(b, {("A.orders", 0): 4, ("A.orders", 2): 6}, {"orders": "A.orders"})
    assert write_resume(tmp_path, b, lines) == 2
    text = (tmp_path / "offsets" / "2").read_text().splitlines()
    assert text[:2] == ["v1", META] and json.loads(text[2]) == {"A.orders": {"0": 4, "2": 6}}
    assert (tmp_path / "commits" / "2").exists()
    assert sorted(os.listdir(tmp_path / "offsets")) == ["0", "1", "2"], "no file already there changes"
    assert json.loads((tmp_path / "offsets" / "1").read_text().splitlines()[2]) == {"orders": {"0": 9, "2": 8}}
    assert read_batch(tmp_path).batch_id == 2


def test_a_planned_uncommitted_batch_is_rewritten_in_place_so_spark_reruns_it_under_its_id(tmp_path):
    """A sink that committed batch 1 before the stop skips it when Spark re-runs it: nothing twice."""
    batch(tmp_path, 0, {"orders": {"0": 5, "2": 7}})
    batch(tmp_path, 1, {"orders": {"0": 9, "2": 8}}, commit=False)
    (tmp_path / "offsets" / ".1.crc").write_bytes(b"crc\0stale")
    b = read_batch(tmp_path)
    assert b.rerun is not None and (b.batch_id, b.rerun.batch_id) == (0, 1)
    assert b.rerun.offsets == {("orders", 0): 9, ("orders", 2): 8}
    rename = {"orders": "A.orders"}
    start = resume_lines(b, {("A.orders", 0): 4, ("A.orders", 2): 6}, rename)
    end = resume_lines(b.rerun, {("A.orders", 0): 8, ("A.orders", 2): 7}, rename)
    with pytest.raises(ValueError):
        write_resume(tmp_path, b, start)
    assert write_resume(tmp_path, b, start, end) == 1
    assert sorted(n for n in os.listdir(tmp_path / "offsets") if n.isdigit()) == ["0", "1"], "no batch added"
    assert not (tmp_path / "commits" / "1").exists(), "Spark re-runs batch 1"
    assert not (tmp_path / "offsets" / ".1.crc").exists(), "a stale checksum would fail Spark's read"
    after = read_batch(tmp_path)
    assert after.offsets == {("A.orders", 0): 4, ("A.orders", 2): 6}
    assert after.rerun is not None and after.rerun.offsets == {("A.orders", 0): 8, ("A.orders", 2): 7}
    kept = (tmp_path / "offsets" / ".1.before-failover").read_text().splitlines()
    assert json.loads(kept[2]) == {"orders": {"0": 9, "2": 8}}, "the original is kept beside it"


def test_other_source_lines_are_left_alone(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    (tmp_path / "offsets" / "0").write_text(f'v1\n{META}\n{{"logOffset":3}}\n{{"t":{{"0":1}}}}')
    (tmp_path / "commits" / "0").write_text("v1\n{}")
    b = read_batch(tmp_path)
    assert b.kafka_lines == (3,)
    assert resume_lines(b, {("A.t", 0): 1}, {"t": "A.t"})[2] == '{"logOffset":3}'


def test_last_write_age(tmp_path):
    batch(tmp_path, 0, {"t": {"0": 1}})
    os.utime(tmp_path / "offsets" / "0", (1000, 1000))
    os.utime(tmp_path / "commits" / "0", (1000, 1000))
    assert last_write_age(tmp_path, now=1300) == 300
