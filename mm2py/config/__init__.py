"""Loading MM2 configuration files into frozen, validated objects.

``load("mm2.properties")`` parses the file as ``java.util.Properties`` does, replaces its
``${provider:path:key}`` references (``mm2py.config.transform``), resolves it as MM2's
MirrorMakerConfig does and validates every key, raising one ``ConfigError`` that lists every
problem (key, line, file) and never a value a provider gave. Loading registers the file's
secrets with ``mm2py.redact``, which keeps them out of everything the process prints.
``.yaml``/``.yml`` files are the same keys spelled in YAML, and go through the same steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from mm2py.config.delivery import apply_delivery
from mm2py.config.model import ClusterConfig, FlowConfig, MirrorMakerConfig
from mm2py.config.properties import Entry, parse_properties
from mm2py.config.resolve import parse_cluster_key, parse_flow_key, resolve
from mm2py.config.transform import redact, transform
from mm2py.config.yamlconf import parse_yaml
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.redact import register, secret_values

__all__ = [
    "ClusterConfig",
    "Entry",
    "FlowConfig",
    "MirrorMakerConfig",
    "load",
    "load_text",
    "parse_cluster_key",
    "parse_flow_key",
    "parse_properties",
    "parse_yaml",
    "resolve",
]

Format = Literal["properties", "yaml"]


def load_text(text: str, source: str = "<text>", fmt: Format = "properties") -> MirrorMakerConfig:
    """Parse and resolve configuration text; ``source`` names it in error messages."""
    if fmt == "yaml":
        entries = parse_yaml(text, source)
    elif fmt == "properties":
        entries = parse_properties(text, source)
    else:
        raise ValueError(f"unknown configuration format {fmt!r} (expected 'properties' or 'yaml')")
    transformed = transform(entries, source)
    # from here on, nothing this process prints shows a secret of the file (mm2py.redact)
    register(secret_values({k: e.value for k, e in transformed.entries.items()}))
    try:
        config = resolve(transformed.entries, source)
        return apply_delivery(transformed.entries, config, source)
    except ConfigError as e:
        raise redact(e, transformed.secrets) from None


def _read(path: Path, fmt: Format) -> str:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(ConfigProblem(None, f"cannot read {path}: {e.strerror}")) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if fmt == "properties":
            # what Java's Properties.load(InputStream), used by MM2, reads every file as
            return data.decode("latin-1")
        raise ConfigError(ConfigProblem(None, f"not UTF-8 text ({e.reason})", None, str(path))) from None


def load(path: str | Path) -> MirrorMakerConfig:
    """Load an MM2 properties file, or YAML when the name ends in .yaml or .yml."""
    path = Path(path)
    fmt: Format = "yaml" if path.suffix.lower() in (".yaml", ".yml") else "properties"
    return load_text(_read(path, fmt), str(path), fmt)
