"""Issue 48: a Spark checkpoint's Kafka offsets moved A -> B and back through the group translation."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.mirror_helpers import a_group_on_a_mirrored_topic, properties

pytestmark = pytest.mark.integration


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mm2py", *args], capture_output=True, text=True, timeout=120)


def test_checkpoint_failover_equals_group_plan_and_fails_back(spark, cluster_a, cluster_b, unique_name, tmp_path):
    """A checkpoint holding a group's offsets gets the group's failover offsets; failback restores them."""
    topic, text, plan = a_group_on_a_mirrored_topic(spark, cluster_a, cluster_b, unique_name, tmp_path)
    source = {str(p.partition): p.source_offset for p in plan.partitions}
    cp = tmp_path / "cp"
    (cp / "offsets").mkdir(parents=True)
    (cp / "commits").mkdir()
    (cp / "offsets" / "0").write_text(f'v1\n{{"batchWatermarkMs":0}}\n{json.dumps({topic: source})}')
    (cp / "commits" / "0").write_text('v1\n{"nextBatchWatermarkMs":0}')
    path = tmp_path / "mm2.properties"
    path.write_text(text)
    dry = cli("failover", str(path), "--spark-checkpoint", str(cp), "--from", "A", "--to", "B")
    assert dry.returncode == 0 and "using batch 0" in dry.stdout and "dry run" in dry.stdout, dry.stderr
    live = cli("failover", str(path), "--spark-checkpoint", str(cp), "--from", "A", "--to", "B", "--execute")
    assert live.returncode != 0 and "looks alive" in live.stderr
    done = cli("failover", str(path), "--spark-checkpoint", str(cp), "--from", "A", "--to", "B", "--execute",
               "--force")
    assert done.returncode == 0 and "wrote offsets/1" in done.stdout, done.stderr
    written = json.loads((cp / "offsets" / "1").read_text().splitlines()[2])
    assert written == {f"A.{topic}": {str(p.partition): p.target_offset for p in plan.partitions}}
    back_text = properties({"A": cluster_a.bootstrap, "B": cluster_b.bootstrap},
                           {"A->B": {"topics": topic}, "B->A": {"topics": "none-such"}})
    path.write_text(back_text)
    back = cli("failback", str(path), "--spark-checkpoint", str(cp), "--from", "B", "--to", "A", "--execute",
               "--force")
    assert back.returncode == 0 and "wrote offsets/2" in back.stdout, back.stderr + back.stdout
    assert json.loads((cp / "offsets" / "2").read_text().splitlines()[2]) == {topic: source}
    assert sorted(os.listdir(cp / "commits")) == ["0", "1", "2"]
