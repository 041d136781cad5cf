"""Command lines: ``connect-mirror-maker mm2.properties`` and ``mm2py <command>``.

Each ``mm2py`` command lives in ``mm2py.commands.<name>`` with ``add_parser(subparsers)``.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence

from mm2py import __version__
from mm2py.errors import ConfigError, Mm2pyError
from mm2py.redact import install as install_redaction

COMMANDS = ("run", "dev_cluster", "dev_registry", "offsets", "failover", "status", "verify")


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="MM2 properties file (or mm2.yaml)")
    parser.add_argument("--clusters", nargs="+", metavar="ALIAS",
                        help="only run flows whose target is one of these clusters")
    parser.add_argument("--spark-master", help="Spark master URL (default: spark.master in the file, else local[*])")
    parser.add_argument("--checkpoint-dir",
                        help="keep Spark checkpoints here (default: a temporary folder; positions live on the target)")
    parser.add_argument("--once", action="store_true",
                        help="mirror what the sources hold now, then stop (a backfill)")
    parser.add_argument("--log-level", default="INFO")


def run_mirror_maker(args: argparse.Namespace) -> int:
    from mm2py.config import load
    from mm2py.engine.run import run
    from mm2py.kafka.oauth import check_tokens
    from mm2py.logs import configure

    configure(args.log_level)
    config = load(args.config)
    check_tokens(config)
    return run(
        config,
        targets=tuple(args.clusters) if args.clusters else None,
        master=args.spark_master,
        checkpoint_dir=args.checkpoint_dir,
        until_caught_up=args.once,
        quiet=args.log_level.lower() != "debug",
    )


def _guarded(func, args: argparse.Namespace) -> int:
    try:
        return func(args)
    except ConfigError as e:
        print(f"mm2py: {e}", file=sys.stderr)
        return 2
    except Mm2pyError as e:
        print(f"mm2py: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _stop_before_start(signum: int, _frame: object) -> None:
    """SIGINT/SIGTERM before the run installs its own handler: nothing started, so a clean exit."""
    raise SystemExit(0)


def connect_mirror_maker_main(argv: Sequence[str] | None = None) -> int:
    install_redaction()  # stdout and stderr hide the file's secrets (mm2py.redact)
    for signum in (signal.SIGINT, signal.SIGTERM):  # the run replaces these (mm2py.engine.shutdown)
        signal.signal(signum, _stop_before_start)
    parser = argparse.ArgumentParser(
        prog="connect-mirror-maker",
        description="Run the replication flows of an Apache Kafka MirrorMaker 2 properties file on Spark.",
    )
    _add_run_arguments(parser)
    return _guarded(run_mirror_maker, parser.parse_args(argv))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mm2py", description="MirrorMaker 2-compatible Kafka replication on Spark")
    parser.add_argument("--version", action="version", version=f"mm2py {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run", help="run the flows of an MM2 file (same as connect-mirror-maker)")
    _add_run_arguments(run_parser)
    run_parser.set_defaults(func=run_mirror_maker)
    for name in COMMANDS[1:]:
        importlib.import_module(f"mm2py.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    install_redaction()
    args = build_parser().parse_args(argv)
    return _guarded(args.func, args)


if __name__ == "__main__":
    sys.exit(main())
