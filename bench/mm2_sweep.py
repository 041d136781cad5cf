"""Apache MirrorMaker 2's configuration for the bench: a small sweep, run once per machine, recorded.

An MM2 operator tunes tasks.max, the producer's batching and requests in flight, the consumer's
fetch sizes and the heap. ``VARIANTS`` (``bench.mm2_variants``) are the settings tried;
``python -m bench.mm2_sweep`` runs each once on a catch-up workload (b, throughput) and on the
steady workload (c, latency), writes ``bench/mm2-sweep.json`` and ``bench/mm2-sweep.md``
(committed), and ``bench.run`` then gives MM2 the best variant for each kind of workload
(``best_for``): the highest records/s for a backlog, the lowest p99 latency for the steady rate.
Every variant's lines come after the bench's own MM2 lines, so they override them
(``java.util.Properties``: the last value wins).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

from bench import run
from bench.mm2_variants import REPO, RESULTS, VARIANTS

REPORT = REPO / "bench" / "mm2-sweep.md"


def choose(results: list[dict]) -> dict[str, str]:
    """Best variants: the highest median records/s on catch-ups, the lowest median p99 on the steady rate."""
    rates: dict[str, list[float]] = {}
    p99s: dict[str, list[float]] = {}
    for r in results:
        if not r["tool"].startswith("mm2@"):
            continue  # the floor
        name = r["tool"].partition("@")[2]
        if r["latency_ms"]:
            p99s.setdefault(name, []).append(r["latency_ms"]["p99"])
        else:
            rates.setdefault(name, []).append(r["records_per_s"])
    return {"catch-up": max(rates, key=lambda n: statistics.median(rates[n])) if rates else "base",
            "steady": min(p99s, key=lambda n: statistics.median(p99s[n])) if p99s else "base"}


def report(results: list[dict], best: dict[str, str], command: str) -> str:
    lines = ["# Apache MirrorMaker 2: the bench's configuration sweep", "",
             f"Written by `{command}`; `bench.run` gives MM2 the best variant per kind of workload "
             f"(catch-up: **{best['catch-up']}**, steady: **{best['steady']}**).", "",
             "| variant | settings | workload | records/s | MB/s | CPU s/GB | peak RSS MB | latency p50/p99 ms | "
             "verified |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        name = r["tool"].partition("@")[2]
        settings = f"{VARIANTS[name].doc} (heap {VARIANTS[name].heap})" if name else "no replicator (bench/floor.py)"
        lat = (f"{r['latency_ms']['p50']:.0f}/{r['latency_ms']['p99']:.0f}" if r["latency_ms"] else "-")
        ok = "ok" if not r["differences"] else f"{r['differences']} diff"
        lines.append(f"| {name or r['tool']} | {settings} | {r['workload']} | "
                     f"{r['records_per_s']:,} | {r['mb_per_s']} | {r['cpu_s_per_gb']} | {r['peak_rss_mb']} | {lat} | "
                     f"{ok} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mm2_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("scale", nargs="?", default="0.5", help="fraction of the bench's record counts")
    parser.add_argument("--warmup-runs", type=int, default=0,
                        help="unmeasured runs of each variant first (0: the first variant, base, meets cold brokers)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    # the floor (no replicator) first, then one run of each variant
    tools = ",".join(["floor", *(f"mm2@{name}" for name in VARIANTS)])
    command = f"python -m bench.mm2_sweep {args.scale} --warmup-runs {args.warmup_runs}"
    run.main(["--scale", args.scale, "--pairs", "1", "--warmup-runs", str(args.warmup_runs), "--workloads", "b,c",
              "--tools", tools])
    results = json.loads((REPO / "bench" / "results.json").read_text())
    best = choose(results)
    RESULTS.write_text(json.dumps({"command": command, "machine": f"{os.cpu_count()} cores", "best": best,
                                   "runs": results}, indent=1) + "\n")
    REPORT.write_text(report(results, best, command))
    print(REPORT.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
