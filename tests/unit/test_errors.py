"""Errors raised inside Spark tasks reach the operator as ours, in one line."""

from mm2py.errors import (
    BRIEF_LINES,
    AuthorizationError,
    EngineTimeoutError,
    Mm2pyError,
    RecordTooLargeError,
    brief_failure,
    from_task_failure,
)

SPARK_DESC = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Job aborted.
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/srv/mm2py/lib/python3.11/site-packages/mm2py/connectors/source.py", line 104, in read
    for result in copy_ranges(...):
  File "/srv/mm2py/lib/python3.11/site-packages/mm2py/source/copy/copier.py", line 288, in _handle_fetched
    raise missing_acl(...)
mm2py.errors.AuthorizationError: not authorized: missing ACL ALLOW READ on TOPIC 'orders' for User:alice \
(kafka-acls --add --allow-principal User:alice --operation Read --topic 'orders') [cluster=A topic=orders]
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:600)
"""


def test_our_error_comes_out_of_sparks_description_with_its_class_and_place():
    error = from_task_failure("flow A->B", SPARK_DESC)
    assert isinstance(error, AuthorizationError)
    assert str(error).startswith("flow A->B failed: not authorized: missing ACL ALLOW READ on TOPIC 'orders'")
    assert "Traceback" not in str(error) and "\n" not in str(error)
    assert (error.cluster, error.topic, error.partition) == ("A", "orders", None)


def test_the_innermost_of_chained_errors_and_partition_offset_are_kept():
    desc = ("mm2py.errors.KafkaError: request failed [cluster=B]\n"
            "mm2py.errors.RecordTooLargeError: batch larger than the target allows [cluster=B topic=A.t "
            "partition=3 offset=120]\n")
    error = from_task_failure("flow A->B", desc)
    assert isinstance(error, RecordTooLargeError)
    assert (error.topic, error.partition, error.offset) == ("A.t", 3, 120)


def test_a_failure_that_is_not_ours_keeps_sparks_first_line():
    error = from_task_failure("heartbeats", "\n[STREAM_FAILED] something in the JVM\n  at x\n")
    assert type(error) is Mm2pyError
    assert str(error) == "heartbeats failed: [STREAM_FAILED] something in the JVM"


def test_the_fullest_place_in_the_message_wins():
    desc = ("mm2py.errors.AuthorizationError: not authorized: missing ACL ALLOW READ on TOPIC 't' [cluster=A]: "
            "not authorized (TopicAuthorizationFailedError) [cluster=A topic=t partition=0]\n")
    error = from_task_failure("flow A->B", desc)
    assert (error.cluster, error.topic, error.partition) == ("A", "t", 0)


def test_missing_acl_spells_kafka_acls_resource_flags():
    from mm2py.errors import missing_acl

    error = missing_acl("WRITE", "TRANSACTIONAL_ID", "mm2py-A->B-0", cluster="B", principal="User:alice")
    assert "--operation Write --transactional-id 'mm2py-A->B-0'" in str(error)
    assert "--topic 'orders'" in str(missing_acl("READ", "TOPIC", "orders", cluster="A"))


def test_a_brief_failure_keeps_what_from_task_failure_reads_without_py4j_words():
    py4j_text = ("An error occurred while calling o87.collectToPython.\n"
                 ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 failed 4 times\n"
                 + SPARK_DESC * 4 + "\tat java.base/java.lang.Thread.run(Thread.java:840)\n" * 200)
    brief = brief_failure(py4j_text)
    assert brief.splitlines()[0] == ("org.apache.spark.SparkException: Job aborted due to stage failure: "
                                     "Task 0 failed 4 times")
    assert "Py4JJavaError" not in brief and "An error occurred while calling" not in brief
    assert len(brief.splitlines()) == 2, "a task retried four times says its error once"
    # raised again as the sink's own error, Spark's description still yields the task's error and place
    error = from_task_failure("checkpoint A->B", f"Traceback ...\nmm2py.errors.Mm2pyError: {brief}\n")
    assert isinstance(error, AuthorizationError) and (error.cluster, error.topic) == ("A", "orders")


def test_a_brief_failure_is_bounded_and_keeps_the_most_recent_errors_and_engine_timeouts():
    text = "first\n" + "".join(f"mm2py.errors.KafkaError: failure {i} [cluster=B]\n" for i in range(50))
    brief = brief_failure(text + "Python worker failed to connect back in 10 s\n")
    lines = brief.splitlines()
    assert len(lines) == BRIEF_LINES and lines[0] == "first"
    assert lines[-2] == "mm2py.errors.KafkaError: failure 49 [cluster=B]"
    assert isinstance(from_task_failure("source A->B", "x\n" + "\n".join(lines[:1] + lines[-1:])), EngineTimeoutError)
    assert len(brief_failure("x" * 100_000)) <= 600
