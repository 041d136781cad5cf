"""Every key has a declared support status, and docs/configuration.md is what the code says."""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from mm2py.config import load_text
from mm2py.config.keys import ALL_KEYS
from mm2py.config.support import OTHER, SUPPORT, Status, other_support, render

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
AB = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


def test_every_key_has_a_status() -> None:
    missing = [k.name for k in ALL_KEYS if k.name not in SUPPORT]
    assert missing == [], f"declare what mm2py does with these keys in mm2py/config/support.py: {missing}"
    assert set(SUPPORT) == {k.name for k in ALL_KEYS}, "a status for a key that does not exist"
    for name, support in SUPPORT.items():
        if support.status in (Status.DIFFERENT, Status.WARNED, Status.REFUSED):
            assert support.why, f"{name}: say why"


def test_the_committed_table_is_generated_from_the_code() -> None:
    assert DOC.read_text() == render(), "run: make config-doc"


def test_mm2_features_mm2py_lacks_are_named_with_why_in_the_one_warning() -> None:
    text = AB + ("dedicated.mode.enable.internal.rest = true\nlisteners = http://localhost:8080\n"
                 "rest.advertised.host.name = h\nB.exactly.once.source.support = preparing\n"
                 "forwarding.admin.class = com.example.Admin\nconfig.providers = file\nmystery = 1\n")
    with capture_logs() as logs:
        load_text(text)
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    named = warning["not_supported"]
    assert set(named) == {"dedicated.mode.enable.internal.rest", "listeners", "rest.advertised.host.name",
                          "B.exactly.once.source.support", "forwarding.admin.class"}
    assert "REST" in named["listeners"] and "at-least-once" in named["B.exactly.once.source.support"]
    assert "com.example.Admin" in named["forwarding.admin.class"]
    assert warning["keys"] == ["mystery"]  # config.providers is honoured (mm2py.config.transform)


def test_quiet_for_settings_that_ask_for_nothing_missing() -> None:
    with capture_logs() as logs:
        load_text(AB + "B.exactly.once.source.support = disabled\noffset.flush.interval.ms = 10000\n"
                       "key.converter = org.apache.kafka.connect.converters.ByteArrayConverter\n")
    assert [e for e in logs if e["log_level"] == "warning"] == []


def test_other_settings_are_matched_by_pattern() -> None:
    assert other_support("rest.port") is not None and other_support("value.converter.schemas.enable") is not None
    assert other_support("topics") is None
    assert all(o.support.why for o in OTHER)
