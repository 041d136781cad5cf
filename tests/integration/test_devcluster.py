"""``mm2py dev-cluster`` end to end, and the independence of the test clusters."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.kafkautil import consume_all, create_topic, list_topics, produce

pytestmark = pytest.mark.integration


def mm2py(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mm2py", *args], capture_output=True, text=True, env=env,
                          timeout=180)


def test_dev_cluster_up_list_down(tmp_path):
    env = dict(os.environ, MM2PY_VAR_DIR=str(tmp_path))
    up = mm2py("dev-cluster", "up", "cli-x", "--port", "39492", env=env)
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout.strip() == "127.0.0.1:39492"
        create_topic("127.0.0.1:39492", "hello", 1)
        assert "hello" in list_topics("127.0.0.1:39492")
        again = mm2py("dev-cluster", "up", "cli-x", "--port", "39492", env=env)
        assert again.returncode == 0 and again.stdout.strip() == "127.0.0.1:39492", "up is idempotent"
        listing = mm2py("dev-cluster", "list", env=env)
        assert "cli-x" in listing.stdout and "127.0.0.1:39492" in listing.stdout and "running" in listing.stdout
    finally:
        down = mm2py("dev-cluster", "down", "cli-x", env=env)
    assert down.returncode == 0 and "stopped" in down.stdout
    assert "no dev clusters" in mm2py("dev-cluster", "list", env=env).stdout


def test_test_clusters_are_independent(cluster_a, cluster_b, unique_name):
    create_topic(cluster_a.bootstrap, unique_name, 1)
    produce(cluster_a.bootstrap, unique_name, [(b"k", b"v", None, None)], partition=0)
    assert [r.value for r in consume_all(cluster_a.bootstrap, unique_name)[0]] == [b"v"]
    assert unique_name not in list_topics(cluster_b.bootstrap)
