"""The operator's terminal: a worker's Python traceback goes to spark.log, one line stays."""

from __future__ import annotations

import os
import threading

from mm2py.engine.console import JvmOutput, Tracebacks

RUNNER_FAILURE = [
    "Traceback (most recent call last):\n",
    '  File "<frozen runpy>", line 198, in _run_module_as_main\n',
    '  File ".../pyspark/util.py", line 858, in local_connect_and_auth\n',
    "    raise PySparkRuntimeError(\n",
    "pyspark.errors.exceptions.base.PySparkRuntimeError: [CANNOT_OPEN_SOCKET] Can not open socket\n",
]


def test_a_traceback_is_one_block_ending_at_its_exception_line():
    split = Tracebacks()
    assert split.feed("before\n") == (["before\n"], None)
    for line in RUNNER_FAILURE[:-1]:
        assert split.feed(line) == ([], None)
    assert split.feed(RUNNER_FAILURE[-1]) == ([], RUNNER_FAILURE)
    assert split.feed("after\n") == (["after\n"], None)


def test_a_chained_traceback_is_two_blocks_and_only_the_blank_line_between_stays():
    split = Tracebacks()
    first = [*RUNNER_FAILURE[:-1], "OSError: timed out\n"]
    second = ["During handling of the above exception, another exception occurred:\n", "\n", *RUNNER_FAILURE]
    results = [split.feed(line) for line in [*first, "\n", *second]]
    assert [block for _, block in results if block is not None] == [first, second]
    assert [line for kept, _ in results for line in kept] == ["\n"]


def _forward(output: JvmOutput, lines: list[str]) -> str:
    read_end, write_end = os.pipe()
    real_read, real_write = os.pipe()
    thread = threading.Thread(target=output._forward, args=(read_end, real_write))
    thread.start()
    with os.fdopen(write_end, "w") as worker:
        worker.writelines(lines)
    thread.join(10)
    with os.fdopen(real_read) as terminal:
        return terminal.read()


def test_a_workers_traceback_goes_to_spark_log_and_the_terminal_keeps_the_rest(tmp_path, capsys):
    spark_log = tmp_path / "spark.log"
    terminal = _forward(JvmOutput(tracebacks_to=spark_log), ["a JVM line\n", *RUNNER_FAILURE, "next line\n"])
    assert terminal == "a JVM line\nnext line\n"
    assert spark_log.read_text() == "".join(RUNNER_FAILURE)
    said = capsys.readouterr()
    assert "CANNOT_OPEN_SOCKET" in said.err + said.out and str(spark_log) in said.err + said.out


def test_without_a_spark_log_the_traceback_is_forwarded():
    assert _forward(JvmOutput(), RUNNER_FAILURE) == "".join(RUNNER_FAILURE)


def test_a_traceback_cut_short_by_the_end_of_the_stream_is_kept_in_spark_log(tmp_path):
    spark_log = tmp_path / "spark.log"
    assert _forward(JvmOutput(tracebacks_to=spark_log), ["a JVM line\n", *RUNNER_FAILURE[:3]]) == "a JVM line\n"
    assert spark_log.read_text() == "".join(RUNNER_FAILURE[:3])
