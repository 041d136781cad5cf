"""Topology checks: cycles a replication policy cannot break are refused before anything runs."""

from __future__ import annotations

import pytest

from mm2py.config import load_text
from mm2py.errors import ConfigError
from mm2py.topology import check_topology, is_blind, unsafe_cycle

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def config(aliases: str, flows: list[str], extra: str = "") -> str:
    lines = [f"clusters = {aliases}"]
    lines += [f"{a}.bootstrap.servers = {a.lower()}:9092" for a in aliases.replace(" ", "").split(",")]
    lines += [f"{f}.enabled = true" for f in flows]
    return "\n".join(lines) + "\n" + extra


def refused(text: str) -> str:
    cfg = load_text(text, source="mm2.properties")
    with pytest.raises(ConfigError) as err:
        check_topology(cfg)
    return str(err.value)


def test_default_policy_cycles_are_safe() -> None:
    for text in (
        config("A, B", ["A->B", "B->A"]),
        config("A, B, C", ["A->B", "B->C", "C->A"]),
        config("A, B, C", ["A->B", "B->A", "B->C", "C->B"]),
    ):
        check_topology(load_text(text))


def test_identity_active_active_refused_naming_the_cycle() -> None:
    message = refused(config("A, B", ["A->B", "B->A"], f"replication.policy.class = {IDENTITY}\n"))
    assert "cycle A->B->A" in message
    assert "IdentityReplicationPolicy" in message
    assert "mm2.properties" in message


def test_identity_three_cluster_ring_refused() -> None:
    message = refused(config("A, B, C", ["A->B", "B->C", "C->A"], f"replication.policy.class = {IDENTITY}\n"))
    assert "cycle A->B->C->A" in message


def test_one_blind_flow_on_a_cycle_is_enough() -> None:
    # A->B keeps names, so B->A (Default) sees a local topic and sends it back as B.t, forever
    message = refused(config("A, B", ["A->B", "B->A"], f"A->B.replication.policy.class = {IDENTITY}\n"))
    assert "cycle A->B->A" in message
    assert "A->B.replication.policy.class" in message


def test_identity_without_cycle_is_fine() -> None:
    for flows in (["A->B"], ["A->K", "B->K"], ["K->A", "K->B"], ["A->B", "B->C"]):
        aliases = ", ".join(sorted({c for f in flows for c in f.split("->")}))
        check_topology(load_text(config(aliases, flows, f"replication.policy.class = {IDENTITY}\n")))


def test_disabled_flows_do_not_count() -> None:
    text = config("A, B", ["A->B"], f"replication.policy.class = {IDENTITY}\nB->A.enabled = false\n")
    check_topology(load_text(text))


def test_blindness_of_builtin_policies() -> None:
    cfg = load_text(config("A, B", ["A->B", "B->A"], f"B->A.replication.policy.class = {IDENTITY}\n"))
    by_name = {f.name: f for f in cfg.enabled_flows}
    assert not is_blind(by_name["A->B"])
    assert is_blind(by_name["B->A"])
    found = unsafe_cycle(cfg.enabled_flows)
    assert found is not None and found[0] == ["B", "A", "B"] and found[1].name == "B->A"
