"""Connect's ``errors.*`` keys for a flow's transforms: fail the flow, skip the record, or dead-letter it.

``errors.tolerance = none`` (Connect's default): a transform that raises fails the flow, naming
the flow, the transform and the record (``TransformFailedError``). ``errors.tolerance = all``:
the record is left out of the remote topic like a dropped one (an offset gap the offset syncs
carry), counted as *failed* for its link and by the audit, and either written to
``errors.deadletterqueue.topic.name`` on the target (the source record as it was, plus
Connect's ``__connect.errors.*`` headers when ``errors.deadletterqueue.context.headers.enable``)
or, without that topic, logged as a warning naming flow, transform, topic, partition and offset
(Connect's source tasks skip it, logging only with ``errors.log.enable``; mm2py always logs).

Connect honours the dead-letter keys on sink connectors only: MM2's source connector ignores
them, so mm2py's dead-letter topic is an extension. Keys mm2py cannot honour are refused,
naming the key (``TransformError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from mm2py.config.model import FlowConfig
from mm2py.errors import ConfigError, ConfigProblem, KafkaError
from mm2py.kafka.admin import Admin
from mm2py.transforms.chain import TransformError

TOLERANCE = "errors.tolerance"
DLQ_TOPIC = "errors.deadletterqueue.topic.name"
DLQ_REPLICATION = "errors.deadletterqueue.topic.replication.factor"
DLQ_HEADERS = "errors.deadletterqueue.context.headers.enable"
# Connect's DeadLetterQueueReporter header names
HEADER_PREFIX = "__connect.errors."


@dataclass(frozen=True)
class ErrorPolicy:
    """What a flow does with a record a transform fails on. Picklable (sent with every copy task)."""

    tolerate: bool = False  # errors.tolerance = all
    dead_letter_topic: str = ""  # "" with tolerate: skipped, counted and logged
    replication_factor: int = 3  # Connect's default, for creating the dead-letter topic
    context_headers: bool = False


def _flag(raw: Mapping[str, str], key: str) -> bool:
    value = raw.get(key, "false").strip().lower()
    if value not in ("true", "false"):
        raise TransformError(key, f"{value!r}: true or false")
    return value == "true"


def error_policy(raw: Mapping[str, str]) -> ErrorPolicy:
    """The policy ``raw`` (a flow's merged keys) sets; raises ``TransformError`` naming a key it cannot honour."""
    tolerance = raw.get(TOLERANCE, "none").strip().lower()
    if tolerance not in ("none", "all"):
        raise TransformError(TOLERANCE, f"{tolerance!r}: none or all")
    topic = raw.get(DLQ_TOPIC, "").strip()
    if topic and tolerance == "none":
        raise TransformError(DLQ_TOPIC, "takes records only with errors.tolerance = all; with none the flow "
                             "fails on the record")
    try:
        rf = int(raw.get(DLQ_REPLICATION, "3").strip())
    except ValueError:
        raise TransformError(DLQ_REPLICATION, f"{raw[DLQ_REPLICATION]!r}: not an integer") from None
    if rf < 1 and rf != -1:
        raise TransformError(DLQ_REPLICATION, f"{rf}: at least 1, or -1 for the broker's default")
    headers = _flag(raw, DLQ_HEADERS)
    _flag(raw, "errors.log.enable")  # mm2py always logs a skipped record (without its content)
    if _flag(raw, "errors.log.include.messages"):
        raise TransformError("errors.log.include.messages", "true: mm2py never logs record contents, which may "
                             "hold what a transform is there to remove; use a dead-letter topic")
    retry = raw.get("errors.retry.timeout", "0").strip()
    if retry != "0":
        raise TransformError("errors.retry.timeout", f"{retry}: transforms are pure functions of the record, "
                             "a retry gives the same failure; only 0 is supported")
    return ErrorPolicy(tolerance == "all", topic, rf, headers)


def context_headers(*, flow: str, link: str, path: str, topic: str, partition: int, offset: int,
                    error: BaseException, trace: str) -> list[tuple[str, bytes | None]]:
    """Connect's dead-letter context headers for a record link ``link`` (class ``path``) failed on."""
    values = {"topic": topic, "partition": str(partition), "offset": str(offset),
              "connector.name": f"MirrorSourceConnector {flow}", "stage": "TRANSFORMATION", "class.name": path,
              "exception.class.name": f"{type(error).__module__}.{type(error).__qualname__}",
              "exception.message": str(error), "exception.stacktrace": trace}
    return [(HEADER_PREFIX + k, v.encode()) for k, v in values.items()]


def create_dead_letter_topics(flows: Iterable[FlowConfig]) -> None:
    """Create each flow's dead-letter topic on its target if missing (1 partition, as Connect does).

    A topic that cannot be created stops the start with a ``ConfigError`` naming the flow, the
    topic and ``errors.deadletterqueue.topic.replication.factor`` when it asks for more brokers.
    """
    problems: list[ConfigProblem] = []
    for flow in flows:
        policy = error_policy(flow.raw)
        if not (policy.tolerate and policy.dead_letter_topic) or not _has_transforms(flow.raw):
            continue
        admin = Admin(flow.target, timeout_ms=flow.admin_timeout_ms)
        try:
            admin.create_topic(policy.dead_letter_topic, 1, policy.replication_factor)
        except KafkaError as e:
            problems.append(ConfigProblem(DLQ_REPLICATION if "REPLICATION" in str(e).upper() else DLQ_TOPIC,
                                          f"dead-letter topic {policy.dead_letter_topic} (replication factor "
                                          f"{policy.replication_factor}) not created on {flow.target.alias}: {e} "
                                          f"(flow {flow.name})"))
    if problems:
        raise ConfigError(problems)


def _has_transforms(raw: Mapping[str, str]) -> bool:
    return any(n.strip() for n in raw.get("transforms", "").split(","))
