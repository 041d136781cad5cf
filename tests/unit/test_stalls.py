"""Stalled partitions: where a range that stopped short starts again, and how a copy stops."""

from __future__ import annotations

from mm2py.errors import AuthorizationError, missing_acl
from mm2py.kafka.admin_errors import principal_of
from mm2py.source.plan.spark_offsets import Offsets
from mm2py.source.plan.stalls import PlannedRange, short_ranges


def test_finished_ranges_are_not_short():
    planned = {"t:0": PlannedRange(10, 20, False), "t:1": PlannedRange(0, 5, False)}
    # a range may end past its planned end (the batch straddling it is copied whole)
    assert short_ranges(planned, {"t:0": 19, "t:1": 7}) == {}


def test_short_range_restarts_at_the_recorded_position_exactly():
    planned = {"t:0": PlannedRange(10, 20, False)}
    assert short_ranges(planned, {"t:0": 14}) == {"t:0": PlannedRange(15, 20, True)}


def test_range_with_nothing_copied_restarts_at_its_own_start():
    planned = {"t:0": PlannedRange(10, 20, False), "t:1": PlannedRange(0, 20, True)}
    # nothing recorded at all (first range of a partition), or the position of an earlier range
    assert short_ranges(planned, {"t:0": None, "t:1": None}) == planned
    assert short_ranges({"t:0": PlannedRange(10, 20, False)}, {"t:0": 9}) == {"t:0": PlannedRange(10, 20, False)}


def test_restarts_ride_in_the_offsets_json_only_when_present():
    plain = Offsets({"t:0": 5}, frozenset(), {})
    assert "r" not in plain.to_json()
    with_restart = Offsets({"t:0": 20}, frozenset(), {}, {"t:0": (15, True)}, 3)
    raw = with_restart.to_json()
    assert raw["r"] == {"t:0": [15, True]} and raw["rn"] == 3
    assert Offsets.parse(raw) == with_restart


def test_missing_acl_names_operation_resource_and_principal():
    error = missing_acl("WRITE", "TOPIC", "A.orders", cluster="B", principal="User:alice")
    assert isinstance(error, AuthorizationError)
    assert (error.operation, error.resource_type, error.resource_name, error.principal) == (
        "WRITE", "TOPIC", "A.orders", "User:alice")
    assert "ALLOW WRITE on TOPIC 'A.orders' for User:alice" in str(error) and "cluster=B" in str(error)
    assert "--operation Write --topic 'A.orders'" in str(error)


def test_principal_from_the_cluster_settings():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="x";'
    assert principal_of({"security.protocol": "SASL_SSL", "sasl.jaas.config": jaas}) == "User:bob"
    assert principal_of({}) == "User:ANONYMOUS"
    assert principal_of({"security.protocol": "SSL"}) is None  # the certificate's name: unknown here
