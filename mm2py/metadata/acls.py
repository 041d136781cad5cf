"""Topic ACLs of mirrored topics, as MM2 copies them to remote topics.

Only literal TOPIC bindings are copied, renamed to the remote topic. ALLOW WRITE is dropped
(only the replicator writes a remote topic) and ALLOW ALL becomes ALLOW READ; DENY bindings
are kept as they are. Bindings are only ever added: a binding removed on the source stays on
the target, as with MM2.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from mm2py.kafka.resources import TopicAcl


def target_acls(
    acls: Iterable[TopicAcl], remote_topic: Callable[[str], str], mirrored: Callable[[str], bool]
) -> list[TopicAcl]:
    """The bindings to create on the target for ``acls`` read from the source."""
    out = []
    for acl in acls:
        if acl.pattern != "LITERAL" or not mirrored(acl.topic):
            continue
        if acl.permission == "ALLOW" and acl.operation == "WRITE":
            continue
        operation = "READ" if acl.permission == "ALLOW" and acl.operation == "ALL" else acl.operation
        out.append(replace(acl, topic=remote_topic(acl.topic), operation=operation))
    return out
