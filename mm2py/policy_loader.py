"""``replication.policy.class`` resolved and its policy built and configured, as MM2 does."""

from __future__ import annotations

import importlib

from mm2py.errors import ConfigError, ConfigProblem
from mm2py.policy import (
    INTERNAL_SEPARATOR_KEY,
    POLICY_CLASS_KEY,
    SEPARATOR_KEY,
    SOURCE_ALIAS_KEY,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
)

_BUILTIN: dict[str, type[ReplicationPolicy]] = {
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}
_JAVA_PACKAGE = "org.apache.kafka.connect.mirror."


def policy_class(class_name: str) -> type[ReplicationPolicy]:
    """Resolve ``replication.policy.class``: MM2's Java names, short names or a Python path."""
    name = class_name.strip()
    if (short := name.removeprefix(_JAVA_PACKAGE)) in _BUILTIN:
        return _BUILTIN[short]
    module_name, _, attr = name.rpartition(".")
    if not module_name or name.startswith(_JAVA_PACKAGE):
        problem = "unknown policy; use DefaultReplicationPolicy, IdentityReplicationPolicy or a Python path"
    else:
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except ImportError as e:
            problem = f"cannot import module {module_name!r}: {e}"
        except AttributeError:
            problem = f"module {module_name!r} has no {attr!r}"
        else:
            if isinstance(cls, type) and issubclass(cls, ReplicationPolicy) and not getattr(
                cls, "__abstractmethods__", None
            ):
                return cls
            problem = "not a concrete subclass of mm2py.policy.ReplicationPolicy"
    raise ConfigError(ConfigProblem(POLICY_CLASS_KEY, f"{problem} (got {class_name!r})"))


def load_policy(
    class_name: str,
    *,
    separator: str = ".",
    internal_topic_separator_enabled: bool = True,
    source_cluster_alias: str | None = None,
) -> ReplicationPolicy:
    """Build and configure the policy ``replication.policy.class`` names, as MM2 does."""
    cls = policy_class(class_name)
    try:
        policy = cls()
    except TypeError as e:
        problem = ConfigProblem(POLICY_CLASS_KEY, f"{class_name!r} cannot be built without arguments: {e}")
        raise ConfigError(problem) from e
    props: dict[str, object] = {SEPARATOR_KEY: separator, INTERNAL_SEPARATOR_KEY: internal_topic_separator_enabled}
    if source_cluster_alias is not None:
        props[SOURCE_ALIAS_KEY] = source_cluster_alias
    policy.configure(props)
    return policy
