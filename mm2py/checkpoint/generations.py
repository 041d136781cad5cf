"""Source topics re-created and not yet taken up by their flow: their group offsets are not translated.

When a flow takes up a re-created topic (mm2py.source.plan.reset_guard), it writes a sync that starts
the new topic's offsets over, and records the new topic id in its ledger. Until then, the syncs
of a partition are the old topic's, and a group offset of the new topic would translate through
them to a wrong place. ``untaken`` names such topics, by comparing each topic's id on the source
with the one the ledger holds; translation (checkpoints, failover) leaves them out with the reason.
A topic the ledger does not know (a flow that never ran this check, MM2's syncs) is translated as
before.
"""

from __future__ import annotations

from collections.abc import Iterable

from mm2py.config.model import FlowConfig
from mm2py.errors import KafkaError
from mm2py.kafka.admin import Admin
from mm2py.stores.ledger import Ledger, ledger_topic

REASON = "source topic re-created and not yet mirrored by the flow (mm2py-ledger); not translated"


def untaken(flow: FlowConfig, src: Admin, dst: Admin, topics: Iterable[str]) -> set[str]:
    """Of ``topics``, those whose id on the source differs from the id the flow last copied them under."""
    wanted = set(topics)
    if not wanted or ledger_topic(flow.source.alias) not in dst.topics():
        return set()
    known = Ledger(flow.target, flow.source.alias, flow.name, timeout_s=flow.admin_timeout_ms / 1000).load().topic_ids
    asked = wanted & set(known)
    if not asked:
        return set()
    try:
        ids = src.topic_ids(asked)
    except KafkaError:
        return set()  # the source cannot say: translated as before, as without a ledger
    return {t for t in asked if t in ids and ids[t] != known[t]}
