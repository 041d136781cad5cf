"""Pluggable filters: ``topic.filter.class``, ``group.filter.class``, ``config.property.filter.class``.

MM2's default Java names load our default classes; a Python path loads the user's class, built
with no arguments and configured with the flow's keys; a class that cannot be loaded is refused
when the file is loaded, naming the key and its line. Every place builds a flow's filters
through the factories, so none can fall back to the default unnoticed.
"""

from __future__ import annotations

import pickle
import re
from abc import ABC, abstractmethod
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import mm2py
from mm2py.config import load_text
from mm2py.config.filters import (
    CONFIG_PROPERTY,
    GROUP,
    TOPIC,
    ConfigPropertyFilter,
    GroupFilter,
    TopicFilter,
    config_property_filter_for,
    filter_class,
    filter_props,
    group_filter_for,
    load_config_property_filter,
    load_group_filter,
    load_topic_filter,
    topic_filter_for,
)
from mm2py.config.model import FlowConfig
from mm2py.errors import ConfigError, ConfigProblem
from mm2py.flow_policy import policy_for
from mm2py.kafka.resources import TopicConfigEntry
from mm2py.metadata.configs import creation_configs
from mm2py.topology import Hop, check_topology, loop_guard, unsafe_cycle
from tests.plugins import NoRetention, PrefixGroups, SuffixTopics

JAVA = "org.apache.kafka.connect.mirror."
BASE = """clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""


def the_flow(extra: str = "", name: str = "A->B") -> FlowConfig:
    return next(f for f in load_text(BASE + extra).flows if f.name == name)


def refused(extra: str) -> list[ConfigProblem]:
    with pytest.raises(ConfigError) as err:
        load_text(BASE + extra, source="mm2.properties")
    return err.value.problems


# -- MM2's default Java names ---------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "cls"), [(TOPIC, TopicFilter), (GROUP, GroupFilter),
                                           (CONFIG_PROPERTY, ConfigPropertyFilter)])
def test_mm2_default_names_load_our_default_classes(kind, cls) -> None:
    for name in (JAVA + kind.java, kind.java, f" {JAVA}{kind.java} ", f"mm2py.filters.{cls.__name__}"):
        assert filter_class(kind, name) is cls


def test_the_defaults_are_mm2s_and_the_factories_build_them() -> None:
    flow = the_flow()
    assert (flow.selection.topic_filter_class, flow.selection.group_filter_class,
            flow.metadata.config_property_filter_class) == (
        JAVA + "DefaultTopicFilter", JAVA + "DefaultGroupFilter", JAVA + "DefaultConfigPropertyFilter")
    assert topic_filter_for(flow) == TopicFilter(flow.selection.topics, flow.selection.topics_exclude) == TopicFilter()
    assert group_filter_for(flow) == GroupFilter(flow.selection.groups, flow.selection.groups_exclude) == GroupFilter()
    assert config_property_filter_for(flow) == ConfigPropertyFilter(flow.metadata.config_properties_exclude) \
        == ConfigPropertyFilter()


def test_default_filters_read_the_flows_resolved_keys() -> None:
    flow = the_flow("topics = a.*\nA->B.topics = b.*\ntopics.blacklist = b2\ngroups = g.*\n"
                    "A->B.groups.exclude = g1\nconfig.properties.exclude = x\nuse.defaults.from = source\n"
                    f"A->B.topic.filter.class = {JAVA}DefaultTopicFilter\n")
    topics, groups, configs = topic_filter_for(flow), group_filter_for(flow), config_property_filter_for(flow)
    assert isinstance(topics, TopicFilter) and topics.include == ("b.*",) and topics.exclude == ("b2",)
    assert topics.should_replicate_topic("b1") and not topics.should_replicate_topic("b2")
    assert groups.should_replicate_group("g2") and not groups.should_replicate_group("g1")
    assert not configs.should_replicate_config_property("x") and configs.should_replicate_config_property("y")
    assert configs.should_replicate_source_default("retention.ms")


def test_default_classes_configure_as_mm2s_do() -> None:
    f = TopicFilter()
    f.configure({"topics.blacklist": "b", "unrelated": "1"})  # deprecated spelling, topics kept
    assert f.include == (".*",) and f.exclude == ("b",)
    f.configure({"topics": "a, b", "topics.exclude": "x", "topics.blacklist": "b"})  # the new name wins
    assert f.include == ("a", "b") and f.exclude == ("x",)
    c = ConfigPropertyFilter()
    c.configure({"use.defaults.from": " Source ", "config.properties.blacklist": ""})
    assert c.exclude == () and c.should_replicate_source_default("x")
    with pytest.raises(ConfigError, match="topics.exclude"):
        TopicFilter().configure({"topics.exclude": "(unclosed"})


# -- a Python path --------------------------------------------------------------------------------


def test_a_python_class_is_loaded_and_configured_with_the_flows_keys() -> None:
    flow = the_flow("topic.filter.class = tests.plugins.SuffixTopics\nfilter.topic.suffix = .top\n"
                    "A->B.filter.topic.suffix = .audit\ntopics = orders\ntopics.blacklist = old\n"
                    "group.filter.class = tests.plugins.PrefixGroups\nA->B.filter.group.prefix = ops-\n")
    topics = topic_filter_for(flow)
    assert isinstance(topics, SuffixTopics)
    assert topics.should_replicate_topic("pay.audit") and not topics.should_replicate_topic("orders")
    # MM2's Configurable: flow-scoped keys (prefix stripped) over top-level ones, unknown keys too,
    # the flow's aliases, and the filter keys as resolved (deprecated spellings applied)
    assert topics.props["filter.topic.suffix"] == ".audit"
    assert topics.props["source.cluster.alias"] == "A" and topics.props["target.cluster.alias"] == "B"
    assert topics.props["topics"] == "orders" and topics.props["topics.exclude"] == "old"
    assert topics.props["groups.exclude"] == r"console-consumer-.*,connect-.*,__.*"
    assert topics.props["topic.filter.class"] == "tests.plugins.SuffixTopics"
    assert all(isinstance(v, str) for v in topics.props.values())
    groups = group_filter_for(flow)
    assert isinstance(groups, PrefixGroups) and groups.should_replicate_group("ops-1")
    assert not groups.should_replicate_group("console-consumer-1")
    assert groups.props == filter_props(flow)
    # the other flow of the file has the top-level suffix
    assert load_topic_filter("tests.plugins.SuffixTopics", {"filter.topic.suffix": ".top"}).suffix == ".top"


def test_no_warning_says_filter_classes_are_ignored() -> None:
    with capture_logs() as logs:
        cfg = load_text(BASE + "topic.filter.class = tests.plugins.SuffixTopics\n"
                               "group.filter.class = tests.plugins.PrefixGroups\n"
                               "config.property.filter.class = tests.plugins.NoRetention\n")
    assert not [e for e in logs if e["log_level"] == "warning"]
    assert cfg.unknown_keys == ()


def test_keys_a_class_reads_in_configure_are_not_unknown() -> None:
    # as Kafka's AbstractConfig: a supplied key nothing looked up is reported, one a plugin read is not
    cfg = load_text(BASE + "topic.filter.class = tests.plugins.SuffixTopics\nfilter.topic.suffix = .a\n"
                           "A->B.group.filter.class = tests.plugins.PrefixGroups\nA->B.filter.group.prefix = g\n"
                           "A->B.filter.unread = 1\nfilter.group.prefix = h\n")
    assert cfg.unknown_keys == ("A->B.filter.unread",)
    # a class of the default kind reads none: the same keys are unknown without the classes
    cfg = load_text(BASE + "filter.topic.suffix = .a\nA->B.filter.group.prefix = g\n")
    assert cfg.unknown_keys == ("filter.topic.suffix", "A->B.filter.group.prefix")


def test_a_user_topic_filter_decides_with_the_policy_everywhere() -> None:
    flow = the_flow("topic.filter.class = tests.plugins.SuffixTopics\n")
    policy, filt = policy_for(flow), topic_filter_for(flow)
    assert policy.should_replicate_topic("audit.internal", "B", filt)  # the default topics.exclude would not
    assert not policy.should_replicate_topic("orders", "B", filt)
    assert policy.should_replicate_topic("heartbeats", "B", filt)  # heartbeats travel whatever the filter says
    assert not policy.should_replicate_topic("mm2-offset-syncs.B.internal", "B", filt)  # MM2's own: never
    assert not policy.should_replicate_topic("B.audit.internal", "B", filt)  # a cycle: never


def test_a_config_property_filter_without_the_optional_methods() -> None:
    filt = load_config_property_filter("tests.plugins.NoRetention")
    assert isinstance(filt, NoRetention)
    entries = [TopicConfigEntry("retention.ms", "1", is_default=False),
               TopicConfigEntry("cleanup.policy", "compact", is_default=False),
               TopicConfigEntry("segment.bytes", "1", is_default=True)]
    # a source default is left to the target's default: MM2's shouldReplicateSourceDefault is false by default
    assert creation_configs(entries, filt) == {"cleanup.policy": "compact"}


def test_a_subclass_of_a_default_filter_works() -> None:
    filt = load_group_filter(f"{__name__}.AlsoConsole", {"groups": "app.*"})
    assert filt.should_replicate_group("app-1") and filt.should_replicate_group("console-consumer-9")
    assert not filt.should_replicate_group("other")


class AlsoConsole(GroupFilter):
    def should_replicate_group(self, group: str) -> bool:
        return group.startswith("console-consumer-") or super().should_replicate_group(group)


# -- refused, naming the key and its line ---------------------------------------------------------


class AbstractTopics(ABC):
    @abstractmethod
    def should_replicate_topic(self, topic: str) -> bool: ...


class NeedsArguments:
    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def should_replicate_topic(self, topic: str) -> bool:
        return topic.endswith(self.suffix)


class FailsToConfigure:
    def configure(self, props: object) -> None:
        raise KeyError("filter.required.key")

    def should_replicate_topic(self, topic: str) -> bool:
        return True


NOT_A_CLASS = SuffixTopics()


@pytest.mark.parametrize(("name", "why"), [
    ("com.example.MyFilter", "Python port"),
    (JAVA + "TopicFilter", "unknown filter class"),
    (JAVA + "DefaultGroupFilter", "unknown filter class; use DefaultTopicFilter"),
    ("Nope", "unknown filter class"),
    ("tests.plugins.NoSuchFilter", "has no 'NoSuchFilter'"),
    ("tests.plugins.PrefixGroups", "no method should_replicate_topic"),
    (f"{__name__}.NOT_A_CLASS", "not a class"),
    (f"{__name__}.AbstractTopics", "abstract"),
    (f"{__name__}.NeedsArguments", "cannot be built without arguments"),
    (f"{__name__}.FailsToConfigure", "configure failed: KeyError"),
])
def test_a_class_that_cannot_be_loaded_is_refused_naming_key_and_line(name: str, why: str) -> None:
    (problem,) = refused(f"topics = x\nA->B.topic.filter.class = {name}\n")
    assert (problem.key, problem.line, problem.source) == ("A->B.topic.filter.class", 6, "mm2.properties")
    assert why in problem.message and name in problem.message


def test_every_kind_is_checked_and_a_top_level_key_is_named_once() -> None:
    text = ("B->A.enabled = true\ntopic.filter.class = no.such.Topics\n"
            "group.filter.class = tests.plugins.SuffixTopics\nconfig.property.filter.class = tests.plugins.Nope\n")
    problems = refused(text)
    assert [(p.key, p.line) for p in problems] == [
        ("topic.filter.class", 6), ("group.filter.class", 7), ("config.property.filter.class", 8)]
    assert "no method should_replicate_group" in problems[1].message


def test_a_bad_class_on_a_disabled_flow_is_not_loaded() -> None:
    the_flow("B->A.topic.filter.class = no.such.Topics\n")


def test_the_loaders_name_the_key() -> None:
    for load, key in ((load_topic_filter, "topic.filter.class"), (load_group_filter, "group.filter.class"),
                      (load_config_property_filter, "config.property.filter.class")):
        with pytest.raises(ConfigError) as err:
            load("no.such.Class")
        assert err.value.problems[0].key == key


# -- topology: a hop selects with its flow's class ------------------------------------------------

IDENTITY = f"replication.policy.class = {JAVA}IdentityReplicationPolicy\n"


def test_a_hop_carries_its_flows_filter_class_and_keys() -> None:
    flow = the_flow("A->B.topic.filter.class = tests.plugins.SuffixTopics\nA->B.filter.topic.suffix = .audit\n")
    hop = pickle.loads(pickle.dumps(Hop.of(flow)))
    assert hop.topic_filter_class == "tests.plugins.SuffixTopics" and not hop.default_filter
    assert isinstance(hop.topic_filter, SuffixTopics) and hop.topic_filter.suffix == ".audit"
    assert hop.selects("pay.audit") and not hop.selects("orders")
    default = Hop.of(the_flow())
    assert default.default_filter and default.topic_filter_props == ()  # plain data: no keys to carry
    assert default.selects("orders") and not default.selects("pay.internal")


def test_a_user_filter_on_an_identity_cycle_starts_and_guards_per_topic() -> None:
    # with the default filters this cycle is refused (every topic loops); a user class cannot be judged
    # in advance, so it starts, and the guards hold back exactly the topics both classes select
    text = (BASE + "B->A.enabled = true\n" + IDENTITY + "topic.filter.class = tests.plugins.SuffixTopics\n"
            "A->B.filter.topic.suffix = .audit\nprovenance.enabled = false\n")
    cfg = load_text(text)
    assert unsafe_cycle(cfg.enabled_flows) is None
    check_topology(cfg)
    guard = loop_guard(cfg, next(f for f in cfg.enabled_flows if f.name == "A->B"))
    assert guard.loop_for("x.audit") is None  # B->A selects .internal only: it goes no further than B
    text += "B->A.filter.topic.suffix = .audit\n"
    cfg = load_text(text)
    check_topology(cfg)
    guard = loop_guard(cfg, next(f for f in cfg.enabled_flows if f.name == "A->B"))
    assert guard.loop_for("x.audit") == ["A", "B", "A"] and guard.loop_for("x.internal") is None


# -- no place builds a filter of its own ----------------------------------------------------------


def test_filters_are_built_only_by_the_factories() -> None:
    """Every flow's filter comes from topic_filter_for & co (or the Hop's), never from a constructor."""
    root = Path(mm2py.__file__).parent
    built = re.compile(r"\b(TopicFilter|GroupFilter|ConfigPropertyFilter)\(")
    offenders = [f"{path.relative_to(root)}:{n}" for path in sorted(root.rglob("*.py")) if path.name != "filters.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1) if built.search(line)]
    assert offenders == []
