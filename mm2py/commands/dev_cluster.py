"""``mm2py dev-cluster up|down|list``: local Kafka clusters for trying mm2py out."""

from __future__ import annotations

import argparse
import sys

from mm2py.dev import cluster as devcluster
from mm2py.errors import DevClusterError


def _up(args: argparse.Namespace) -> int:
    cluster = devcluster.start_cluster(args.name, args.port, listeners_security=args.security,
                                       controller_port=args.controller_port, wait_timeout=args.timeout)
    if cluster.protocol != "PLAINTEXT":
        # stdout carries only the address, so scripts can use $(mm2py dev-cluster up ...)
        print(f"client settings: {cluster.directory / 'client.properties'}", file=sys.stderr)
    print(cluster.bootstrap, flush=True)
    return 0


def _down(args: argparse.Namespace) -> int:
    if args.all:
        names = [c.name for c in devcluster.list_clusters()]
    elif args.name:
        names = [args.name]
    else:
        raise DevClusterError("name a cluster to stop, or pass --all")
    for name in names:
        stopped = devcluster.stop_cluster(name, keep_data=args.keep_data)
        print(f"{name}: {'stopped' if stopped else 'was not running'}")
    return 0


def _list(_args: argparse.Namespace) -> int:
    clusters = devcluster.list_clusters()
    if not clusters:
        print("no dev clusters")
        return 0
    print(f"{'NAME':<16} {'BOOTSTRAP':<22} {'PID':>8}  STATE")
    for c in clusters:
        running = c.running
        pid = str(c.pid) if running else "-"
        print(f"{c.name:<16} {c.bootstrap:<22} {pid:>8}  {'running' if running else 'stopped'}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dev-cluster", help="local single-node Kafka clusters (KRaft) on 127.0.0.1",
        description="Local single-node Kafka clusters (KRaft) on 127.0.0.1, kept under var/dev-clusters/NAME "
                    "(MM2PY_VAR_DIR moves var/).")
    sub = parser.add_subparsers(dest="action", required=True)

    up = sub.add_parser("up", help="start a cluster; prints its bootstrap address once it accepts requests")
    up.add_argument("name")
    up.add_argument("--port", type=int, required=True, help="client port")
    up.add_argument("--controller-port", type=int, help="KRaft controller port (default: port+1)")
    up.add_argument("--security", default="PLAINTEXT", choices=devcluster.SECURITY_PROTOCOLS,
                    help="client listener protocol; SASL user admin/admin-secret, a self-signed TLS certificate")
    up.add_argument("--timeout", type=float, default=90, help="seconds to wait for the broker (default 90)")
    up.set_defaults(func=_up)

    down = sub.add_parser("down", help="stop a cluster and delete its data")
    down.add_argument("name", nargs="?")
    down.add_argument("--all", action="store_true", help="stop every dev cluster")
    down.add_argument("--keep-data", action="store_true", help="keep the logs for the next `up`")
    down.set_defaults(func=_down)

    sub.add_parser("list", help="show dev clusters: name, bootstrap, pid, running/stopped").set_defaults(func=_list)
