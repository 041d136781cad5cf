"""What the Spark-checkpoint failover tests share: the job's process, its sink, the writer of ``orders``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from confluent_kafka import Producer

from tests.integration import reaper
from tests.integration.mirror_helpers import REPO, wait_for

JOB = Path(__file__).with_name("spark_kafka_job.py")
PARTITIONS = 3


def start_job(bootstrap: str, source: str, sink: Path, cp: Path, log: Path, form: str = "subscribe",
              isolation: str = "read_uncommitted") -> subprocess.Popen:
    """The job (spark_kafka_job.py) as its own process, reading ``source`` in Kafka source form ``form``."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return reaper.track(subprocess.Popen([sys.executable, str(JOB), bootstrap, source, str(sink), str(cp), form,
                                          isolation], cwd=REPO, env=env, stdout=open(log, "ab"),
                                         stderr=subprocess.STDOUT, start_new_session=True), f"Spark job {JOB.name}")


def sink_rows(sink: Path) -> list[dict]:
    """The rows of the files the sink committed (its _spark_metadata log), not of aborted batches'
    files, in the order of their batches (a partition's rows in one batch are in one file)."""
    meta = sink / "_spark_metadata"
    entries = [e for e in (os.listdir(meta) if meta.is_dir() else []) if e.split(".")[0].isdigit()]
    files: list[str] = []
    for entry in sorted(entries, key=lambda e: int(e.split(".")[0])):
        for line in (meta / entry).read_text().splitlines()[1:]:
            path = urlparse(json.loads(line)["path"]).path
            if path not in files:
                files.append(path)
    return [json.loads(line) for f in files for line in Path(f).read_text().splitlines() if line]


def sink_batches(sink: Path) -> list[int]:
    """The batches the sink committed (its _spark_metadata log)."""
    meta = sink / "_spark_metadata"
    names = (n.split(".")[0] for n in (os.listdir(meta) if meta.is_dir() else []))
    return sorted(int(n) for n in names if n.isdigit())


def drain_job(job: subprocess.Popen, sink: Path, total: int, log: Path, where: str, timeout: float = 180) -> None:
    """Wait until the job's sink holds ``total`` rows, then 3 s more (a duplicate would come after the
    count is reached); the job must still be running, its log's tail is the failure message otherwise."""
    wait_for(lambda: len(sink_rows(sink)) >= total or job.poll() is not None, timeout, f"the job drained on {where}")
    time.sleep(3)
    assert job.poll() is None, log.read_text()[-3000:]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mm2py", *args], capture_output=True, text=True, timeout=120)


def forget_last_commit(cp: Path, sink: Path) -> int:
    """The state of a query killed after its sink committed batch L and before Spark wrote commits/L
    (what Spark re-runs as L on restart); returns L. A stop that came between the two left that
    state already: then commits/L is not there to delete."""
    last = sink_batches(sink)[-1]
    for path in (cp / "commits" / str(last), cp / "commits" / f".{last}.crc"):
        path.unlink(missing_ok=True)
    for sub in ("offsets", "commits"):  # planned after L: not there when L's commit is missing
        for n in os.listdir(cp / sub):
            if n.lstrip(".").split(".")[0].isdigit() and int(n.lstrip(".").split(".")[0]) > last:
                (cp / sub / n).unlink()
    return last


class OrdersWriter:
    """One record a partition every 0.2 s into ``topic``, values ``p{partition}-{round}`` unique across
    runs. With a ``transactional_id`` each round is one transaction, every ``abort_every``-th aborted
    (its records on the log first): ``produced`` holds the committed values only, ``aborted`` the rest."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str | None = None, abort_every: int = 0):
        self.bootstrap, self.topic = bootstrap, topic
        self.transactional_id, self.abort_every = transactional_id, abort_every
        self.produced: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
        self.aborted: set[str] = set()
        self.rounds = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed: list[str] = []

    @property
    def total(self) -> int:
        return sum(len(v) for v in self.produced.values())

    def start(self) -> OrdersWriter:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(self._stop,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        assert not self.failed, self.failed

    def _run(self, stop: threading.Event) -> None:
        conf: dict[str, object] = {"bootstrap.servers": self.bootstrap, "linger.ms": 5, "log_level": 0}
        if self.transactional_id:
            conf["transactional.id"] = self.transactional_id
        producer = Producer(conf)
        try:
            if self.transactional_id:
                producer.init_transactions(30)
            while not stop.is_set():
                i = self.rounds
                values = [f"p{p}-{i}" for p in range(PARTITIONS)]
                abort = False
                if self.transactional_id:
                    producer.begin_transaction()
                for p, value in enumerate(values):
                    producer.produce(self.topic, key=f"k{i}", value=value, partition=p)
                if self.transactional_id:
                    assert producer.flush(30) == 0  # on the log before an abort: aborted data to leave out
                    abort = bool(self.abort_every) and i % self.abort_every == self.abort_every - 1
                    if abort:
                        producer.abort_transaction(30)
                        self.aborted.update(values)
                    else:
                        producer.commit_transaction(30)
                if not abort:
                    for p, value in enumerate(values):
                        self.produced[p].append(value)
                self.rounds += 1
                producer.poll(0)
                time.sleep(0.2)  # ~5 records/s a partition: small counts on a busy machine
            assert producer.flush(30) == 0
        except Exception as e:  # reported by stop()
            self.failed.append(repr(e))


def exactness(rows: list[dict], writer: OrdersWriter) -> tuple[dict[int, list[str]], int, int, int]:
    """The sink's values per partition in the order it committed them, and its duplicates, missing
    committed records and aborted records."""
    by_partition: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    for row in rows:
        by_partition[row["partition"]].append(row["value"])
    values = [v for vs in by_partition.values() for v in vs]
    dups = len(values) - len(set(values))
    missing = sum(len(set(writer.produced[p]) - set(by_partition[p])) for p in range(PARTITIONS))
    return by_partition, dups, missing, len(writer.aborted & set(values))
