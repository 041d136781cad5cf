"""errors.tolerance and the dead-letter keys on a flow's transforms (mm2py.transforms.tolerance)."""

from __future__ import annotations

import pytest
import structlog

from mm2py.config import load_text
from mm2py.errors import ConfigError, TransformFailedError
from mm2py.source.copy.transforming import TransformingWriter
from mm2py.transforms import TransformError, chain_for, check_flows
from mm2py.transforms.tolerance import ErrorPolicy, context_headers, error_policy
from tests.fakes.batches import transformed_copy

MASK = {"transforms": "mask", "transforms.mask.type": "tests.plugins.MaskDigits", "transforms.mask.fail.offset": "3,7"}


def test_connects_keys_give_the_policy_and_defaults_fail_the_flow() -> None:
    assert error_policy({}) == ErrorPolicy(tolerate=False, dead_letter_topic="", replication_factor=3)
    assert error_policy({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": " dlq ",
                         "errors.deadletterqueue.topic.replication.factor": "1",
                         "errors.deadletterqueue.context.headers.enable": "true",
                         "errors.log.enable": "true"}) == ErrorPolicy(True, "dlq", 1, True)


@pytest.mark.parametrize(("raw", "key"), [
    ({"errors.tolerance": "some"}, "errors.tolerance"),
    ({"errors.deadletterqueue.topic.name": "dlq"}, "errors.deadletterqueue.topic.name"),
    ({"errors.tolerance": "all", "errors.deadletterqueue.topic.replication.factor": "x"},
     "errors.deadletterqueue.topic.replication.factor"),
    ({"errors.deadletterqueue.context.headers.enable": "yes"}, "errors.deadletterqueue.context.headers.enable"),
    ({"errors.log.include.messages": "true"}, "errors.log.include.messages"),
    ({"errors.retry.timeout": "-1"}, "errors.retry.timeout"),
])
def test_what_cannot_be_honoured_is_refused_naming_the_key(raw: dict, key: str) -> None:
    with pytest.raises(TransformError) as e:
        error_policy(raw)
    assert e.value.key == key


def test_a_file_with_errors_keys_loads_them_without_a_warning_and_refuses_at_start() -> None:
    text = ("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
            + "".join(f"A->B.{k} = {v}\n" for k, v in MASK.items()) + "errors.tolerance = all\n")
    config = load_text(text)
    assert not [k for k in config.unknown_keys if k.startswith("errors.")]
    check_flows(config.enabled_flows, lambda f: False)
    bad = load_text(text + "A->B.errors.tolerance = none\nA->B.errors.deadletterqueue.topic.name = dlq\n")
    with pytest.raises(ConfigError, match="errors.deadletterqueue.topic.name.*flow A->B"):
        check_flows(bad.enabled_flows, lambda f: False)


def test_tolerance_none_fails_the_flow_naming_flow_transform_and_record() -> None:
    with pytest.raises(TransformFailedError, match=r"flow A->B: transform 'mask' \(tests.plugins.MaskDigits\) raised "
                       r"ValueError: .* at topic t partition 2 offset 3 \(remote topic A.t\)"):
        transformed_copy(MASK, ErrorPolicy())


def test_tolerance_all_leaves_an_offset_gap_counted_failed_and_logs_where() -> None:
    with structlog.testing.capture_logs() as logs:
        part = transformed_copy(MASK, ErrorPolicy(tolerate=True))
    [(_payload, pending)] = part.queue
    assert pending.offsets == (0, 1, 2, 4, 5, 6, 8, 9) and part.dropped == 2
    assert part.result().transformed == (("mask", 10, 8, 0, 2),), "10 in, 8 out, 2 failed"
    part.send_next()
    part.acked(500, lag_max=1000)
    # as across a dropped record: a group committed at a failed one resumes at the next kept one
    assert part.syncs == [(0, 500), (4, 503), (8, 506)] and part.run_next == (10, 508)
    skipped = [e for e in logs if e["log_level"] == "warning"]
    assert [(e["flow"], e["transform"], e["topic"], e["partition"], e["offset"]) for e in skipped] == [
        ("A->B", "mask", "t", 2, 3), ("A->B", "mask", "t", 2, 7)]
    assert all("errors.deadletterqueue.topic.name" in e["event"] for e in skipped)


def test_a_dead_letter_topic_needs_the_target_and_context_headers_are_connects() -> None:
    with pytest.raises(ValueError, match="dead-letter writer"):
        TransformingWriter(chain_for(MASK), errors=ErrorPolicy(True, "dlq"))
    headers = dict(context_headers(flow="A->B", link="mask", path="tests.plugins.MaskDigits", topic="t", partition=2,
                                   offset=3, error=ValueError("no"), trace="Traceback"))
    assert headers == {
        "__connect.errors.topic": b"t", "__connect.errors.partition": b"2", "__connect.errors.offset": b"3",
        "__connect.errors.connector.name": b"MirrorSourceConnector A->B", "__connect.errors.stage": b"TRANSFORMATION",
        "__connect.errors.class.name": b"tests.plugins.MaskDigits",
        "__connect.errors.exception.class.name": b"builtins.ValueError",
        "__connect.errors.exception.message": b"no", "__connect.errors.exception.stacktrace": b"Traceback"}
