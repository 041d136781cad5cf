"""A replication policy for the bench: Default's names, but it never traces a remote topic back.

Such a policy is *blind* (mm2py.topology), so flows on a cycle of it run with provenance
(mm2py.source.provenance) while every remote topic keeps a run's own ``{alias}.`` prefix. The
``mm2py-provenance`` bench tool uses it to measure the registry's cost on the copy path.
"""

from __future__ import annotations

from mm2py.policy import DefaultReplicationPolicy


class PrefixedUntracedPolicy(DefaultReplicationPolicy):
    def topic_source(self, topic: str) -> str | None:
        return None

    def upstream_topic(self, topic: str) -> str | None:
        return None
