"""Loading MM2 configuration files into frozen, validated objects."""

from __future__ import annotations

from pathlib import Path

from mm2py.config.model import ClusterConfig, FlowConfig, MirrorMakerConfig
from mm2py.config.properties import parse_properties
from mm2py.config.resolve import resolve
from mm2py.config.yamlconf import parse_yaml
from mm2py.errors import ConfigError, ConfigProblem

__all__ = ["ClusterConfig", "FlowConfig", "MirrorMakerConfig", "load", "load_text"]


def load_text(text: str, source: str = "<text>", fmt: str = "properties") -> MirrorMakerConfig:
    entries = parse_yaml(text, source) if fmt == "yaml" else parse_properties(text, source)
    return resolve(entries, source)


def load(path: str | Path) -> MirrorMakerConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(ConfigProblem(None, f"cannot read {path}: {e.strerror}")) from None
    fmt = "yaml" if path.suffix in (".yaml", ".yml") else "properties"
    return load_text(text, str(path), fmt)
