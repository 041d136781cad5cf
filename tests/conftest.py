"""Session-wide fixtures: real single-node KRaft clusters, started once and shared."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mm2py import devcluster

TEST_PORTS = {"a": 39092, "b": 39192, "c": 39292}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs real Kafka brokers and Spark")


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
        for cluster in self.started.values():
            devcluster.stop_cluster(cluster.name, workdir=self.workdir)


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    return devcluster.ensure_kafka_jars()


@pytest.fixture(scope="session")
def _clusters(kafka_jars: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Clusters]:
    clusters = _Clusters(tmp_path_factory.mktemp("dev-clusters"))
    yield clusters
    clusters.stop_all()


@pytest.fixture(scope="session")
def cluster_a(_clusters: _Clusters) -> devcluster.DevCluster:
    return _clusters.get("a")


@pytest.fixture(scope="session")
def cluster_b(_clusters: _Clusters) -> devcluster.DevCluster:
    return _clusters.get("b")


@pytest.fixture(scope="session")
def cluster_c(_clusters: _Clusters) -> devcluster.DevCluster:
    return _clusters.get("c")


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A topic-name prefix no other test uses: the test's name plus a short random suffix."""
    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name.removeprefix("test_"))[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:6]}"
