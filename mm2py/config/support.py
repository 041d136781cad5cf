"""What mm2py does with each MM2 4.3 setting: honoured, honoured differently, warned or refused.

One entry per key of ``mm2py.config.keys`` (a unit test fails on a key without one) and one
per MM2 setting mm2py declares no key for (Connect worker, REST and plugin settings, matched
by pattern). ``make config-doc`` writes ``docs/configuration.md`` from it (``render``); a unit
test fails when the committed file differs.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from mm2py.config.keys import ALL_KEYS, Key


class Status(enum.Enum):
    HONOURED = "honoured"
    DIFFERENT = "honoured differently"
    WARNED = "warned"
    REFUSED = "refused"
    EXTENSION = "mm2py extension"


@dataclass(frozen=True)
class Support:
    status: Status
    why: str = ""


H = Support(Status.HONOURED)
X = Support(Status.EXTENSION)

SUPPORT: dict[str, Support] = {
    "enabled": H, "topics": H, "topics.exclude": H, "groups": H, "groups.exclude": H,
    "replication.policy.class": H, "topic.filter.class": H, "group.filter.class": H,
    "config.property.filter.class": H,
    "replication.policy.separator": H, "replication.policy.internal.topic.separator.enabled": H,
    "replication.factor": Support(Status.DIFFERENT, "capped at the target's broker count, with a warning"),
    "heartbeats.topic.replication.factor": Support(Status.DIFFERENT, "capped at the broker count"),
    "checkpoints.topic.replication.factor": Support(Status.DIFFERENT, "capped at the broker count"),
    "offset-syncs.topic.replication.factor": Support(Status.DIFFERENT, "capped at the broker count"),
    "offset-syncs.topic.location": H,
    "refresh.topics.enabled": H, "refresh.topics.interval.seconds": H,
    "refresh.groups.enabled": H, "refresh.groups.interval.seconds": H,
    "sync.topic.configs.enabled": H, "sync.topic.configs.interval.seconds": H,
    "config.properties.exclude": Support(Status.DIFFERENT, "also: max.message.bytes is always copied unless "
                                         "excluded, so the target takes every batch the source took"),
    "use.defaults.from": H, "sync.topic.acls.enabled": H, "sync.topic.acls.interval.seconds": H,
    "emit.heartbeats.enabled": H, "emit.heartbeats.interval.seconds": H,
    "emit.checkpoints.enabled": H, "emit.checkpoints.interval.seconds": H,
    "sync.group.offsets.enabled": H, "sync.group.offsets.interval.seconds": H,
    "emit.offset-syncs.enabled": H,
    "offset-syncs.history.enabled": X,
    "batch.coalesce.bytes": X,
    "provenance.enabled": X,
    "offset.lag.max": Support(Status.DIFFERENT, "syncs are written wherever the offset mapping breaks (exact "
                              "translation) and also every offset.lag.max offsets, for MM2's own tools"),
    "heartbeats.replication.enabled": H,
    "admin.timeout.ms": Support(Status.DIFFERENT, "also how long a cluster that never answered is waited for "
                                "at start; an outage after that stalls the flow until the cluster returns"),
    "consumer.poll.timeout.ms": Support(Status.DIFFERENT, "there is no poll loop: a micro-batch fetches its "
                                       "ranges; fetch.max.wait.ms bounds each fetch"),
    "tasks.max": Support(Status.DIFFERENT, "most Spark tasks per micro-batch (default: Spark's parallelism, "
                         "not 1)"),
    "exactly.once.support": Support(Status.HONOURED, "'required' refuses to start when the target cannot "
                                    "commit transactions; 'enabled' (mm2py's) falls back to at-least-once with a "
                                    "warning; 'requested' follows exactly.once.source.support"),
    "partition.mismatch": X, "source.reset.policy": X, "sync.topic.deletes.enabled": X, "max.batch.bytes": X,
    "batch.duration.ms": X,
    "trigger.interval.ms": X, "copy.tail.ms": X, "copy.tail.commit.ms": X, "copy.continuous.enabled": X,
    "copy.resident.enabled": X, "copy.resident.grace.ms": X,
    "metrics.port": X, "metrics.bind.address": X,
    "audit.interval.seconds": X, "shutdown.timeout.ms": X,
    "auto.offset.reset": Support(Status.HONOURED, "'{source}.consumer.auto.offset.reset'; 'latest' as MM2 3.7+"),
    "clusters": H, "bootstrap.servers": H,
    "schemas.mode": X, "schemas.on.error": X, "schemas.dead.letter.topic": X, "schema.registry.url": X,
    "schemas.storage.topic": X, "schemas.keys": X,
}


@dataclass(frozen=True)
class Other:
    """An MM2 setting mm2py declares no key for, matched by ``pattern``."""

    name: str
    pattern: str
    support: Support

    def matches(self, setting: str) -> bool:
        return re.fullmatch(self.pattern, setting) is not None


_NO_REST = "mm2py runs no Connect REST server: flows of one file share a process; split with --clusters"
OTHER: tuple[Other, ...] = (
    Other("dedicated.mode.enable.internal.rest", r"dedicated\.mode\.enable\.internal\.rest",
          Support(Status.WARNED, _NO_REST)),
    Other("listeners", r"listeners", Support(Status.WARNED, _NO_REST)),
    Other("rest.*", r"rest\..+", Support(Status.WARNED, _NO_REST)),
    Other("exactly.once.source.support", r"exactly\.once\.source\.support",
          Support(Status.WARNED, "'enabled'/'required' make flows into the cluster exactly-once; 'preparing' "
                                 "(MM2's rollout step) starts with a warning and is at-least-once")),
    Other("forwarding.admin.class", r"forwarding\.admin\.class",
          Support(Status.WARNED, "mm2py's admin client is not pluggable; a class other than MM2's default is "
                                 "named in the start-up warning")),
    Other("offset.flush.interval.ms / offset.flush.timeout.ms", r"offset\.flush\.(interval|timeout)\.ms",
          Support(Status.DIFFERENT, "positions are written after every micro-batch (trigger.interval.ms, "
                                    "batch.duration.ms), not on a flush timer")),
    Other("offset.storage.topic / .partitions / .replication.factor", r"offset\.storage\..+",
          Support(Status.DIFFERENT, "positions live in MM2's mm2-offsets.{source}.internal on the target, "
                                    "created with 25 partitions as Connect does")),
    Other("config.storage.* / status.storage.*", r"(config|status)\.storage\..+",
          Support(Status.DIFFERENT, "no Connect config or status topics: the file is the configuration, "
                                    "status comes from mm2py status and the metrics")),
    Other("key.converter / value.converter / header.converter", r"(key|value|header)\.converter(\..+)?",
          Support(Status.DIFFERENT, "batches are copied byte for byte, as MM2's ByteArrayConverter does")),
    Other("group.id", r"group\.id", Support(Status.DIFFERENT, "no Connect worker group")),
    Other("name / connector.class / source.cluster.alias / target.cluster.alias",
          r"name|connector\.class|(source|target)\.cluster\.alias",
          Support(Status.DIFFERENT, "connectors are built per flow from the file; these follow from the flow")),
    Other("metric.names.formats", r"metric\.names\.formats",
          Support(Status.DIFFERENT, "metrics carry the names the Prometheus JMX exporter gives MM2's MBeans")),
    Other("config.providers*", r"config\.providers(\..+)?",
          Support(Status.HONOURED, "${provider:[path:]key} in any value is replaced once, at start, before "
                                   "validation: Kafka's FileConfigProvider, DirectoryConfigProvider and "
                                   "EnvVarConfigProvider by their Java class names (params allowed.paths, "
                                   "allowlist.pattern) or a Python class with configure(params) and get(path, keys) "
                                   "(mm2py.config.providers); a reference that cannot be resolved is refused, "
                                   "where Kafka would keep it as text")),
    Other("task.* / worker.*", r"(task|worker)\..+", Support(Status.DIFFERENT, "no Connect worker")),
    Other("transforms* / predicates*", r"(transforms|predicates)(\..+)?",
          Support(Status.DIFFERENT, "Connect's Filter, DropHeaders and InsertHeader (value.literal = null only: "
                                    "MM2's ByteArrayConverter refuses any other literal on every record) with the "
                                    "predicates TopicNameMatches, HasHeaderKey and RecordIsTombstone run on the "
                                    "mirrored records, as in MM2 (mm2py.transforms); RegexRouter renames the remote "
                                    "topic after the policy everywhere mm2py names it (creation, checkpoints, "
                                    "failover, status; MM2 creates and checkpoints the policy's name), refused on a "
                                    "flow of a cycle (mm2py.routing); TimestampRouter sends each record to its "
                                    "window topic (timestamp.format translated from SimpleDateFormat: yyyy yy MM dd "
                                    "HH mm ss SSS and quoted literals, UTC), created on demand, with no offset syncs "
                                    "or checkpoints there (failover refuses those topics; refused with exactly-once, "
                                    "translate, a cycle, a record predicate: mm2py.transforms.timestamp_router); "
                                    "any other Connect class is refused at start naming its key; heartbeats and "
                                    "checkpoints are not "
                                    "transformed. Extension: a type outside org.apache.kafka. is a Python class "
                                    "by dotted path (mm2py.transforms.RecordTransform), built with the link's "
                                    "keys and called per record")),
    Other("errors.tolerance, errors.log.*, errors.retry.*", r"errors\.(tolerance|log\..+|retry\..+)",
          Support(Status.HONOURED, "a record a transform fails on: none fails the flow naming flow, transform, "
                                   "topic, partition and offset; all leaves it out (an offset gap, counted failed "
                                   "per transform and by the audit) and logs it naming topic, partition and offset "
                                   "(always, without its content: errors.log.include.messages = true is refused); "
                                   "errors.retry.timeout other than 0 is refused (mm2py.transforms.tolerance)")),
    Other("errors.deadletterqueue.*", r"errors\.deadletterqueue\..+",
          Support(Status.EXTENSION, "topic.name (with errors.tolerance = all) takes records a transform failed on, "
                                    "on the target, as the source had them; topic.replication.factor creates it; "
                                    "context.headers.enable adds Connect's __connect.errors.* headers. Connect "
                                    "honours these keys on sink connectors only: MM2's source connector ignores "
                                    "them and only skips the record")),
    Other("{alias}.sasl.oauthbearer.token.provider", r"sasl\.oauthbearer\.token\.provider",
          Support(Status.EXTENSION, "package.module:callable returning (token, expiry epoch seconds): signs "
                                    "OAUTHBEARER clients in where MM2 names a Java login callback handler (MSK IAM's "
                                    "Python signer fits here); another handler class is refused naming this key")),
    Other("{alias}.sasl.mechanism = OAUTHBEARER, sasl.oauthbearer.*, sasl.login.*",
          r"sasl\.(oauthbearer|login)\..+",
          Support(Status.HONOURED, "OIDC client credentials (KIP-768) on every client: tokens from "
                                   "sasl.oauthbearer.token.endpoint.url for the JAAS clientId/clientSecret/scope, "
                                   "replaced at the sasl.login.refresh.* time; a client secret the endpoint refuses "
                                   "stops the start naming the key (mm2py.config.oauth)")),
    Other("{alias}.consumer.* / .producer.* / .admin.*, {src}->{tgt}.consumer.* ...",
          r"(consumer|producer|admin)\..+",
          Support(Status.HONOURED, "by MM2's precedence (mm2py.config.clients); settings a client cannot apply "
                                   "are named in the start-up warning with the reason")),
)


def support_of(key: Key) -> Support | None:
    return SUPPORT.get(key.name)


def other_support(setting: str) -> Support | None:
    """The support of an MM2 setting mm2py has no key for (None: not an MM2 setting we know)."""
    return next((o.support for o in OTHER if o.matches(setting)), None)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _default(key: Key) -> str:
    value = key.default
    if value is None:
        return ""
    if isinstance(value, tuple):
        value = ", ".join(value)
    if isinstance(value, bool):
        value = str(value).lower()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{_cell(value)}`" if value != "" else ""


def render() -> str:
    """docs/configuration.md."""
    lines = [
        "# Configuration keys",
        "",
        "Generated by `make config-doc` from `mm2py/config/keys.py` and `mm2py/config/support.py`;",
        "a unit test fails when this file and the code differ.",
        "",
        "Status: **honoured** (as MM2 4.3 does), **honoured differently** (why), **warned** (named in the",
        "one start-up WARNING), **refused** (a ConfigError naming key and line), **mm2py extension**.",
        "Flow keys may be set at top level or as `{src}->{tgt}.<key>`; cluster keys as `{alias}.<key>`.",
        "",
        "| key | scope | default | status | notes |",
        "|---|---|---|---|---|",
    ]
    for key in ALL_KEYS:
        support = SUPPORT[key.name]
        notes = " ".join(t for t in (key.doc, support.why) if t)
        lines.append(f"| `{key.name}` | {key.scope.value} | {_default(key)} | {support.status.value} | "
                     f"{_cell(notes)} |")
    lines += ["", "## MM2 settings without a key of their own", "",
              "| setting | status | notes |", "|---|---|---|"]
    for other in OTHER:
        lines.append(f"| `{other.name}` | {other.support.status.value} | {_cell(other.support.why)} |")
    return "\n".join(lines) + "\n"
