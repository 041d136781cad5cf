"""The error classification table: every Kafka error code mm2py handles, and what it does."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import KafkaException

from mm2py.errors import KafkaError
from mm2py.kafka.admin_errors import translate
from mm2py.kafka.classify import TABLE, Action, action_for
from mm2py.kafka.retry import is_retriable
from mm2py.kafka.wire import to_kafka_error

EXPECTED = {
    "NOT_LEADER_OR_FOLLOWER": Action.REFRESH, "LEADER_NOT_AVAILABLE": Action.REFRESH,
    "FENCED_LEADER_EPOCH": Action.REFRESH, "UNKNOWN_LEADER_EPOCH": Action.REFRESH,
    "UNKNOWN_TOPIC_OR_PARTITION": Action.REFRESH, "NOT_COORDINATOR": Action.REFRESH,
    "NETWORK_EXCEPTION": Action.REFRESH, "KAFKA_STORAGE_ERROR": Action.REFRESH, "_TRANSPORT": Action.REFRESH,
    "_ALL_BROKERS_DOWN": Action.REFRESH, "_NOENT": Action.REFRESH,
    "REQUEST_TIMED_OUT": Action.RETRY, "NOT_ENOUGH_REPLICAS": Action.RETRY,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": Action.RETRY, "COORDINATOR_LOAD_IN_PROGRESS": Action.RETRY,
    "THROTTLING_QUOTA_EXCEEDED": Action.RETRY, "_TIMED_OUT": Action.RETRY, "INVALID_REPLICATION_FACTOR": Action.RETRY,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": Action.RESTART, "UNKNOWN_PRODUCER_ID": Action.RESTART,
    "INVALID_PRODUCER_EPOCH": Action.RESTART,
    "TOPIC_AUTHORIZATION_FAILED": Action.FATAL, "GROUP_AUTHORIZATION_FAILED": Action.FATAL,
    "CLUSTER_AUTHORIZATION_FAILED": Action.FATAL, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": Action.FATAL,
    "MESSAGE_TOO_LARGE": Action.FATAL, "RECORD_LIST_TOO_LARGE": Action.FATAL,
    "UNSUPPORTED_COMPRESSION_TYPE": Action.FATAL, "_AUTHENTICATION": Action.FATAL,
    "SASL_AUTHENTICATION_FAILED": Action.FATAL,
}

# the few codes librdkafka spells otherwise than Kafka's protocol guide
LIBRDKAFKA_NAMES = {"NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION", "MESSAGE_TOO_LARGE": "MSG_SIZE_TOO_LARGE",
                    "UNKNOWN_TOPIC_OR_PARTITION": "UNKNOWN_TOPIC_OR_PART"}


@pytest.mark.parametrize("name, action", sorted(EXPECTED.items(), key=lambda kv: kv[0]))
def test_each_code_and_what_it_does(name: str, action: Action) -> None:
    code = next(c for c, (n, _) in TABLE.items() if n == name)
    assert action_for(code) is action
    # the names are Kafka's own: librdkafka knows each code under the same name
    assert getattr(CKafkaError, LIBRDKAFKA_NAMES.get(name, name)) == code


def test_every_code_in_the_table_is_tested() -> None:
    assert {name for name, _ in TABLE.values()} - set(EXPECTED) <= {
        "CORRUPT_MESSAGE", "BROKER_NOT_AVAILABLE", "REPLICA_NOT_AVAILABLE", "COORDINATOR_NOT_AVAILABLE",
        "UNSUPPORTED_VERSION", "NOT_CONTROLLER", "CONCURRENT_TRANSACTIONS", "INVALID_RECORD", "UNKNOWN_TOPIC_ID",
        "_RESOLVE", "_MSG_TIMED_OUT", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "_WAIT_COORD"}


def test_unknown_codes_follow_the_library() -> None:
    assert action_for(9999, library_says_retriable=True) is Action.RETRY
    assert action_for(9999) is Action.FATAL


def test_both_clients_errors_carry_the_tables_verdict() -> None:
    fenced = to_kafka_error(74, cluster="A", topic="t", partition=0)
    assert isinstance(fenced, KafkaError) and fenced.retriable
    assert not to_kafka_error(29, cluster="A", topic="t").retriable
    ours = translate(KafkaException(CKafkaError(CKafkaError.FENCED_LEADER_EPOCH)), cluster="A",
                     action="listing latest offsets", topic="events")
    assert ours.retriable and "cluster=A" in str(ours)
    no_leaders = KafkaException(CKafkaError(CKafkaError._NOENT, "Failed to query partition leaders: No leaders found"))
    assert translate(no_leaders, cluster="B", action="listing latest offsets").retriable
    assert is_retriable(no_leaders)
