"""``mm2.yaml``: the same keys as the properties file, flat or nested, with line numbers.

``A: {bootstrap.servers: h:9092}`` and ``"A->B": {enabled: true}`` nest; the joined path is
the key. Lists become comma-separated values, as MM2's list keys are written.
"""

from __future__ import annotations

import yaml

from mm2py.config.properties import Entry
from mm2py.errors import ConfigError, ConfigProblem


def _scalar(node: yaml.Node, key: str, source: str | None) -> str:
    if isinstance(node, yaml.ScalarNode):
        # the text as written: the key's own type decides what it means, as for properties
        return "" if node.tag == "tag:yaml.org,2002:null" else node.value
    if isinstance(node, yaml.SequenceNode):
        return ", ".join(_scalar(item, key, source) for item in node.value)
    raise ConfigError(ConfigProblem(key, "expected a value or a list", node.start_mark.line + 1, source))


def _walk(node: yaml.Node, prefix: str, out: dict[str, Entry], source: str | None) -> None:
    if not isinstance(node, yaml.MappingNode):
        raise ConfigError(ConfigProblem(prefix or None, "expected a mapping of keys", node.start_mark.line + 1,
                                        source))
    for key_node, value_node in node.value:
        key = f"{prefix}{key_node.value}"
        if isinstance(value_node, yaml.MappingNode):
            _walk(value_node, key + ".", out, source)
        else:
            out[key] = Entry(_scalar(value_node, key, source), key_node.start_mark.line + 1)


def parse_yaml(text: str, source: str | None = None) -> dict[str, Entry]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ConfigError(ConfigProblem(None, f"not valid YAML: {getattr(e, 'problem', e)}",
                                        mark.line + 1 if mark else None, source)) from None
    out: dict[str, Entry] = {}
    if root is not None:
        _walk(root, "", out, source)
    return out
