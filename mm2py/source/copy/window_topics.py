"""The window topics a ``TimestampRouter`` writes (``mm2py.transforms.timestamp_router``), made on demand.

Invariants: a window topic is created, before the first record is sent to it, with its remote
topic's partition count (so source partition p has partition p there too), the remote topic's
configs that were set on it (mm2py creates and syncs remote topics with the source's copied
configs: ``mm2py.metadata``) and the flow's ``replication.factor`` capped by the target's
brokers, as remote topics are; a topic another task or run created first is taken as it is
(creation races are tolerated); a remote topic missing on the target fails the task naming it.
"""

from __future__ import annotations

from mm2py.errors import KafkaError
from mm2py.kafka.admin import Admin


class WindowTopics:
    """Creates window topics on the target through ``admin``; ``replication_factor`` the flow's. No I/O here."""

    def __init__(self, admin: Admin, replication_factor: int):
        self.admin = admin
        self.replication_factor = replication_factor
        self.known: set[str] = set()
        self._remote: dict[str, tuple[int, dict[str, str]]] = {}  # remote topic -> (partitions, configs)

    def _shape(self, remote: str) -> tuple[int, dict[str, str]]:
        found = self._remote.get(remote)
        if found is None:
            partitions = self.admin.topics().get(remote)
            if partitions is None:
                raise KafkaError("the remote topic is missing on the target: its window topics take its partitions",
                                 cluster=self.admin.alias, topic=remote)
            entries = self.admin.topic_configs([remote]).get(remote, [])
            configs = {e.name: e.value for e in entries
                       if e.value is not None and not (e.is_default or e.read_only or e.sensitive or e.static_broker)}
            found = self._remote[remote] = (partitions, configs)
        return found

    def ensure(self, window: str, remote: str) -> None:
        """Window topic ``window`` of remote topic ``remote`` exists, with every partition led."""
        if window in self.known:
            return
        partitions, configs = self._shape(remote)
        rf = min(self.replication_factor, self.admin.broker_count())
        self.admin.create_topics([(window, partitions, rf, configs)])  # False: it was there: taken as it is
        self.known.add(window)
