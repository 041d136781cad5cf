"""The one exception tree of mm2py.

Errors raised by client libraries (kafka-python, confluent-kafka) are translated at the
boundary into these, keeping the cluster, topic, partition, offset and the original cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class Mm2pyError(Exception):
    """Base class of every error mm2py raises on purpose."""


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a configuration file: the key at fault, its line, and why."""

    key: str | None
    message: str
    line: int | None = None
    source: str | None = None

    def __str__(self) -> str:
        where = []
        if self.source:
            where.append(self.source + (f":{self.line}" if self.line else ""))
        elif self.line:
            where.append(f"line {self.line}")
        if self.key:
            where.append(f"key '{self.key}'")
        prefix = ", ".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message


class ConfigError(Mm2pyError):
    """A configuration that cannot run. Lists every problem at once; a single problem on one line."""

    def __init__(self, problems: list[ConfigProblem] | ConfigProblem | str):
        if isinstance(problems, str):
            problems = [ConfigProblem(None, problems)]
        elif isinstance(problems, ConfigProblem):
            problems = [problems]
        self.problems: list[ConfigProblem] = list(problems)
        count = len(self.problems)
        if count == 1:  # one line, so that a log line or a Spark task's failure carries all of it
            super().__init__(f"invalid configuration: {self.problems[0]}")
            return
        head = f"invalid configuration ({count} problems):"
        super().__init__("\n  ".join([head, *map(str, self.problems)]))


class ConfigProviderError(Mm2pyError):
    """A config provider (``config.providers``) could not give the values asked of it.

    The message names the provider, the path and the keys asked for, never a value: callers put
    it into a ConfigError beside the key and line that holds the reference.
    """


class KafkaError(Mm2pyError):
    """A failure talking to a Kafka cluster, with where it happened and why."""

    def __init__(
        self,
        message: str,
        *,
        cluster: str | None = None,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        cause: BaseException | None = None,
        retriable: bool = False,
    ):
        self.cluster = cluster
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.cause = cause
        self.retriable = retriable
        parts = []
        if cluster is not None:
            parts.append(f"cluster={cluster}")
        if topic is not None:
            parts.append(f"topic={topic}")
        if partition is not None:
            parts.append(f"partition={partition}")
        if offset is not None:
            parts.append(f"offset={offset}")
        where = f" [{' '.join(parts)}]" if parts else ""
        why = f": {cause}" if cause is not None and str(cause) not in message else ""
        super().__init__(f"{message}{where}{why}")
        if cause is not None:
            self.__cause__ = cause


class ClusterUnreachableError(KafkaError):
    """No broker of a cluster answered within the admin timeout."""


class AuthenticationError(KafkaError):
    """The cluster refused our credentials."""


class AuthorizationError(KafkaError):
    """The cluster refused an operation for lack of an ACL; the message names it.

    ``operation``, ``resource_type``, ``resource_name`` and ``principal`` say which ACL is
    missing when the failing call tells (see ``missing_acl``).
    """

    operation: str | None = None
    resource_type: str | None = None
    resource_name: str | None = None
    principal: str | None = None


def missing_acl(
    operation: str,
    resource_type: str,
    resource_name: str,
    *,
    cluster: str,
    principal: str | None = None,
    topic: str | None = None,
    cause: BaseException | None = None,
    doing: str | None = None,
) -> AuthorizationError:
    """An ``AuthorizationError`` naming the ACL to add, as ``kafka-acls.sh`` would spell it."""
    who = principal or "the client's principal"
    op_flag = "".join(word.title() for word in operation.split("_"))
    resource_flag = ("--cluster" if resource_type == "CLUSTER"
                     else f"--{resource_type.lower().replace('_', '-')} '{resource_name}'")
    error = AuthorizationError(
        (f"{doing} failed: " if doing else "")
        + f"not authorized: missing ACL ALLOW {operation} on {resource_type} '{resource_name}' for {who} "
        f"(kafka-acls --add --allow-principal {principal or '<principal>'} --operation {op_flag} {resource_flag})",
        cluster=cluster, topic=topic, cause=cause,
    )
    error.operation, error.resource_type, error.resource_name = operation, resource_type, resource_name
    error.principal = principal
    return error


class RecordTooLargeError(KafkaError):
    """A source batch exceeds what the target topic accepts (max.message.bytes)."""


class DataLossError(KafkaError):
    """Source records vanished (retention, truncation) before they were mirrored."""


class DevClusterError(Mm2pyError):
    """A local development cluster could not be started, found or stopped."""


class FormatError(Mm2pyError):
    """Bytes that do not decode as the MM2 record type they should be."""


class SchemaError(KafkaError, FormatError):
    """A record whose schema id cannot be carried to the target (``schemas.mode``): not the
    Confluent wire format, an id its registry does not know, a schema that is not Avro, or a
    target id that would not resolve to the same schema. Waiting cannot fix it: the flow stops."""


class TransformFailedError(Mm2pyError):
    """A Python transform (``mm2py.transforms.RecordTransform``) raised on a record, or returned what
    is not a record, while copying. The message names the flow, the transform and its class, and
    the record (source topic, partition, offset). Waiting cannot fix it: the flow stops."""


class SchemaRegistryError(KafkaError):
    """A schema registry did not answer or refused a call; ``cluster`` names whose registry."""


class EngineTimeoutError(Mm2pyError):
    """Spark and one of its own Python processes did not reach each other in time (a worker that
    did not connect back, a socket to a planner that timed out): a machine too loaded to answer,
    which waiting fixes, whatever the flow did before."""


# Spark's words for its own Python processes missing a connection deadline (EngineTimeoutError)
_ENGINE_TIMEOUTS = ("Python worker failed to connect back", "CANNOT_OPEN_SOCKET")

_RAISED_IN_TASK = re.compile(r"^mm2py\.errors\.(\w+): (.+)$", re.M)
_WHERE = re.compile(r"\[cluster=(\S+)(?: topic=(\S+))?(?: partition=(\d+))?(?: offset=(\d+))?\]")


def from_task_failure(what: str, description: str) -> Mm2pyError:
    """Our error raised inside a Spark task (or Python data source), out of Spark's failure text.

    Spark reports it as a StreamingQueryException whose description holds the Python traceback
    of the task; the operator needs its last line, and callers its class and where it happened.
    """
    found = _RAISED_IN_TASK.findall(description)
    if not found:
        first = next((line for line in description.splitlines() if line.strip()), description)
        cls = EngineTimeoutError if any(words in description for words in _ENGINE_TIMEOUTS) else Mm2pyError
        return cls(f"{what} failed: {first.strip()}")
    name, text = found[-1]
    named = globals().get(name)
    if not (isinstance(named, type) and issubclass(named, Mm2pyError)) or named is ConfigError:
        named = Mm2pyError  # ConfigError words its message itself; a name we no longer have
    error = named(f"{what} failed: {text}")
    # the message may hold its cause's place too ("... [cluster=A]: ... [cluster=A topic=t partition=0]")
    where = max(_WHERE.finditer(text), key=lambda m: sum(g is not None for g in m.groups()), default=None)
    if where and isinstance(error, KafkaError):
        error.cluster, error.topic = where.group(1), where.group(2)
        error.partition = int(where.group(3)) if where.group(3) else None
        error.offset = int(where.group(4)) if where.group(4) else None
    return error


BRIEF_LINES = 12  # distinct lines a brief failure keeps, the most recent last
BRIEF_LINE_CHARS = 600


def brief_failure(description: str) -> str:
    """What ``from_task_failure`` reads of a Spark failure text, and nothing more.

    Keeps its first line (py4j's own "An error occurred while calling" line skipped), every
    mm2py error raised in a task, and Spark's words for an engine time-out: each distinct line
    once, in the order of its last appearance (a task retried four times says it four times),
    at most ``BRIEF_LINES`` lines of ``BRIEF_LINE_CHARS`` characters.
    """
    lines = [line.strip() for line in description.splitlines() if line.strip()]
    lines = [line.removeprefix(": ") for line in lines if not line.startswith("An error occurred while calling")]
    if not lines:
        return description.strip()[:BRIEF_LINE_CHARS]
    rest = [line for line in lines[1:]
            if _RAISED_IN_TASK.match(line) or any(words in line for words in _ENGINE_TIMEOUTS)]
    last_first = list(dict.fromkeys(reversed(rest)))[:BRIEF_LINES - 1]
    return "\n".join(line[:BRIEF_LINE_CHARS] for line in [lines[0], *reversed(last_first)])
