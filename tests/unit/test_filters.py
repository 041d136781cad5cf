"""Topic, group and config-property filters with MM2's Default*Filter semantics."""

from __future__ import annotations

import pickle

import pytest

from mm2py.config.filters import ConfigPropertyFilter, GroupFilter, TopicFilter
from mm2py.errors import ConfigError

# MM2's defaults (DefaultTopicFilter, DefaultGroupFilter, DefaultConfigPropertyFilter)
TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", "__.*")
GROUPS_EXCLUDE = ("console-consumer-.*", "connect-.*", "__.*")
CONFIG_EXCLUDE = (r"follower\.replication\.throttled\.replicas", r"leader\.replication\.throttled\.replicas",
                  r"message\.timestamp\.difference\.max\.ms", r"message\.timestamp\.type",
                  r"unclean\.leader\.election\.enable", r"min\.insync\.replicas")


def test_patterns_match_whole_names_and_exclude_wins() -> None:
    f = TopicFilter(("orders.*", "pay"), ("orders-internal",))
    assert f.matches("orders-eu") and f.matches("pay")
    assert not f.matches("payments") and not f.matches("xorders")  # full match, not search
    assert not f.matches("orders-internal")
    assert f.should_replicate_topic("orders")


def test_default_topic_excludes() -> None:
    f = TopicFilter((".*",), TOPICS_EXCLUDE)
    assert f.matches("orders") and f.matches("A.orders") and f.matches("internal")
    for topic in ("mm2-offsets.A.internal", "x-internal", "t.replica", "__consumer_offsets"):
        assert not f.matches(topic), topic


def test_default_group_excludes() -> None:
    g = GroupFilter((".*",), GROUPS_EXCLUDE)
    assert g.matches("app") and g.should_replicate_group("my-connect-group")
    for group in ("console-consumer-1234", "connect-mirror", "__x"):
        assert not g.matches(group), group


def test_empty_lists() -> None:
    # an empty include list matches nothing (MirrorUtils.compilePatternList returns null)
    assert not TopicFilter((), ()).matches("t")
    assert TopicFilter((".*",), ()).matches("t")
    assert not TopicFilter(("",), ()).matches("t")  # an empty entry is an empty alternative


def test_java_spellings() -> None:
    f = TopicFilter((r"\Qa.b\E.*", r"(?i)Orders", r"end\z"), ())
    assert f.matches("a.b-1") and not f.matches("axb-1")
    assert f.matches("ORDERS") and f.matches("end")
    assert TopicFilter((r"\Qx*",), ()).matches("x*")  # \Q without \E quotes to the end


def test_bad_pattern_is_a_config_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="topics.exclude"):
        TopicFilter((".*",), ("(unclosed",))
    with pytest.raises(ConfigError, match="'groups'"):
        GroupFilter(("[",), ())
    with pytest.raises(ConfigError, match="config.properties.exclude"):
        ConfigPropertyFilter(("*",))


def test_filters_are_frozen_hashable_and_pickle() -> None:
    f = TopicFilter([".*"], ["x"])  # type: ignore[arg-type]  # lists become tuples
    assert f.include == (".*",) and hash(f) == hash(TopicFilter((".*",), ("x",)))
    with pytest.raises(AttributeError):
        f.include = ()  # type: ignore[misc]
    g = pickle.loads(pickle.dumps(GroupFilter((".*",), GROUPS_EXCLUDE)))
    assert g == GroupFilter((".*",), GROUPS_EXCLUDE)
    assert g.matches("app") and not g.matches("console-consumer-1")
    c = pickle.loads(pickle.dumps(ConfigPropertyFilter(CONFIG_EXCLUDE, "source")))
    assert c.use_defaults_from == "source" and not c.should_replicate("min.insync.replicas")


def test_config_property_filter() -> None:
    c = ConfigPropertyFilter(CONFIG_EXCLUDE)
    assert c.should_replicate("cleanup.policy") and c.should_replicate("retention.ms")
    assert not c.should_replicate("min.insync.replicas") and not c.should_replicate("message.timestamp.type")
    assert c.should_replicate("min.insync.replicasX")  # full match
    assert not c.should_replicate_source_default("retention.ms")  # use.defaults.from=target
    assert ConfigPropertyFilter((), "source").should_replicate_source_default("retention.ms")
    assert ConfigPropertyFilter(()).should_replicate("min.insync.replicas")
    with pytest.raises(ConfigError, match="use.defaults.from"):
        ConfigPropertyFilter((), "both")
