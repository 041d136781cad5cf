"""bench.landed's arithmetic, bench.run's published summary and its tools' files, without brokers (issue 23)."""

from __future__ import annotations

import pytest

from bench import mm2_variants
from bench.landed import Landed, only_repeats, tally
from bench.publish import MARKERS, replace_marked, summarize
from bench.results import RunResult, cpu_per_gb, verdict
from bench.run import mm2_properties, workloads
from mm2py.ops.digest import PartitionCheck, PartitionDigest


def check(topic: str, partition: int, source: tuple[int, str], target: tuple[int, str]) -> PartitionCheck:
    return PartitionCheck(topic, partition, PartitionDigest(*source), PartitionDigest(*target))


def test_an_exact_copy_is_ok():
    landed = tally([check("t", 0, (5, "x"), (5, "x")), check("t", 1, (0, "e"), (0, "e")),
                    check("u", 0, (7, "y"), (7, "y"))])
    assert landed == Landed(12, 12, 0, (), 3)
    assert landed.ok and landed.complete and landed.verdict() == "ok"


def test_duplicates_explained_by_repeats_are_counted_not_differences():
    landed = tally([check("t", 0, (5, "x"), (8, "z")), check("t", 1, (4, "y"), (4, "y")),
                    check("t", 2, (3, "w"), (4, "v"))], repeats_only=[("t", 0), ("t", 2)])
    assert (landed.records_source, landed.records_target, landed.duplicates) == (12, 16, 4)
    assert landed.differing_partitions == ()
    assert not landed.ok and landed.complete
    assert landed.verdict() == "4 dup / 0 diff"


def test_missing_changed_and_unexplained_extra_records_are_differences():
    landed = tally([
        check("t", 0, (5, "x"), (4, "x4")),  # a record missing
        check("t", 1, (5, "y"), (5, "y2")),  # same count, a record changed
        check("t", 2, (5, "z"), (6, "z6")),  # one more, not only repeats (not in repeats_only)
        check("t", 3, (5, "w"), (7, "w7")),  # two repeats
        check("u", 0, (2, "v"), (2, "v")),
    ], repeats_only=[("t", 3), ("t", 1)])  # t:1 has no extra record: repeats cannot explain it
    assert landed.records_source == 22 and landed.records_target == 24
    assert landed.duplicates == 3  # t:2's one extra and t:3's two, per partition where the target has more
    assert landed.differing_partitions == ("t:0", "t:1", "t:2")
    assert not landed.complete and landed.verdict() == "3 dup / 3 diff"


def test_a_partition_only_the_target_has_counts_its_records():
    landed = tally([check("t", 0, (3, "x"), (3, "x")), check("t", 1, (0, "e"), (2, "f"))])
    assert (landed.records_source, landed.records_target, landed.duplicates) == (3, 5, 2)
    assert landed.differing_partitions == ("t:1",)


@pytest.mark.parametrize(("source", "target", "expected"), [
    (b"abc", b"abc", True),
    (b"abc", b"abbc", True),  # one record sent twice
    (b"abcde", b"abcdcde", True),  # a range re-sent after a restart
    (b"abc", b"abcabc", True),
    (b"aab", b"aaab", True),  # identical records in the source are fine too
    (b"abc", b"abcx", False),  # a foreign record
    (b"abc", b"acb", False),  # reordered: the source is not a subsequence
    (b"abc", b"abbd", False),  # c changed into d, b repeated: same count as a changed record plus one
    (b"abc", b"ab", False),  # a record missing
    (b"", b"", True),
    (b"", b"a", False),
])
def test_only_repeats(source: bytes, target: bytes, expected: bool):
    assert only_repeats([bytes([c]) for c in source], [bytes([c]) for c in target]) is expected


def test_replace_marked_replaces_only_between_the_markers():
    begin, end = MARKERS
    text = f"# Title\n\nintro\n\n{begin}\nold table\nmore old\n{end}\n\n## Latest results\nkept\n"
    out = replace_marked(text, "| a | b |\n|---|---|\n")
    assert out == f"# Title\n\nintro\n\n{begin}\n| a | b |\n|---|---|\n{end}\n\n## Latest results\nkept\n"
    assert replace_marked(out, "new") == f"# Title\n\nintro\n\n{begin}\nnew\n{end}\n\n## Latest results\nkept\n"


@pytest.mark.parametrize("text", ["no markers", f"{MARKERS[0]}\nonly the begin", f"{MARKERS[1]}\nx\n{MARKERS[0]}\n",
                                  f"{MARKERS[0]}\n{MARKERS[1]}\n{MARKERS[0]}\n{MARKERS[1]}\n"])
def test_replace_marked_refuses_missing_twice_or_reversed_markers(text: str):
    with pytest.raises(ValueError, match="bench:results"):
        replace_marked(text, "table")


def test_the_docs_page_has_the_markers_once():
    from bench.run import REPO

    page = (REPO / "docs" / "benchmarks.md").read_text()
    out = replace_marked(page, "TABLE")
    assert out.count("TABLE") == 1 and len(out.splitlines()) <= len(page.splitlines()) + 1
    assert out.index("TABLE") < out.index("## Latest results")


def run(tool: str, duplicates: int = 0, differences: int = 0) -> RunResult:
    return RunResult(tool, "a-catchup-100B-lz4", 1, 1000, 100_000, 1.0, 1.0, 1000.0, 0.1, 1.0, 10.0, 100.0,
                     verified_records=1000 + duplicates, duplicates=duplicates, differences=differences)


def test_verified_column_sums_over_the_pairs():
    assert verdict([run("mm2"), run("mm2")]) == "ok"
    assert verdict([run("mm2", duplicates=3), run("mm2", duplicates=2, differences=1)]) == "5 dup / 1 diff"
    table = summarize([run("mm2", duplicates=7), run("mm2py")], "test")
    rows = [line for line in table.splitlines() if line.startswith("| a-catchup") and line.count("|") == 12]
    assert len(rows) == 2
    assert rows[0].startswith("| a-catchup-100B-lz4 | mm2 |") and rows[0].endswith("| 7 dup / 0 diff |")
    assert rows[1].startswith("| a-catchup-100B-lz4 | mm2py |") and rows[1].endswith("| ok |")
    assert "| verified |" in table and "not a failure" in table


@pytest.fixture
def fake_bench(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """bench.run.main with its brokers, load and runs replaced: results land in ``tmp_path``."""
    import types

    import bench.run as bench_run

    (tmp_path / "bench").mkdir()
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text(f"# B\n\n{MARKERS[0]}\nold\n{MARKERS[1]}\n\n## Latest results\n")
    monkeypatch.setattr(bench_run, "REPO", tmp_path)
    monkeypatch.setattr(bench_run, "WORK", tmp_path / "work")
    monkeypatch.setattr(bench_run.devcluster, "start_cluster", lambda *a, **k: types.SimpleNamespace(pid=1))
    monkeypatch.setattr(bench_run.devcluster, "stop_cluster", lambda *a, **k: None)
    monkeypatch.setattr(bench_run, "prime_mm2py", lambda: None)
    monkeypatch.setattr(bench_run, "load", lambda *a: 0)
    runs: dict[str, RunResult] = {}
    monkeypatch.setattr(bench_run, "run_one", lambda tool, w, pair, data, brokers, net, transforms="none": runs[tool])
    return tmp_path, runs


def test_a_run_with_a_difference_fails_the_bench(fake_bench):
    from bench.run import main

    tmp_path, runs = fake_bench
    runs["mm2"] = run("mm2", duplicates=4)
    runs["mm2py"] = RunResult(**{**run("mm2py").__dict__, "differences": 2, "differing": ["bench-a:3", "bench-a:7"]})
    with pytest.raises(RuntimeError, match=r"mm2py a-catchup-100B-lz4 \(run 1\).* 2 partition\(s\), first "
                                           r"bench-a:3, bench-a:7"):
        main(["--pairs", "1", "--warmup-runs", "0", "--workloads", "a", "--tools", "mm2,mm2py",
              "--broker-dir", str(tmp_path / "brokers"), "--publish"])
    assert "| mm2py |" in (tmp_path / "bench" / "results.md").read_text()  # recorded before failing
    assert "old" in (tmp_path / "docs" / "benchmarks.md").read_text()  # and not published
    assert not (tmp_path / "docs" / "bench-results.json").exists()


def test_duplicates_alone_pass_and_publish(fake_bench):
    import json

    from bench.run import main

    tmp_path, runs = fake_bench
    runs["mm2"], runs["mm2py"] = run("mm2", duplicates=4), run("mm2py")
    args = ["--pairs", "1", "--warmup-runs", "0", "--workloads", "a", "--tools", "mm2,mm2py",
            "--broker-dir", str(tmp_path / "brokers"), "--publish"]
    assert main(args) == 0
    doc = json.loads((tmp_path / "docs" / "bench-results.json").read_text())
    assert doc["command"] == "python -m bench.run " + " ".join(args)
    assert [(r["tool"], r["duplicates"]) for r in doc["results"]] == [("mm2", 4), ("mm2py", 0)]
    assert doc["machine"]["cores"] > 0 and doc["machine"]["kafka"] and "Kafka" in doc["machine"]["setting"]
    page = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "old" not in page and page.startswith(f"# B\n\n{MARKERS[0]}\n`python -m bench.run --pairs 1")
    assert "| 4 dup / 0 diff |" in page and page.endswith(f"{MARKERS[1]}\n\n## Latest results\n")


def test_the_floor_bounds_the_ratio_row():
    """The floor's records/s over MM2's says how far any tool could get past MM2 on the machine."""
    floor = RunResult("floor", "a-catchup-100B-lz4", 1, 1000, 100_000, 0.5, 20.0, 4000.0, 0.4, 1.0, 10.0, 50.0)
    mm2 = RunResult("mm2", "a-catchup-100B-lz4", 1, 1000, 100_000, 1.0, 20.0, 1000.0, 0.1, 1.0, 10.0, 100.0)
    py = RunResult("mm2py", "a-catchup-100B-lz4", 1, 1000, 100_000, 1.0, 20.0, 2000.0, 0.2, 1.0, 5.0, 100.0)
    table = summarize([floor, mm2, py], "test")
    assert "| a-catchup-100B-lz4 | 2.00x | 1.00x faster | 0.50x | - | 4.00x MM2 |" in table
    assert "| a-catchup-100B-lz4 | floor |" in table
    steady = [RunResult(tool, "c-steady-20k-per-s", 1, 1000, 100_000, 0.0, 20.0, 1000.0, 0.1, 1.0, 1.0, 1.0,
                        latency_ms={"p50": 10.0, "p99": p99, "p99.9": p99, "max": p99})
              for tool, p99 in (("floor", 40.0), ("mm2", 120.0), ("mm2py", 150.0))]
    assert "| c-steady-20k-per-s | - (the producer sets the rate) | - | 1.00x | 1.25x | p99 40 ms |" in summarize(
        steady, "test")


def test_broker_cpu_per_gb_is_the_difference_over_the_data_moved():
    assert cpu_per_gb({"src": 10.0, "dst": 4.0}, {"src": 12.5, "dst": 10.0}, 2.0) == {"src": 1.2, "dst": 3.0}
    assert cpu_per_gb({"src": 1.0}, {"src": 2.0}, 0.0) == {}  # nothing moved: no figure


@pytest.mark.parametrize("steady", [False, True])
def test_mm2py_runs_the_file_mm2_runs_with_the_sweeps_best_lines(steady: bool):
    w = workloads(0.01)["c" if steady else "b"]
    best = mm2_variants.lines_of(mm2_variants.variant_of("mm2", steady)[1], "r1")
    mm2 = mm2_properties("r1", w, "mm2").splitlines()
    mm2py = mm2_properties("r1", w, "mm2py").splitlines()
    assert best and mm2py == mm2  # the same file, the variant's lines last (they win)
    assert mm2py[-len(best) - 1:-1] == best
