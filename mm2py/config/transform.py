"""``${provider:[path:]key}`` in an MM2 file, replaced by what its config provider gives, once, at load.

Kafka's ``ConfigTransformer`` rules: a reference is ``${name:path:key}`` or ``${name:key}`` (path
empty), matched by Kafka's own pattern (so ``${env::VAR}`` is the empty path too); every key a
(provider, path) pair is asked for is asked in one ``get``; a replaced value is not scanned again.
The ``config.providers*`` keys themselves are read as written. Unlike Kafka, which leaves a
reference it cannot resolve as literal text (and so sends ``${file:...}`` to a broker as a
password), a reference to an unknown provider, a missing file, key or variable, or a path outside
``allowed.paths`` is a ConfigError naming the key, its line and the provider. Messages name the
reference, never a value it stands for; ``redact`` keeps later validation errors from showing them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from mm2py.config.keys import split_list
from mm2py.config.properties import Entry
from mm2py.config.providers import ConfigProvider, load_provider
from mm2py.errors import ConfigError, ConfigProblem, ConfigProviderError

PROVIDERS = "config.providers"
# Kafka's ConfigTransformer.DEFAULT_PATTERN, which Python's re reads the same way
REFERENCE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
HIDDEN = "[hidden]"
_SHORT = 4  # values shorter than this are hidden only in problems of the keys that hold them


def is_provider_key(name: str) -> bool:
    return name == PROVIDERS or name.startswith(PROVIDERS + ".")


@dataclass(frozen=True)
class Reference:
    """One ``${provider:path:key}`` in a value."""

    provider: str
    path: str
    key: str
    text: str

    @classmethod
    def of(cls, match: re.Match[str]) -> Reference:
        return cls(match.group(1), match.group(3) or "", match.group(4), match.group(0))


@dataclass
class Transformed:
    """The entries with every reference replaced, and what replaced them, by key (for ``redact``)."""

    entries: dict[str, Entry]
    secrets: dict[str, tuple[str, ...]] = field(default_factory=dict)


class _Transformer:
    def __init__(self, entries: Mapping[str, Entry], source: str | None):
        self.entries = entries
        self.source = source
        self.problems: list[ConfigProblem] = []
        self.providers: dict[str, ConfigProvider] = {}
        self.classes: dict[str, str] = {}
        self.missing: set[str] = set()  # providers referenced but not declared

    def problem(self, key: str, message: str) -> None:
        self.problems.append(ConfigProblem(key, message, self.entries[key].line if key in self.entries else None,
                                           self.source))

    def load_providers(self, wanted: set[str]) -> None:
        """Build every provider ``config.providers`` names (as MM2 does); name a referenced one it does not.

        A provider without a ``.class`` is skipped, as Kafka skips it, unless a value refers to it.
        """
        declared = split_list(self.entries[PROVIDERS].value) if PROVIDERS in self.entries else ()
        for name in declared:
            class_key = f"{PROVIDERS}.{name}.class"
            if class_key not in self.entries:
                if name in wanted:
                    self.problem(PROVIDERS, f"names provider {name!r}, but {class_key} is not set")
                continue
            class_name = self.entries[class_key].value.strip()
            prefix = f"{PROVIDERS}.{name}.param."
            params = {k[len(prefix):]: e.value.strip() for k, e in self.entries.items() if k.startswith(prefix)}
            try:
                self.providers[name] = load_provider(class_name, params)
                self.classes[name] = class_name.rpartition(".")[2]
            except ConfigProviderError as e:
                self.problem(class_key, f"config provider {name!r}: {e}")
        self.missing = wanted - set(declared)

    def fetch(self, refs: dict[str, list[Reference]]) -> dict[tuple[str, str], Mapping[str, str]]:
        """One ``get`` per (provider, path) with every key asked of it; a failure is named at each key asking."""
        asked: dict[tuple[str, str], set[str]] = {}
        for found in refs.values():
            for ref in found:
                if ref.provider in self.providers:
                    asked.setdefault((ref.provider, ref.path), set()).add(ref.key)
        data: dict[tuple[str, str], Mapping[str, str]] = {}
        for (name, path), keys in asked.items():
            try:
                got = self.providers[name].get(path, set(keys))
                data[(name, path)] = dict(getattr(got, "data", got) or {})
            except Exception as e:  # a plugin's failure, whatever it raises, is the operator's to see
                why = str(e) if isinstance(e, ConfigProviderError) else f"{type(e).__name__}: {e}"
                for key, found in refs.items():
                    for ref in found:
                        if (ref.provider, ref.path) == (name, path):
                            self.problem(key, f"{ref.text}: {self.who(name)} failed: {why}")
                            break
        return data

    def who(self, name: str) -> str:
        return f"config provider {name!r} ({self.classes[name]})"

    def replace(self, key: str, value: str, data: Mapping[tuple[str, str], Mapping[str, str]],
                used: list[str]) -> str:
        def one(match: re.Match[str]) -> str:
            ref = Reference.of(match)
            if ref.provider not in self.providers:
                if ref.provider in self.missing:
                    self.problem(key, f"{ref.text}: no config provider {ref.provider!r} is declared "
                                      f"(config.providers = {', '.join(self.providers) or 'nothing'})")
                return ref.text
            got = data.get((ref.provider, ref.path))
            if got is None:
                return ref.text  # its get failed: named already
            if ref.key not in got:
                where = f" at {ref.path!r}" if ref.path else ""
                self.problem(key, f"{ref.text}: {self.who(ref.provider)} has no {ref.key!r}{where}")
                return ref.text
            value = str(got[ref.key])
            used.append(value)
            return value

        return REFERENCE.sub(one, value)


def transform(entries: Mapping[str, Entry], source: str | None = None) -> Transformed:
    """Replace every provider reference; one ConfigError lists every one that cannot be (key, line, provider)."""
    refs = {k: [Reference.of(m) for m in REFERENCE.finditer(e.value)]
            for k, e in entries.items() if not is_provider_key(k)}
    refs = {k: found for k, found in refs.items() if found}
    if not refs and PROVIDERS not in entries:
        return Transformed(dict(entries))
    t = _Transformer(entries, source)
    t.load_providers({ref.provider for found in refs.values() for ref in found})
    data = t.fetch(refs)
    out = dict(entries)
    secrets: dict[str, tuple[str, ...]] = {}
    for key in refs:
        used: list[str] = []
        out[key] = Entry(t.replace(key, entries[key].value, data, used), entries[key].line)
        secrets[key] = tuple(used)
    for provider in t.providers.values():
        close = getattr(provider, "close", None)
        if callable(close):
            close()
    if t.problems:
        raise ConfigError(sorted(t.problems, key=lambda p: (p.line is None, p.line or 0)))
    return Transformed(out, secrets)


def redact(error: ConfigError, secrets: Mapping[str, tuple[str, ...]]) -> ConfigError:
    """``error`` with every value a provider gave hidden from its messages.

    A value is hidden in the problems of the key that holds it, and, when it is not too short to
    be mistaken for other text, in every problem.
    """
    if not secrets:
        return error
    everywhere = sorted({v for vs in secrets.values() for v in vs if len(v.strip()) >= _SHORT}, key=len, reverse=True)
    problems = []
    for problem in error.problems:
        message = problem.message
        for value in sorted({*secrets.get(problem.key or "", ()), *everywhere}, key=len, reverse=True):
            for form in {value, value.strip()} - {""}:
                message = message.replace(form, HIDDEN)
        problems.append(ConfigProblem(problem.key, message, problem.line, problem.source))
    return ConfigError(problems)
