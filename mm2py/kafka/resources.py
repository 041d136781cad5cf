"""Value types of topic resources that the admin client reads and the metadata sync copies."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TopicAcl:
    """One ACL binding on a topic (operation and permission as Kafka names them: READ, ALLOW)."""

    topic: str
    principal: str
    host: str
    operation: str
    permission: str
    pattern: str = "LITERAL"


@dataclass(frozen=True)
class TopicConfigEntry:
    """One entry of a topic's DescribeConfigs answer."""

    name: str
    value: str | None
    is_default: bool
    read_only: bool = False
    sensitive: bool = False
    static_broker: bool = False  # set in the broker's server.properties
