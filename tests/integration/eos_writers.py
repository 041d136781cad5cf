"""Writers of plain records and source transactions (some aborted), for exactly-once tests."""

from __future__ import annotations

import threading
import time

from confluent_kafka import Producer

PARTITIONS = 4


class Writers:
    """Plain records and source transactions (every third aborted) streaming into ``topic``."""

    def __init__(self, bootstrap: str, topic: str, txn_id: str):
        self.bootstrap, self.topic, self.txn_id = bootstrap, topic, txn_id
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
                    plain.produce(self.topic, value=b"p-%d" % i, partition=i % PARTITIONS)
                    i += 1
                plain.poll(0)
                txn.begin_transaction()
                values = [b"t-%d-%d" % (k, j) for j in range(20)]
                for j, value in enumerate(values):
                    txn.produce(self.topic, value=value, partition=j % PARTITIONS)
                assert txn.flush(30) == 0  # on the log before the abort: aborted data to leave out
                if k % 3 == 2:
                    txn.abort_transaction(30)
                    self.aborted_values.update(values)
                else:
                    txn.commit_transaction(30)
                k += 1
                self.transactions = k
                time.sleep(0.1)
            assert plain.flush(30) == 0
        except Exception as e:  # reported by the test
            self.failed.append(repr(e))
