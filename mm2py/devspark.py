"""A Spark standalone cluster (one master, N workers) on 127.0.0.1, from the pyspark install.

For trying mm2py on a real Spark cluster without installing Spark separately: the pyspark
wheel ships ``bin/spark-class`` and the standalone Master and Worker classes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from mm2py.errors import DevClusterError

SPARK_HOME = Path(pyspark.__file__).resolve().parent


@dataclass
class StandaloneSpark:
    master_url: str
    webui_port: int
    procs: list[subprocess.Popen] = field(default_factory=list)
    logdir: Path | None = None

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(SPARK_HOME),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
    })
    return env


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=_env(), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)


def _alive_workers(webui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{webui_port}/json/", timeout=2) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def start_standalone(logdir: Path, *, workers: int = 2, port: int = 40077, webui_port: int = 40080,
                     worker_cores: int = 1, worker_memory: str = "1g", timeout: float = 90) -> StandaloneSpark:
    """Start a master and ``workers`` workers; return once every worker has registered."""
    logdir.mkdir(parents=True, exist_ok=True)
    spark = StandaloneSpark(f"spark://127.0.0.1:{port}", webui_port, logdir=logdir)
    spark.procs.append(_spawn(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                               "--webui-port", str(webui_port)], logdir / "master.log"))
    for i in range(workers):
        spark.procs.append(_spawn(
            ["org.apache.spark.deploy.worker.Worker", spark.master_url, "--host", "127.0.0.1",
             "--cores", str(worker_cores), "--memory", worker_memory, "--webui-port", str(webui_port + 1 + i),
             "--work-dir", str(logdir / f"worker-{i}")],
            logdir / f"worker-{i}.log"))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in spark.procs):
            spark.stop()
            raise DevClusterError(f"a Spark standalone process exited during start-up; see {logdir}")
        if _alive_workers(webui_port) >= workers:
            return spark
        time.sleep(0.5)
    spark.stop()
    raise DevClusterError(f"Spark workers did not register with {spark.master_url} within {timeout:.0f} s")
