"""java.util.Properties parsing, checked against Properties.load's documented behaviour."""

from __future__ import annotations

import pytest

from mm2py.config.properties import Entry, parse_properties
from mm2py.errors import ConfigError


def values(text: str) -> dict[str, str]:
    return {k: e.value for k, e in parse_properties(text).items()}


def test_three_separators_and_surrounding_whitespace():
    assert values("a=1\nb : 2\nc 3\n  d\t=\t4\ne:=5\nf==6\ng \t :x\nh\f7") == {
        "a": "1", "b": "2", "c": "3", "d": "4", "e": "=5", "f": "=6", "g": "x", "h": "7"}


def test_first_separator_wins_and_the_rest_belongs_to_the_value():
    assert values("url = http://h:80/p?a=b\nk v = w\nx:y:z") == {
        "url": "http://h:80/p?a=b", "k": "v = w", "x": "y:z"}


def test_trailing_whitespace_of_a_value_is_kept():
    assert values("a = 1  \nb = \t") == {"a": "1  ", "b": ""}


def test_comments_blank_lines_and_key_without_value():
    text = "# x = 1\n   ! y = 2\n\n \t \f\nlonely\nalso:\nz = #not a comment\nw = a ! b"
    assert values(text) == {"lonely": "", "also": "", "z": "#not a comment", "w": "a ! b"}


def test_comment_ending_in_backslash_does_not_continue():
    assert values("# comment \\\na = 1") == {"a": "1"}


def test_continuation_lines_join_and_drop_leading_whitespace():
    text = "topics = a, \\\n        b, \\\n    c\nnext = 1\n"
    entries = parse_properties(text)
    assert entries["topics"] == Entry("a, b, c", 1)
    assert entries["next"].line == 4, "line numbers count natural lines"


def test_line_numbers_after_comments_blanks_and_continuations():
    text = "# header\n\nfirst = 1\nlong = x\\\n  y\\\n  z\n! note\nlast = 2\n"
    entries = parse_properties(text)
    assert [(k, e.line) for k, e in entries.items()] == [("first", 3), ("long", 4), ("last", 8)]
    assert entries["long"].value == "xyz"


def test_continued_key_spans_lines():
    assert values("spl\\\n   it = v") == {"split": "v"}


def test_escaped_backslash_at_end_is_not_a_continuation():
    assert values("path = C:\\\\dir\\\\\nnext = 2") == {"path": "C:\\dir\\", "next": "2"}


def test_three_backslashes_at_end_are_an_escaped_backslash_and_a_continuation():
    assert values("a = x\\\\\\\n  y") == {"a": "x\\y"}


def test_continuation_at_end_of_input_continues_into_nothing():
    assert values("a = 1\\") == {"a": "1"}
    assert values("a = 1\\\n") == {"a": "1"}


def test_continuation_into_a_blank_line_ends_the_value():
    assert values("a = 1\\\n\nb = 2") == {"a": "1", "b": "2"}


def test_continuation_line_starting_with_hash_is_not_a_comment():
    assert values("a = 1\\\n# still a\nb = 2") == {"a": "1# still a", "b": "2"}


def test_escapes_in_keys_and_values():
    text = "key\\ with\\:colon\\=eq = tab\\there\\nnewline \\u00e9\\u20AC \\q\\r\\f"
    assert values(text) == {"key with:colon=eq": "tab\there\nnewline é€ q\r\f"}


def test_escaped_comment_characters_start_a_key():
    assert values("\\#not = comment\n\\!bang = 2") == {"#not": "comment", "!bang": "2"}


def test_escaped_backslash_before_separator_leaves_the_separator_unescaped():
    assert values("a\\\\=b") == {"a\\": "b"}


def test_escaped_whitespace_at_start_of_value_is_kept():
    assert values("a = \\  x") == {"a": "  x"}


def test_unicode_escapes_pair_surrogates_as_java_strings_do():
    assert values("smile = \\uD83D\\uDE00") == {"smile": "\U0001f600"}
    assert values("k\\u0020ey = \\u0041") == {"k ey": "A"}


def test_malformed_unicode_escape_names_the_line():
    with pytest.raises(ConfigError) as err:
        parse_properties("ok = 1\nbad = \\u12G4\n", source="mm2.properties")
    [problem] = err.value.problems
    assert (problem.key, problem.line, problem.source) == ("bad", 2, "mm2.properties")
    assert "mm2.properties:2" in str(err.value) and "\\u12G4" in str(err.value)


def test_every_malformed_unicode_escape_is_reported_at_once():
    with pytest.raises(ConfigError) as err:
        parse_properties("a = \\u12\nok = 1\nb\\uZZZZ = 2\nc = x\\\n  \\u")
    assert [p.line for p in err.value.problems] == [1, 3, 4]


def test_later_duplicate_wins_with_its_line():
    entries = parse_properties("a = 1\nb = x\na = 2\n")
    assert entries["a"] == Entry("2", 3)
    assert list(entries) == ["b", "a"]


def test_line_endings_crlf_and_cr_only():
    assert values("a = 1\r\nb = 2\r\n") == {"a": "1", "b": "2"}
    assert parse_properties("a = 1\rb = 2\r")["b"].line == 2
    assert values("a = 1\\\r\n  2") == {"a": "12"}


def test_other_unicode_line_breaks_are_not_line_ends():
    # Python's str.splitlines would split here; Java's LineReader does not
    assert values("a = x\x85y\u2028z\x0bw") == {"a": "x\x85y\u2028z\x0bw"}
