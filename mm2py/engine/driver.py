"""Runs every flow of an MM2 config as Spark streaming queries in one Spark application."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.connectors.checkpoint import CheckpointDataSource
from mm2py.connectors.heartbeat import HeartbeatDataSource
from mm2py.connectors.options import encode
from mm2py.connectors.sink import FlowSink, log_rows
from mm2py.connectors.source import MirrorSourceDataSource
from mm2py.connectors.warmup import WarmupDataSource
from mm2py.engine.console import JvmOutput, divert_py4j, log4j2_options
from mm2py.engine.jvmcache import DriverArchive
from mm2py.engine.metrics_server import MetricsServer
from mm2py.engine.prepare import TargetPreparation, prepare_flow_target
from mm2py.engine.shutdown import Shutdown, signals_to
from mm2py.engine.sparkhome import use_lean_spark_home
from mm2py.engine.supervisor import State, Supervisor
from mm2py.errors import Mm2pyError, from_task_failure
from mm2py.flowspec import FlowSpec
from mm2py.kafka.krb5conf import check_flows as check_kerberos
from mm2py.kafka.tls import check_stores
from mm2py.metrics import Metrics
from mm2py.schemas.check import check_schemas
from mm2py.source.copy.exactly_once import fence
from mm2py.source.copy.exactly_once import prepare as prepare_exactly_once
from mm2py.source.copy.stop_flag import StopFlag
from mm2py.source.copy.tail import may_tail
from mm2py.source.copy.task import CopySpec
from mm2py.source.plan.commit import committer_for
from mm2py.source.sync_history import prepare_history
from mm2py.topology import check_topology
from mm2py.transforms import check_flows as check_transforms

log = structlog.get_logger(__name__)

DEFAULT_MASTER = "local[*]"
SPARK_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.python.worker.reuse": "true",
    "spark.sql.streaming.stopTimeout": "60s",
    # a task failure (a broker hiccup) is retried: copies are at-least-once, positions
    # move only after the whole micro-batch succeeded
    "spark.task.maxFailures": "4",
    "spark.ui.showConsoleProgress": "false",
    # Every micro-batch writes its offset and commit log entries; Hadoop's checksummed local
    # file system doubles each write with a .crc file. The checkpoint is only Spark's
    # bookkeeping: positions live on the target cluster, and a checkpoint elsewhere (hdfs://,
    # s3a://) is not touched by this.
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    # Python workers that ignore SIGINT/SIGTERM, as the driver JVM does (mm2py.engine.sparkhome):
    # a signal to every process of a systemd unit must not end a copy task before its commit
    "spark.python.daemon.module": "mm2py.connectors.daemon",
}
# Spark's JVM only schedules here (records never pass through it), so the optimizing JIT
# compiler only burns CPU; C1 alone and the serial collector do the same work for less
# (docs/design.md has the measurement). Given options come after ours.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
JVM_OPTION_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
# Local masters bind the driver to loopback: a replicator has no business listening elsewhere.
LOCAL_NETWORK = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}


def local_master_with_retries(master: str) -> str:
    """``local[N]`` never retries failed tasks; ``local[N,F]`` does."""
    if master.startswith("local[") and "," not in master:
        return master[:-1] + ",4]"
    if master == "local":
        return "local[1,4]"
    return master


def build_session(master: str, conf: Mapping[str, str], app_name: str = "mm2py", *,
                  extra_driver_options: str = "", output: JvmOutput | None = None,
                  archive: DriverArchive | None = None) -> SparkSession:
    """A Spark session with mm2py's settings and data sources; ``archive``: the driver JVM's class
    archive (mm2py.engine.jvmcache), made here when not given."""
    builder = SparkSession.builder.appName(app_name).master(local_master_with_retries(master))
    settings = dict(SPARK_DEFAULTS)
    if master.startswith("local") or master.startswith("spark://127.") or master.startswith("spark://localhost"):
        settings.update(LOCAL_NETWORK)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run the interpreter mm2py is installed in, not whatever is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings["spark.pyspark.python"] = os.environ["PYSPARK_PYTHON"]
    settings.update({k: v for k, v in conf.items() if k != "spark.master"})
    spark_home = use_lean_spark_home()
    archive = archive or DriverArchive(JVM_OPTIONS, spark_home)
    for key in JVM_OPTION_KEYS:
        driver = f"{archive.option()} {extra_driver_options}" if key == "spark.driver.extraJavaOptions" else ""
        settings[key] = f"{JVM_OPTIONS} {driver} {settings.get(key, '')}".strip()
    for key, value in settings.items():
        builder = builder.config(key, value)
    with output.capture() if output is not None else contextlib.nullcontext():
        spark = builder.getOrCreate()
    gateway = getattr(spark.sparkContext._gateway, "proc", None)  # spark-submit exec's into the JVM
    archive.started(getattr(gateway, "pid", None))
    spark.sparkContext.setLogLevel("ERROR")
    for source in (MirrorSourceDataSource, CheckpointDataSource, HeartbeatDataSource, WarmupDataSource):
        spark.dataSource.register(source)
    return spark


def warm_python_workers(spark: SparkSession) -> None:
    """Start Spark's Python workers, with the data path imported, before the first micro-batch.

    Workers are reused (spark.python.worker.reuse), so the first micro-batches no longer pay
    for starting interpreters and importing PySpark, Arrow and the copier while records wait.
    The warm-up is a read of a Python data source, as the flows' reads are: an RDD job
    starts workers of another kind, which the flows never use.
    """
    slots = spark.sparkContext.defaultParallelism
    spark.read.format(WarmupDataSource.name()).option("slots", str(slots)).load().collect()


class WorkerWarmup:
    """``warm_python_workers`` in a thread, beside the wait for remote topics and the queries' start.

    Waiting for the remote topics (``TargetPreparation``), starting the queries and their first
    plans (planner processes, the first offset listings) take seconds on the driver while the
    warm-up's tasks start workers on the executors: they overlap. A micro-batch's tasks
    submitted before the warm-up's end wait for its slots (Spark's scheduler is FIFO), so the
    first copy tasks still find warm workers. ``finish`` waits for it and raises its error.
    ``warm`` does the warm-up (``warm_python_workers`` on the session); the constructor does
    nothing else.
    """

    def __init__(self, warm: Callable[[], None]):
        self.warm = warm
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="mm2py-warm-workers", daemon=True)

    def _run(self) -> None:
        try:
            self.warm()
        except BaseException as e:  # handed to finish()
            self.error = e

    def start(self) -> WorkerWarmup:
        self._thread.start()
        return self

    def finish(self, stop: threading.Event) -> None:
        """Wait for the warm-up (or ``stop``); raise its error unless stopping."""
        while self._thread.is_alive() and not stop.is_set():
            self._thread.join(0.2)
        if self.error is not None and not stop.is_set():
            raise self.error


@dataclass
class Connector:
    """One streaming query of a flow (source, checkpoint or heartbeat) and how to start it again."""

    flow: FlowConfig
    kind: str
    start: Callable[[], StreamingQuery]
    query: StreamingQuery
    progress_at: str | None = None  # timestamp of the query's last progress report seen
    phases: dict[str, int] = field(default_factory=dict)  # that report's durationMs: Spark's phases, ms
    restart_at: float | None = None  # monotonic time to start the failed query again
    stopped: bool = False  # ended by itself, or its flow failed for good: not restarted

    def made_progress(self) -> bool:
        """True when the query reported progress since the last call (a trigger ran through).

        Reads only the last report's timestamp from the JVM: the whole report (``lastProgress``)
        carries the source's offsets, thousands of partitions of JSON built and parsed per call.
        """
        try:
            last = self.query._jsq.lastProgress()  # PySpark's handle on the JVM query
            stamp = last.timestamp() if last is not None else None
            if stamp is None or stamp == self.progress_at:
                return False
            durations = last.durationMs().toString()  # the Java map's own text: one call, not one per entry
        except Exception:  # a query whose JVM side is gone reports nothing
            return False
        self.progress_at = stamp
        self.phases = parse_durations(durations)
        return True


def parse_durations(text: str) -> dict[str, int]:
    """A progress report's ``durationMs`` from the Java map's text ``{addBatch=5, walCommit=12}``.

    Entries that are not ``name=integer`` are left out: the figures are for watching, not for
    control, so an unexpected text costs a series, never the run.
    """
    out: dict[str, int] = {}
    for entry in text.strip().strip("{}").split(","):
        name, _, value = entry.strip().partition("=")
        if name and value.strip().isdigit():
            out[name] = int(value)
    return out


@dataclass
class RunningFlow:
    flow: FlowConfig
    sink: FlowSink
    connectors: list[Connector] = field(default_factory=list)
    # a query made progress, or the start-up reached both clusters: a failure after that is an
    # outage (retried), not a wrong address (mm2py.engine.supervisor.classify)
    ever_ran: bool = False

    @property
    def query(self) -> StreamingQuery:
        """The source connector's query."""
        return self.connectors[0].query


@dataclass
class Engine:
    """The flows of one process and their queries, restarted through outages (``Supervisor``)."""

    config: MirrorMakerConfig
    spark: SparkSession
    checkpoint_root: str
    flows: list[RunningFlow] = field(default_factory=list)
    metrics: Metrics | None = None
    supervisor: Supervisor = field(default_factory=Supervisor)
    tailing: frozenset[str] = frozenset()  # flows whose copy tasks may tail (mm2py.source.copy.tail)
    committed: Callable[[], None] | None = None  # called after each committed micro-batch of any flow
    stop_flag: StopFlag = field(default_factory=lambda: StopFlag(None))  # raised on stop (mm2py.source.copy.stop_flag)
    specs: dict[str, FlowSpec] = field(default_factory=dict)  # by flow name, each resolved once

    def spec(self, flow: FlowConfig) -> FlowSpec:
        """``flow`` resolved (mm2py.flowspec): on first use, then kept; over ``flow`` as start-up adjusted it."""
        if flow.name not in self.specs:
            self.specs[flow.name] = FlowSpec.resolve(self.config, flow)
        spec = self.specs[flow.name]
        return spec if spec.flow is flow else spec.with_flow(flow)

    def _query(self, flow: FlowConfig, source: type, kind: str, sink: Callable, trigger: dict) -> StreamingQuery:
        spec = self.spec(flow)
        reader = (
            self.spark.readStream.format(source.name())
            .option("spec", encode(spec))
            .option("tasks", str(self.spark.sparkContext.defaultParallelism))
        )
        if source is MirrorSourceDataSource:
            reader = (reader.option("copy", encode(CopySpec.for_flow(spec)))
                      .option("tailing", str(len(self.tailing))))
            if self.stop_flag.path is not None:
                reader = reader.option("stop", self.stop_flag.path)
        df = reader.load()
        checkpoint = os.path.join(self.checkpoint_root, flow.name.replace(">", ""), kind)
        return (df.writeStream.queryName(f"{kind} {flow.name}").foreachBatch(sink)
                .option("checkpointLocation", checkpoint).trigger(**trigger).start())

    def _connector(self, flow: FlowConfig, source: type, kind: str, sink: Callable, trigger: dict) -> Connector:
        def start() -> StreamingQuery:
            return self._query(flow, source, kind, sink, trigger)

        def restart() -> StreamingQuery:
            if source is MirrorSourceDataSource and flow.delivery.exactly_once != "off":
                # tasks of the failed query may hold transactions open: abort them before planning
                fence(flow, self._tasks(flow))
            return start()
        return Connector(flow, kind, restart, start())

    def _tasks(self, flow: FlowConfig) -> int:
        """The most copy tasks a micro-batch of ``flow`` has (the source reader's rule)."""
        return flow.copy.tasks_max or self.spark.sparkContext.defaultParallelism

    def start(self, flows: tuple[FlowConfig, ...], *, until_caught_up: bool = False,
              heartbeat_flows: tuple[FlowConfig, ...] = (), reached: frozenset[str] = frozenset()) -> None:
        """Start the source and checkpoint connectors of ``flows`` and heartbeats of ``heartbeat_flows``.

        ``reached``: the flows whose clusters already answered (``TargetPreparation.prepared``).
        """
        def every(seconds: float) -> dict:
            if until_caught_up:
                return {"availableNow": True}
            return {"processingTime": f"{int(seconds * 1000)} milliseconds"}

        by_name: dict[str, RunningFlow] = {}
        flows = tuple(prepare_exactly_once(prepare_history(flow), self._tasks(flow)) for flow in flows)
        # each tailing flow holds task slots for its tail window (mm2py.source.copy.tail)
        self.tailing = frozenset() if until_caught_up else frozenset(
            f.name for f in flows if may_tail(f, self.spec(f).provenance))
        # every source first: copying starts before the other connectors' queries are made
        for flow in flows:
            committer = committer_for(self.spec(flow), self.metrics)
            committer.open()  # its producers get their ids while the first micro-batch copies
            sink = FlowSink(committer, self.committed)
            running = RunningFlow(flow, sink, ever_ran=flow.name in reached)
            running.connectors.append(self._connector(flow, MirrorSourceDataSource, "source", sink,
                                                      every(flow.copy.trigger_interval_ms / 1000)))
            self.flows.append(running)
            by_name[flow.name] = running
            self.supervisor.add(flow.name)
            log.info("flow started", flow=flow.name, source=flow.source.bootstrap_servers,
                     target=flow.target.bootstrap_servers,
                     delivery="exactly-once" if flow.delivery.exactly_once != "off" else "at-least-once")
        for flow in flows:
            checkpoints = flow.checkpoints
            if checkpoints.emit_checkpoints_enabled and checkpoints.emit_offset_syncs_enabled and not until_caught_up:
                by_name[flow.name].connectors.append(self._connector(
                    flow, CheckpointDataSource, "checkpoint", log_rows(flow, "checkpoints", self.metrics),
                    every(flow.checkpoints.emit_checkpoints_interval_seconds)))
        if not until_caught_up:
            for flow in heartbeat_flows:
                if not flow.heartbeats.emit_heartbeats_enabled:
                    continue
                connector = self._connector(flow, HeartbeatDataSource, "heartbeat", log_rows(flow, None),
                                            every(flow.heartbeats.emit_heartbeats_interval_seconds))
                if flow.name in by_name:
                    by_name[flow.name].connectors.append(connector)
                else:  # heartbeats of a flow that does not mirror (MM2 runs them for every pair)
                    running = RunningFlow(flow, None, [connector])
                    self.flows.append(running)
                    self.supervisor.add(flow.name, mirrors=False)

    def await_caught_up(self, timeout: float) -> None:
        """With ``until_caught_up``: wait until every query finished; raise on failure or timeout."""
        for running in self.flows:
            try:
                running.query.awaitTermination(timeout)
            except StreamingQueryException as e:
                raise from_task_failure(f"flow {running.flow.name}", str(e)) from None
            exc = running.query.exception()
            if exc is not None:
                raise from_task_failure(f"flow {running.flow.name}", str(exc)) from None
            if running.query.isActive:
                raise Mm2pyError(f"flow {running.flow.name} still running after {timeout} s")

    def wait(self, stop: threading.Event) -> None:
        """Block until ``stop`` is set or every flow's source query has ended; restart queries through outages.

        Raises the first fatal error once no mirroring flow is left running or stalled.
        """
        first_fatal: Mm2pyError | None = None
        while not stop.is_set():
            for running in self.flows:
                first_fatal = self._watch(running) or first_fatal
            if self.metrics is not None:
                self.metrics.observe_health(self.supervisor.health.values())
                self.metrics.observe_connectors(self.connector_states())
            # every mirroring flow's source query ended: by itself (availableNow) or failed for good
            finished = all(r.connectors[0].stopped for r in self.flows if r.sink is not None)
            if finished or not self.supervisor.alive():
                if first_fatal is not None:
                    raise first_fatal
                return
            stop.wait(0.5)

    def _watch(self, running: RunningFlow) -> Mm2pyError | None:
        """Check one flow's queries: note progress, restart what an outage stopped, stop what failed."""
        name = running.flow.name
        for connector in running.connectors:
            if connector.stopped:
                continue
            if connector.made_progress():
                running.ever_ran = True
                if connector.kind == "source" or running.sink is None:
                    self.supervisor.progressed(name)
                if connector.kind == "source":
                    log.debug("micro-batch phases", flow=name, **{f"{k}_ms": v for k, v in connector.phases.items()})
                    if self.metrics is not None:
                        self.metrics.observe_progress(name, connector.phases)
            if connector.query.isActive:
                continue
            if connector.restart_at is not None:
                if self.supervisor.clock() >= connector.restart_at:
                    self._restart(connector)
                continue
            exc = _exception(connector.query)
            if exc is None:
                connector.stopped = True  # ended by itself (availableNow)
                continue
            error = from_task_failure(f"{connector.kind} {name}", exc)
            health = self.supervisor.failed(name, error, ever_ran=running.ever_ran)
            if health.state is State.FAILED:
                for other in running.connectors:
                    other.stopped = True
                    with contextlib.suppress(Exception):
                        other.query.stop()
                return error
            connector.restart_at = health.retry_at
        return None

    def connector_states(self) -> list[tuple[str, str, str]]:
        """(flow, connector kind, state) of every query: running, stalled (restart pending), failed or stopped."""
        out = []
        for running in self.flows:
            failed = self.supervisor.health[running.flow.name].state is State.FAILED
            for c in running.connectors:
                if c.stopped:
                    state = "failed" if failed else "stopped"
                else:
                    state = "stalled" if c.restart_at is not None else "running"
                out.append((running.flow.name, c.kind, state))
        return out

    def _restart(self, connector: Connector) -> None:
        connector.restart_at = None
        try:
            connector.query = connector.start()
        except Exception as e:  # py4j or Spark; tried again at the next backoff
            health = self.supervisor.failed(connector.flow.name, Mm2pyError(_first_line(e)), ever_ran=True)
            connector.restart_at = health.retry_at
            return
        log.info("query restarted", flow=connector.flow.name, connector=connector.kind)

    def _drain(self, deadline: float) -> None:
        """Let each running micro-batch commit, then stop its query; past ``deadline``, stop the rest anyway.

        A stopped query cancels its running tasks, and what a cancelled task copied is not recorded:
        the next start copies it again. With the stop flag raised, tails end where they stand and
        no source plans another micro-batch (mm2py.source.copy.stop_flag), so each query is stopped once
        it is between triggers or the micro-batch it was running completed (committed, for a source).
        """
        def batch_id(query: StreamingQuery) -> int:
            progress = query.lastProgress
            return int(progress["batchId"]) if progress else -1

        waiting: dict[int, tuple[RunningFlow, Connector, int]] = {}
        for running in self.flows:
            for connector in running.connectors:
                with contextlib.suppress(Exception):  # a query whose JVM side is gone
                    if connector.query.isActive:
                        waiting[id(connector)] = (running, connector, batch_id(connector.query))
        while waiting and time.monotonic() < deadline:
            for key, (_running, connector, first) in list(waiting.items()):
                try:
                    idle = not connector.query.status["isTriggerActive"] or batch_id(connector.query) != first
                except Exception:  # the query ended meanwhile
                    idle = True
                if idle:
                    with contextlib.suppress(Exception):
                        connector.query.stop()
                    del waiting[key]
            time.sleep(0.02)
        for running, connector, _first in waiting.values():
            log.warning("stopping a query whose micro-batch did not commit within shutdown.timeout.ms; the next "
                        "start copies it again", flow=running.flow.name, connector=connector.kind)

    def stop(self, *, quiet: bool = False, timeout_s: float = 25.0) -> None:
        """Stop every query and report what was committed; ``quiet`` after a signal.

        Running micro-batches commit first, for up to ``timeout_s`` (``_drain``).
        """
        self.stop_flag.raise_()
        self._drain(time.monotonic() + timeout_s)
        unstoppable = []
        for running in self.flows:
            for connector in reversed(running.connectors):
                try:
                    connector.query.stop()
                except Exception as e:  # keep stopping the others
                    unstoppable.append(f"{connector.kind} {running.flow.name}")
                    if not quiet:
                        log.warning("stopping a query failed", flow=running.flow.name, connector=connector.kind,
                                    error=_first_line(e))
            if running.sink is not None:
                with contextlib.suppress(Exception):
                    running.sink.close()
        committed = {r.flow.name: {"micro_batches": r.sink.committer.totals.batches,
                                   "records": r.sink.committer.totals.records}
                     for r in self.flows if r.sink is not None}
        log.info("flows stopped; each resumes from the positions recorded on its target", committed=committed,
                 **({"spark_ended_first": unstoppable} if unstoppable and quiet else {}))


def _exception(query: StreamingQuery) -> str | None:
    try:
        exc = query.exception()
    except Exception as e:  # the JVM side of a query may be gone
        return _first_line(e)
    return str(exc) if exc is not None else None


def _first_line(exc: BaseException) -> str:
    """``str(exc)``'s first line; a py4j error asks the JVM for its text, and the JVM may be gone."""
    try:
        return (str(exc).splitlines() or [""])[0]
    except Exception:  # ConnectionRefusedError and kin, from py4j
        return type(exc).__name__


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
    check_kerberos(flows)  # GSSAPI clients: each principal logs in (keytab, KDC) before Spark starts
    check_schemas(flows)  # schemas.mode: registries configured and answering
    # JKS / PKCS12 stores readable with their passwords (mm2py.kafka.tls)
    check_stores(c for f in flows for c in (f.source, f.target, f.offset_syncs))
    master = master or config.spark.get("spark.master") or DEFAULT_MASTER
    # Without a configured directory each run plans from the positions on the target, so a
    # lost or stale checkpoint can never disagree with what was really copied.
    root = checkpoint_dir or config.spark.get("spark.checkpoint.dir") or tempfile.mkdtemp(prefix="mm2py-ckpt-")
    output = JvmOutput() if quiet else None
    options = ""
    if quiet and "://" not in root:
        options, spark_log = log4j2_options(root)
        divert_py4j(spark_log)
        log.info("Spark's own logs", path=str(spark_log))
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
                           config.audit_interval_seconds).start() if metrics is not None else None
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
        log.info("stopping interrupted a step of the run", error=_first_line(e))
        return 0
    finally:
        if server is not None:
            server.stop()
        engine.stop(quiet=stop.is_set(), timeout_s=config.shutdown_timeout_ms / 1000)
        with contextlib.suppress(Exception):
            spark.stop()
        if stop.is_set():
            log.info("stopped", seconds_since_signal=shutdown.seconds())
