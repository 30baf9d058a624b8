"""Deleted versus unrouted: the push announces a deletion only when one caused a topic's leaving,
and the server remembers (boundedly) the topics deleted in this epoch.

The real server in the deterministic world (``support.memory_world``); every per-topic rule is
loud here (``push.suppress`` all off), so departures are notified per topic too.
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from support.fake_broker import register_request, topic_configs, unregister_request
from support.memory_world import connect, kept_in_use, until
from support.push_wire import TICK, changes, round_trip, subscribe

from namesrv.push.deleted_topics import DeletedTopics
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import ChangeKind
from protocol.route_model import DataVersion

LOUD = {
    "suppress": {
        "broker_startup": False,
        "unregister": False,
        "channel_close": False,
        "expiry": False,
    }
}
BROKER_B = {"broker_name": "broker-b", "broker_addr": "10.0.0.2:10911", "cluster": "C2"}


async def registered(ns: Any, *topics: str, **kw: Any) -> Any:
    broker = await connect(ns.port)
    resp = await broker.request(register_request(topic_configs(*topics), **kw))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return broker


async def watching(ns: Any, *topics: str) -> Any:
    ns.clock.advance(TICK)  # what the registers changed is settled before the subscription
    client = await connect(ns.port)
    await subscribe(client, *topics)
    return client


async def notified(ns: Any, client: Any) -> Any:
    ns.clock.advance(TICK)
    await round_trip(client)
    return changes(client)


def lookup(client: Any, topic: str) -> Any:
    return client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


@pytest.mark.parametrize("cause", ["unregister", "channel_close", "expiry"])
@pytest_twisted.ensureDeferred
async def test_a_topic_whose_brokers_departed_is_unrouted_not_deleted(make_world_server, cause):
    ns = make_world_server({"push": LOUD})
    broker = await registered(ns, "T", "U")
    client = await watching(ns, "T")
    if cause == "unregister":
        await broker.request(unregister_request())
    elif cause == "channel_close":
        broker.transport.loseConnection()
        await until(lambda: ns.server.registry.broker_count == 0)
    else:  # silent, its connection in use: it expires
        await kept_in_use(ns.server.config.registry.broker_expiry_ms / 1000 + 10, broker)
    got = await notified(ns, client)
    assert got == [("T", ChangeKind.UNROUTED)]
    resp = await lookup(client, "T")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST and "topicDeleted" not in resp.ext_fields
    ack = await subscribe(client, "T")
    assert (ack.topics[0].exists, ack.topics[0].deleted) == (False, False)
    assert ns.server.stats()["deleted_topics"] == 0


@pytest.mark.parametrize("how", ["delete_topic", "register_without_it"])
@pytest_twisted.ensureDeferred
async def test_a_deleted_topic_is_notified_deleted_and_remembered_until_registered_again(
    make_world_server, how
):
    ns = make_world_server(
        {"push": LOUD, "registry": {"delete_topic_with_broker_registration": True}}
    )
    broker = await registered(ns, "T", "U")
    client = await watching(ns, "T")
    if how == "delete_topic":
        resp = await broker.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})
    else:  # a live master's full register without it
        resp = await broker.request(
            register_request(topic_configs("U"), data_version=DataVersion(0, 2, 2))
        )
    assert resp.code == ResponseCode.SUCCESS
    got = await notified(ns, client)
    assert got == [("T", ChangeKind.DELETED)]
    resp = await lookup(client, "T")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.ext_fields["topicDeleted"] == "true"
    ack = await subscribe(client, "T")
    assert (ack.topics[0].exists, ack.topics[0].deleted) == (False, True)
    # Registered again: no longer deleted; its brokers leaving then is no deletion.
    await broker.request(
        register_request(topic_configs("T", "U"), data_version=DataVersion(0, 3, 3))
    )
    resp = await lookup(client, "T")
    assert resp.code == ResponseCode.SUCCESS
    ack = await subscribe(client, "T")
    assert (ack.topics[0].exists, ack.topics[0].deleted) == (True, False)
    await broker.request(unregister_request())
    resp = await lookup(client, "T")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST and "topicDeleted" not in resp.ext_fields
    got = await notified(ns, client)
    assert got[-1] == ("T", ChangeKind.UNROUTED)


@pytest_twisted.ensureDeferred
async def test_a_topic_left_by_a_departure_and_a_delete_in_one_tick_is_deleted(make_world_server):
    ns = make_world_server({"push": LOUD})
    broker_a = await registered(ns, "T", "A1", cluster="C1")
    await registered(ns, "T", "B1", **BROKER_B)
    client = await watching(ns, "T")
    # T leaves cluster C2 by an operator's delete (broker-a still serves it) ...
    resp = await broker_a.call(
        RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T", "clusterName": "C2"}
    )
    assert resp.code == ResponseCode.SUCCESS
    # ... then its last broker unregisters, before the tick.
    await broker_a.request(unregister_request(cluster="C1"))
    got = await notified(ns, client)
    assert got == [("T", ChangeKind.DELETED)]
    resp = await lookup(client, "T")
    assert resp.ext_fields.get("topicDeleted") == "true"


@pytest_twisted.ensureDeferred
async def test_deleting_more_topics_than_remembered_forgets_the_oldest_and_serves_on(
    make_world_server,
):
    bound = 50
    ns = make_world_server({"push": {"deleted_topics_remembered": bound}})
    broker = await registered(ns, "Keep")
    client = await connect(ns.port)
    # As an attacker with admin rights would: create topic after topic, have each seen (a
    # lookup: a topic nobody could see come and go is no news), then delete it.
    for i in range(3 * bound):
        topic = f"Churn{i}"
        await broker.request(
            register_request(topic_configs("Keep", topic), data_version=DataVersion(0, i + 2, i))
        )
        seen = await lookup(client, topic)
        assert seen.code == ResponseCode.SUCCESS
        await broker.call(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})
        gone = await lookup(client, topic)
        assert gone.ext_fields["topicDeleted"] == "true"
    stats = ns.server.stats()
    assert stats["deleted_topics"] == bound
    assert stats["deleted_topics_forgotten"] == 2 * bound
    oldest = await lookup(client, "Churn0")
    assert oldest.code == ResponseCode.TOPIC_NOT_EXIST and "topicDeleted" not in oldest.ext_fields
    newest = await lookup(client, f"Churn{3 * bound - 1}")
    assert newest.ext_fields["topicDeleted"] == "true"
    kept = await lookup(client, "Keep")
    assert kept.code == ResponseCode.SUCCESS


def test_the_deleted_set_keeps_the_newest_within_its_bound():
    deleted = DeletedTopics(3)
    for topic in ("a", "b", "c", "a", "d"):  # "a" deleted again: newest now, "b" goes first
        deleted.add(topic)
    assert [t for t in "abcd" if t in deleted] == ["a", "c", "d"]
    assert (len(deleted), deleted.forgotten) == (3, 1)
    deleted.discard("c")
    deleted.discard_all(["a", "zzz"])
    assert [t for t in "abcd" if t in deleted] == ["d"]
    none = DeletedTopics(0)
    none.add("a")
    assert "a" not in none and len(none) == 0
