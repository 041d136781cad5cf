"""Exactly-once checks on real clusters: a source with plain and transactional writers, and a check that
the target's read_committed records are exactly the source's committed ones (tests/integration)."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

from tests.integration.mirror_helpers import Replicator, wait_for
from tests.kafkautil import consume_all


class Writers:
    """Plain records and source transactions (every third aborted) streaming into ``topic``."""

    def __init__(self, bootstrap: str, topic: str, txn_id: str, partitions: int = 4, pause_s: float = 0.1):
        self.bootstrap, self.topic, self.txn_id, self.partitions = bootstrap, topic, txn_id, partitions
        self.pause_s = pause_s  # between two rounds of 100 plain records and a source transaction of 20
        self._stop = threading.Event()
        self.failed: list[str] = []
        self.aborted_values: set[bytes] = set()
        self.transactions = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Writers:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        plain = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "compression.type": "lz4",
                          "enable.idempotence": True, "log_level": 0})
        txn = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id, "linger.ms": 5,
                        "log_level": 0})
        txn.init_transactions(30)
        i = k = 0
        try:
            while not self._stop.is_set():
                for _ in range(100):
                    plain.produce(self.topic, value=b"p-%d" % i, partition=i % self.partitions)
                    i += 1
                plain.poll(0)
                txn.begin_transaction()
                values = [b"t-%d-%d" % (k, j) for j in range(20)]
                for j, value in enumerate(values):
                    txn.produce(self.topic, value=value, partition=j % self.partitions)
                assert txn.flush(30) == 0  # on the log before the abort: aborted data to leave out
                if k % 3 == 2:
                    txn.abort_transaction(30)
                    self.aborted_values.update(values)
                else:
                    txn.commit_transaction(30)
                k += 1
                self.transactions = k
                time.sleep(self.pause_s)
            assert plain.flush(30) == 0
        except Exception as e:  # reported by the test
            self.failed.append(repr(e))


def exactly_once(a: str, b: str, topic: str, aborted: set[bytes]) -> tuple[bool, str]:
    """(caught up exactly, why not): per partition, B's read_committed records are A's committed ones in order.

    A is read before and after B (writers may still run): B must hold all of A's first read and
    be a prefix of A's second.
    """
    before = consume_all(a, topic, isolation="read_committed")
    try:
        target = consume_all(b, f"A.{topic}", isolation="read_committed")
    except AssertionError as e:  # the remote topic not there yet
        return False, str(e)
    after = consume_all(a, topic, isolation="read_committed")
    problems = []
    for p, records in after.items():
        want, got = [r.value for r in records], [r.value for r in target.get(p, [])]
        if got != want[:len(got)] or len(got) < len(before[p]):
            problems.append(f"partition {p}: {len(before[p])}..{len(want)} on A, {len(got)} on B, "
                            f"{len(got) - len(set(got))} twice, {len(set(want[:len(before[p])]) - set(got))} missing, "
                            f"{len(set(got) - set(want))} not on A")
        if aborted & set(got):
            problems.append(f"partition {p}: {len(aborted & set(got))} aborted records on B")
    return not problems, "; ".join(problems)


def assert_exactly_once(a: str, b: str, topic: str, writers: Writers, rep: Replicator, what: str) -> None:
    """Wait until B caught up with A's committed records; fail on anything but an exact copy."""
    state = {"why": ""}

    def caught_up() -> bool:
        ok, state["why"] = exactly_once(a, b, topic, writers.aborted_values)
        return ok

    try:
        wait_for(caught_up, 240, f"B holds A's committed records exactly once after {what}", rep)
    except AssertionError as e:
        raise AssertionError(f"{e}\nlast difference: {state['why']}") from None
