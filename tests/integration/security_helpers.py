"""Helpers of the security tests: run mm2py's commands, find secrets in their outputs, read clusters.

Each reads real clusters and real files; none asserts beyond what its docstring names.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka import TopicPartition

from mm2py.dev import cluster as devcluster
from mm2py.kafka import rdclients
from tests.integration.mirror_helpers import REPO
from tests.kafkautil import consume_all


def mm2py(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``mm2py ARGS`` in a session of its own: on a timeout its Spark JVM is killed with it."""
    proc = subprocess.Popen([sys.executable, "-m", "mm2py", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"mm2py {' '.join(args)} still ran after {timeout} s:\n{err[-3000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def leaks(where: str, text: str, values: dict[str, str]) -> list[str]:
    """The secrets of ``values`` (name: secret) ``text`` shows, as written or inside a base64 blob
    (a pickled config, a header)."""
    found = [f"{name} in {where}" for name, value in values.items() if value in text]
    for blob in re.findall(r"[A-Za-z0-9+/_-]{40,}={0,2}", text):
        with contextlib.suppress(ValueError):
            decoded = base64.b64decode(blob + "=" * (-len(blob) % 4), altchars=b"-_" if "-" in blob else None)
            found += [f"{name} in a base64 blob in {where}" for name, value in values.items()
                      if value.encode() in decoded]
    return found


def event_log(folder: Path) -> str:
    """Every event Spark logged under ``folder``, decompressed (Spark 4 writes zstd by default)."""
    import zstandard

    texts = []
    for file in sorted(f for f in folder.rglob("*") if f.is_file()):
        data = file.read_bytes()
        if file.name.endswith(".zstd") and data:
            data = zstandard.ZstdDecompressor().stream_reader(data).read()
        texts.append(data.decode(errors="replace"))
    return "\n".join(texts)


def count(cluster: devcluster.DevCluster, topic: str, isolation: str = "read_uncommitted") -> int:
    """How many records ``topic`` holds on ``cluster`` (0 while it does not exist)."""
    try:
        got = consume_all(cluster.bootstrap, topic, isolation=isolation, client=cluster.rdkafka_config())
    except AssertionError:
        return 0
    return sum(len(p) for p in got.values())


def committed_on(cluster: devcluster.DevCluster, group: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """``group``'s committed offsets on ``cluster`` for ``tps`` (those it has)."""
    consumer = rdclients.consumer({**cluster.rdkafka_config(), "group.id": group, "enable.auto.commit": False})
    try:
        got = consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
    finally:
        consumer.close()
    return {(tp.topic, tp.partition): tp.offset for tp in got if tp.offset >= 0}
