"""Session-wide fixtures: real single-node KRaft clusters, started on first use and shared.

Test clusters listen on fixed ports (controller on port+1). ``MM2PY_TEST_PORT_OFFSET`` shifts
them all, so two test sessions on one machine do not collide.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mm2py.dev import cluster as devcluster

PORT_OFFSET = int(os.environ.get("MM2PY_TEST_PORT_OFFSET", "0"))
# clusters the fixtures share, and spare ports for tests that start their own; all below the
# kernel's ephemeral range (32768-60999), where a client's outgoing connection can hold the port
TEST_PORTS = {name: port + PORT_OFFSET for name, port in
              {"a": 30092, "b": 30192, "c": 30292, "cli": 30392, "sasl": 30492, "ssl": 30592,
               "crash": 30692, "acl-a": 30792, "acl-b": 30892}.items()}


# The suite's brokers live minutes: C2's compiles would be about half their CPU, on two cores shared
# with Spark and the other lane (docs/design.md). Benches keep the JVM's defaults.
TEST_BROKER_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs real Kafka brokers and Spark")
    os.environ.setdefault(devcluster.JVM_OPTIONS_ENV, TEST_BROKER_JVM)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A ``krb_clients`` test fails at once, naming the cure, where confluent-kafka lacks GSSAPI: never a skip."""
    if item.get_closest_marker("krb_clients") is not None:
        from mm2py.kafka.krb5conf import rdkafka_has_gssapi

        if not rdkafka_has_gssapi():
            pytest.fail(f"{item.nodeid} is marked krb_clients: it needs confluent-kafka built with GSSAPI (PyPI's "
                        "Linux wheels are not); run it with make kerberos-clients' .venv-krb/bin/python, as "
                        "make test's krb lane does (tests/lanes.py)", pytrace=False)


class _Clusters:
    """Starts each test cluster on first use; stops all at session end."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.started: dict[str, devcluster.DevCluster] = {}

    def get(self, key: str) -> devcluster.DevCluster:
        if key not in self.started:
            self.started[key] = devcluster.start_cluster(f"test-{key}", TEST_PORTS[key], workdir=self.workdir)
        return self.started[key]

    def stop_all(self) -> None:
        # by name, from the folder: a fault test may have killed and restarted one meanwhile
        for cluster in devcluster.list_clusters(self.workdir):
            devcluster.stop_cluster(cluster.name, self.workdir)


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    """The folder of Apache Kafka's jars (fetched with Maven on first use)."""
    return devcluster.ensure_kafka_jars()


@pytest.fixture(scope="session")
def cluster_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's clusters live; pass it as ``workdir`` to devcluster functions (fault tests)."""
    return tmp_path_factory.mktemp("dev-clusters")


@pytest.fixture(scope="session")
def _clusters(kafka_jars: Path, cluster_workdir: Path) -> Iterator[_Clusters]:
    clusters = _Clusters(cluster_workdir)
    try:
        yield clusters
    finally:
        clusters.stop_all()


@pytest.fixture(scope="session")
def cluster_a(_clusters: _Clusters) -> devcluster.DevCluster:
    """Cluster ``test-a``: ``.name``, ``.bootstrap`` ("127.0.0.1:PORT"), ``.port``."""
    return _clusters.get("a")


@pytest.fixture(scope="session")
def cluster_b(_clusters: _Clusters) -> devcluster.DevCluster:
    """Cluster ``test-b``, independent of ``cluster_a``."""
    return _clusters.get("b")


@pytest.fixture(scope="session")
def cluster_c(_clusters: _Clusters) -> devcluster.DevCluster:
    """Cluster ``test-c``, for three-cluster topologies."""
    return _clusters.get("c")


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A topic-name prefix no other test uses: the test's name plus a short random suffix."""
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name.removeprefix("test_"))[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def own_clusters(workdir: Path, ports: dict[str, int]) -> Iterator[dict[str, devcluster.DevCluster]]:
    """Single-broker clusters for one test module alone (kept apart from the shared clusters' topics).

    They start side by side (a broker takes seconds to start) and end with SIGKILL: their data is
    deleted anyway, and a controlled shutdown of thousands of partitions takes tens of seconds.
    """
    try:
        with ThreadPoolExecutor(len(ports)) as pool:  # its end waits for every start
            futures = {name: pool.submit(devcluster.start_cluster, name, port, workdir=workdir)
                       for name, port in ports.items()}
        yield {name: future.result() for name, future in futures.items()}
    finally:
        for name in ports:
            with contextlib.suppress(devcluster.DevClusterError):
                devcluster.kill_cluster_hard(name, workdir)
                devcluster.stop_cluster(name, workdir)


@contextlib.contextmanager
def own_cluster(name: str, port: int, workdir: Path) -> Iterator[devcluster.DevCluster]:
    """One cluster of ``own_clusters``."""
    with own_clusters(workdir, {name: port}) as started:
        yield started[name]
