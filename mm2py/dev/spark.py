"""A Spark standalone cluster (one master, N workers) on 127.0.0.1, from the pyspark install.

For trying mm2py on a real Spark cluster without installing Spark separately: the pyspark
wheel ships ``bin/spark-class`` and the standalone Master and Worker classes. Every port is
chosen from ``port`` upwards, so a test can keep Spark inside a known range.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from mm2py.dev.cluster import var_dir, wait_ports_free
from mm2py.engine.sparkhome import lean_spark_home
from mm2py.errors import DevClusterError

SPARK_HOME = Path(pyspark.__file__).resolve().parent


@dataclass
class StandaloneSpark:
    """A running master and its workers. Ports: master ``port``, master UI ``webui_port``, then per
    worker its UI and RPC port above that."""

    master_url: str
    port: int
    webui_port: int
    logdir: Path
    workers: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def webui_url(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    def alive_workers(self) -> int:
        return _alive_workers(self.webui_port)

    def stop(self, timeout: float = 20) -> None:
        stop_standalone(self, timeout)

    def __enter__(self) -> StandaloneSpark:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def spark_env() -> dict[str, str]:
    """Environment for Spark JVMs and drivers: this pyspark as SPARK_HOME, this interpreter for Python workers."""
    env = dict(os.environ)
    env.update({
        # workers then import compiled PySpark rather than recompiling pyspark.zip (see sparkhome)
        "SPARK_HOME": str(lean_spark_home()),
        # executors must run the interpreter that has mm2py and its dependencies installed (the venv)
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
        # the master's REST submission server would take port 6066, outside our range; nothing uses it
        "SPARK_MASTER_OPTS": f"{os.environ.get('SPARK_MASTER_OPTS', '')} -Dspark.master.rest.enabled=false".strip(),
    })
    return env


def _spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        # spark-class execs the JVM, so the pid is the JVM's; its own session keeps it out of the
        # caller's ^C and lets stop() signal it together with the executors it forks
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=spark_env(), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _alive_workers(webui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _master_address(log: Path, proc: subprocess.Popen[bytes], deadline: float) -> tuple[str, int]:
    """The URL and UI port the master really bound: Spark moves to the next port when one is taken."""
    while True:
        text = log.read_text(errors="replace") if log.exists() else ""
        url = re.search(r"Starting Spark master at (spark://\S+)", text)
        ui = re.search(r"Successfully started service 'MasterUI' on port (\d+)", text)
        if url and ui:
            return url.group(1), int(ui.group(1))
        if proc.poll() is not None:
            raise DevClusterError(f"the Spark master exited with {proc.returncode} during start-up; "
                                  f"{log}:\n{_tail(log)}")
        if time.monotonic() >= deadline:
            raise DevClusterError(f"the Spark master did not start in time; {log}:\n{_tail(log)}")
        time.sleep(0.3)


def start_standalone(
    logdir: Path | None = None,
    *,
    workers: int = 2,
    port: int = 27077,
    webui_port: int | None = None,
    worker_cores: int = 1,
    worker_memory: str = "1g",
    timeout: float = 90,
) -> StandaloneSpark:
    """Start a master on 127.0.0.1:``port`` and ``workers`` workers; returns once every worker registered.

    The default ports lie below Linux's ephemeral range (32768-60999): at 40077 the master once
    found its port taken by a listening socket that another process had been given by the kernel.

    Logs and the workers' work dirs (executor stdout/stderr) go to ``logdir`` (default
    ``var/spark-standalone``). Ports: ``port``, ``webui_port`` (default port+3), and for worker i
    ``webui_port+1+i`` (UI) and ``webui_port+1+workers+i`` (RPC); Spark takes the next free port
    when one is busy, and ``master_url`` / ``webui_port`` report where the master really is.
    """
    webui_port = webui_port if webui_port is not None else port + 3
    worker_ui = [webui_port + 1 + i for i in range(workers)]
    worker_rpc = [webui_port + 1 + workers + i for i in range(workers)]
    wait_ports_free([port, webui_port], "the Spark master")
    logdir = Path(logdir) if logdir is not None else var_dir() / "spark-standalone"
    logdir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout
    master = _spawn(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(webui_port)], logdir / "master.log")
    spark = StandaloneSpark(f"spark://127.0.0.1:{port}", port, webui_port, logdir, workers, [master])
    try:
        spark.master_url, spark.webui_port = _master_address(logdir / "master.log", master, deadline)
        spark.port = int(spark.master_url.rsplit(":", 1)[1])
        for i in range(workers):
            spark.procs.append(_spawn(
                ["org.apache.spark.deploy.worker.Worker", spark.master_url, "--host", "127.0.0.1",
                 "--port", str(worker_rpc[i]), "--webui-port", str(worker_ui[i]),
                 "--cores", str(worker_cores), "--memory", worker_memory, "--work-dir", str(logdir / f"worker-{i}")],
                logdir / f"worker-{i}.log"))
        while _alive_workers(spark.webui_port) < workers:
            for i, proc in enumerate(spark.procs[1:]):
                if proc.poll() is not None:
                    log = logdir / f"worker-{i}.log"
                    raise DevClusterError(f"Spark worker {i} exited with {proc.returncode} during start-up; "
                                          f"{log}:\n{_tail(log)}")
            if time.monotonic() >= deadline:
                raise DevClusterError(f"Spark workers did not register with {spark.master_url} within "
                                      f"{timeout:.0f} s; see {logdir}")
            time.sleep(0.5)
    except BaseException:
        spark.stop()
        raise
    return spark


def stop_standalone(spark: StandaloneSpark, timeout: float = 20) -> None:
    """Stop workers (and their executors) first, then the master: SIGTERM, after ``timeout`` s SIGKILL."""
    for proc in reversed(spark.procs):
        if proc.poll() is None:
            _signal_group(proc.pid, signal.SIGTERM)
    for proc in spark.procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait(10)
        # executors share their worker's process group; make sure none outlives it
        _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
