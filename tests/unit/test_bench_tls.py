"""bench.run's --security option (issue 44): modes, the files and listeners of a TLS run, what is published."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from bench.publish import MARKERS, TLS_MARKERS, publish, replace_marked, summarize
from bench.results import RunResult
from bench.run import A_PORT, B_PORT, mm2_properties, run_alias, workloads
from bench.security import (
    TLS_PORT_SHIFT,
    TRUSTSTORE_PASSWORD,
    TlsStores,
    broker_listeners,
    network,
    parse_modes,
    security_plan,
)
from bench.tables import tls_cost

B = "b-catchup-1KiB-none"


def fake_stores(folder: Path) -> TlsStores:
    return TlsStores(folder, {"ssl.keystore.location": str(folder / "keystore.p12")}, str(folder / "ca.pem"))


@pytest.mark.parametrize(("text", "modes"), [
    ("plaintext", ("plaintext",)), ("tls", ("tls",)), ("plaintext,tls", ("plaintext", "tls")),
    (" TLS , plaintext", ("tls", "plaintext")),
])
def test_security_modes_parse_in_the_order_given(text: str, modes: tuple[str, ...]):
    assert parse_modes(text) == modes


@pytest.mark.parametrize(("text", "error"), [("", "no mode"), ("ssl", "unknown mode 'ssl'"),
                                             ("tls,plaintext,tls", "mode 'tls' given twice")])
def test_a_bad_security_mode_is_named(text: str, error: str):
    with pytest.raises(ValueError, match=f"--security: {error}"):
        parse_modes(text)


def test_tls_workloads_choose_which_workloads_also_run_on_tls():
    assert security_plan(["a", "b"], "plaintext", None) == {"a": ("plaintext",), "b": ("plaintext",)}
    assert security_plan(["a", "b"], "plaintext,tls", None) == {"a": ("plaintext", "tls"), "b": ("plaintext", "tls")}
    assert security_plan(["a", "b", "c"], "plaintext,tls", "b", shape_too=True) == {
        "a": ("plaintext",), "b": ("plaintext", "tls"), "c": ("plaintext",)}
    assert security_plan(["b"], "tls", "b") == {"b": ("tls",)}


@pytest.mark.parametrize(("keys", "security", "tls_workloads", "shape_too", "error"), [
    (["a", "b"], "tls", "b", False, "workload a: --security tls runs TLS only"),
    (["b"], "plaintext", "b", False, "--tls-workloads b needs tls in --security"),
    (["b"], "plaintext,tls", "b,d", False, "workload 'd' is not among --workloads b"),
    (["b"], "plaintext,tls", "e", True, "workload e .* plaintext clusters of its own"),
    (["b"], "tls", None, True, "--security tls: workload e .* plaintext clusters of its own"),
])
def test_a_plan_that_makes_no_sense_names_option_and_workload(keys, security, tls_workloads, shape_too, error):
    with pytest.raises(ValueError, match=error):
        security_plan(keys, security, tls_workloads, shape_too)


def test_the_command_line_refuses_a_bad_mode_before_starting_anything(capsys: pytest.CaptureFixture[str]):
    from bench.run import main

    with pytest.raises(SystemExit) as exit_:
        main(["--security", "plaintext,ssl", "--workloads", "b"])
    assert exit_.value.code == 2
    assert "--security: unknown mode 'ssl'" in capsys.readouterr().err


def test_a_tls_run_gives_mm2_and_mm2py_the_same_operator_file(tmp_path: Path):
    w = workloads(0.01)["b"]
    tls = network("tls", A_PORT, B_PORT, fake_stores(tmp_path))
    mm2 = mm2_properties("r1mm2bt", w, "mm2", tls).splitlines()
    assert mm2_properties("r1mm2bt", w, "mm2py", tls).splitlines() == mm2
    truststore = str(tmp_path / "truststore.jks")
    for alias, port in (("r1mm2bt", A_PORT), ("tgt", B_PORT)):
        assert f"{alias}.bootstrap.servers = 127.0.0.1:{port + TLS_PORT_SHIFT}" in mm2
        assert {f"{alias}.security.protocol = SSL", f"{alias}.ssl.truststore.location = {truststore}",
                f"{alias}.ssl.truststore.password = {TRUSTSTORE_PASSWORD}",
                f"{alias}.ssl.truststore.type = JKS"} <= set(mm2)
    # plaintext runs write the file they wrote before --security existed
    assert mm2_properties("r1mm2b", w, "mm2", network("plaintext", A_PORT, B_PORT, None)) == mm2_properties(
        "r1mm2b", w, "mm2")
    assert not any("security" in line or "ssl." in line for line in mm2_properties("r1mm2b", w, "mm2").splitlines())


def test_runs_in_each_mode_have_their_own_alias(tmp_path: Path):
    w = workloads(0.01)["b"]
    plain, tls = network("plaintext", A_PORT, B_PORT, None), network("tls", A_PORT, B_PORT, fake_stores(tmp_path))
    assert (run_alias(1, "mm2", w, plain), run_alias(1, "mm2", w, tls), run_alias(0, "fl", w, tls)) == (
        "r1mm2b", "r1mm2bt", "w1flbt")


def test_the_tls_listener_sits_beside_plaintext_which_stays_inter_broker(tmp_path: Path):
    props = broker_listeners(29092, fake_stores(tmp_path))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:29092,SSL://127.0.0.1:29094,CONTROLLER://127.0.0.1:29093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:29092,SSL://127.0.0.1:29094"
    assert props["inter.broker.listener.name"] == "PLAINTEXT"
    assert props["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL"
    assert props["ssl.keystore.location"] == str(tmp_path / "keystore.p12")


def result(tool: str, mode: str, mb_per_s: float, mirror_s: float = 20.0, cpu: float = 10.0,
           p99: float | None = None, **kw: object) -> RunResult:
    latency = {"p50": 1.0, "p99": p99, "p99.9": p99, "max": p99} if p99 is not None else {}
    return RunResult(tool, "c-steady-20k-per-s" if latency else B, 1, 1000, 1_000_000, 1.0, mirror_s, 1000.0,
                     mb_per_s, 1.0, cpu, 100.0, latency_ms=latency, security=mode, **kw)  # type: ignore[arg-type]


def test_the_cost_of_tls_is_tls_over_plaintext_per_tool():
    runs = [result("mm2", "plaintext", 100.0), result("mm2", "tls", 80.0, cpu=12.0),
            result("mm2py", "plaintext", 300.0, mirror_s=12.0), result("mm2py", "tls", 240.0, mirror_s=8.0),
            result("floor", "tls", 500.0)]  # the floor ran on TLS only: no cost to state
    [line] = tls_cost(runs)
    assert line.startswith(f"Cost of TLS on {B}, both modes in this invocation")
    assert "mm2 MB/s 0.80x (100.0 -> 80.0), CPU s/GB 1.20x" in line
    assert "mm2py MB/s 0.80x (300.0 -> 240.0, copy window 8.0 s: not a rate), CPU s/GB 1.00x" in line
    assert "floor" not in line
    steady = tls_cost([result("mm2", "plaintext", 2.0, p99=100.0), result("mm2", "tls", 2.0, p99=125.0)])
    assert "mm2 p99 1.25x (100 -> 125 ms)" in steady[0]
    assert tls_cost([result("mm2", "tls", 80.0)]) == [
        "Cost of TLS: not stated, plaintext and TLS were not both measured in this invocation."]


def test_results_md_has_a_tls_section_with_the_same_columns():
    text = summarize([result("mm2", "plaintext", 100.0), result("mm2", "tls", 80.0)], "test")
    plain, tls = text.split("## TLS on both clusters")
    header = "| workload | tool | records/s | MB/s |"
    assert header in plain and header in tls
    assert f"| {B} | mm2 | 1,000 | 100.0 |" in plain and f"| {B} | mm2 | 1,000 | 80.0 |" in tls
    assert "Cost of TLS on" in tls
    only_plain = summarize([result("mm2", "plaintext", 100.0)], "test")
    assert "TLS" not in only_plain


def page(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "benchmarks.md").write_text(f"# B\n\n{MARKERS[0]}\nold plain\n{MARKERS[1]}\n\n"
                                        f"{TLS_MARKERS[0]}\nold tls\n{TLS_MARKERS[1]}\n\n## Latest results\n")
    return docs


def test_publish_writes_each_modes_block_and_json(tmp_path: Path):
    docs = page(tmp_path)
    runs = [result("mm2", "plaintext", 100.0), result("mm2", "tls", 80.0)]
    written = publish(runs, "test", ["--security", "plaintext,tls"], docs, tmp_path)
    assert written == [docs / "bench-results.json", docs / "bench-results-tls.json", docs / "benchmarks.md"]
    text = (docs / "benchmarks.md").read_text()
    assert "old" not in text and text.endswith("\n## Latest results\n")
    plain = text[text.index(MARKERS[0]):text.index(MARKERS[1])]
    tls = text[text.index(TLS_MARKERS[0]):text.index(TLS_MARKERS[1])]
    assert "[bench-results.json](bench-results.json)" in plain and "Cost of TLS" not in plain
    assert "[bench-results-tls.json](bench-results-tls.json)" in tls and "Cost of TLS on" in tls
    assert f"| {B} | mm2 | 1,000 | 80.0 |" in tls
    for name, mode in (("bench-results.json", "plaintext"), ("bench-results-tls.json", "tls")):
        doc = json.loads((docs / name).read_text())
        assert doc["security"] == mode and [r["security"] for r in doc["results"]] == [mode]
        assert doc["command"] == "python -m bench.run --security plaintext,tls"


def test_publishing_tls_alone_leaves_the_plaintext_block_and_json(tmp_path: Path):
    docs = page(tmp_path)
    publish([result("mm2", "tls", 80.0)], "test", ["--security", "tls"], docs, tmp_path)
    text = (docs / "benchmarks.md").read_text()
    assert "old plain" in text and "old tls" not in text and "Cost of TLS: not stated" in text
    assert not (docs / "bench-results.json").exists() and (docs / "bench-results-tls.json").exists()


def test_nothing_is_published_when_a_run_differed_or_a_marker_is_missing(tmp_path: Path):
    docs = page(tmp_path)
    before = (docs / "benchmarks.md").read_text()
    with pytest.raises(ValueError, match=r"not published: .* mm2 b-catchup-1KiB-none \(tls, run 1\)"):
        publish([result("mm2", "plaintext", 1.0), result("mm2", "tls", 1.0, differences=1)], "t", [], docs, tmp_path)
    (docs / "benchmarks.md").write_text(before.replace(TLS_MARKERS[0], ""))
    with pytest.raises(ValueError, match="bench:tls:begin"):
        publish([result("mm2", "plaintext", 1.0), result("mm2", "tls", 1.0)], "t", [], docs, tmp_path)
    assert "old plain" in (docs / "benchmarks.md").read_text()  # the plaintext block was not half-written
    assert list(docs.iterdir()) == [docs / "benchmarks.md"]


def test_the_docs_page_has_the_tls_markers_once_beside_the_plaintext_ones():
    from bench.common import REPO

    text = (REPO / "docs" / "benchmarks.md").read_text()
    out = replace_marked(replace_marked(text, "PLAIN"), "TLS TABLE", TLS_MARKERS)
    assert out.index("PLAIN") < out.index("TLS TABLE") < out.index("## Latest results")


def test_a_plaintext_and_tls_bench_alternates_every_run_of_both_modes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """bench.run.main with brokers, load and runs replaced: which runs happen in which order, what --docs gets."""
    import bench.run as bench_run

    docs = page(tmp_path)
    (tmp_path / "bench").mkdir()
    started: list[dict] = []
    monkeypatch.setattr(bench_run, "REPO", tmp_path)
    monkeypatch.setattr(bench_run, "WORK", tmp_path / "work")
    monkeypatch.setattr(bench_run, "make_stores", fake_stores)
    monkeypatch.setattr(bench_run.devcluster, "start_cluster",
                        lambda *a, **k: started.append(k["extra_properties"]) or types.SimpleNamespace(pid=1))
    monkeypatch.setattr(bench_run.devcluster, "stop_cluster", lambda *a, **k: None)
    monkeypatch.setattr(bench_run, "prime_mm2py", lambda: None)
    monkeypatch.setattr(bench_run, "load", lambda *a: 0)
    order: list[tuple[str, str, int]] = []

    def run_one(tool, w, pair, data, brokers, net, transforms="none"):
        order.append((tool, net.mode, pair))
        return result(tool, net.mode, 100.0 if net.mode == "plaintext" else 90.0)

    monkeypatch.setattr(bench_run, "run_one", run_one)
    args = ["--pairs", "2", "--warmup-runs", "1", "--workloads", "b", "--tools", "mm2,mm2py", "--security",
            "plaintext,tls", "--broker-dir", str(tmp_path / "brokers"), "--publish", "--docs", str(docs)]
    assert bench_run.main(args) == 0
    assert [props["listeners"].count("SSL://") for props in started] == [1, 1]
    assert started[0]["file.delete.delay.ms"] == 1000  # the bench's own broker settings stay
    sequence = [("mm2", "plaintext"), ("mm2py", "plaintext"), ("mm2", "tls"), ("mm2py", "tls")]
    assert order == ([(t, m, 0) for t, m in reversed(sequence)] + [(t, m, 1) for t, m in sequence]
                     + [(t, m, 2) for t, m in reversed(sequence)])
    text = (docs / "benchmarks.md").read_text()
    assert "mm2py MB/s 0.90x (100.0 -> 90.0)" in text and "--docs" in text
