"""Runs every flow of an MM2 config as Spark streaming queries in one Spark application."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.connectors.checkpoint import CheckpointDataSource
from mm2py.connectors.heartbeat import HeartbeatDataSource
from mm2py.connectors.options import encode, encode_flow
from mm2py.connectors.sink import FlowSink, log_rows
from mm2py.connectors.source import MirrorSourceDataSource
from mm2py.connectors.warmup import WarmupDataSource
from mm2py.engine.jvmcache import DriverArchive
from mm2py.engine.sparkhome import use_lean_spark_home
from mm2py.errors import Mm2pyError, from_task_failure
from mm2py.metrics import Metrics, MetricsServer
from mm2py.source.commit import committer_for
from mm2py.topology import check_topology, loop_guard

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


def build_session(master: str, conf: Mapping[str, str], app_name: str = "mm2py") -> SparkSession:
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
    archive = DriverArchive(JVM_OPTIONS, spark_home)
    for key in JVM_OPTION_KEYS:
        cds = archive.option() if key == "spark.driver.extraJavaOptions" else ""
        settings[key] = f"{JVM_OPTIONS} {cds} {settings.get(key, '')}".strip()
    for key, value in settings.items():
        builder = builder.config(key, value)
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



@dataclass
class RunningFlow:
    flow: FlowConfig
    sink: FlowSink
    query: StreamingQuery


@dataclass
class Engine:
    """The flows of one process and their queries."""

    config: MirrorMakerConfig
    spark: SparkSession
    checkpoint_root: str
    flows: list[RunningFlow] = field(default_factory=list)
    periodic: list[StreamingQuery] = field(default_factory=list)
    metrics: Metrics | None = None

    def _query(self, flow: FlowConfig, source: type, kind: str, sink: Callable, trigger: dict) -> StreamingQuery:
        reader = (
            self.spark.readStream.format(source.name())
            .option("flow", encode_flow(flow))
            .option("tasks", str(self.spark.sparkContext.defaultParallelism))
        )
        if source is MirrorSourceDataSource:
            reader = reader.option("guard", encode(loop_guard(self.config, flow)))
        df = reader.load()
        checkpoint = os.path.join(self.checkpoint_root, flow.name.replace(">", ""), kind)
        return (df.writeStream.queryName(f"{kind} {flow.name}").foreachBatch(sink)
                .option("checkpointLocation", checkpoint).trigger(**trigger).start())

    def start(self, flows: tuple[FlowConfig, ...], *, until_caught_up: bool = False,
              heartbeat_flows: tuple[FlowConfig, ...] = ()) -> None:
        """Start the source and checkpoint connectors of ``flows`` and heartbeats of ``heartbeat_flows``."""
        def every(seconds: float) -> dict:
            if until_caught_up:
                return {"availableNow": True}
            return {"processingTime": f"{int(seconds * 1000)} milliseconds"}

        for flow in flows:
            sink = FlowSink(committer_for(flow, self.metrics))
            query = self._query(flow, MirrorSourceDataSource, "source", sink,
                                every(flow.trigger_interval_ms / 1000))
            self.flows.append(RunningFlow(flow, sink, query))
            if flow.emit_checkpoints_enabled and flow.emit_offset_syncs_enabled and not until_caught_up:
                self.periodic.append(self._query(flow, CheckpointDataSource, "checkpoint",
                                                 log_rows(flow, "checkpoints", self.metrics),
                                                 every(flow.emit_checkpoints_interval_seconds)))
            log.info("flow started", flow=flow.name, source=flow.source.bootstrap_servers,
                     target=flow.target.bootstrap_servers)
        if not until_caught_up:
            for flow in heartbeat_flows:
                if flow.emit_heartbeats_enabled:
                    self.periodic.append(self._query(flow, HeartbeatDataSource, "heartbeat",
                                                     log_rows(flow, None),
                                                     every(flow.emit_heartbeats_interval_seconds)))

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
        """Block until ``stop`` is set or a query ends; raise the first query failure."""
        while not stop.is_set():
            for query in [r.query for r in self.flows] + self.periodic:
                if not query.isActive:
                    exc = query.exception()
                    if exc is not None:
                        raise from_task_failure(query.name, str(exc)) from None
            if all(not r.query.isActive for r in self.flows):
                return
            stop.wait(0.5)

    def stop(self) -> None:
        for query in self.periodic:
            with contextlib.suppress(Exception):
                query.stop()
        for running in self.flows:
            try:
                running.query.stop()
            except Exception as e:  # noqa: BLE001 - keep stopping the others
                log.warning("stopping a query failed", flow=running.flow.name, error=_first_line(e))
            running.sink.close()
        log.info("flows stopped", flows=[r.flow.name for r in self.flows])


def _first_line(exc: BaseException) -> str:
    """``str(exc)``'s first line; a py4j error asks the JVM for its text, and the JVM may be gone."""
    try:
        return (str(exc).splitlines() or [""])[0]
    except Exception:  # noqa: BLE001 - ConnectionRefusedError and kin, from py4j
        return type(exc).__name__


def run(
    config: MirrorMakerConfig,
    *,
    targets: tuple[str, ...] | None = None,
    master: str | None = None,
    checkpoint_dir: str | None = None,
    until_caught_up: bool = False,
) -> int:
    """Run the enabled flows (into ``targets`` when given) until SIGINT/SIGTERM."""
    flows = config.flows_into(targets)
    if not flows:
        raise Mm2pyError(
            "no enabled flow" + (f" into {', '.join(targets)}" if targets else "")
            + ": set e.g. 'A->B.enabled = true'"
        )
    check_topology(config)  # refuse a looping topology before paying for Spark
    master = master or config.spark.get("spark.master") or DEFAULT_MASTER
    spark = build_session(master, config.spark)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("shutting down", signal=signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    # Without a configured directory each run plans from the positions on the target, so a
    # lost or stale checkpoint can never disagree with what was really copied.
    root = checkpoint_dir or config.spark.get("spark.checkpoint.dir") or tempfile.mkdtemp(prefix="mm2py-ckpt-")
    metrics = Metrics() if config.metrics_port is not None else None
    engine = Engine(config, spark, root, metrics=metrics)
    server = MetricsServer(metrics, config.metrics_port, flows).start() if metrics is not None else None
    try:
        # heartbeats run on every flow into this process's clusters, enabled or not, as MM2's
        # herders do: B->A heartbeats are what make A's "heartbeats" topic, mirrored as A.heartbeats
        into = set(targets) if targets else set(config.clusters)
        heartbeat_flows = tuple(f for f in config.flows if f.target.alias in into)
        warm_python_workers(spark)
        engine.start(flows, until_caught_up=until_caught_up, heartbeat_flows=heartbeat_flows)
        engine.wait(stop)
        return 0
    except Exception:
        if not stop.is_set():
            raise
        # A signal sent to the whole process group (Ctrl-C, systemd) reaches Spark's JVM too and
        # may end it before we stop the queries. Nothing is lost: positions move only after
        # a micro-batch completed, so the next start resumes from them.
        log.warning("Spark ended during shutdown; flows resume from their recorded positions")
        return 0
    finally:
        if server is not None:
            server.stop()
        engine.stop()
        with contextlib.suppress(Exception):
            spark.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
