"""DescribeLogDirs as the planner asks it: the bytes on disk of the partitions a broker leads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kafka.protocol.admin.cluster import DescribeLogDirsRequest

from mm2py.types import TP


def log_dirs_request(wanted: Mapping[str, Sequence[int]]) -> object:
    """The request for ``wanted`` (topic -> partitions) to one broker."""
    return DescribeLogDirsRequest(topics=[
        DescribeLogDirsRequest.DescribableLogDirTopic(topic=t, partitions=list(ps)) for t, ps in wanted.items()])


def log_sizes_of(response: Any, wanted: Mapping[str, Sequence[int]]) -> dict[TP, int]:
    """The size of each partition in ``wanted`` the answer holds; a replica being moved (a future
    log, ``is_future_key``) is not counted."""
    return {(topic.name, part.partition_index): part.partition_size
            for result in response.results for topic in result.topics for part in topic.partitions
            if not part.is_future_key and part.partition_index in wanted.get(topic.name, ())}
