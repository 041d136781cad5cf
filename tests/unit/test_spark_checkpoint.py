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


def test_nothing_committed_refuses(tmp_path):
    batch(tmp_path, 0, {"orders": {"0": 5}}, commit=False)
    with pytest.raises(Mm2pyError, match="never committed"):
        read_batch(tmp_path)


def test_resume_batch_renames_translates_and_keeps_the_rest(tmp_path):
    batch(tmp_path, 0, {"orders": {"0": 5, "2": 7}})
    batch(tmp_path, 1, {"orders": {"0": 9, "2": 8}}, commit=False)
    b = read_batch(tmp_path)
    lines = resume_lines(b, {("A.orders", 0): 4, ("A.orders", 2): 6}, {"orders": "A.orders"})
    assert write_resume(tmp_path, b, lines) == 2
    text = (tmp_path / "offsets" / "2").read_text().splitlines()
    assert text[:2] == ["v1", META] and json.loads(text[2]) == {"A.orders": {"0": 4, "2": 6}}
    assert (tmp_path / "commits" / "2").exists() and not (tmp_path / "commits" / "1").exists()
    assert sorted(os.listdir(tmp_path / "offsets")) == ["0", "1", "2"]
    assert read_batch(tmp_path).batch_id == 2


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
