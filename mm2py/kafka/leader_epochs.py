"""OffsetsForLeaderEpoch (KIP-101, KIP-320) as a consumer asks it: where a leader epoch ends in a leader's log.

A leader answers with the end offset of the requested epoch in its own log: the start offset of
the next epoch it holds, or its log end for its current epoch. An epoch it never held is
answered with the largest epoch below it that it holds, and that epoch's end. A client whose
last copied batch was written in epoch E below offset P finds the log it copied from diverged
when the end offset of E is below P (the Java consumer's ``SubscriptionState.maybeCompleteValidation``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from mm2py.types import TP

# v3: the first with replica_id (-1: a consumer) and current_leader_epoch; Kafka 2.3 on, and 4.x
REQUEST = OffsetForLeaderEpochRequest[3]
CONSUMER = -1
NO_EPOCH = -1  # current_leader_epoch: not fenced against the client's view of the leader


@dataclass(frozen=True, slots=True)
class EpochEnd:
    """One partition's answer: the epoch the leader answered for and its end offset (-1: undefined)."""

    error_code: int
    leader_epoch: int
    end_offset: int


def epoch_request(epochs: Mapping[TP, int]) -> object:
    """A consumer's OffsetsForLeaderEpoch request asking the end offset of ``epochs[tp]`` for each partition."""
    by_topic: dict[str, list[object]] = {}
    for (topic, partition), epoch in sorted(epochs.items()):
        by_topic.setdefault(topic, []).append(REQUEST.OffsetForLeaderTopic.OffsetForLeaderPartition(
            partition=partition, current_leader_epoch=NO_EPOCH, leader_epoch=epoch))
    return REQUEST(replica_id=CONSUMER, topics=[REQUEST.OffsetForLeaderTopic(topic=t, partitions=ps)
                                                for t, ps in by_topic.items()])


def epoch_answers(response: Any) -> dict[TP, EpochEnd]:  # a kafka-python response
    return {(topic.topic, p.partition): EpochEnd(p.error_code, p.leader_epoch, p.end_offset)
            for topic in response.topics for p in topic.partitions}
