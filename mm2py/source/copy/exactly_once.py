"""Start-up of an exactly-once flow: check the target can commit transactions, fence earlier tasks.

``prepare(flow, tasks)`` runs on the driver before the flow's source connector starts (and
again before it restarts). For a flow whose mode is ``enabled`` or ``required``
(``mm2py.config.delivery``) it

1. checks the target's ``transaction.version`` is 2 or more (Kafka 4.0+; the copy path speaks
   transaction version 2);
2. creates the positions topic and the offset syncs topic, so that the tasks only write;
3. fences every transactional id of the flow: ids ``0 .. tasks-1`` and any other the coordinators
   list under the flow's prefix (an earlier run with more tasks). InitProducerId bumps each id's
   epoch and aborts its open transaction, so no task of an earlier run commits after this point
   and no open transaction holds back the read_committed reads of positions.

A failure (no coordinator, a missing TransactionalId ACL, an old transaction version) stops a
``required`` flow with an error naming the cause; an ``enabled`` flow runs at-least-once and
one WARNING says why.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace

import structlog

from mm2py.config.model import FlowConfig
from mm2py.errors import AuthorizationError, KafkaError, Mm2pyError
from mm2py.flow_policy import offset_syncs_history_location, offset_syncs_location
from mm2py.kafka.admin import Admin
from mm2py.kafka.admin_errors import principal_of
from mm2py.kafka.compacted import ensure_compacted_topic
from mm2py.kafka.transactions import (
    REQUIRED_TRANSACTION_VERSION,
    Transaction,
    list_transactional_ids,
    transaction_version,
)
from mm2py.kafka.wire import RawClient
from mm2py.source.copy.copy_settings import CopySettings
from mm2py.source.copy.transactional import ExactlyOnce, transactional_id, transactional_prefix
from mm2py.stores.positions import PositionStore, offsets_topic

log = structlog.get_logger(__name__)


class ExactlyOnceUnavailable(Mm2pyError):
    """The target cannot give a flow exactly-once delivery; the message says why and what to do."""


def spec_for(flow: FlowConfig) -> ExactlyOnce | None:
    """What the flow's copy tasks need for their transactions; None when the flow is at-least-once."""
    if flow.delivery.exactly_once == "off":
        return None
    cluster, topic = offset_syncs_location(flow)
    syncs = flow.checkpoints.emit_offset_syncs_enabled
    on_target = flow.checkpoints.offset_syncs_topic_location == "target"
    return ExactlyOnce(
        source_alias=flow.source.alias, target_alias=flow.target.alias,
        positions_topic=offsets_topic(flow.source.alias),
        syncs_topic=topic if syncs else None,
        history_topic=(offset_syncs_history_location(flow)[1]
                       if syncs and flow.checkpoints.offset_syncs_history_enabled else None),
        source_syncs=cluster if syncs and not on_target else None,
        timeout_ms=flow.admin_timeout_ms,
        produce_timeout_ms=CopySettings.for_flow(flow).produce_timeout_ms,
        commit_ms=flow.copy.tail_commit_ms,
    )


def prepare(flow: FlowConfig, tasks: int) -> FlowConfig:
    """``flow`` ready to run in its delivery mode: ``exactly_once`` is "off" after a fallback."""
    if flow.delivery.exactly_once == "off":
        return flow
    try:
        _prepare(flow, tasks)
    except (KafkaError, ExactlyOnceUnavailable) as e:
        why = str(e)
        if flow.delivery.exactly_once == "required":
            raise ExactlyOnceUnavailable(
                f"flow {flow.name}: exactly-once delivery is required "
                f"({flow.delivery.exactly_once_key or 'exactly.once'}"
                f" = required) but the target cluster {flow.target.alias} cannot give it: {why}") from e
        log.warning("exactly-once delivery unavailable on the target: this flow runs at-least-once",
                    flow=flow.name, key=flow.delivery.exactly_once_key, reason=why)
        return replace(flow, delivery=replace(flow.delivery, exactly_once="off"))
    log.info("exactly-once delivery: tasks commit data, positions and syncs in target transactions",
             flow=flow.name, transactional_ids=f"{transactional_prefix(flow.source.alias, flow.target.alias)}*")
    return flow


def fence(flow: FlowConfig, tasks: int) -> None:
    """Check the target and fence every transactional id of ``flow``; errors as they come."""
    _prepare(flow, tasks)


def _prepare(flow: FlowConfig, tasks: int) -> None:
    timeout = flow.admin_timeout_ms
    client = RawClient(flow.target, client_id=f"mm2py-{flow.name}-fence", timeout_ms=timeout, role="producer")
    try:
        version = transaction_version(client)
        if version < REQUIRED_TRANSACTION_VERSION:
            raise ExactlyOnceUnavailable(
                f"its transaction.version is {version}; mm2py's transactions need {REQUIRED_TRANSACTION_VERSION} "
                f"(Kafka 4.0+): kafka-features --bootstrap-server {flow.target.bootstrap_servers} upgrade "
                "--feature transaction.version=2")
        admin = Admin(flow.target, timeout_ms=timeout)
        PositionStore(flow.target, flow.source.alias, timeout_ms=timeout).ensure_topic(admin)
        if flow.checkpoints.emit_offset_syncs_enabled:  # tasks write syncs, on the source or in their transactions
            cluster, topic = offset_syncs_location(flow)
            ensure_compacted_topic(Admin(cluster, timeout_ms=timeout), topic,
                                   flow.checkpoints.offset_syncs_topic_replication_factor)
        ids = {transactional_id(flow.source.alias, flow.target.alias, i) for i in range(tasks)}
        principal = principal_of(flow.target.producer)
        # listing needs DESCRIBE on the ids; fencing below names a missing ACL precisely
        with contextlib.suppress(AuthorizationError):
            ids |= list_transactional_ids(client, transactional_prefix(flow.source.alias, flow.target.alias))
        for txn_id in sorted(ids):
            try:
                Transaction(client, txn_id, timeout_ms=timeout, principal=principal).begin()
            except AuthorizationError as e:
                prefix = transactional_prefix(flow.source.alias, flow.target.alias)
                who = principal or "<principal>"
                raise ExactlyOnceUnavailable(
                    f"not authorized to use transactional id {txn_id!r}: missing ACL ALLOW WRITE and DESCRIBE on "
                    f"TRANSACTIONAL_ID prefix '{prefix}' for {principal or 'the producer principal'} "
                    f"(kafka-acls --add --allow-principal {who} --operation Write --operation Describe "
                    f"--transactional-id '{prefix}' --resource-pattern-type prefixed)") from e
    finally:
        client.close()
