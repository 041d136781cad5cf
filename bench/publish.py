"""What a bench run writes: bench/results.md while it runs, and with ``--publish`` the docs.

docs/benchmarks.md holds one block per variant (bench.variants) between its markers: the
plaintext tables between ``MARKERS`` (every run in docs/bench-results.json), the TLS tables
between ``TLS_MARKERS`` (docs/bench-results-tls.json), the Filter chain's between
``FILTER_MARKERS`` (docs/bench-results-filter.json, with the floor's plaintext runs). A run
publishes the blocks of the variants it ran and leaves the others as they were; the TLS block
states the cost of TLS only when plaintext ran in the same invocation, the filter block the
cost of the chain only when the raw path did.

Invariant: nothing is published when any run's target differed from its source; the page is
rewritten only once every block found its markers, and then with the JSON files.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import psutil

from bench.results import RunResult
from bench.security import TLS_SETTING
from bench.tables import chain_cost, summary_tables, tls_cost
from bench.variants import FILTER_SETTING
from mm2py.dev import cluster as devcluster

MARKERS = ("<!-- bench:results:begin -->", "<!-- bench:results:end -->")
TLS_MARKERS = ("<!-- bench:tls:begin -->", "<!-- bench:tls:end -->")
FILTER_MARKERS = ("<!-- bench:filter:begin -->", "<!-- bench:filter:end -->")
# per block: the page's markers, and the JSON file of its runs (in docs/)
BLOCKS = {"plaintext": (MARKERS, "bench-results.json"), "tls": (TLS_MARKERS, "bench-results-tls.json"),
          "filter": (FILTER_MARKERS, "bench-results-filter.json")}


def block_runs(results: list[RunResult], block: str) -> list[RunResult]:
    """The runs of ``block`` (a key of BLOCKS): the raw path's runs of a security mode, or the
    filter chain's runs with the floor's plaintext ones (the floor runs no chain)."""
    if block == "filter":
        return [r for r in results if r.security == "plaintext" and (r.transforms == "filter" or r.tool == "floor")]
    return [r for r in results if r.security == block and r.transforms == "none"]


def has_block(results: list[RunResult], block: str) -> bool:
    """Whether ``results`` hold a run of ``block`` itself (the floor alone makes no filter block)."""
    return any(r.tool != "floor" or block != "filter" for r in block_runs(results, block))


def mode_tables(results: list[RunResult], block: str) -> list[str]:
    """The tables of ``block``'s runs among ``results``; the TLS and filter ones with what they ran
    and their cost over the plaintext raw path."""
    runs = block_runs(results, block)
    if block == "plaintext":
        return summary_tables(runs)
    if block == "filter":
        return [f"{FILTER_SETTING}.", "", *summary_tables(runs), "", *chain_cost(results)]
    return [f"{TLS_SETTING}.", "", *summary_tables(runs), "", *tls_cost(results)]


def summarize(results: list[RunResult], setting: str) -> str:
    """bench/results.md: the plaintext tables (also when nothing ran yet), then the TLS ones, then
    the filter chain's."""
    lines = ["# mm2py vs Apache MirrorMaker 2 (same machine, same run)", "", f"Setting: {setting}.", ""]
    tls, chain = has_block(results, "tls"), has_block(results, "filter")
    if has_block(results, "plaintext") or not (tls or chain):
        lines += mode_tables(results, "plaintext")
    if tls:
        lines += ["", "## TLS on both clusters", "", *mode_tables(results, "tls")]
    if chain:
        lines += ["", "## Workload b with a Filter chain", "", *mode_tables(results, "filter")]
    return "\n".join(lines) + "\n"


def replace_marked(text: str, block: str, markers: tuple[str, str] = MARKERS) -> str:
    """``text`` with what stands between the two markers (on their own lines) replaced by ``block``."""
    begin, end = markers
    if text.count(begin) != 1 or text.count(end) != 1:
        raise ValueError(f"expected {begin} and {end} once each")
    head, rest = text.split(begin)
    if end in head:
        raise ValueError(f"{end} comes before {begin}")
    _, tail = rest.split(end)
    return f"{head}{begin}\n{block.strip()}\n{end}{tail}"


def publish(results: list[RunResult], setting: str, args: list[str], docs: Path, repo: Path) -> list[Path]:
    """Each block's runs into ``docs``: its JSON file (every run, the command, commit and machine)
    and its block of ``docs``/benchmarks.md. Returns the files written, the page last."""
    differing = [f"{r.tool} {r.workload} ({r.security}, run {r.pair})" for r in results if r.differences]
    if differing:
        raise ValueError(f"not published: the target differed from the source in {', '.join(differing)}")
    command_line = shlex.join(["python", "-m", "bench.run", *args])
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                                capture_output=True, text=True).stdout.strip())
    finished = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    page_file = docs / "benchmarks.md"
    page = page_file.read_text()
    files: dict[Path, str] = {}
    for mode in (b for b in BLOCKS if has_block(results, b)):
        markers, name = BLOCKS[mode]
        doc = {"command": command_line, "commit": commit, "uncommitted_changes": dirty, "finished": finished,
               "security": "plaintext" if mode == "filter" else mode,
               "transforms": "filter" if mode == "filter" else "none",
               "machine": {"cores": os.cpu_count(), "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
                           "kafka": devcluster.KAFKA_VERSION, "setting": setting},
               "results": [asdict(r) for r in block_runs(results, mode)]}
        files[docs / name] = json.dumps(doc, indent=1) + "\n"
        block = "\n".join([f"`{command_line}`, finished {finished}, at {commit[:7]}"
                           f"{' with uncommitted changes' if dirty else ''}; every run in [{name}]({name}).", "",
                           f"Setting: {setting}.", "", *mode_tables(results, mode)])
        page = replace_marked(page, block, markers)
    files[page_file] = page
    for file, text in files.items():
        file.write_text(text)
    return list(files)
