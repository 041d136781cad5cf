"""Integration fixtures: one Spark session for in-process flows; no process a test started outlives it."""

from __future__ import annotations

import pytest

from mm2py.engine.driver import build_session
from tests.integration import reaper


@pytest.fixture(scope="session")
def spark():
    session = build_session("local[2]", {"spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"},
                            app_name="mm2py-tests")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test():
    """Kill what a test left running (tests/integration/reaper.py) and fail its teardown naming it."""
    yield
    killed = reaper.reap()
    assert not killed, f"still running after the test, killed: {killed}"
