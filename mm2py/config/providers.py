"""Config providers (KIP-297): where a ``${provider:[path:]key}`` reference in an MM2 file gets its value.

``config.providers = file,dir,env`` names them; ``config.providers.<name>.class`` is Kafka's Java
class name of a built-in (``FileConfigProvider``, ``DirectoryConfigProvider``,
``EnvVarConfigProvider``, under ``org.apache.kafka.common.config.provider``) or the dotted path
of a Python class; ``config.providers.<name>.param.<p>`` are its parameters. A Python provider
keeps Kafka's ``ConfigProvider`` contract (``ConfigProvider`` below): ``configure(params)``
once, then ``get(path, keys)`` returning the values it has of ``keys`` at ``path`` (a key it has
not is left out; raising ``ConfigProviderError`` says why).

The built-ins behave as Kafka 4.3's: a file is read as ``java.util.Properties`` (UTF-8); a
directory's regular file named ``key`` gives its whole content, byte for byte (Kafka trims the
value later, as mm2py does, when a setting's own type reads it); ``${env:VAR}`` and
``${env::VAR}`` read the environment, filtered by ``allowlist.pattern``. ``allowed.paths``
(KIP-993) lists absolute, existing folders or files; a path that does not normalise to one of
them (or under one) is refused. Where Kafka leaves a reference it cannot resolve as literal
text, mm2py refuses to start (``mm2py.config.transform``). Errors never hold a value read.
Constructors do no I/O: ``configure`` and ``get`` do.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePath
from typing import Protocol, runtime_checkable

from mm2py.errors import ConfigError, ConfigProviderError

_JAVA_PACKAGE = "org.apache.kafka.common.config.provider."
ALLOWED_PATHS = "allowed.paths"
ALLOWLIST_PATTERN = "allowlist.pattern"


@runtime_checkable
class ConfigProvider(Protocol):
    """Kafka's ``ConfigProvider``, in Python: what a ``config.providers.<name>.class`` must offer."""

    def configure(self, params: Mapping[str, str]) -> None: ...

    def get(self, path: str, keys: set[str] | None = None) -> Mapping[str, str]: ...


class AllowedPaths:
    """``allowed.paths``: the folders (or files) a file-reading provider may read, as Kafka checks them.

    A path is allowed when its lexical normal form (``..`` and ``.`` folded, symlinks not
    followed, as Java's ``Path.normalize``) is one of them or lies under one; without the
    parameter every path is.
    """

    def __init__(self, allowed: tuple[PurePath, ...] | None):
        self.allowed = allowed

    @classmethod
    def parse(cls, value: str | None) -> AllowedPaths:
        """Read the parameter; ConfigProviderError for a path that is relative or does not exist."""
        if not value:
            return cls(None)
        allowed = []
        for item in (part.strip() for part in value.split(",")):
            path = PurePath(os.path.normpath(item)) if item else PurePath()
            if not path.is_absolute():
                raise ConfigProviderError(f"{ALLOWED_PATHS}: path {item!r} is not absolute")
            if not Path(path).exists():
                raise ConfigProviderError(f"{ALLOWED_PATHS}: path {item!r} does not exist")
            allowed.append(path)
        return cls(tuple(allowed))

    def check(self, path: str) -> Path:
        """The path to read; ConfigProviderError when ``allowed.paths`` does not cover it."""
        if self.allowed is None:
            return Path(path)
        normal = PurePath(os.path.normpath(path))
        if not any(normal == a or a in normal.parents for a in self.allowed):
            raise ConfigProviderError(f"path {path!r} is outside {ALLOWED_PATHS} "
                                      f"({', '.join(str(a) for a in self.allowed)})")
        return Path(normal)


class _PathProvider:
    """A provider reading files under ``allowed.paths`` (KIP-993; unset: anywhere)."""

    def __init__(self) -> None:
        self.allowed = AllowedPaths(None)

    def configure(self, params: Mapping[str, str]) -> None:
        self.allowed = AllowedPaths.parse(params.get(ALLOWED_PATHS))



class FileConfigProvider(_PathProvider):
    """``${file:<properties file>:<key>}``: a key of a properties file (Kafka's FileConfigProvider)."""

    def get(self, path: str, keys: set[str] | None = None) -> Mapping[str, str]:
        from mm2py.config.properties import parse_properties

        if not path:
            raise ConfigProviderError("needs the path of a properties file: ${<name>:<path>:<key>}")
        file = self.allowed.check(path)
        try:
            text = file.read_bytes().decode("utf-8")
        except OSError as e:
            raise ConfigProviderError(f"cannot read properties file {path!r}: {e.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigProviderError(f"properties file {path!r} is not UTF-8 text") from None
        try:
            data = {k: e.value for k, e in parse_properties(text).items()}
        except ConfigError:
            raise ConfigProviderError(f"properties file {path!r} holds a malformed \\uXXXX escape") from None
        return data if keys is None else {k: v for k, v in data.items() if k in keys}


class DirectoryConfigProvider(_PathProvider):
    """``${dir:<folder>:<file name>}``: the whole content of a regular file in a folder (Kafka's
    DirectoryConfigProvider; Kubernetes and Docker secrets are mounted so). Content is kept as
    is, trailing newline included; bytes that are not UTF-8 become U+FFFD, as Java reads them."""

    def get(self, path: str, keys: set[str] | None = None) -> Mapping[str, str]:
        if not path:
            raise ConfigProviderError("needs a folder: ${<name>:<folder>:<file name>}")
        folder = self.allowed.check(path)
        if not folder.is_dir():
            raise ConfigProviderError(f"{path!r} is not a folder")
        data: dict[str, str] = {}
        try:
            names: Iterable[str] = keys if keys is not None else os.listdir(folder)
            for name in names:
                # only a file directly in the folder: a key naming a sub-path is no file of it
                file = folder / name
                if "/" in name or name in (".", "..") or not file.is_file():
                    continue
                data[name] = file.read_bytes().decode("utf-8", errors="replace")
        except OSError as e:
            raise ConfigProviderError(f"cannot read {e.filename or path!r}: {e.strerror}") from None
        return data


class EnvVarConfigProvider:
    """``${env:VAR}`` or ``${env::VAR}``: an environment variable (Kafka's EnvVarConfigProvider),
    among those whose whole name ``allowlist.pattern`` matches (every one by default)."""

    def __init__(self) -> None:
        self.pattern: re.Pattern[str] = re.compile(".*")
        self.environment: Mapping[str, str] = {}

    def configure(self, params: Mapping[str, str]) -> None:
        try:
            self.pattern = re.compile(params.get(ALLOWLIST_PATTERN, ".*"))
        except re.error as e:
            raise ConfigProviderError(f"{ALLOWLIST_PATTERN} is not a regular expression: {e}") from None
        self.environment = dict(os.environ)

    def get(self, path: str, keys: set[str] | None = None) -> Mapping[str, str]:
        if path:
            raise ConfigProviderError(f"takes no path, got {path!r}: write ${{<name>:VAR}}")
        names = keys if keys is not None else self.environment.keys()
        refused = sorted(k for k in names if k in self.environment and not self.pattern.fullmatch(k))
        if refused:
            raise ConfigProviderError(f"environment variable {refused[0]} does not match {ALLOWLIST_PATTERN} "
                                      f"{self.pattern.pattern!r}")
        return {k: self.environment[k] for k in names if k in self.environment}


BUILT_IN: dict[str, type] = {
    _JAVA_PACKAGE + cls.__name__: cls for cls in (FileConfigProvider, DirectoryConfigProvider, EnvVarConfigProvider)
}


def provider_class(class_name: str) -> type:
    """The class ``config.providers.<name>.class`` names: Kafka's Java name of a built-in, or a Python dotted path."""
    if class_name in BUILT_IN:
        return BUILT_IN[class_name]
    module_name, _, attr = class_name.rpartition(".")
    if not module_name:
        raise ConfigProviderError(f"{class_name!r} is no class name (a Java built-in or a Python 'module.Class')")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except ImportError as e:
        raise ConfigProviderError(
            f"cannot import module {module_name!r}: {e} (mm2py loads Kafka's three built-ins and Python classes; a "
            "Java provider needs a Python port with configure(params) and get(path, keys))") from None
    except AttributeError:
        raise ConfigProviderError(f"module {module_name!r} has no {attr!r}") from None
    if not isinstance(cls, type) or not callable(getattr(cls, "get", None)):
        raise ConfigProviderError(f"{class_name!r} is not a class with get(path, keys)")
    return cls


def load_provider(class_name: str, params: Mapping[str, str]) -> ConfigProvider:
    """Build and configure a provider; ConfigProviderError (no value in it) when that fails."""
    cls = provider_class(class_name)
    try:
        provider = cls()
    except TypeError as e:
        raise ConfigProviderError(f"{class_name!r} cannot be built without arguments: {e}") from None
    configure = getattr(provider, "configure", None)
    if callable(configure):
        configure(dict(params))
    return provider
