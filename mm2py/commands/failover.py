"""``mm2py failover`` and ``mm2py failback``: move a consumer group to the other cluster."""

from __future__ import annotations

import argparse

from mm2py.commands.offsets import add_group_arguments, time_ms
from mm2py.config import load
from mm2py.config.model import MirrorMakerConfig
from mm2py.errors import ConfigError, ConfigProblem


def _failover(args: argparse.Namespace, back: bool = False) -> int:
    from mm2py.ops.failover import apply_plan, plan_failback, plan_failover, render

    config = load(args.config)
    if args.spark_checkpoint:
        return _spark(args, config, back)
    if not args.group:
        raise ConfigError(ConfigProblem("--group", "give --group or --spark-checkpoint"))
    if back:
        plan = plan_failback(config, args.group, args.source, args.target)
    else:
        plan = plan_failover(config, args.group, args.source, args.target,
                             time_ms(args.to_time) if args.to_time else None)
    print(render(plan))
    if not args.execute:
        print("\n(dry run: add --execute to commit these offsets to the group on "
              f"{args.target})")
        return 0
    apply_plan(config, plan)
    print(f"\ncommitted {len(plan.offsets)} offsets for group {args.group} on {args.target}")
    return 0



def _spark(args: argparse.Namespace, config: MirrorMakerConfig, back: bool) -> int:
    from pathlib import Path

    from mm2py.ops.failover import render
    from mm2py.ops.spark_failover import apply_spark, plan_spark

    to_time = time_ms(args.to_time) if getattr(args, "to_time", None) else None
    sp = plan_spark(config, Path(args.spark_checkpoint), args.source, args.target, to_time, back)
    print(f"using {sp.batch.note}")
    print(render(sp.plan))
    if sp.rerun is not None:
        print(f"\nbatch {sp.batch.latest_id}, which Spark re-runs, ends at:")
        print(render(sp.rerun))
    if not args.execute:
        print(f"\n(dry run: add --execute to write the resume batch into {args.spark_checkpoint})")
        return 0
    new = apply_spark(sp, force=args.force)
    if sp.rerun is not None:
        print(f"\nrewrote offsets/{sp.batch.batch_id} and offsets/{new} (originals kept as .N.before-failover): "
              f"the query re-runs batch {new} on {args.target}, as Spark would have on {args.source}")
    else:
        print(f"\nwrote offsets/{new} and commits/{new}: the query resumes on {args.target} after batch {new}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    fo = subparsers.add_parser("failover", help="move a consumer group to the other cluster (dry run by default)")
    add_group_arguments(fo, group_required=False)
    _spark_arguments(fo)
    fo.add_argument("--execute", action="store_true", help="commit the plan (refused while the group is active)")
    fo.add_argument("--to-time", help="for partitions without translation: first offsets at/after this time")
    fo.set_defaults(func=_failover)

    fb = subparsers.add_parser("failback", help="move a group back after an active/passive failover")
    add_group_arguments(fb, group_required=False)
    _spark_arguments(fb)
    fb.add_argument("--execute", action="store_true")
    fb.set_defaults(func=lambda a: _failover(a, back=True))


def _spark_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--spark-checkpoint", metavar="DIR",
                        help="move a Structured Streaming query's Kafka offsets (its checkpoint) instead of a group")
    parser.add_argument("--force", action="store_true", help="with --spark-checkpoint: write even if it is fresh")
