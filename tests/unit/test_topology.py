"""Topology checks. With provenance (the default) a blind cycle starts and its flows run with
provenance, unless a flow of it cannot. With ``provenance.enabled = false`` a blind cycle every
topic would loop round is refused; other blind cycles start, and each flow's LoopGuard holds back
the concrete topics that would loop."""

from __future__ import annotations

import pickle

import pytest

from mm2py.config import load_text
from mm2py.errors import ConfigError
from mm2py.topology import LoopGuard, check_topology, is_blind, loop_guard, unsafe_cycle

IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"


def config(aliases: str, flows: list[str], extra: str = "", *, provenance: bool = False) -> str:
    lines = [f"clusters = {aliases}"] + ([] if provenance else ["provenance.enabled = false"])
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


def guards(text: str) -> dict[str, LoopGuard]:
    cfg = load_text(text, source="mm2.properties")
    check_topology(cfg)  # starts
    return {f.name: loop_guard(cfg, f) for f in cfg.enabled_flows}


IDENTITY_ALL = f"replication.policy.class = {IDENTITY}\n"


def test_identity_cycle_with_disjoint_topics_starts_and_loops_nothing() -> None:
    g = guards(config("A, B", ["A->B", "B->A"], IDENTITY_ALL + "A->B.topics = orders\nB->A.topics = payments\n"))
    for name in ("A->B", "B->A"):
        assert g[name].cycles  # the cycle is known ...
        for topic in ("orders", "payments", "other"):
            assert g[name].loop_for(topic) is None  # ... but nothing goes round it


def test_identity_cycle_with_overlapping_topics_holds_back_the_shared_name() -> None:
    text = config("A, B", ["A->B", "B->A"],
                  IDENTITY_ALL + "A->B.topics = orders, shared\nB->A.topics = payments, shared\n")
    g = guards(text)
    assert g["A->B"].loop_for("shared") == ["A", "B", "A"]
    assert g["B->A"].loop_for("shared") == ["B", "A", "B"]
    assert g["A->B"].loop_for("orders") is None
    assert g["B->A"].loop_for("payments") is None
    assert g["A->B"].held_back(["orders", "shared", "x"]) == {"shared": ["A", "B", "A"]}
    message = g["A->B"].describe("shared", ["A", "B", "A"])
    assert "'shared'" in message and "A->B->A" in message and "IdentityReplicationPolicy" in message


def test_identity_cycle_with_regex_topics_starts() -> None:
    g = guards(config("A, B", ["A->B", "B->A"], IDENTITY_ALL + "A->B.topics = ord.*\nB->A.topics = pay.*\n"))
    assert g["A->B"].loop_for("orders") is None and g["B->A"].loop_for("payments") is None
    # regexes that do meet are caught per topic
    g = guards(config("A, B", ["A->B", "B->A"], IDENTITY_ALL + "A->B.topics = ord.*\nB->A.topics = .*ers\n"))
    assert g["A->B"].loop_for("orders") == ["A", "B", "A"]
    assert g["A->B"].loop_for("ordinal") is None


def test_match_all_with_different_excludes_starts_and_holds_back_the_rest() -> None:
    text = config("A, B", ["A->B", "B->A"], IDENTITY_ALL + "A->B.topics.exclude = orders\n")
    g = guards(text)
    assert g["B->A"].loop_for("orders") is None  # B's orders reach A and stop there: worth starting for
    assert g["A->B"].loop_for("x") == ["A", "B", "A"]
    assert g["B->A"].loop_for("x") == ["B", "A", "B"]


def test_identity_three_cluster_ring_only_the_shared_name_loops() -> None:
    text = config("A, B, C", ["A->B", "B->C", "C->A"], IDENTITY_ALL
                  + "A->B.topics = x, y, ring\nB->C.topics = y, ring\nC->A.topics = ring, z\n")
    g = guards(text)
    assert g["A->B"].loop_for("ring") == ["A", "B", "C", "A"]
    assert g["B->C"].loop_for("ring") == ["B", "C", "A", "B"]
    assert g["C->A"].loop_for("ring") == ["C", "A", "B", "C"]
    for topic in ("x", "y", "z", "other"):
        assert all(guard.loop_for(topic) is None for guard in g.values())


def test_one_default_hop_renames_so_literal_names_do_not_loop() -> None:
    # B->A (Default) brings shared back as B.shared, which A->B does not select
    text = config("A, B", ["A->B", "B->A"],
                  f"A->B.replication.policy.class = {IDENTITY}\nA->B.topics = orders, shared\n"
                  "B->A.topics = payments, shared\n")
    g = guards(text)
    assert g["A->B"].cycles and g["B->A"].cycles
    for name in g:
        for topic in ("shared", "orders", "payments"):
            assert g[name].loop_for(topic) is None


def test_one_default_hop_loops_when_the_blind_flow_selects_the_prefixed_name() -> None:
    # the blind hop erased where shared came from, so B->A's is_cycle cannot see it: B.shared, B.B.shared, ...
    g = guards(config("A, B", ["A->B", "B->A"], f"A->B.replication.policy.class = {IDENTITY}\n"
                      "A->B.topics = shared, B[.].*\nB->A.topics = shared, B[.].*\n"))
    assert g["A->B"].loop_for("shared") == ["A", "B", "A"]
    assert g["B->A"].loop_for("shared") == ["B", "A", "B"]


def test_match_all_cycle_whose_exclusions_stop_the_prefixed_name_starts() -> None:
    g = guards(config("A, B", ["A->B", "B->A"],
                      f"A->B.replication.policy.class = {IDENTITY}\ntopics.exclude = B[.].*\n"))
    assert g["A->B"].loop_for("t") is None and g["B->A"].loop_for("t") is None


def test_default_cycles_and_acyclic_flows_have_empty_guards() -> None:
    for text in (config("A, B", ["A->B", "B->A"]),
                 config("A, B, C", ["A->B", "B->C"], IDENTITY_ALL)):
        for guard in guards(text).values():
            assert guard.cycles == () and guard.loop_for("t") is None


def test_guard_follows_every_cycle_through_the_flow() -> None:
    text = config("A, B, C", ["A->B", "B->A", "B->C", "C->A"], IDENTITY_ALL
                  + "B->A.topics = direct\nA->B.topics = direct, round\nB->C.topics = round\nC->A.topics = round\n")
    g = guards(text)
    assert [len(c) for c in g["A->B"].cycles] == [2, 3]
    assert g["A->B"].loop_for("direct") == ["A", "B", "A"]
    assert g["A->B"].loop_for("round") == ["A", "B", "C", "A"]


def test_heartbeats_do_not_loop() -> None:
    g = guards(config("A, B", ["A->B", "B->A"], IDENTITY_ALL + "topics = orders\n"))
    assert g["A->B"].loop_for("heartbeats") is None


def test_guard_pickles() -> None:
    g = guards(config("A, B", ["A->B", "B->A"],
                      IDENTITY_ALL + "A->B.topics = orders, shared\nB->A.topics = payments, shared\n"))
    back = pickle.loads(pickle.dumps(g["A->B"]))
    assert back == g["A->B"]
    assert back.loop_for("shared") == ["A", "B", "A"] and back.loop_for("orders") is None


def test_identity_cycles_start_with_provenance_on_every_flow_of_them() -> None:
    for flows in (["A->B", "B->A"], ["A->B", "B->C", "C->A"], ["A->B", "B->A", "B->C", "C->B"]):
        aliases = ", ".join(sorted({c for f in flows for c in f.split("->")}))
        g = guards(config(aliases, flows, IDENTITY_ALL, provenance=True))
        for name in flows:
            assert g[name].provenance and g[name].cycles == ()
            assert g[name].loop_for("orders") is None  # nothing held back: provenance stops the loop


def test_provenance_is_off_where_no_cycle_needs_it() -> None:
    g = guards(config("A, B, C", ["A->B", "B->C"], IDENTITY_ALL, provenance=True))
    assert not g["A->B"].provenance and not g["B->C"].provenance
    g = guards(config("A, B", ["A->B", "B->A"], "", provenance=True))  # Default policy: names trace
    assert not g["A->B"].provenance and not g["B->A"].provenance


def test_a_cycle_with_one_flow_without_provenance_is_guarded_as_before() -> None:
    text = config("A, B", ["A->B", "B->A"], IDENTITY_ALL + "B->A.provenance.enabled = false\n", provenance=True)
    assert "cycle A->B->A" in refused(text)


def test_provenance_refuses_the_record_paths_and_multi_origin_transactions() -> None:
    text = config("A, B", ["A->B", "B->A"], IDENTITY_ALL + "A->B.partition.mismatch = hash\n", provenance=True)
    assert "A->B.partition.mismatch" in refused(text)
    text = config("A, B, C", ["A->B", "B->C", "C->A"],
                  IDENTITY_ALL + "B->C.exactly.once.support = required\n", provenance=True)
    message = refused(text)
    assert "B->C.exactly.once.support" in message and "takes records of A" in message
    # two clusters: the source takes records from the target only, which go home anyway
    guards(config("A, B", ["A->B", "B->A"], IDENTITY_ALL + "exactly.once.support = required\n", provenance=True))
