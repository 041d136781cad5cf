"""Issue 48: an offset map kept outside Kafka (Flink, Beam) translated like a group's offsets."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mm2py.config import load_text
from mm2py.ops.failover import plan_failover
from tests.integration.mirror_helpers import mirror_once, properties
from tests.integration.test_failover import consume
from tests.kafkautil import create_topic, produce

pytestmark = pytest.mark.integration


def test_flink_map_translates_as_the_group_failover(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """A group's offsets written as a Flink-shaped file translate to exactly the group's failover plan."""
    topic = f"{unique_name}-orders"
    create_topic(cluster_a.bootstrap, topic, 3)
    values = [f"o-{i}".encode() for i in range(3000)]
    for p in range(3):
        produce(cluster_a.bootstrap, topic, [(b"k", v, None, None) for v in values[p::3]], partition=p)
    text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap}, {"A->B": {"topics": topic}})
    mirror_once(spark, text, tmp_path / "m1")
    group = f"{unique_name}-g"
    consume(cluster_a.bootstrap, group, topic, limits={0: 333, 1: 1000, 2: 1})
    plan = plan_failover(load_text(text), group, "A", "B")
    committed = {p.source_topic: {} for p in plan.partitions}
    for p in plan.partitions:
        committed[p.source_topic][str(p.partition)] = p.source_offset
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    out = subprocess.run([sys.executable, "-m", "mm2py", "offsets", "translate", str(path), "--from", "A",
                          "--to", "B", "--offsets", "-"], input=json.dumps(committed), capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    expected: dict[str, dict[str, int]] = {}
    for p in plan.partitions:
        expected.setdefault(p.target_topic, {})[str(p.partition)] = p.target_offset
    assert json.loads(out.stdout) == expected
    assert set(expected) == {f"A.{topic}"} and len(expected[f"A.{topic}"]) == 3
