"""Topic names and ids both ways, as metadata answers give them, and the ids a copy is pinned to.

Fetch requests by id (Fetch v13) read the log of one topic incarnation: a topic deleted and
created again under the same name has a new id, and a fetch naming the old id is refused by
the broker (UNKNOWN_TOPIC_ID) instead of answered from the new log.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping


class TopicIds:
    """Each topic name's id: the pinned one (``pin``), else the one the newest metadata answer gave.

    Invariants:
    - a learned name has one id, and an id names one topic; learning a re-created topic's new id
      drops its old id (unless pinned), so a fetch answer naming the old id is refused rather
      than named;
    - a pinned name keeps its pinned id whatever metadata answers say: ``id_of`` gives the pinned
      id, so a fetch by id never reads a re-created topic's log; ``moved`` names the id metadata
      gives instead, when it differs.
    """

    def __init__(self) -> None:
        self._learned: dict[str, uuid.UUID] = {}
        self._pinned: dict[str, uuid.UUID] = {}
        self._names: dict[uuid.UUID, str] = {}

    def learn(self, name: str, topic_id: uuid.UUID) -> None:
        """A metadata answer gave ``name`` the id ``topic_id``."""
        old = self._learned.get(name)
        if old is not None and old != topic_id and self._pinned.get(name) != old:
            del self._names[old]
        self._learned[name] = topic_id
        self._names[topic_id] = name

    def pin(self, ids: Mapping[str, uuid.UUID]) -> bool:
        """Replace the pins with ``ids``; True when any name's id (``id_of``) changed by it."""
        before = {name: self._pinned.get(name, self._learned.get(name)) for name in self._pinned.keys() | ids.keys()}
        for name, old in self._pinned.items():
            if ids.get(name) != old and self._learned.get(name) != old:
                self._names.pop(old, None)
        self._pinned = dict(ids)
        self._names.update((topic_id, name) for name, topic_id in ids.items())
        return any(ids.get(name, self._learned.get(name)) != old for name, old in before.items())

    def knows(self, name: str) -> bool:
        return name in self._pinned or name in self._learned

    def pinned(self, name: str) -> bool:
        return name in self._pinned

    def id_of(self, name: str) -> uuid.UUID:
        pinned = self._pinned.get(name)
        return pinned if pinned is not None else self._learned[name]

    def learned(self, name: str) -> uuid.UUID | None:
        """The id the newest metadata answer gave ``name``, pinned or not."""
        return self._learned.get(name)

    def name_of(self, topic_id: uuid.UUID) -> str:
        return self._names[topic_id]

    def moved(self, name: str) -> uuid.UUID | None:
        """The id metadata gives a pinned ``name`` when it is not the pinned one (the topic was re-created)."""
        pinned, learned = self._pinned.get(name), self._learned.get(name)
        return learned if pinned is not None and learned is not None and learned != pinned else None
