"""``mm2py dev-cluster up|down|list``: local Kafka clusters for trying mm2py out."""

from __future__ import annotations

import argparse

from mm2py import devcluster


def _up(args: argparse.Namespace) -> int:
    cluster = devcluster.start_cluster(args.name, args.port)
    print(cluster.bootstrap, flush=True)
    return 0


def _down(args: argparse.Namespace) -> int:
    names = [c.name for c in devcluster.list_clusters()] if args.all else [args.name]
    for name in names:
        if name is None:
            continue
        stopped = devcluster.stop_cluster(name)
        print(f"{name}: {'stopped' if stopped else 'was not running'}")
    return 0


def _list(_args: argparse.Namespace) -> int:
    clusters = devcluster.list_clusters()
    if not clusters:
        print("no dev clusters")
        return 0
    print(f"{'NAME':<16} {'BOOTSTRAP':<22} {'PID':>8}  STATE")
    for c in clusters:
        print(f"{c.name:<16} {c.bootstrap:<22} {c.pid:>8}  {'running' if c.running else 'stopped'}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("dev-cluster", help="local single-node Kafka clusters (KRaft) on 127.0.0.1")
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start a cluster; prints its bootstrap address once it accepts requests")
    up.add_argument("name")
    up.add_argument("--port", type=int, required=True, help="client port (the controller takes port+1)")
    up.set_defaults(func=_up)
    down = sub.add_parser("down", help="stop a cluster and delete its data")
    down.add_argument("name", nargs="?")
    down.add_argument("--all", action="store_true", help="stop every dev cluster")
    down.set_defaults(func=_down)
    sub.add_parser("list", help="show dev clusters").set_defaults(func=_list)
