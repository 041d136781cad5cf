"""``mm2py offsets translate``: a group's committed offsets on one cluster, translated to the other."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime

from mm2py.config import load
from mm2py.errors import ConfigError, ConfigProblem, Mm2pyError


def time_ms(text: str) -> int:
    if text.isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        problem = ConfigProblem("--to-time", f"expected epoch milliseconds or ISO time, got {text!r}")
        raise ConfigError(problem) from None


def _translate(args: argparse.Namespace) -> int:
    from mm2py.ops.failover import plan_failover, render

    if (args.group is None) == (args.offsets is None):
        raise Mm2pyError("give exactly one of --group and --offsets")
    if args.offsets is not None:
        return _translate_map(args)
    plan = plan_failover(load(args.config), args.group, args.source, args.target)
    if args.json:
        print(json.dumps([p.__dict__ for p in plan.partitions], indent=2))
    else:
        print(render(plan))
    return 0


def _translate_map(args: argparse.Namespace) -> int:
    from mm2py.ops.failover import plan_offsets, render
    from mm2py.ops.offset_map import plan_to_map, read_offset_map

    if args.offsets == "-":
        committed = read_offset_map(sys.stdin)
    else:
        with open(args.offsets) as f:
            committed = read_offset_map(f)
    plan = plan_offsets(load(args.config), committed, args.source, args.target,
                        time_ms(args.to_time) if args.to_time else None, label=args.offsets)
    print(render(plan), file=sys.stderr)
    print(json.dumps(plan_to_map(plan), indent=2, sort_keys=True))
    return 0


def add_group_arguments(parser: argparse.ArgumentParser, group_required: bool = True) -> None:
    parser.add_argument("config", help="the MM2 properties file of the flows")
    parser.add_argument("--group", required=group_required)
    parser.add_argument("--from", dest="source", required=True, metavar="ALIAS")
    parser.add_argument("--to", dest="target", required=True, metavar="ALIAS")



def add_parser(subparsers: argparse._SubParsersAction) -> None:
    offsets = subparsers.add_parser("offsets", help="consumer group offset translation")
    sub = offsets.add_subparsers(dest="action", required=True)
    tr = sub.add_parser("translate", help="per partition: committed offset on --from, translated offset on --to")
    tr.add_argument("config", help="the MM2 properties file of the flows")
    tr.add_argument("--group", help="a consumer group's committed offsets on --from")
    tr.add_argument("--offsets", metavar="FILE",
                    help="a JSON map {topic: {partition: offset}} on --from ('-': stdin); prints it translated")
    tr.add_argument("--from", dest="source", required=True, metavar="ALIAS")
    tr.add_argument("--to", dest="target", required=True, metavar="ALIAS")
    tr.add_argument("--to-time", help="with --offsets: for partitions without translation, time placement")
    tr.add_argument("--json", action="store_true")
    tr.set_defaults(func=_translate)
