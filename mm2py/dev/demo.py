"""``make demo``: two local Kafka clusters, live data, mm2py mirroring it, and the proof.

Starts clusters A (127.0.0.1:19092) and B (127.0.0.1:19192), fills three topics on A, runs
``connect-mirror-maker`` with examples/active-passive.properties while more data streams in,
then shows per-topic counts on both sides and verifies every record matches.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mm2py.config import load
from mm2py.dev import cluster as devcluster
from mm2py.kafka import rdclients
from mm2py.kafka.admin import Admin
from mm2py.ops.digest import compare_topic
from mm2py.ops.status import status
from mm2py.ops.status_view import RateKey, rates_between, render

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "active-passive.properties"
TOPICS = {"orders": (4, "lz4"), "payments": (2, "gzip"), "clickstream": (6, "none")}
INITIAL_RECORDS = 300_000
LIVE_SECONDS = 15
LIVE_RATE = 10_000  # records per second while the replicator runs


def say(text: str = "") -> None:
    print(text, flush=True)


def produce(bootstrap: str, topic: str, count: int, start: int, compression: str) -> None:
    producer = rdclients.producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "compression.type": compression,
                         "acks": "all", "log_level": 0})
    for i in range(start, start + count):
        value = f'{{"id": {i}, "topic": "{topic}", "amount": {i % 997}.{i % 100:02d}}}'.encode()
        while True:
            try:
                producer.produce(topic, key=f"{topic}-{i % 5000}".encode(), value=value,
                                 headers=[("source", b"demo"), ("seq", str(i).encode())])
                break
            except BufferError:
                producer.poll(0.05)
        if i % 20000 == 0:
            producer.poll(0)
    producer.flush(60)


def end_total(admin: Admin, topic: str) -> int:
    partitions = admin.topics().get(topic, 0)
    return sum(admin.list_offsets([(topic, p) for p in range(partitions)], "latest").values())


def live_producer(bootstrap: str, stop: threading.Event, counters: dict[str, int]) -> None:
    """Keep writing to 'orders' at LIVE_RATE while the replicator runs."""
    start = INITIAL_RECORDS
    while not stop.is_set():
        t0 = time.monotonic()
        produce(bootstrap, "orders", LIVE_RATE // 4, start, "lz4")
        start += LIVE_RATE // 4
        counters["orders"] = start - INITIAL_RECORDS
        stop.wait(max(0.0, 0.25 - (time.monotonic() - t0)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the clusters running afterwards")
    args = parser.parse_args(argv)
    workdir = REPO / "var" / "demo"
    workdir.mkdir(parents=True, exist_ok=True)
    config = load(EXAMPLE)
    a, b = config.clusters["A"], config.clusters["B"]

    say("== mm2py demo: mirroring live data from cluster A to cluster B ==")
    say("1. starting two Apache Kafka clusters (KRaft, single node) on loopback ...")
    with ThreadPoolExecutor(2) as pool:
        clusters = list(pool.map(lambda nc: devcluster.start_cluster(nc[0], nc[1]),
                                 [("A", 19092), ("B", 19192)]))
    for c in clusters:
        say(f"   cluster {c.name}: {c.bootstrap}")
    replicator: subprocess.Popen | None = None
    try:
        src, dst = Admin(a, timeout_ms=30000), Admin(b, timeout_ms=30000)
        say(f"2. creating topics on A and writing {INITIAL_RECORDS:,} records to each ...")
        for topic, (partitions, codec) in TOPICS.items():
            src.create_topic(topic, partitions, 1)
            produce(a.bootstrap_servers, topic, INITIAL_RECORDS, 0, codec)
            say(f"   {topic:<12} {partitions} partitions, {codec} compression")

        log_path = workdir / "replicator.log"
        say(f"3. connect-mirror-maker {EXAMPLE.relative_to(REPO)}   (log: {log_path.relative_to(REPO)})")
        with open(log_path, "wb") as log:
            replicator = subprocess.Popen(
                [sys.executable, "-m", "mm2py", "run", str(EXAMPLE)], stdout=log, stderr=subprocess.STDOUT,
                cwd=REPO, start_new_session=True)
        stop = threading.Event()
        live: dict[str, int] = {"orders": 0}
        feeder = threading.Thread(target=live_producer, args=(a.bootstrap_servers, stop, live), daemon=True)
        t0 = time.monotonic()
        live_from: float | None = None
        last_status, last_at = None, 0.0
        say("   waiting for Spark to start and the first micro-batch to land on B ...")
        while True:
            elapsed = time.monotonic() - t0
            if live_from is None and end_total(dst, "A.orders") > 0:
                live_from = elapsed
                feeder.start()
                say(f"4. mirroring; now streaming {LIVE_RATE:,} more records/s into 'orders' for {LIVE_SECONDS} s:")
            if live_from is not None and elapsed - live_from >= LIVE_SECONDS and not stop.is_set():
                stop.set()
                feeder.join()
            if replicator.poll() is not None:
                say(f"   replicator exited with {replicator.returncode}; see {log_path}")
                return 1
            if live_from is None:
                time.sleep(0.5)
                continue
            totals = {t: (end_total(src, t), end_total(dst, f"A.{t}")) for t in TOPICS}
            # what `mm2py status --watch examples/active-passive.properties` shows, every 2 s
            now_status = status(config.enabled_flows)
            rates: dict[RateKey, float] = (rates_between(last_status, now_status, elapsed - last_at)
                                           if last_status else {})
            last_status, last_at = now_status, elapsed
            say(f"   t={elapsed:5.1f}s   mm2py status --watch {EXAMPLE.relative_to(REPO)}")
            say("\n".join("   " + line for line in render(now_status, rates).splitlines()))
            if stop.is_set() and all(s == d for s, d in totals.values()):
                break
            if elapsed > 240:
                say("   still not caught up after 240 s; see the replicator log")
                return 1
            time.sleep(2)
        say(f"   caught up {time.monotonic() - t0 - LIVE_SECONDS - (live_from or 0):.1f} s after the live writes "
            f"stopped ({live_from:.0f} s of Spark start-up before the first micro-batch)")
        say("5. verifying every record (count + SHA-256 over key, value, headers, timestamp per partition):")
        say(f"   {'topic':<12} {'on A':>10} {'on B (A.<topic>)':>18}  {'partitions':>10}  result")
        failed = False
        for topic in TOPICS:
            checks = compare_topic(a, topic, b, f"A.{topic}")
            ok = all(c.ok for c in checks)
            failed |= not ok
            say(f"   {topic:<12} {sum(c.source.count for c in checks):>10,} "
                f"{sum(c.target.count for c in checks):>18,}  {len(checks):>10}  {'identical' if ok else 'DIFFERENT'}")
        replicator.send_signal(signal.SIGTERM)
        replicator.wait(90)
        say(f"6. replicator stopped cleanly (exit {replicator.returncode}); positions are kept on B in "
            "mm2-offsets.A.internal, so a restart resumes where it stopped.")
        say("RESULT: " + ("all topics mirrored, every record identical" if not failed else "MISMATCH"))
        return 1 if failed else 0
    finally:
        if replicator is not None and replicator.poll() is None:
            os.killpg(replicator.pid, signal.SIGKILL)
        if not args.keep:
            for c in clusters:
                devcluster.stop_cluster(c.name)
            say("clusters stopped (make demo again starts fresh; --keep leaves them running)")


if __name__ == "__main__":
    sys.exit(main())
