"""``mm2py status mm2.properties [--json] [--watch]``: how far each flow is behind, per topic."""

from __future__ import annotations

import argparse
import json
import sys
import time

from mm2py.config import load
from mm2py.ops.status import status
from mm2py.ops.status_view import rates_between, render


def _metrics_host(bind_address: str) -> str:
    """Where this machine reaches the replicator's metrics (it listens on every interface by default)."""
    return "127.0.0.1" if bind_address in ("", "0.0.0.0", "::") else bind_address


def _run(args: argparse.Namespace) -> int:
    config = load(args.config)
    flows = config.flows_into(tuple(args.clusters) if args.clusters else None)
    if not args.watch:
        result = status(flows, config.metrics_port, _metrics_host(config.metrics_bind_address))
        print(json.dumps([f.to_json() for f in result], indent=2) if args.json else render(result))
        return 1 if any(f.error for f in result) else 0
    previous, at = None, time.monotonic()
    while True:
        result = status(flows, config.metrics_port, _metrics_host(config.metrics_bind_address))
        now = time.monotonic()
        rates: dict[tuple[str, str], float] = rates_between(previous, result, now - at) if previous is not None else {}
        previous, at = result, now
        if args.json:
            print(json.dumps({"flows": [f.to_json() for f in result],
                              "rates": {f"{k[0]} {k[1]}": v for k, v in rates.items()}}), flush=True)
        else:
            clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else ""
            print(f"{clear}mm2py status   {time.strftime('%H:%M:%S')}   every {args.interval:g}s (Ctrl-C stops)\n"
                  + render(result, rates) + "\n", flush=True)
        time.sleep(args.interval)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("status", help="per flow and topic: source end, mirrored offset, lag, heartbeats")
    p.add_argument("config", help="MM2 properties file (or mm2.yaml)")
    p.add_argument("--clusters", nargs="+", metavar="ALIAS", help="only flows into these clusters")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--watch", action="store_true", help="refresh until Ctrl-C, with rates and time left")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes with --watch")
    p.set_defaults(func=_run)
