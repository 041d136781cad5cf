"""RegexRouter on remote topic names (mm2py.routing, mm2py.flow_policy)."""

from __future__ import annotations

import pytest

from mm2py.config import load_text
from mm2py.errors import ConfigError
from mm2py.flow_policy import RoutedPolicy, policy_for
from mm2py.routing import refuse_clashes, routers_of
from mm2py.transforms import TransformError, chain_for, check_flows

T = "org.apache.kafka.connect.transforms."
P = T + "predicates."
ROUTE = {"transforms": "route", "transforms.route.type": T + "RegexRouter",
         "transforms.route.regex": r"A\.(.*)", "transforms.route.replacement": "$1-from-A"}


def flows(text: str) -> list:
    base = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"
    return load_text(base + text).enabled_flows


def test_the_policys_name_is_routed_where_the_regex_matches_it_whole() -> None:
    [flow] = flows("".join(f"A->B.{k} = {v}\n" for k, v in ROUTE.items()))
    policy = policy_for(flow)
    assert isinstance(policy, RoutedPolicy)
    assert policy.format_remote_topic("A", "orders") == "orders-from-A"
    assert policy.unrouted("A", "orders") == "A.orders"
    # tracing back and internal topics stay the policy's: a routed name is a local topic downstream
    assert policy.topic_source("orders-from-A") is None and policy.topic_source("A.orders") == "A"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    [plain] = flows("A->B.topics = .*\n")
    assert not isinstance(policy_for(plain), RoutedPolicy)


@pytest.mark.parametrize(("regex", "replacement", "topic", "routed"), [
    (r"A\.(.*)", "$1", "A.orders", "orders"),
    (r"A\.(?P<name>.*)", "${name}.mirror", "A.orders", "orders.mirror"),
    (r"A\.(.*)", r"cost\$-$1", "A.x", "cost$-x"),
    (r"A\.(o.*)", "$1", "A.x", "A.x"),  # no whole match: unchanged
    (r"orders", "x", "A.orders", "A.orders"),  # Java's matches(): the whole name, not a search
    (r"A\.(a)?(.*)", "$1$2", "A.b", "b"),  # an unmatched group gives nothing
])
def test_java_replacement_syntax(regex: str, replacement: str, topic: str, routed: str) -> None:
    [router] = routers_of({**ROUTE, "transforms.route.regex": regex, "transforms.route.replacement": replacement})
    assert router.route(topic) == routed


def test_routers_run_in_order_and_a_topic_predicate_decides_where() -> None:
    raw = {"transforms": "a, b", "transforms.a.type": T + "RegexRouter", "transforms.a.regex": r"A\.(.*)",
           "transforms.a.replacement": "$1", "transforms.a.predicate": "isOrders",
           "transforms.b.type": T + "RegexRouter", "transforms.b.regex": "(orders)", "transforms.b.replacement": "$1-x",
           "predicates": "isOrders", "predicates.isOrders.type": P + "TopicNameMatches",
           "predicates.isOrders.pattern": r"A\.orders"}
    routers = routers_of(raw)
    assert [r.name for r in routers] == ["a", "b"]
    assert [routers[1].route(routers[0].route(t)) for t in ("A.orders", "A.other")] == ["orders-x", "A.other"]
    assert chain_for(raw).links == (), "routers touch names, never records"


@pytest.mark.parametrize(("extra", "key"), [
    ({"transforms.route.regex": "("}, "transforms.route.regex"),
    ({"transforms.route.replacement": "$2"}, "transforms.route.replacement"),
    ({"transforms.route.replacement": "x$"}, "transforms.route.replacement"),
    ({"transforms.route.predicate": "h", "predicates": "h", "predicates.h.type": P + "HasHeaderKey",
      "predicates.h.name": "x"}, "transforms.route.predicate"),
])
def test_what_a_router_cannot_honour_is_refused_naming_the_key(extra: dict, key: str) -> None:
    with pytest.raises(TransformError) as e:
        chain_for({**ROUTE, **extra})
    assert e.value.key == key, str(e.value)


def test_a_link_before_a_router_that_reads_the_name_is_refused() -> None:
    drop = {"transforms.drop.type": T + "Filter", "transforms.drop.predicate": "isA", "predicates": "isA",
            "predicates.isA.type": P + "TopicNameMatches", "predicates.isA.pattern": "A.*"}
    after = chain_for({**ROUTE, **drop, "transforms": "route, drop"})
    assert [link.name for link in after.links] == ["drop"]
    with pytest.raises(TransformError, match="list it after the router") as e:
        chain_for({**ROUTE, **drop, "transforms": "drop, route"})
    assert e.value.key == "transforms.drop.predicate"
    mask = {"transforms.mask.type": "tests.plugins.MaskDigits"}
    with pytest.raises(TransformError) as e:
        chain_for({**ROUTE, **mask, "transforms": "mask, route"})
    assert e.value.key == "transforms.mask.type"
    strip = {"transforms.strip.type": T + "DropHeaders", "transforms.strip.headers": "x"}
    assert len(chain_for({**ROUTE, **strip, "transforms": "strip, route"}).links) == 1, "blind to names: allowed"


def test_a_router_on_a_flow_of_a_cycle_is_refused_and_clashing_names_stop_the_flow() -> None:
    keys = "".join(f"A->B.{k} = {v}\n" for k, v in ROUTE.items())
    check_flows(flows(keys), lambda f: False)
    with pytest.raises(ConfigError, match="transforms.route.type.*cycle.*flow A->B"):
        check_flows(flows(keys + "B->A.enabled = true\nB->A.provenance.enabled = false\n"), lambda f: False)
    [flow] = flows(keys)
    policy = policy_for(flow)
    refuse_clashes("A->B", ["orders", "A.orders"], lambda t: policy.format_remote_topic("A", t))
    [flow] = flows(keys.replace("$1-from-A", "all"))
    policy = policy_for(flow)
    with pytest.raises(ConfigError, match="source topics a, b would all be written to remote topic all"):
        refuse_clashes("A->B", ["a", "b"], lambda t: policy.format_remote_topic("A", t))
