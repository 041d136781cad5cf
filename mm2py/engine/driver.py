"""The composition root: a Spark session with mm2py's data sources, and the ``Engine`` that starts
each flow's streaming queries (source, checkpoint, heartbeat) in one Spark application.

The one module of mm2py/ that imports the adapters (``mm2py.connectors``). Watching and stopping
the queries is ``mm2py.engine.watch``'s; a whole run (checks, session, engine, stop) is
``mm2py.engine.run``'s.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource
from pyspark.sql.streaming import StreamingQuery

from mm2py.config.model import FlowConfig, MirrorMakerConfig
from mm2py.connectors.checkpoint import CheckpointDataSource
from mm2py.connectors.heartbeat import HeartbeatDataSource
from mm2py.connectors.options import encode
from mm2py.connectors.sink import FlowSink, log_rows
from mm2py.connectors.source import MirrorSourceDataSource
from mm2py.connectors.warmup import WarmupDataSource
from mm2py.engine.console import JvmOutput
from mm2py.engine.jvmcache import DriverArchive
from mm2py.engine.queries import Connector, RunningFlow
from mm2py.engine.sparkhome import use_lean_spark_home
from mm2py.engine.supervisor import Supervisor
from mm2py.engine.watch import QueryWatch
from mm2py.flowspec import FlowSpec
from mm2py.metrics import Metrics
from mm2py.source.copy.continuous import may_continue
from mm2py.source.copy.exactly_once import fence
from mm2py.source.copy.exactly_once import prepare as prepare_exactly_once
from mm2py.source.copy.stop_flag import StopFlag
from mm2py.source.copy.tail import may_tail
from mm2py.source.copy.task import CopySpec
from mm2py.source.plan.commit import committer_for
from mm2py.source.sync_history import prepare_history

log = structlog.get_logger(__name__)

DEFAULT_MASTER = "local[*]"
PYTHON_AUTH_TIMEOUT_S = 120  # spark.python.authenticate.socketTimeout below
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
    # Seconds a Python process Spark starts (a worker, a streaming source's runner) and its JVM give
    # each other to connect and authenticate: 15 by default, which a host whose cores brokers and
    # other JVMs keep busy exceeded (CANNOT_OPEN_SOCKET, a failed query). The JVM passes it to its
    # Python processes as SPARK_AUTH_SOCKET_TIMEOUT.
    "spark.python.authenticate.socketTimeout": f"{PYTHON_AUTH_TIMEOUT_S}s",
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


def loopback_master(master: str) -> bool:
    """The master runs its executors on this host: local, or a standalone master on loopback."""
    return master.startswith("local") or master.startswith("spark://127.") or master.startswith("spark://localhost")


def build_session(master: str, conf: Mapping[str, str], app_name: str = "mm2py", *,
                  extra_driver_options: str = "", output: JvmOutput | None = None,
                  archive: DriverArchive | None = None) -> SparkSession:
    """A Spark session with mm2py's settings and data sources; ``archive``: the driver JVM's class
    archive (mm2py.engine.jvmcache), made here when not given."""
    builder = SparkSession.builder.appName(app_name).master(local_master_with_retries(master))
    settings = dict(SPARK_DEFAULTS)
    if loopback_master(master):
        settings.update(LOCAL_NETWORK)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # the driver process's own connections to its JVM (results of collect) wait as long
    os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", str(PYTHON_AUTH_TIMEOUT_S))
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

    def _query(self, flow: FlowConfig, source: type[DataSource], kind: str, sink: Callable,
               trigger: dict) -> StreamingQuery:
        spec = self.spec(flow)
        reader = (
            self.spark.readStream.format(source.name())
            .option("spec", encode(spec))
            .option("tasks", str(self.spark.sparkContext.defaultParallelism))
        )
        if source is MirrorSourceDataSource:
            reader = (reader.option("copy", encode(CopySpec.for_flow(spec)))
                      .option("tailing", str(len(self.tailing)))
                      .option("one_host", str(loopback_master(self.spark.sparkContext.master or "")).lower()))
            if self.stop_flag.path is not None:
                reader = reader.option("stop", self.stop_flag.path)
        df = reader.load()
        checkpoint = os.path.join(self.checkpoint_root, flow.name.replace(">", ""), kind)
        return (df.writeStream.queryName(f"{kind} {flow.name}").foreachBatch(sink)
                .option("checkpointLocation", checkpoint).trigger(**trigger).start())

    def _connector(self, flow: FlowConfig, source: type[DataSource], kind: str, sink: Callable,
                   trigger: dict) -> Connector:
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
        # each tailing flow holds task slots for its tail window (mm2py.source.copy.tail), or its
        # copy interval (mm2py.source.copy.continuous)
        self.tailing = frozenset() if until_caught_up else frozenset(
            f.name for f in flows
            if may_tail(f, self.spec(f).provenance) or may_continue(f, self.spec(f).provenance))
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

    def __post_init__(self) -> None:
        self.watch = QueryWatch(self.flows, self.supervisor, self.metrics, self.stop_flag)

    def await_caught_up(self, timeout: float) -> None:
        """With ``until_caught_up``: wait until every query finished; raise on failure or timeout."""
        self.watch.await_caught_up(timeout)

    def wait(self, stop: threading.Event) -> None:
        """Block until ``stop`` is set or every flow's source query has ended (``QueryWatch.wait``)."""
        self.watch.wait(stop)

    def connector_states(self) -> list[tuple[str, str, str]]:
        return self.watch.connector_states()

    def stop(self, *, quiet: bool = False, timeout_s: float = 25.0) -> None:
        """Stop every query, running micro-batches committing first for up to ``timeout_s`` (``QueryWatch.stop``)."""
        self.watch.stop(quiet=quiet, timeout_s=timeout_s)

