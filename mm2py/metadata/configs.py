"""Which source topic configs a remote topic gets, at creation and at every sync (MM2's rules).

A config is copied unless it is read-only, sensitive, a static broker setting, or excluded by
``config.properties.exclude``. At creation a remote topic gets the source's non-default
values (and its defaults too with ``use.defaults.from = source``). A sync sets every copied
config to the source's value, or deletes it on the target (so the target's default applies)
where the source is at its default and defaults come from the target: an included key edited
on the target is reverted, an excluded key keeps the target's value.

One addition: ``max.message.bytes`` is always set to the source's effective value unless
excluded. The target must accept every batch the source accepted; MM2 leaves a source default
to the target's default, which may be smaller, and then fails on the first large batch.
"""

from __future__ import annotations

from collections.abc import Iterable

from mm2py.config.filters import ConfigPropertyFilterInterface, should_replicate_source_default
from mm2py.kafka.resources import TopicConfigEntry

MAX_MESSAGE_BYTES = "max.message.bytes"


def _copyable(entry: TopicConfigEntry, filt: ConfigPropertyFilterInterface) -> bool:
    # a static broker value of max.message.bytes (message.max.bytes) still bounds the batches
    static = entry.static_broker and entry.name != MAX_MESSAGE_BYTES
    return (not entry.read_only and not entry.sensitive and not static
            and entry.value is not None and filt.should_replicate_config_property(entry.name))


def _always_set(entry: TopicConfigEntry, filt: ConfigPropertyFilterInterface) -> bool:
    return (not entry.is_default or should_replicate_source_default(filt, entry.name)
            or entry.name == MAX_MESSAGE_BYTES)


def creation_configs(entries: Iterable[TopicConfigEntry], filt: ConfigPropertyFilterInterface) -> dict[str, str]:
    """The configs a new remote topic is created with."""
    return {e.name: e.value for e in entries if _copyable(e, filt) and _always_set(e, filt)}  # type: ignore[misc]


def sync_operations(entries: Iterable[TopicConfigEntry], filt: ConfigPropertyFilterInterface) -> dict[str, str | None]:
    """Incremental changes for an existing remote topic: name -> value to set, or None to delete."""
    return {e.name: (e.value if _always_set(e, filt) else None) for e in entries if _copyable(e, filt)}


def pending(operations: dict[str, str | None], target: Iterable[TopicConfigEntry]) -> dict[str, str | None]:
    """The operations that change something on the target (the rest would only add load)."""
    current = {e.name: e for e in target}
    out: dict[str, str | None] = {}
    for name, value in operations.items():
        have = current.get(name)
        if value is None:
            if have is not None and not have.is_default:
                out[name] = None
        elif have is None or have.value != value or have.is_default:
            out[name] = value
    return out
