"""``mm2py dev-registry up|down|list``: local Apicurio Registry instances beside dev clusters."""

from __future__ import annotations

import argparse

from mm2py.dev import registry as devregistry
from mm2py.errors import DevClusterError


def _up(args: argparse.Namespace) -> int:
    started = devregistry.start_registry(args.name, args.port, kafka_bootstrap=args.kafka,
                                         journal_topic=args.topic, read_only=args.read_only)
    print(started.url, flush=True)  # stdout carries only the URL: $(mm2py dev-registry up ...)
    return 0


def _down(args: argparse.Namespace) -> int:
    if args.all:
        names = [r.name for r in devregistry.list_registries()]
    elif args.name:
        names = [args.name]
    else:
        raise DevClusterError("name a registry to stop, or pass --all")
    for name in names:
        print(f"{name}: {'stopped' if devregistry.stop_registry(name) else 'was not running'}")
    return 0


def _list(_args: argparse.Namespace) -> int:
    registries = devregistry.list_registries()
    if not registries:
        print("no dev registries")
        return 0
    print(f"{'NAME':<16} {'URL':<46} {'PID':>8}  STATE")
    for r in registries:
        print(f"{r.name:<16} {r.url:<46} {r.pid or '-':>8}  {'running' if r.running else 'stopped'}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "dev-registry", help="local Apicurio schema registries on 127.0.0.1",
        description="Local Apicurio Registry instances (Confluent-compatible API at /apis/ccompat/v7) on "
                    "127.0.0.1, kept under var/dev-registries/NAME; fetched from Maven Central on first use.")
    sub = parser.add_subparsers(dest="action", required=True)
    up = sub.add_parser("up", help="start a registry; prints its URL once it answers")
    up.add_argument("name")
    up.add_argument("--port", type=int, required=True, help="HTTP port; the management interface takes port+1")
    up.add_argument("--kafka", metavar="BOOTSTRAP", help="keep schemas in a Kafka topic (kafkasql) instead of memory")
    up.add_argument("--topic", default="kafkasql-journal", help="the kafkasql journal topic")
    up.add_argument("--read-only", action="store_true", help="refuse writes (serving a mirrored journal)")
    up.set_defaults(func=_up)
    down = sub.add_parser("down", help="stop a registry")
    down.add_argument("name", nargs="?")
    down.add_argument("--all", action="store_true")
    down.set_defaults(func=_down)
    sub.add_parser("list", help="registries and their state").set_defaults(func=_list)
