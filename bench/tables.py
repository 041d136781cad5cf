"""The tables of a bench run (bench.run): per tool and workload, the mm2py/MM2 ratios, the cost of
TLS and the cost of a transform chain.

Invariant: every figure is a median over the runs of one tool, workload and variant (security mode, chain); a
throughput ratio comes only from copy windows of at least ``MIN_RATIO_WINDOW_S`` (shorter windows
are one or two micro-batches, not a rate), and the cost of TLS or of a chain only from runs of
both variants in one invocation (the same brokers, data and machine state).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from bench.results import RunResult, verdict

# ratios of copy-window throughput only from windows at least this long (shorter: start to end)
MIN_RATIO_WINDOW_S = 10.0


def summary_tables(results: list[RunResult]) -> list[str]:
    """The legend and tables of results.md (the part ``--publish`` puts in docs/benchmarks.md)."""
    lines = ["Medians over alternating pairs. Throughput counts from the first mirrored record to the last; "
             "start-up is listed apart, and 'start to end' is the wall-clock time from launching the tool to "
             "the last record on the target (a backlog of one or two micro-batches makes the MB/s window short). "
             "CPU is the replicator's whole process tree (JVM, Python workers), "
             "start-up included. Latency (steady workload): producer send to arrival on the target, for "
             "records sent after the first 20 s at the steady rate (the same warm-up for both tools). "
             "Brokers: CPU seconds per GB of the source + target broker over the same run (they share the "
             "machine's cores with the replicator). Tool copier: mm2py's copy path alone, without Spark "
             "(bench/copier.py). Verified: after each run, before its remote topics are deleted, every "
             "partition of each source topic is compared with its remote topic (record count and SHA-256 over "
             "key, value, headers and timestamp, read_committed; bench/landed.py), summed over the pairs: ok is "
             "an exact copy; 'N dup / M diff' counts N duplicate records (at-least-once delivery repeating "
             "records in order: reported, not a failure) and M partitions with records missing, changed, "
             "reordered or foreign (the bench fails).", "",
             "| workload | tool | records/s | MB/s | CPU s/GB | brokers CPU s/GB | peak RSS MB | start-up s | "
             "start to end s | latency p50/p99/p99.9/max ms (p99 of each run) | verified |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    by: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        by.setdefault((r.workload, r.tool), []).append(r)
    for (workload, tool), rs in sorted(by.items()):
        def med(attr: str, rs: list[RunResult] = rs) -> float:
            return statistics.median(getattr(r, attr) for r in rs)
        lat = "-"
        if rs[0].latency_ms:
            lat = "/".join(f"{statistics.median(r.latency_ms.get(k, -1) for r in rs):.0f}"
                           for k in ("p50", "p99", "p99.9", "max"))
            p99s = ", ".join(f"{r.latency_ms['p99']:.0f}" for r in rs)
            lat += f" ({p99s})"
        brokers = "-"
        if rs[0].broker_cpu_s_per_gb:
            brokers = " + ".join(f"{statistics.median(r.broker_cpu_s_per_gb[k] for r in rs):.1f}"
                                 for k in ("source", "target"))
        lines.append(f"| {workload} | {tool} | {med('records_per_s'):,.0f} | {med('mb_per_s'):.1f} | "
                     f"{med('cpu_s_per_gb'):.1f} | {brokers} | {med('peak_rss_mb'):.0f} | {med('startup_s'):.1f} | "
                     f"{statistics.median(r.startup_s + r.mirror_s for r in rs):.1f} | {lat} | "
                     f"{verdict(rs)} |")
    eos = sorted({w for w, t in by if t == "mm2py-eos" and (w, "mm2py") in by})
    if eos:
        lines += ["", "| workload | throughput exactly-once/at-least-once | p99 latency exactly-once/at-least-once |",
                  "|---|---|---|"]
        for workload in eos:
            e, a = by[(workload, "mm2py-eos")], by[(workload, "mm2py")]
            t = statistics.median(r.records_per_s for r in e) / statistics.median(r.records_per_s for r in a)
            p99 = "-"
            if e[0].latency_ms and a[0].latency_ms:
                ratio = (statistics.median(r.latency_ms["p99"] for r in e)
                         / statistics.median(r.latency_ms["p99"] for r in a))
                p99 = f"{ratio:.2f}x"
            lines.append(f"| {workload} | {t:.2f}x | {p99} |")
    provenance = sorted({w for w, t in by if t == "mm2py-provenance" and (w, "mm2py") in by})
    if provenance:  # issue 22: the registry's cost on the copy path, within noise of mm2py's
        lines += ["", "| workload | throughput with provenance/without | CPU per GB with provenance/without |",
                  "|---|---|---|"]
        for workload in provenance:
            v, a = by[(workload, "mm2py-provenance")], by[(workload, "mm2py")]
            t = statistics.median(r.records_per_s for r in v) / statistics.median(r.records_per_s for r in a)
            c = statistics.median(r.cpu_s_per_gb for r in v) / max(statistics.median(r.cpu_s_per_gb for r in a), 1e-9)
            lines.append(f"| {workload} | {t:.2f}x | {c:.2f}x |")
    lines += ["", f"Ratios mm2py/MM2. Throughput from the copy windows only where both last at least "
              f"{MIN_RATIO_WINDOW_S} s; start to end: MM2's time over mm2py's, launch to last record; p99: "
              "mm2py's over MM2's (mm2py-lowlat: the README's low-latency setting). Floor: the same "
              "workload with no replicator (bench/floor.py: Kafka's consumer perf tool reads the backlog on A; steady: "
              "the probe reads the source topic itself), its records/s over MM2's, or its p99: no tool can "
              "beat it on this machine, so where it misses a target both are reported.", "",
              "| workload | throughput | start to end | CPU per GB | p99 latency | floor |",
              "|---|---|---|---|---|---|"]
    for workload in sorted({w for w, _ in by}):
        py, mm = by.get((workload, "mm2py")), by.get((workload, "mm2"))
        if py and mm:
            lines.append(ratio_row(workload, py, mm, by.get((workload, "mm2py-lowlat")),
                                   by.get((workload, "floor"))))
    avro = sorted({w for w, t in by if t == "mm2py-shallow" and (w, "mm2py") in by})
    if avro:  # the issue-26 targets: translate >= MM2's plain copy, >= half the shallow path
        lines += ["", "| workload | throughput translate/shallow | translate/MM2 (plain copy, unreadable on B) |",
                  "|---|---|---|"]
        for workload in avro:
            rate = {tool: statistics.median(r.records_per_s for r in by[(workload, tool)])
                    for tool in ("mm2py", "mm2py-shallow", "mm2") if (workload, tool) in by}
            vs_mm2 = f"{rate['mm2py'] / rate['mm2']:.2f}x" if "mm2" in rate else "-"
            lines.append(f"| {workload} | {rate['mm2py'] / rate['mm2py-shallow']:.2f}x | {vs_mm2} |")
    return lines


def ratio_row(workload: str, py: list[RunResult], mm: list[RunResult], low: list[RunResult] | None,
              floor: list[RunResult] | None = None) -> str:
    """One row of the mm2py/MM2 ratios: no throughput ratio from a copy window under ``MIN_RATIO_WINDOW_S``.

    ``floor``: the workload's runs without a replicator; its records/s over MM2's (catch-up) or its p99.
    """
    def med(rs: list[RunResult], value: Callable[[RunResult], float]) -> float:
        return statistics.median(value(r) for r in rs)

    if py[0].latency_ms:
        throughput = "- (the producer sets the rate)"
    elif min(med(py, lambda r: r.mirror_s), med(mm, lambda r: r.mirror_s)) >= MIN_RATIO_WINDOW_S:
        throughput = f"{med(py, lambda r: r.records_per_s) / med(mm, lambda r: r.records_per_s):.2f}x"
    else:
        throughput = f"- (copy window {med(py, lambda r: r.mirror_s):.1f} s)"
    ends = med(mm, lambda r: r.startup_s + r.mirror_s) / med(py, lambda r: r.startup_s + r.mirror_s)
    cpu = med(py, lambda r: r.cpu_s_per_gb) / max(med(mm, lambda r: r.cpu_s_per_gb), 1e-9)
    p99 = "-"
    if py[0].latency_ms and mm[0].latency_ms:
        p99 = f"{med(py, lambda r: r.latency_ms['p99']) / med(mm, lambda r: r.latency_ms['p99']):.2f}x"
        if low:
            p99 += f" (lowlat {med(low, lambda r: r.latency_ms['p99']) / med(mm, lambda r: r.latency_ms['p99']):.2f}x)"
    start_to_end = "-" if py[0].latency_ms else f"{ends:.2f}x faster"
    bound = "-"
    if floor and floor[0].latency_ms:
        bound = f"p99 {med(floor, lambda r: r.latency_ms['p99']):.0f} ms"
    elif floor:
        bound = f"{med(floor, lambda r: r.records_per_s) / med(mm, lambda r: r.records_per_s):.2f}x MM2"
    return f"| {workload} | {throughput} | {start_to_end} | {cpu:.2f}x | {p99} | {bound} |"


def _median(runs: list[RunResult], value: Callable[[RunResult], float]) -> float:
    return statistics.median(value(r) for r in runs)


def tls_cost(results: list[RunResult]) -> list[str]:
    """One line per workload run in both modes: each tool's TLS MB/s over its plaintext MB/s
    (steady: its p99 over plaintext's) and CPU per GB likewise, medians of this invocation's runs
    without a transform chain (bench.variants)."""
    raw = [r for r in results if r.transforms == "none"]
    return variant_cost(raw, lambda r: r.security, ("plaintext", "tls"),
                        "Cost of TLS: not stated, plaintext and TLS were not both measured in this invocation.",
                        "Cost of TLS on {workload}, both modes in this invocation on the same brokers and data "
                        "(TLS over plaintext, medians)")


def chain_cost(results: list[RunResult]) -> list[str]:
    """One line per workload run with and without the Filter chain (plaintext runs): each tool's
    filter MB/s over its none MB/s and CPU per GB likewise, medians of this invocation's runs."""
    plain = [r for r in results if r.security == "plaintext"]
    return variant_cost(plain, lambda r: r.transforms, ("none", "filter"),
                        "Cost of the chain: not stated, runs with and without it were not both measured in this "
                        "invocation.",
                        "Cost of the chain on {workload}, with and without it in this invocation on the same brokers "
                        "and data (filter over none, medians)")


def variant_cost(results: list[RunResult], variant: Callable[[RunResult], str], pair: tuple[str, str],
                 missing: str, title: str) -> list[str]:
    """One line per workload whose tools ran in both variants ``pair`` (base, other) by ``variant``:
    each tool's other MB/s over its base MB/s (steady: p99) and CPU per GB likewise; ``missing``
    alone when no tool ran both. A tool whose copy window is under ``MIN_RATIO_WINDOW_S`` in
    either variant is marked so: its MB/s is one or two micro-batches, not a rate."""
    by: dict[tuple[str, str], dict[str, list[RunResult]]] = {}
    for r in results:
        by.setdefault((r.workload, r.tool), {}).setdefault(variant(r), []).append(r)
    both = {key: runs for key, runs in by.items() if set(pair) <= runs.keys()}
    if not both:
        return [missing]
    lines = []
    for workload in sorted({w for w, _ in both}):
        parts = [_cost_part(tool, runs[pair[0]], runs[pair[1]]) for (w, tool), runs in sorted(both.items())
                 if w == workload]
        lines.append(f"{title.format(workload=workload)}: {'; '.join(parts)}.")
    return lines


def _cost_part(tool: str, plain: list[RunResult], tls: list[RunResult]) -> str:
    """``tool``'s figures in the other variant (``tls``) over the base one's (``plain``): MB/s
    (steady: p99) and CPU per GB."""
    cpu = _median(tls, lambda r: r.cpu_s_per_gb) / max(_median(plain, lambda r: r.cpu_s_per_gb), 1e-9)
    if plain[0].latency_ms:
        before, after = (_median(runs, lambda r: r.latency_ms["p99"]) for runs in (plain, tls))
        return f"{tool} p99 {after / max(before, 1e-9):.2f}x ({before:.0f} -> {after:.0f} ms), CPU s/GB {cpu:.2f}x"
    before, after = (_median(runs, lambda r: r.mb_per_s) for runs in (plain, tls))
    window = min(_median(plain, lambda r: r.mirror_s), _median(tls, lambda r: r.mirror_s))
    short = f", copy window {window:.1f} s: not a rate" if window < MIN_RATIO_WINDOW_S else ""
    return f"{tool} MB/s {after / max(before, 1e-9):.2f}x ({before:.1f} -> {after:.1f}{short}), CPU s/GB {cpu:.2f}x"
