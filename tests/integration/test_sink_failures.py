"""foreachBatch sinks on a real Spark session: a failed or stopped micro-batch leaves Spark's
stream thread alive to record it (connectors.sink.collected)."""

from __future__ import annotations

import os
import time

import pytest
from pyspark.sql.functions import udf

from connectors.sink import collected


class UncaughtInJvm:
    """The JVM's default handler of uncaught thread exceptions, recording what reaches it."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def uncaughtException(self, thread, throwable) -> None:  # a Java interface
        self.seen.append(f"{thread.getName()}: {throwable.toString()}")

    class Java:
        implements = ["java.lang.Thread$UncaughtExceptionHandler"]


@pytest.fixture
def uncaught(spark):
    thread = spark.sparkContext._jvm.java.lang.Thread
    before = thread.getDefaultUncaughtExceptionHandler()
    handler = UncaughtInJvm()
    thread.setDefaultUncaughtExceptionHandler(handler)
    yield handler
    thread.setDefaultUncaughtExceptionHandler(before)


def _start(spark, sink):
    return spark.readStream.format("rate").option("rowsPerSecond", 1).load().writeStream.foreachBatch(sink).start()


def _ended(query, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while query.isActive and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not query.isActive, f"the query still runs after {seconds} s"


def test_a_query_stopped_during_its_sinks_collect_ends_as_stopped(spark, uncaught):
    """Spark tests the error of a stopped foreachBatch with a pattern that recurses per character:
    on py4j's full text (a Java stack) the stream thread died of a StackOverflowError."""
    @udf("long")
    def slow(x):
        time.sleep(12)  # stopped after 2 s; a slot it held would be free soon after anyway
        return x

    started = []

    def sink(df, batch_id):
        started.append(batch_id)
        collected(spark.range(2).select(slow("id")))

    query = _start(spark, sink)
    deadline = time.monotonic() + 60
    while not started and time.monotonic() < deadline:
        time.sleep(0.2)
    assert started, "no micro-batch reached the sink in 60 s"
    time.sleep(2)  # the job is running
    query.stop()
    _ended(query, 30)
    assert query.exception() is None, "a stop is not a failure"
    assert uncaught.seen == [], uncaught.seen


def test_a_sinks_failed_job_is_the_querys_error_in_brief(spark, uncaught):
    @udf("long")
    def crash(x):
        os._exit(3)  # a Python worker that dies: PySpark keeps the job's failure as a Py4JJavaError

    def sink(df, batch_id):
        collected(spark.range(1).select(crash("id")))

    query = _start(spark, sink)
    _ended(query, 120)
    text = str(query.exception())
    assert "mm2py.errors.Mm2pyError: org.apache.spark.SparkException: Job aborted due to stage failure" in text
    assert "Python worker exited unexpectedly" in text
    assert "Py4JJavaError" not in text, "py4j's text with its Java stack stays out"
    assert uncaught.seen == [], uncaught.seen
