"""``mm2py offsets translate``: a group's committed offsets on one cluster, translated to the other."""

from __future__ import annotations

import argparse
import json

from mm2py.config import load


def _translate(args: argparse.Namespace) -> int:
    from mm2py.ops.failover import plan_failover, render

    plan = plan_failover(load(args.config), args.group, args.source, args.target)
    if args.json:
        print(json.dumps([p.__dict__ for p in plan.partitions], indent=2))
    else:
        print(render(plan))
    return 0


def add_group_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="the MM2 properties file of the flows")
    parser.add_argument("--group", required=True)
    parser.add_argument("--from", dest="source", required=True, metavar="ALIAS")
    parser.add_argument("--to", dest="target", required=True, metavar="ALIAS")



def add_parser(subparsers: argparse._SubParsersAction) -> None:
    offsets = subparsers.add_parser("offsets", help="consumer group offset translation")
    sub = offsets.add_subparsers(dest="action", required=True)
    tr = sub.add_parser("translate", help="per partition: committed offset on --from, translated offset on --to")
    add_group_arguments(tr)
    tr.add_argument("--json", action="store_true")
    tr.set_defaults(func=_translate)
