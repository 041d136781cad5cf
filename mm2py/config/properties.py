"""java.util.Properties text, parsed as ``Properties.load`` does, keeping line numbers.

Rules (from the Javadoc of ``Properties.load(Reader)``): a logical line may span several
natural lines, joined where a line ends in an odd number of backslashes (leading white space
of the next line dropped); ``#`` or ``!`` as the first non-blank character starts a comment;
the key ends at the first unescaped ``=``, ``:`` or white space, and white space plus at most
one ``=``/``:`` after it are skipped; ``\\t \\n \\r \\f \\uXXXX`` are escapes and a
backslash before any other character stands for that character. Later keys win.
"""

from __future__ import annotations

from dataclasses import dataclass

from mm2py.errors import ConfigError, ConfigProblem

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True, slots=True)
class Entry:
    value: str
    line: int


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continued lines; return (first line number, raw logical line) pairs."""
    out: list[tuple[int, str]] = []
    natural = text.splitlines()
    i = 0
    while i < len(natural):
        start = i + 1
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _ends_with_continuation(line) and i < len(natural):
            line = line[:-1] + natural[i].lstrip(_WHITESPACE)
            i += 1
        if _ends_with_continuation(line):
            line = line[:-1]  # a continuation at end of file continues into nothing
        out.append((start, line))
    return out


def _ends_with_continuation(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _unescape(raw: str, line: int, source: str | None) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch != "\\" or i + 1 >= len(raw):
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(ConfigProblem(None, f"malformed \\uxxxx escape '\\u{digits}'", line, source))
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """Split a logical line at the first unescaped separator, still escaped."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(text: str, source: str | None = None) -> dict[str, Entry]:
    """Every key of a properties text with its value and the line its logical line starts on."""
    entries: dict[str, Entry] = {}
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split(line)
        key = _unescape(raw_key, number, source)
        entries[key] = Entry(_unescape(raw_value, number, source), number)
    return entries
