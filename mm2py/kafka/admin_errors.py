"""Admin and client errors as mm2py's: ``translate`` keeps what failed and where, and names the
ACL an authorization failure lacks; ``principal_of`` names the principal the settings log in as."""

from __future__ import annotations

import re
from collections.abc import Mapping

from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import KafkaException

from mm2py.errors import AuthenticationError, ClusterUnreachableError, KafkaError, missing_acl
from mm2py.kafka.classify import is_retriable

_JAAS_USER = re.compile(r'username\s*=\s*"([^"]*)"')

# The operation each admin action needs (Kafka's ACL operations, by the first word of the action)
_OPERATIONS = {
    "listing": "DESCRIBE", "describing": "DESCRIBE", "reading": "DESCRIBE", "finding": "DESCRIBE",
    "creating": "CREATE", "growing": "ALTER", "deleting": "DELETE", "committing": "READ",
    "altering": "ALTER_CONFIGS",
}
_RESOURCES = {
    CKafkaError.TOPIC_AUTHORIZATION_FAILED: "TOPIC",
    CKafkaError.GROUP_AUTHORIZATION_FAILED: "GROUP",
    CKafkaError.CLUSTER_AUTHORIZATION_FAILED: "CLUSTER",
}


def principal_of(settings: Mapping[str, str]) -> str | None:
    """``User:name`` for SASL settings that name the user (PLAIN/SCRAM), else None (unknown)."""
    if "sasl.username" in settings:
        return f"User:{settings['sasl.username']}"
    match = _JAAS_USER.search(settings.get("sasl.jaas.config", ""))
    if match:
        return f"User:{match.group(1)}"
    if settings.get("security.protocol", "PLAINTEXT").upper() == "PLAINTEXT":
        return "User:ANONYMOUS"
    return None


def translate(exc: BaseException, *, cluster: str, action: str, topic: str | None = None,
              principal: str | None = None, group: str | None = None) -> KafkaError:
    """confluent-kafka's error -> ours, keeping what failed and where.

    An authorization failure names the ACL that is missing: the operation (from ``action``),
    the resource (topic, group or cluster, from the error code) and the principal if known.
    """
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    code = err.code() if isinstance(err, CKafkaError) else None
    text = err.str() if isinstance(err, CKafkaError) else str(exc)
    message = f"{action} failed: {text}"
    if code in _RESOURCES:
        resource = _RESOURCES[code]
        operation = _OPERATIONS.get(action.split(" ", 1)[0], "DESCRIBE")
        if resource == "CLUSTER" and operation == "CREATE" and "ACL" in action:
            operation = "ALTER"
        name = {"TOPIC": topic or "?", "GROUP": group or "?", "CLUSTER": "kafka-cluster"}[resource]
        return missing_acl(operation, resource, name, cluster=cluster, principal=principal, topic=topic,
                           cause=exc, doing=action)
    if code in (CKafkaError._AUTHENTICATION, CKafkaError.SASL_AUTHENTICATION_FAILED):
        return AuthenticationError(f"authentication failed ({action}): {text}; check the "
                                   "sasl.*/ssl.* settings of this cluster", cluster=cluster, topic=topic, cause=exc)
    if code in (CKafkaError._TRANSPORT, CKafkaError._ALL_BROKERS_DOWN, CKafkaError._TIMED_OUT):
        return ClusterUnreachableError(message, cluster=cluster, topic=topic, cause=exc, retriable=True)
    retriable = (isinstance(err, CKafkaError) and code is not None
                 and is_retriable(code, library_says_retriable=err.retriable()))
    return KafkaError(message, cluster=cluster, topic=topic, cause=exc, retriable=retriable)
