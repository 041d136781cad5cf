"""``mm2.yaml``: the same keys as the properties file, flat or nested, with line numbers.

``A: {bootstrap.servers: h:9092}`` and ``"A->B": {enabled: true}`` nest; the joined path is
the key. Scalars keep the text as written (``true``, ``1``) so that each key's own type decides
what it means, exactly as for properties; lists become comma-separated values, as MM2's list
keys are written. Lines come from the node marks of ``yaml.compose``.
"""

from __future__ import annotations

import yaml

from mm2py.config.properties import Entry
from mm2py.errors import ConfigError, ConfigProblem

_NULL = "tag:yaml.org,2002:null"
_MERGE = "tag:yaml.org,2002:merge"


class _Walker:
    def __init__(self, source: str | None):
        self.source = source
        self.entries: dict[str, Entry] = {}
        self.problems: list[ConfigProblem] = []

    def problem(self, key: str | None, message: str, node: yaml.Node) -> None:
        self.problems.append(ConfigProblem(key, message, node.start_mark.line + 1, self.source))

    def mapping(self, node: yaml.Node, prefix: str) -> None:
        if not isinstance(node, yaml.MappingNode):
            self.problem(prefix.rstrip(".") or None, "expected a mapping of keys", node)
            return
        pairs = list(node.value)
        # '<<: *defaults' merges first so that the mapping's own keys win, as in YAML
        for key_node, value_node in pairs:
            if key_node.tag == _MERGE:
                merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for source_node in merged:
                    self.mapping(source_node, prefix)
        for key_node, value_node in pairs:
            if key_node.tag == _MERGE:
                continue
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _NULL:
                self.problem(prefix.rstrip(".") or None, "a key must be plain text", key_node)
                continue
            key = f"{prefix}{key_node.value}"
            if isinstance(value_node, yaml.MappingNode):
                self.mapping(value_node, key + ".")
            elif (value := self.value(value_node, key)) is not None:
                self.entries.pop(key, None)  # a later spelling of the same key wins, as in properties
                self.entries[key] = Entry(value, key_node.start_mark.line + 1)

    def value(self, node: yaml.Node, key: str) -> str | None:
        if isinstance(node, yaml.ScalarNode):
            return "" if node.tag == _NULL else node.value
        if isinstance(node, yaml.SequenceNode):
            items: list[str] = []
            for item in node.value:
                if not isinstance(item, yaml.ScalarNode):
                    self.problem(key, "a list may only hold plain values", item)
                    return None
                if "," in item.value:
                    # MM2 lists are comma-separated text: the item would split in two
                    self.problem(key, f"list item {item.value!r} holds a comma, which a list value cannot", item)
                    return None
                if item.tag != _NULL:
                    items.append(item.value)
            return ", ".join(items)
        self.problem(key, "expected a value or a list", node)
        return None


def parse_yaml(text: str, source: str | None = None) -> dict[str, Entry]:
    """Every key of a YAML configuration with its value (as text) and the line of its key."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ConfigError(ConfigProblem(None, f"not valid YAML: {getattr(e, 'problem', None) or e}",
                                        mark.line + 1 if mark else None, source)) from None
    walker = _Walker(source)
    if root is not None:
        walker.mapping(root, "")
    if walker.problems:
        raise ConfigError(walker.problems)
    return walker.entries
