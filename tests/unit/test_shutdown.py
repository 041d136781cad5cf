from mm2py.engine.driver import _first_line


class JvmGoneError(Exception):
    """Like py4j's Py4JJavaError once the JVM is gone: its text needs the JVM."""

    def __str__(self) -> str:
        raise ConnectionRefusedError(111, "Connection refused")


def test_a_query_failing_to_stop_is_named_even_when_its_text_needs_a_gone_jvm():
    assert _first_line(JvmGoneError()) == "JvmGoneError"


def test_first_line_of_a_readable_error():
    assert _first_line(RuntimeError("query stopped\nat org.apache...")) == "query stopped"
    assert _first_line(RuntimeError("")) == ""
