"""java.util.Properties text, parsed as ``Properties.load`` does, keeping line numbers.

Rules (``Properties.load(Reader)`` and its ``LineReader``/``loadConvert``):

- natural lines end at ``\\n``, ``\\r`` or ``\\r\\n`` (nothing else: no ``\\v``, ``\\x85``, ...);
- a logical line continues on the next natural line when it ends in an odd number of
  backslashes; that backslash goes, and so does leading white space of the next line;
  a continuation at end of input continues into nothing;
- leading white space (space, tab, form feed) is skipped; a line whose first other character is
  ``#`` or ``!`` is a comment (but a continued line never is), and a comment never continues;
- the key ends at the first unescaped ``=``, ``:`` or white space; white space and at most one
  ``=``/``:`` after it are skipped, the rest is the value (trailing white space kept);
- ``\\t \\n \\r \\f \\uXXXX`` are escapes; a backslash before any other character stands for
  that character, which is how ``\\=``, ``\\:``, ``\\ ``, ``\\#`` get into keys;
- the same key later in the text replaces the earlier one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mm2py.errors import ConfigError, ConfigProblem

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_NATURAL_LINE_END = re.compile(r"\r\n|\r|\n")
_HEX = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True, slots=True)
class Entry:
    """A key's value and the 1-based line its logical line starts on (for error messages)."""

    value: str
    line: int


def logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continued lines and drop comments and blanks: (first line number, raw line) pairs."""
    natural = _NATURAL_LINE_END.split(text)
    out: list[tuple[int, str]] = []
    i = 0
    while i < len(natural):
        start = i + 1
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line):
            line = line[:-1]
            if i >= len(natural):
                break
            line += natural[i].lstrip(_WHITESPACE)
            i += 1
        out.append((start, line))
    return out


def _continues(line: str) -> bool:
    # an even run of trailing backslashes is escaped backslashes, not a continuation
    return (len(line) - len(line.rstrip("\\"))) % 2 == 1


def _split(line: str) -> tuple[str, str]:
    """Split a logical line at its first unescaped separator; both parts still escaped."""
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


def unescape(raw: str) -> str:
    """Resolve Properties escapes; ValueError names a malformed ``\\uXXXX``."""
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
            if len(digits) != 4 or not _HEX.issuperset(digits):
                raise ValueError(f"malformed \\uxxxx escape '\\u{digits}'")
            out.append(chr(int(digits, 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
    text = "".join(out)
    # Java strings are UTF-16: "\uD83D\uDE00" is one character there, so pair surrogates up too
    if any("\ud800" <= c <= "\udfff" for c in text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def parse_properties(text: str, source: str | None = None) -> dict[str, Entry]:
    """Every key of a properties text with its value and the line its logical line starts on.

    All malformed escapes are reported together in one ConfigError.
    """
    entries: dict[str, Entry] = {}
    problems: list[ConfigProblem] = []
    for number, line in logical_lines(text):
        raw_key, raw_value = _split(line)
        try:
            key = unescape(raw_key)
        except ValueError as e:
            problems.append(ConfigProblem(None, str(e), number, source))
            continue
        try:
            value = unescape(raw_value)
        except ValueError as e:
            problems.append(ConfigProblem(key, str(e), number, source))
            continue
        # pop first so that iteration order follows the winning (last) occurrence
        entries.pop(key, None)
        entries[key] = Entry(value, number)
    if problems:
        raise ConfigError(problems)
    return entries
