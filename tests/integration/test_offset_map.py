"""Issue 48: an offset map kept outside Kafka (Flink, Beam) translated like a group's offsets."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.integration.mirror_helpers import a_group_on_a_mirrored_topic

pytestmark = pytest.mark.integration


def test_flink_map_translates_as_the_group_failover(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """A group's offsets written as a Flink-shaped file translate to exactly the group's failover plan."""
    topic, text, plan = a_group_on_a_mirrored_topic(spark, cluster_a, cluster_b, unique_name, tmp_path)
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
