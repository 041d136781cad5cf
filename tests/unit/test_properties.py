"""java.util.Properties parsing, checked against Properties.load's documented behaviour."""

from __future__ import annotations

import pytest

from mm2py.config.properties import parse_properties
from mm2py.errors import ConfigError


def values(text: str) -> dict[str, str]:
    return {k: e.value for k, e in parse_properties(text).items()}


def test_three_separators_and_surrounding_whitespace():
    assert values("a=1\nb : 2\nc 3\n  d\t=\t4\ne:=5\nf==6") == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "=5", "f": "=6"}


def test_comments_blank_lines_and_key_without_value():
    assert values("# x = 1\n   ! y = 2\n\n   \nlonely\nz = #not a comment") == {"lonely": "", "z": "#not a comment"}


def test_continuation_lines_join_and_drop_leading_whitespace():
    text = "topics = a, \\\n        b, \\\n    c\nnext = 1\n"
    entries = parse_properties(text)
    assert entries["topics"].value == "a, b, c"
    assert entries["topics"].line == 1
    assert entries["next"].line == 4, "line numbers count natural lines"


def test_escaped_backslash_at_end_is_not_a_continuation():
    assert values("path = C:\\\\dir\\\\\nnext = 2") == {"path": "C:\\dir\\", "next": "2"}


def test_continuation_line_starting_with_hash_is_not_a_comment():
    assert values("a = 1\\\n# still a\nb = 2") == {"a": "1# still a", "b": "2"}


def test_escapes_in_keys_and_values():
    text = "key\\ with\\:colon\\=eq = tab\\there\\nnewline \\u00e9\\u20AC \\q"
    assert values(text) == {"key with:colon=eq": "tab\there\nnewline é€ q"}


def test_malformed_unicode_escape_names_the_line():
    with pytest.raises(ConfigError) as err:
        parse_properties("ok = 1\nbad = \\u12G4\n", source="mm2.properties")
    assert "mm2.properties:2" in str(err.value) and "\\u12G4" in str(err.value)


def test_later_duplicate_wins_with_its_line():
    entries = parse_properties("a = 1\nb = x\na = 2\n")
    assert (entries["a"].value, entries["a"].line) == ("2", 3)


def test_crlf_line_endings():
    assert values("a = 1\r\nb = 2\r\n") == {"a": "1", "b": "2"}
