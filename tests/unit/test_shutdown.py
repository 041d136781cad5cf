from mm2py.engine.queries import first_line


class JvmGoneError(Exception):
    """Like py4j's Py4JJavaError once the JVM is gone: its text needs the JVM."""

    def __str__(self) -> str:
        raise ConnectionRefusedError(111, "Connection refused")


def test_a_query_failing_to_stop_is_named_even_when_its_text_needs_a_gone_jvm():
    assert first_line(JvmGoneError()) == "JvmGoneError"


def test_first_line_of_a_readable_error():
    assert first_line(RuntimeError("query stopped\nat org.apache...")) == "query stopped"
    assert first_line(RuntimeError("")) == ""


def test_py4j_root_logger_errors_go_to_spark_log_and_ours_still_print(tmp_path, capsys):
    import logging

    import py4j.java_gateway

    from mm2py.engine.console import divert_py4j

    root = logging.getLogger()
    before = list(root.filters)
    spark_log = tmp_path / "spark.log"
    try:
        divert_py4j(spark_log)
        # py4j's own call: logging.exception(...) on the root logger from java_gateway.py
        record = root.makeRecord("root", logging.ERROR, py4j.java_gateway.__file__, 1,
                                 "Exception while sending command.", (), None)
        assert root.filter(record) is False
        ours = root.makeRecord("root", logging.ERROR, __file__, 1, "ours", (), None)
        assert root.filter(ours) is True
    finally:
        root.filters[:] = before
    assert "Exception while sending command." in spark_log.read_text()
    assert "ours" not in spark_log.read_text()
