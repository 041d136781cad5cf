"""Kafka transactions over the raw protocol: a transactional producer id, then commit or abort.

mm2py's copy tasks write raw batches, so they speak the transaction protocol themselves
(Kafka 4.x, transaction version 2, as the Java producer does there): FindCoordinator for
the transactional id, InitProducerId on the coordinator, Produce v12 with the transactional id
(the partition leader adds the partition to the transaction), EndTxn v5.

Invariants:
- ``begin`` returns a producer id and epoch that fence every earlier holder of the
  transactional id: the coordinator aborts an open transaction of theirs, and their later
  produce or EndTxn is refused (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH);
- one ``Transaction`` holds one transactional id's transactions in turn: sequences start at 0
  after ``begin`` and after every ``commit`` or ``abort``, which (EndTxn v5) bump the epoch: the
  answer's producer id and epoch are those of the next transaction, kept in ``producer_id`` and
  ``epoch``;
- every error leaving this module is a ``mm2py.errors.KafkaError`` naming the cluster and the
  transactional id; a missing TransactionalId ACL names the ``kafka-acls`` command to run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import kafka.errors as kerr
from kafka.protocol.admin.transactions import ListTransactionsRequest
from kafka.protocol.metadata.api_versions import ApiVersionsRequest
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer import EndTxnRequest, InitProducerIdRequest

from mm2py.errors import KafkaError, missing_acl
from mm2py.kafka.wire import RawClient, error_for, to_kafka_error

TRANSACTION_KEY_TYPE = 1
# transaction version 2 (KIP-890): Produce v12 adds partitions, EndTxn v5 bumps the epoch
REQUIRED_TRANSACTION_VERSION = 2
FIND_COORDINATOR = FindCoordinatorRequest[4]
INIT_PRODUCER_ID = InitProducerIdRequest[5]
END_TXN = EndTxnRequest[5]
# errors after which the same request succeeds once the coordinator is ready or elsewhere
_AGAIN = {
    kerr.CoordinatorNotAvailableError.errno,
    kerr.NotCoordinatorError.errno,
    kerr.CoordinatorLoadInProgressError.errno,
    kerr.ConcurrentTransactionsError.errno,
}
_FENCED = {kerr.ProducerFencedError.errno, kerr.InvalidProducerEpochError.errno}
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = kerr.TransactionalIdAuthorizationFailedError.errno


class FencedError(KafkaError):
    """A newer holder of the transactional id fenced this one; its transaction will not commit."""


class NoCoordinatorError(KafkaError):
    """No transaction coordinator answered in time (``__transaction_state`` cannot be created?)."""


def transaction_version(client: RawClient) -> int:
    """The cluster's finalized ``transaction.version`` feature level (0 when none)."""
    response = client.wait(client._send(client.any_node(), ApiVersionsRequest[3](
        client_software_name="mm2py", client_software_version="1")))
    for feature in getattr(response, "finalized_features", None) or ():
        if feature.name == "transaction.version":
            return int(feature.max_version_level)
    return 0


def list_transactional_ids(client: RawClient, prefix: str) -> set[str]:
    """Transactional ids starting with ``prefix`` that any broker coordinates (ListTransactions)."""
    client.leaders(())  # refresh the broker list
    found: set[str] = set()
    for node in sorted(b.node_id for b in client._net.cluster.brokers()):
        response = client.wait(client._send(node, ListTransactionsRequest[0](state_filters=[],
                                                                           producer_id_filters=[])))
        if response.error_code:
            raise to_kafka_error(response.error_code, cluster=client.alias, detail="ListTransactions")
        found.update(t.transactional_id for t in response.transaction_states
                     if t.transactional_id.startswith(prefix))
    return found


class Transaction:
    """One transaction of ``transactional_id`` on ``client``'s cluster. The constructor does no I/O."""

    def __init__(self, client: RawClient, transactional_id: str, *, timeout_ms: int = 60000,
                 transaction_timeout_ms: int = 60000, principal: str | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.transaction_timeout_ms = transaction_timeout_ms
        self.principal = principal
        self.clock = clock
        self.producer_id, self.epoch = -1, -1
        self._coordinator: int | None = None

    def begin(self) -> tuple[int, int]:
        """A producer id and epoch for this transaction, fencing every earlier holder of the id."""
        response = self._call(lambda: INIT_PRODUCER_ID(
            transactional_id=self.transactional_id, transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=-1, producer_epoch=-1), "InitProducerId")
        self.producer_id, self.epoch = response.producer_id, response.producer_epoch
        return self.producer_id, self.epoch

    def commit(self) -> None:
        self._end(True)

    def abort(self) -> None:
        self._end(False)

    def _end(self, committed: bool) -> None:
        response = self._call(lambda: END_TXN(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                              producer_epoch=self.epoch, committed=committed),
                              "EndTxn(commit)" if committed else "EndTxn(abort)")
        # transaction version 2 bumps the epoch at every end: the next transaction's producer state
        if getattr(response, "producer_id", -1) >= 0 and getattr(response, "producer_epoch", -1) >= 0:
            self.producer_id, self.epoch = response.producer_id, response.producer_epoch

    def _call(self, request: Callable[[], object], what: str) -> Any:
        """Send ``request()`` to the coordinator until it answers without a transient error."""
        deadline = self.clock() + self.timeout_ms / 1000
        backoff = 0.05
        last = 0
        while True:
            try:
                node = self._find_coordinator(deadline)
                response = self.client.wait(self.client._send(node, request()))
                code = response.error_code
            except KafkaError as e:
                if not e.retriable or self.clock() >= deadline:
                    raise
                self._coordinator, code = None, -1
            if code == 0:
                return response
            if code in _FENCED:
                raise FencedError(f"{what} of transactional id {self.transactional_id!r} fenced by a newer "
                                  f"holder ({error_for(code).__name__})", cluster=self.client.alias)
            if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise self._missing_acl(code, what)
            if code not in _AGAIN and code != -1:
                raise to_kafka_error(code, cluster=self.client.alias,
                                     detail=f"{what} of transactional id {self.transactional_id!r}")
            last = code
            if code in (kerr.NotCoordinatorError.errno, kerr.CoordinatorNotAvailableError.errno):
                self._coordinator = None
            if self.clock() + backoff >= deadline:
                raise self._timed_out(what, last)
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _find_coordinator(self, deadline: float) -> int:
        if self._coordinator is not None:
            return self._coordinator
        backoff = 0.05
        while True:
            response = self.client.wait(self.client._send(self.client.any_node(), FIND_COORDINATOR(
                key_type=TRANSACTION_KEY_TYPE, coordinator_keys=[self.transactional_id])))
            found = response.coordinators[0]
            if found.error_code == 0:
                self._coordinator = found.node_id
                if not self.client.knows_broker(found.node_id):
                    self.client.leaders(())  # learn the address of a broker not seen yet
                return found.node_id
            if found.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
                raise self._missing_acl(found.error_code, "FindCoordinator")
            if found.error_code not in _AGAIN or self.clock() + backoff >= deadline:
                if found.error_code in _AGAIN:
                    raise self._timed_out("FindCoordinator", found.error_code)
                raise to_kafka_error(found.error_code, cluster=self.client.alias, detail="FindCoordinator")
            time.sleep(backoff)
            backoff = min(backoff * 2, 1.0)

    def _timed_out(self, what: str, code: int) -> KafkaError:
        name = error_for(code).__name__ if code > 0 else "no answer"
        return NoCoordinatorError(
            f"{what} of transactional id {self.transactional_id!r}: no transaction coordinator within "
            f"{self.timeout_ms} ms ({name}); the brokers create __transaction_state on first use and cannot "
            "when transaction.state.log.replication.factor (default 3) exceeds the live brokers",
            cluster=self.client.alias, retriable=True)

    def _missing_acl(self, code: int, what: str) -> KafkaError:
        return missing_acl("WRITE", "TRANSACTIONAL_ID", self.transactional_id, cluster=self.client.alias,
                           principal=self.principal, doing=what,
                           cause=to_kafka_error(code, cluster=self.client.alias))
