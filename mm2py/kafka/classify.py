"""What mm2py does about each Kafka error code: the one table every client path consults.

Codes are Kafka's protocol error codes (shared by kafka-python and librdkafka) and
librdkafka's local codes (negative). Actions:

- ``RETRY``: the same request again after a backoff (a timeout, a coordinator loading, too few
  in-sync replicas while a broker restarts);
- ``REFRESH``: leadership or metadata moved; refresh them, then retry (not leader, fenced or
  unknown leader epoch, a broker gone, no leader yet);
- ``RESTART``: the producer's state on the broker is gone or out of step; the copy task starts
  again with a new producer id from the recorded positions (at-least-once, order kept);
- ``FATAL``: waiting cannot fix it (authorization, a batch the target cannot take, an
  unsupported codec or version); it stops only what it concerns, naming it.

A code missing from the table is treated as ``RETRY`` when the client library says it is
retriable, else ``FATAL``.
"""

from __future__ import annotations

import enum


class Action(enum.Enum):
    RETRY = "retry"
    REFRESH = "refresh metadata, retry"
    RESTART = "restart the task"
    FATAL = "stop, naming it"

    @property
    def retriable(self) -> bool:
        return self is not Action.FATAL


UNKNOWN_TOPIC_OR_PARTITION = 3  # the topic (or partition) does not exist on the cluster

# code -> (Kafka's name, action)
TABLE: dict[int, tuple[str, Action]] = {
    2: ("CORRUPT_MESSAGE", Action.RETRY),
    3: ("UNKNOWN_TOPIC_OR_PARTITION", Action.REFRESH),
    5: ("LEADER_NOT_AVAILABLE", Action.REFRESH),
    6: ("NOT_LEADER_OR_FOLLOWER", Action.REFRESH),
    7: ("REQUEST_TIMED_OUT", Action.RETRY),
    8: ("BROKER_NOT_AVAILABLE", Action.REFRESH),
    9: ("REPLICA_NOT_AVAILABLE", Action.REFRESH),
    10: ("MESSAGE_TOO_LARGE", Action.FATAL),
    13: ("NETWORK_EXCEPTION", Action.REFRESH),
    14: ("COORDINATOR_LOAD_IN_PROGRESS", Action.RETRY),
    15: ("COORDINATOR_NOT_AVAILABLE", Action.REFRESH),
    16: ("NOT_COORDINATOR", Action.REFRESH),
    18: ("RECORD_LIST_TOO_LARGE", Action.FATAL),
    19: ("NOT_ENOUGH_REPLICAS", Action.RETRY),
    20: ("NOT_ENOUGH_REPLICAS_AFTER_APPEND", Action.RETRY),
    29: ("TOPIC_AUTHORIZATION_FAILED", Action.FATAL),
    30: ("GROUP_AUTHORIZATION_FAILED", Action.FATAL),
    31: ("CLUSTER_AUTHORIZATION_FAILED", Action.FATAL),
    35: ("UNSUPPORTED_VERSION", Action.FATAL),
    # internal topics are created with min(factor, live brokers): a refusal means brokers are away
    38: ("INVALID_REPLICATION_FACTOR", Action.RETRY),
    41: ("NOT_CONTROLLER", Action.REFRESH),
    45: ("OUT_OF_ORDER_SEQUENCE_NUMBER", Action.RESTART),
    47: ("INVALID_PRODUCER_EPOCH", Action.RESTART),
    51: ("CONCURRENT_TRANSACTIONS", Action.RETRY),
    53: ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", Action.FATAL),
    # a refused sign-in or re-authentication (KIP-368): credentials or token no longer accepted
    58: ("SASL_AUTHENTICATION_FAILED", Action.FATAL),
    56: ("KAFKA_STORAGE_ERROR", Action.REFRESH),
    59: ("UNKNOWN_PRODUCER_ID", Action.RESTART),
    74: ("FENCED_LEADER_EPOCH", Action.REFRESH),
    75: ("UNKNOWN_LEADER_EPOCH", Action.REFRESH),
    76: ("UNSUPPORTED_COMPRESSION_TYPE", Action.FATAL),
    87: ("INVALID_RECORD", Action.FATAL),
    89: ("THROTTLING_QUOTA_EXCEEDED", Action.RETRY),
    100: ("UNKNOWN_TOPIC_ID", Action.REFRESH),
    # librdkafka's local codes
    -195: ("_TRANSPORT", Action.REFRESH),
    -193: ("_RESOLVE", Action.REFRESH),
    -192: ("_MSG_TIMED_OUT", Action.RETRY),
    -190: ("_UNKNOWN_PARTITION", Action.REFRESH),
    -188: ("_UNKNOWN_TOPIC", Action.REFRESH),
    -187: ("_ALL_BROKERS_DOWN", Action.REFRESH),
    -185: ("_TIMED_OUT", Action.RETRY),
    -180: ("_WAIT_COORD", Action.RETRY),
    -169: ("_AUTHENTICATION", Action.FATAL),
    -156: ("_NOENT", Action.REFRESH),  # "no leaders found" while partitions have no leader yet
}


def action_for(code: int, *, library_says_retriable: bool = False) -> Action:
    """The action for a Kafka error code (see the module docstring for codes not in the table)."""
    known = TABLE.get(code)
    if known is not None:
        return known[1]
    return Action.RETRY if library_says_retriable else Action.FATAL


def is_retriable(code: int, *, library_says_retriable: bool = False) -> bool:
    return action_for(code, library_says_retriable=library_says_retriable).retriable
