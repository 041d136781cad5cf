"""bench.run's --transforms option (issue 47): the Filter chain's files, plan, order and published block."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from bench.publish import FILTER_MARKERS, MARKERS, TLS_MARKERS, publish, replace_marked, summarize
from bench.results import RunResult
from bench.run import A_PORT, B_PORT, mm2_properties, run_alias, workloads
from bench.security import network, security_plan
from bench.tables import chain_cost, tls_cost
from bench.variants import FILTER_CHAIN, Variant, parse_transforms, require_no_tombstones, sequence, variant_plan

B = "b-catchup-1KiB-none"
PLAIN, FILTER, TLS = Variant("plaintext"), Variant("plaintext", "filter"), Variant("tls")


@pytest.mark.parametrize(("text", "error"), [("", "no variant"), ("regex", "unknown variant 'regex'"),
                                             ("none,filter,none", "variant 'none' given twice")])
def test_a_bad_transforms_value_is_named(text: str, error: str):
    with pytest.raises(ValueError, match=f"--transforms: {error}"):
        parse_transforms(text)


def test_mm2_and_mm2py_get_the_same_filter_chain_and_the_raw_file_is_unchanged():
    w = workloads(0.01)["b"]
    mm2 = mm2_properties("r1mm2bf", w, "mm2", None, "filter").splitlines()
    assert mm2_properties("r1mm2bf", w, "mm2py", None, "filter").splitlines() == mm2
    flow = "r1mm2bf->tgt."
    assert [line for line in mm2 if "transforms" in line or "predicates" in line] == [flow + x for x in FILTER_CHAIN]
    assert flow + "predicates.isTombstone.type = org.apache.kafka.connect.transforms.predicates.RecordIsTombstone" \
        in mm2
    raw = mm2_properties("r1mm2b", w, "mm2")
    assert mm2_properties("r1mm2b", w, "mm2", None, "none") == raw
    assert "transforms" not in raw and "predicates" not in raw


def test_filter_runs_have_their_own_alias():
    w, plain = workloads(0.01)["b"], network("plaintext", A_PORT, B_PORT, None)
    assert (run_alias(1, "mm2", w, plain), run_alias(1, "mm2", w, plain, "filter"), run_alias(0, "mm2p", w, plain,
                                                                                                "filter")) == (
        "r1mm2b", "r1mm2bf", "w1mm2pbf")


def test_the_plan_adds_the_filter_variant_on_plaintext_where_asked():
    security = security_plan(["a", "b"], "plaintext,tls", "b")
    assert variant_plan(security, "none", None) == {"a": (PLAIN,), "b": (PLAIN, TLS)}
    assert variant_plan(security, "none,filter", "b") == {"a": (PLAIN,), "b": (PLAIN, TLS, FILTER)}
    assert variant_plan(security_plan(["b"], "plaintext", None), "filter", None) == {"b": (FILTER,)}
    # a workload the filter leaves out keeps its raw runs even when none is not asked for
    assert variant_plan(security_plan(["a", "b"], "plaintext", None), "filter", "b") == {"a": (PLAIN,), "b": (FILTER,)}


@pytest.mark.parametrize(("keys", "security", "transforms", "workloads_", "shape_too", "error"), [
    (["b"], "plaintext", "none", "b", False, "--transform-workloads b needs filter in --transforms"),
    (["b"], "plaintext", "none,filter", "a", False, "workload 'a' is not among --workloads b"),
    (["b"], "tls", "filter", None, False, "workload b: --transforms filter runs on plaintext only"),
    (["b"], "plaintext", "filter", None, True, "--transforms filter: workload e .* without transforms"),
])
def test_a_plan_that_makes_no_sense_names_option_and_workload(keys, security, transforms, workloads_, shape_too,
                                                              error):
    with pytest.raises(ValueError, match=error):
        variant_plan(security_plan(keys, security, None, shape_too), transforms, workloads_, shape_too)


def test_the_floor_runs_once_per_security_mode():
    runs = sequence(["floor", "mm2", "mm2py"], (PLAIN, TLS, FILTER))
    assert runs == [("floor", PLAIN), ("mm2", PLAIN), ("mm2py", PLAIN), ("floor", TLS), ("mm2", TLS), ("mm2py", TLS),
                    ("mm2", FILTER), ("mm2py", FILTER)]
    assert sequence(["floor", "mm2"], (FILTER,)) == [("floor", FILTER), ("mm2", FILTER)]


def test_a_workload_with_a_tombstone_is_refused():
    require_no_tombstones("b", [b"x" * 1024])
    with pytest.raises(ValueError, match="workload b: writes a tombstone"):
        require_no_tombstones("b", [b"x", None])


def result(tool: str, transforms: str, mb_per_s: float, cpu: float = 10.0, security: str = "plaintext",
           **kw: object) -> RunResult:
    return RunResult(tool, B, 1, 1000, 1_000_000, 1.0, 20.0, 1000.0, mb_per_s, 1.0, cpu, 100.0,
                     security=security, transforms=transforms, **kw)  # type: ignore[arg-type]


def test_the_cost_of_the_chain_is_filter_over_none_per_tool():
    runs = [result("floor", "none", 500.0), result("mm2", "none", 100.0), result("mm2", "filter", 90.0, cpu=11.0),
            result("mm2py", "none", 300.0), result("mm2py", "filter", 150.0, cpu=20.0),
            result("mm2py", "none", 200.0, security="tls")]  # TLS runs are not the raw path's base
    [line] = chain_cost(runs)
    assert line.startswith(f"Cost of the chain on {B}, with and without it in this invocation")
    assert "mm2 MB/s 0.90x (100.0 -> 90.0), CPU s/GB 1.10x" in line
    assert "mm2py MB/s 0.50x (300.0 -> 150.0), CPU s/GB 2.00x" in line
    assert "floor" not in line
    assert chain_cost([result("mm2", "filter", 90.0)])[0].startswith("Cost of the chain: not stated")
    # the filter runs are not TLS's plaintext base
    assert "0.67x" in tls_cost(runs)[0] and "mm2 " not in tls_cost(runs)[0]


def test_results_md_has_a_filter_section_with_the_floor_beside_the_tools():
    text = summarize([result("floor", "none", 500.0), result("mm2", "none", 100.0), result("mm2", "filter", 90.0)],
                     "test")
    plain, chain = text.split("## Workload b with a Filter chain")
    assert f"| {B} | mm2 | 1,000 | 100.0 |" in plain and f"| {B} | mm2 | 1,000 | 90.0 |" not in plain
    assert f"| {B} | mm2 | 1,000 | 90.0 |" in chain and f"| {B} | floor | 1,000 | 500.0 |" in chain
    assert "RecordIsTombstone" in chain and "Cost of the chain on" in chain
    assert "Filter chain" not in summarize([result("floor", "none", 500.0), result("mm2", "none", 100.0)], "test")


def page(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "benchmarks.md").write_text(f"# B\n\n{MARKERS[0]}\nold plain\n{MARKERS[1]}\n\n{TLS_MARKERS[0]}\nold tls\n"
                                        f"{TLS_MARKERS[1]}\n\n{FILTER_MARKERS[0]}\nold filter\n{FILTER_MARKERS[1]}\n")
    return docs


def test_publish_writes_the_filter_block_and_json_beside_the_raw_ones(tmp_path: Path):
    docs = page(tmp_path)
    runs = [result("floor", "none", 500.0), result("mm2", "none", 100.0), result("mm2", "filter", 90.0)]
    written = publish(runs, "test", ["--transforms", "none,filter"], docs, tmp_path)
    assert written == [docs / "bench-results.json", docs / "bench-results-filter.json", docs / "benchmarks.md"]
    text = (docs / "benchmarks.md").read_text()
    assert "old plain" not in text and "old filter" not in text and "old tls" in text
    block = text[text.index(FILTER_MARKERS[0]):text.index(FILTER_MARKERS[1])]
    assert "[bench-results-filter.json](bench-results-filter.json)" in block and "Cost of the chain on" in block
    doc = json.loads((docs / "bench-results-filter.json").read_text())
    assert doc["transforms"] == "filter" and doc["security"] == "plaintext"
    assert [(r["tool"], r["transforms"]) for r in doc["results"]] == [("floor", "none"), ("mm2", "filter")]
    raw = json.loads((docs / "bench-results.json").read_text())
    assert [(r["tool"], r["transforms"]) for r in raw["results"]] == [("floor", "none"), ("mm2", "none")]


def test_the_docs_page_has_the_filter_markers_once_after_the_tls_ones():
    from bench.common import REPO

    text = (REPO / "docs" / "benchmarks.md").read_text()
    out = replace_marked(replace_marked(text, "TLS TABLE", TLS_MARKERS), "FILTER TABLE", FILTER_MARKERS)
    assert out.index("TLS TABLE") < out.index("## Workload b with a Filter chain") < out.index("FILTER TABLE") < \
        out.index("## Latest results")


def test_a_filter_bench_alternates_raw_and_filter_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """bench.run.main with brokers, load and runs replaced: which runs happen in which order, what --docs gets."""
    import bench.run as bench_run

    docs = page(tmp_path)
    (tmp_path / "bench").mkdir()
    monkeypatch.setattr(bench_run, "REPO", tmp_path)
    monkeypatch.setattr(bench_run, "WORK", tmp_path / "work")
    monkeypatch.setattr(bench_run.devcluster, "start_cluster", lambda *a, **k: types.SimpleNamespace(pid=1))
    monkeypatch.setattr(bench_run.devcluster, "stop_cluster", lambda *a, **k: None)
    monkeypatch.setattr(bench_run, "prime_mm2py", lambda: None)
    monkeypatch.setattr(bench_run, "load", lambda *a: 0)
    order: list[tuple[str, str, int]] = []

    def run_one(tool, w, pair, data, brokers, net, transforms="none"):
        order.append((tool, transforms, pair))
        return result(tool, transforms, 100.0 if transforms == "none" else 80.0, security=net.mode)

    monkeypatch.setattr(bench_run, "run_one", run_one)
    args = ["--pairs", "1", "--warmup-runs", "1", "--workloads", "b", "--tools", "floor,mm2,mm2py", "--transforms",
            "none,filter", "--broker-dir", str(tmp_path / "brokers"), "--publish", "--docs", str(docs)]
    assert bench_run.main(args) == 0
    forward = [("floor", "none"), ("mm2", "none"), ("mm2py", "none"), ("mm2", "filter"), ("mm2py", "filter")]
    assert order == [(t, c, 0) for t, c in reversed(forward)] + [(t, c, 1) for t, c in forward]
    text = (docs / "benchmarks.md").read_text()
    assert "mm2py MB/s 0.80x (100.0 -> 80.0)" in text and "--transforms none,filter" in text
