"""The one rule that keeps secrets out of what mm2py prints: ``hide``, applied where text leaves the process.

A secret is the value of a secret setting of the MM2 file (``SECRET_KEY``: a ``*.password``, a
client secret, a key in PEM, a registry's ``basic.auth.user.info``, the ``password`` and
``clientSecret`` options of a ``sasl.jaas.config``), whether written or given by a config
provider. ``mm2py.config.load_text`` registers them (``register``); ``install`` wraps the process's
``sys.stdout`` and ``sys.stderr`` so that every line written there (structlog's and stdlib
logging's records, including the client libraries' own debug logs, error lines, command output)
passes ``hide`` first; so does the one free text ``/metrics`` serves (a flow's last error,
``mm2py.metrics``). ``hide`` also blanks what a SASL exchange carries whatever the values
(kafka-python's debug log of a ``SaslAuthenticateRequest``, a ``Bearer`` token).

Invariants: a value shorter than ``MIN_LENGTH`` is not registered (hiding it would blank ordinary
words; ``mm2py.config.transform.redact`` hides those in their own key's config errors);
``hide`` only replaces text, so a line keeps its shape.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import TextIO

HIDDEN = "[hidden]"
MIN_LENGTH = 4
# keys of an MM2 file (after any ``alias.``/``A->B.``/client prefix) whose whole value is a secret
SECRET_KEY = re.compile(r"(?i)password$|client\.secret$|ssl\.keystore\.key$|basic\.auth\.user\.info$"
                        r"|sasl\.jaas\.config$")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_SECRET = re.compile(r"(?i)password|secret")
# what a SASL exchange carries, as client libraries print it: PLAIN/SCRAM/OAUTHBEARER bytes, tokens
_WIRE = (re.compile(r"(auth_bytes=b)(['\"])(?:\\.|(?!\2).)*\2"), re.compile(r"(Bearer\s+)[\w.~+/=-]{8,}"))

_lock = threading.Lock()
_values: tuple[str, ...] = ()  # longest first, so a value holding another is hidden whole


def secret_values(entries: Mapping[str, str]) -> list[str]:
    """The secrets among ``entries`` (key -> value, as in an MM2 file)."""
    found: list[str] = []
    for key, value in entries.items():
        if not SECRET_KEY.search(key):
            continue
        if key.endswith("sasl.jaas.config"):
            found += [v for name, v in _JAAS_OPTION.findall(value) if _JAAS_SECRET.search(name)]
        else:
            found.append(value)
    return found


def register(values: Iterable[str]) -> None:
    """Hide these values from now on, in this process: as written, trimmed, and escaped as JSON and repr show them."""
    global _values
    new = {form for v in values for t in (v, v.strip()) for form in (t, json.dumps(t)[1:-1], repr(t)[1:-1])
           if len(t.strip()) >= MIN_LENGTH}
    with _lock:
        _values = tuple(sorted(set(_values) | new, key=len, reverse=True))


def hide(text: str) -> str:
    """``text`` with every registered secret and every SASL credential replaced by ``HIDDEN``."""
    for value in _values:
        if value in text:
            text = text.replace(value, HIDDEN)
    if "auth_bytes=" in text or "Bearer" in text:
        text = _WIRE[0].sub(rf"\g<1>\g<2>{HIDDEN}\g<2>", text)
        text = _WIRE[1].sub(rf"\g<1>{HIDDEN}", text)
    return text


class HidingStream:
    """A text stream that writes ``hide(text)`` to the stream it wraps; everything else is the wrapped one's."""

    def __init__(self, stream: TextIO):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(hide(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


def install() -> None:
    """Route ``sys.stdout`` and ``sys.stderr`` through ``hide`` (once; later calls do nothing)."""
    if not isinstance(sys.stdout, HidingStream):
        sys.stdout = HidingStream(sys.stdout)
    if not isinstance(sys.stderr, HidingStream):
        sys.stderr = HidingStream(sys.stderr)
