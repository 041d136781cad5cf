"""What to do when a remote topic has fewer partitions than its source topic.

MM2 adds partitions to the remote topic (createPartitions) whenever the source has more.
mm2py does the same for remote topics that are its own: created by this flow in this run,
already mirrored partition for partition in this run (the source grew), or holding positions
this flow recorded (mirrored 1:1 before a restart; ``error`` mode only, since ``hash`` mode
records positions too). A remote topic found with fewer partitions otherwise was made by
someone else, on purpose or not; growing it would silently move keys between its partitions,
so mm2py does not:

- ``partition.mismatch = error`` (default): the flow fails, naming both topics and counts;
- ``partition.mismatch = hash``: records are spread over the target's partitions by murmur2
  of the key as a Java producer would (``mm2py.source.copy.rehash``), for as long as the run lasts.
"""

from __future__ import annotations

from enum import Enum

from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError


class Action(Enum):
    GROW = "grow"
    HASH = "hash"


def on_fewer_partitions(flow: FlowConfig, topic: str, remote: str, have: int, count: int, *, ours: bool) -> Action:
    """Grow the remote topic, hash into it, or raise (a remote topic that is not ours, mode error)."""
    if ours:
        return Action.GROW
    if flow.delivery.partition_mismatch == "hash":
        return Action.HASH
    raise KafkaError(
        f"remote topic {remote} has {have} partitions, fewer than the {count} of source topic {topic} on "
        f"{flow.source.alias}, and was not created by flow {flow.name}: partition p cannot be mirrored to "
        f"partition p. Add partitions to {remote} (at least {count}), delete it so mm2py creates it, or set "
        f"'{flow.name}.partition.mismatch = hash' to write records by key hash over its {have} partitions",
        cluster=flow.target.alias, topic=remote,
    )
