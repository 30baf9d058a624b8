from __future__ import annotations

import pytest

from namesrv.push.subscriptions import SubscriptionError, SubscriptionRegistry
from protocol.codes import ResponseCode
from protocol.errors import ProtocolError


def registry(per_conn: int = 10, total: int = 100) -> SubscriptionRegistry:
    return SubscriptionRegistry(max_topics_per_connection=per_conn, max_total_subscriptions=total)


def test_subscribe_returns_new_topics_and_is_idempotent() -> None:
    reg = registry()
    assert reg.subscribe("c1", ["a", "b", "a"]) == ["a", "b"]
    assert reg.subscribe("c1", ["b", "c"]) == ["c"]
    assert reg.subscribe("c1", ["a"]) == []
    assert reg.topics_of("c1") == {"a", "b", "c"}
    assert reg.total == 3


def test_topics_that_do_not_exist_yet_may_be_subscribed() -> None:
    reg = registry()
    assert reg.subscribe("c1", ["NotCreatedYet"]) == ["NotCreatedYet"]
    assert reg.subscribers("NotCreatedYet") == {"c1"}


def test_both_directions_are_indexed() -> None:
    reg = registry()
    reg.subscribe("c1", ["a", "b"])
    reg.subscribe("c2", ["b"])
    assert reg.subscribers("a") == {"c1"}
    assert reg.subscribers("b") == {"c1", "c2"}
    assert (reg.connection_count, reg.topic_count, reg.total) == (2, 2, 3)


def test_reading_unknown_keys_creates_nothing() -> None:
    reg = registry()
    assert reg.subscribers("nobody") == frozenset()
    assert reg.topics_of("ghost") == frozenset()
    assert not reg.is_subscribed("ghost", "nobody")
    assert (reg.connection_count, reg.topic_count, reg.total) == (0, 0, 0)


def test_unsubscribe_returns_removed_and_cleans_empty_sets() -> None:
    reg = registry()
    reg.subscribe("c1", ["a", "b"])
    reg.subscribe("c2", ["a"])
    assert reg.unsubscribe("c1", ["a", "zzz"]) == ["a"]
    assert reg.subscribers("a") == {"c2"}
    assert reg.unsubscribe("c1", ["b"]) == ["b"]
    assert reg.topics_of("c1") == frozenset()
    assert (reg.connection_count, reg.topic_count, reg.total) == (1, 1, 1)
    assert reg.unsubscribe("never", ["a"]) == []


def test_drop_connection_releases_everything_it_held() -> None:
    reg = registry()
    reg.subscribe("c1", ["b", "a"])
    reg.subscribe("c2", ["a"])
    assert reg.drop_connection("c1") == ["a", "b"]
    assert reg.subscribers("b") == frozenset()
    assert (reg.connection_count, reg.topic_count, reg.total) == (1, 1, 1)
    assert reg.drop_connection("c1") == []


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ("", "empty"),
        ("x" * 128, "longer than 127"),
        ("has space", "characters"),
        ("dot.ted", "characters"),
        ("ünï", "characters"),
    ],
)
def test_malformed_topic_names_are_refused(bad: str, fragment: str) -> None:
    reg = registry()
    with pytest.raises(SubscriptionError) as info:
        reg.subscribe("c1", ["ok", bad])
    assert isinstance(info.value, ProtocolError)
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    assert fragment in info.value.remark
    assert reg.total == 0


def test_upstream_topic_characters_are_accepted() -> None:
    reg = registry()
    name = "%RETRY%group_1|A-b" + "x" * (127 - 18)
    assert len(name) == 127
    assert reg.subscribe("c1", [name]) == [name]


def test_empty_subscribe_is_refused() -> None:
    with pytest.raises(SubscriptionError, match="no topic"):
        registry().subscribe("c1", [])


def test_per_connection_bound_refuses_whole_request() -> None:
    reg = registry(per_conn=3)
    reg.subscribe("c1", ["a", "b"])
    with pytest.raises(SubscriptionError, match="max_topics_per_connection=3"):
        reg.subscribe("c1", ["c", "d"])
    assert reg.topics_of("c1") == {"a", "b"}
    assert reg.subscribers("c") == frozenset()
    assert reg.subscribe("c1", ["a", "b", "c"]) == ["c"]
    assert reg.subscribe("c1", ["a", "b", "c"]) == []


def test_total_bound_refuses_whole_request() -> None:
    reg = registry(per_conn=10, total=3)
    reg.subscribe("c1", ["a", "b"])
    with pytest.raises(SubscriptionError, match="max_total_subscriptions=3"):
        reg.subscribe("c2", ["a", "b"])
    assert reg.connection_count == 1
    assert reg.total == 2
    reg.drop_connection("c1")
    assert reg.subscribe("c2", ["a", "b", "c"]) == ["a", "b", "c"]
