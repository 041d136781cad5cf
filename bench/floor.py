"""The floor of a catch-up workload: the same backlog read by Kafka's own consumer, no replicator.

``python -m bench.floor BOOTSTRAP TOPIC[,TOPIC...] RECORDS [CLIENT_PROPERTIES]`` runs Apache
Kafka's consumer performance tool (``org.apache.kafka.tools.ConsumerPerformance``, what
``kafka-consumer-perf-test.sh`` runs; from the Kafka jars the project fetches) on the topics
until it has read ``RECORDS`` records, its consumer configured by the Java client properties
file ``CLIENT_PROPERTIES`` when given (a TLS run's ``security.protocol`` and truststore), and
prints one JSON line: ``records`` (what the tool counted), ``fetch_s`` (its fetch time: from
the first fetch to the last, the JVM's start and the group join left out) and ``wall_s``. Nothing is written anywhere.

A replicator must at least read what it copies, on the same brokers and cores; a Java consumer
reads without per-record work in Python, so this is the machine's read rate for the workload:
where a target needs more than the floor allows, the bench reports both (bench.run, tool
``floor``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

from mm2py.dev import cluster as devcluster

TOOL = "org.apache.kafka.tools.ConsumerPerformance"


def read_backlog(bootstrap: str, topics: list[str], records: int, timeout_s: float = 1800,
                 client_config: str | None = None) -> dict[str, float]:
    """Read ``records`` records of ``topics`` from their start with Kafka's consumer perf tool;
    ``client_config``: a Java client properties file for its consumer (``--command-config``)."""
    libs = devcluster.ensure_kafka_jars()
    pattern = "|".join(re.escape(t) for t in topics)
    cmd = ["java", "-Xmx1g", "-cp", f"{libs}/*", TOOL, "--bootstrap-server", bootstrap, "--include", f"^({pattern})$",
           "--num-records", str(records), "--timeout", "60000", "--group", f"bench-floor-{time.time_ns()}",
           "--command-property", "isolation.level=read_committed", "--command-property", "auto.offset.reset=earliest",
           *(["--command-config", client_config] if client_config else [])]
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    wall = time.monotonic() - t0
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or len(lines) < 2:
        raise SystemExit(f"bench.floor: {TOOL} exited with {done.returncode}: {(done.stderr or done.stdout)[-800:]}")
    header = [h.strip() for h in lines[0].split(",")]
    row = dict(zip(header, (v.strip() for v in lines[-1].split(",")), strict=False))
    return {"records": int(row["data.consumed.in.nMsg"]), "fetch_s": round(float(row["fetch.time.ms"]) / 1000, 3),
            "wall_s": round(wall, 3)}


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        raise SystemExit("usage: python -m bench.floor BOOTSTRAP TOPIC[,TOPIC...] RECORDS [CLIENT_PROPERTIES]")
    client_config = argv[3] if len(argv) == 4 else None
    print(json.dumps(read_backlog(argv[0], argv[1].split(","), int(argv[2]), client_config=client_config)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
