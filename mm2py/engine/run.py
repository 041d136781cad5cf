"""The run of an MM2 config: checks before Spark, the session, the engine, and an orderly stop."""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path

import structlog
from pyspark.sql import SparkSession

from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.engine.console import JvmOutput, divert_py4j, log4j2_options
from mm2py.engine.driver import DEFAULT_MASTER, JVM_OPTIONS, Engine, build_session, warm_python_workers
from mm2py.engine.jvmcache import DriverArchive
from mm2py.engine.metrics_server import MetricsServer
from mm2py.engine.prepare import TargetPreparation, prepare_flow_target
from mm2py.engine.queries import first_line
from mm2py.engine.shutdown import Shutdown, signals_to
from mm2py.engine.sparkhome import use_lean_spark_home
from mm2py.engine.warmup import WorkerWarmup
from mm2py.errors import Mm2pyError
from mm2py.flowspec import FlowSpec
from mm2py.kafka.krb5conf import check_flows as check_kerberos
from mm2py.kafka.tls import check_stores
from mm2py.metrics import Metrics
from mm2py.schemas.check import check_schemas
from mm2py.source.copy.stop_flag import StopFlag
from mm2py.topology import check_topology
from mm2py.transforms import check_flows as check_transforms
from mm2py.transforms.tolerance import create_dead_letter_topics

log = structlog.get_logger(__name__)


def run(
    config: MirrorMakerConfig,
    *,
    targets: tuple[str, ...] | None = None,
    master: str | None = None,
    checkpoint_dir: str | None = None,
    until_caught_up: bool = False,
    quiet: bool = True,
) -> int:
    """Run the enabled flows (into ``targets`` when given) until SIGINT/SIGTERM.

    ``quiet``: Spark's own logs go to ``spark.log`` beside the checkpoints and the JVM's
    start-up chatter is dropped (``mm2py.engine.console``); else both reach the terminal.
    """
    flows = config.flows_into(targets)
    if not flows:
        raise Mm2pyError(
            "no enabled flow" + (f" into {', '.join(targets)}" if targets else "")
            + ": set e.g. 'A->B.enabled = true'"
        )
    check_topology(config)  # refuse a looping topology before paying for Spark
    specs = {f.name: FlowSpec.resolve(config, f) for f in flows}  # each flow resolved once for the run
    check_transforms(flows, lambda f: specs[f.name].provenance)  # every link implemented, or refused
    create_dead_letter_topics(flows)  # errors.deadletterqueue.topic.name: on the target before a record fails
    check_kerberos(flows)  # GSSAPI clients: each principal logs in (keytab, KDC) before Spark starts
    check_schemas(flows)  # schemas.mode: registries configured and answering
    # JKS / PKCS12 stores readable with their passwords (mm2py.kafka.tls)
    check_stores(c for f in flows for c in (f.source, f.target, f.offset_syncs) if c is not None)
    master = master or config.spark.get("spark.master") or DEFAULT_MASTER
    # Without a configured directory each run plans from the positions on the target, so a
    # lost or stale checkpoint can never disagree with what was really copied.
    root = checkpoint_dir or config.spark.get("spark.checkpoint.dir") or tempfile.mkdtemp(prefix="mm2py-ckpt-")
    options = ""
    spark_log: Path | None = None
    if quiet and "://" not in root:
        options, spark_log = log4j2_options(root)
        divert_py4j(spark_log)
        log.info("Spark's own logs", path=str(spark_log))
    output = JvmOutput(tracebacks_to=spark_log) if quiet else None
    # a folder private to the run: the stop flag that running tasks and planners watch
    run_dir = tempfile.mkdtemp(prefix="mm2py-run-")
    session: list[SparkSession] = []  # the SparkSession once built; a signal may arrive while Spark starts

    def quieten() -> None:
        if output is not None:
            output.stopping()  # Spark's chatter while it stops says nothing to the operator
        logging.getLogger("py4j").setLevel(logging.CRITICAL)
        # PySpark's accumulator server prints an EOFError traceback when the JVM it serves ends first
        server = getattr(session[0].sparkContext, "_accumulatorServer", None) if session else None
        if server is not None:
            server.handle_error = lambda *_: None

    shutdown = Shutdown(StopFlag.in_folder(run_dir), config.shutdown_timeout_ms / 1000, on_first=quieten)
    # internal and remote topics are created while Spark starts, before any source lists topics
    # (mm2py.engine.prepare); a run that stops once caught up runs no heartbeats nor checkpoints
    preparation = TargetPreparation(
        flows, prepare_flow_target(lambda f: specs[f.name], checkpoints=not until_caught_up),
        heartbeats=() if until_caught_up else config.heartbeat_flows(targets)).start()
    # the driver JVM's class archive, kept only once a micro-batch was copied (mm2py.engine.jvmcache)
    archive = DriverArchive(JVM_OPTIONS, use_lean_spark_home())

    # handlers before Spark starts: a SIGTERM during start-up stops the run cleanly (exit 0)
    try:
        with signals_to(shutdown.handle):
            spark = build_session(master, config.spark, extra_driver_options=options, output=output,
                                  archive=archive)
            session.append(spark)
            # PySpark's SparkContext installs its own SIGINT handler (cancel every job, raise
            # KeyboardInterrupt): Ctrl-C must stop in order as SIGTERM does
            signal.signal(signal.SIGINT, shutdown.handle)
            gateway = getattr(spark.sparkContext._gateway, "proc", None)  # spark-submit exec'd the JVM
            shutdown.jvm_pid = getattr(gateway, "pid", None)
            return _serve(config, spark, root, flows, targets, shutdown, until_caught_up=until_caught_up, specs=specs,
                          preparation=preparation, committed=archive.worked)
    finally:
        shutdown.done()
        shutil.rmtree(run_dir, ignore_errors=True)


def _serve(config: MirrorMakerConfig, spark: SparkSession, root: str, flows: tuple[FlowConfig, ...],
           targets: tuple[str, ...] | None, shutdown: Shutdown, *, until_caught_up: bool,
           preparation: TargetPreparation | None = None, committed: Callable[[], None] | None = None,
           specs: dict[str, FlowSpec] | None = None) -> int:
    """Run ``flows`` on ``spark`` until a signal (or, ``until_caught_up``, they caught up); stop Spark in order."""
    stop = shutdown.stop
    metrics = Metrics() if config.metrics_port is not None else None
    engine = Engine(config, spark, root, metrics=metrics, committed=committed, stop_flag=shutdown.flag,
                    specs=dict(specs or {}))
    server = MetricsServer(metrics, config.metrics_port, flows, config.metrics_bind_address,
                           config.audit_interval_seconds).start() \
        if metrics is not None and config.metrics_port is not None else None
    try:
        # heartbeats run on every flow into this process's clusters, enabled or not, as MM2's
        # herders do: B->A heartbeats are what make A's "heartbeats" topic, mirrored as A.heartbeats
        into = set(targets) if targets else set(config.clusters)
        heartbeat_flows = tuple(f for f in config.flows if f.target.alias in into)
        # workers start while remote topics are made and the queries start and plan (WorkerWarmup)
        warmup = WorkerWarmup(lambda: warm_python_workers(spark)).start() if not stop.is_set() else None
        if preparation is not None:
            preparation.wait(stop, max(f.admin_timeout_ms for f in flows) / 1000)
        if not stop.is_set():
            engine.start(flows, until_caught_up=until_caught_up, heartbeat_flows=heartbeat_flows,
                         reached=frozenset(preparation.prepared) if preparation is not None else frozenset())
        if warmup is not None:
            warmup.finish(stop)
        if not stop.is_set():
            engine.wait(stop)
        return 0
    except Exception as e:
        if not stop.is_set():
            raise
        # stopping: what failed meanwhile (a query starting as the signal came) leaves the
        # positions where the last commit put them, and the next start resumes from them
        log.info("stopping interrupted a step of the run", error=first_line(e))
        return 0
    finally:
        if server is not None:
            server.stop()
        engine.stop(quiet=stop.is_set(), timeout_s=config.shutdown_timeout_ms / 1000)
        with contextlib.suppress(Exception):
            spark.stop()
        if stop.is_set():
            log.info("stopped", seconds_since_signal=shutdown.seconds())
