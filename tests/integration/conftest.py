"""Integration fixtures shared across the session: one Spark session for in-process flows."""

from __future__ import annotations

import pytest

from mm2py.engine.driver import build_session


@pytest.fixture(scope="session")
def spark():
    session = build_session("local[2]", {"spark.sql.streaming.forceDeleteTempCheckpointLocation": "true"},
                            app_name="mm2py-tests")
    yield session
    session.stop()
