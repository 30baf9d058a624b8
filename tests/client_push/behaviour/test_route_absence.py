"""Restarts and absence (docs/protocol-extension.md): a held route is never replaced by an empty
one, and only a deletion drops it. Each case runs against the Twisted and the asyncio route
clients (``world``), over loopback to ``FakeNamesrv``\\ s, on a fake clock.
"""

from __future__ import annotations

import pytest
import pytest_twisted
from support.fake_namesrv import FakeNamesrv, make_route
from support.memory_route_world import MemoryDriver as RouteDriver
from support.memory_route_world import held, until

from client_push.cli.watch import event_line
from client_push.errors import TopicNotExistError
from protocol.codes import RequestCode
from protocol.frame import RemotingCommand
from protocol.push_codec import BrokerChangeKind, ChangeKind, encode_notification

GET = RequestCode.GET_ROUTEINFO_BY_TOPIC
SUBSCRIBE = RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED


def stale(d: RouteDriver, topic: str) -> bool:
    entry = d.client.cached_route(topic)
    return entry is not None and entry.stale


async def reconnected(d: RouteDriver, ns: FakeNamesrv) -> None:
    """The client lost its server, reconnects (first delay at most 0.2 s) and is acked."""
    await until(lambda: not d.client.connected)
    await d.advance(0.2)
    await until(lambda: bool(ns.conns) and d.client.push_active and d.client.namesrv == ns.addr)
    await d.barrier()


# -- a restarted name server ----------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_restarted_server_that_knows_no_broker_yet_leaves_the_held_route_in_place(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    await d.listen("T")
    fresh = await world.restart(ns, "e2", warming=True, uptime_ms=200)
    await reconnected(d, fresh)
    await until(lambda: fresh.count(GET, "T") == 1)  # the new epoch's refetch: not ready
    await d.barrier()
    # Kept, stale, at version 0: the old epoch's version says nothing of the new server's.
    assert stale(d, "T") and d.client.cached_route("T").version == 0
    assert (await d.get("T")).route == make_route()  # lookups go on with the held route
    assert [(e.exists, e.stale) for e in d.events] == [(True, False), (True, True)]
    assert event_line(d.events[-1])["stale"] is True
    stats = await d.call(d.client.stats)
    assert stats["stale_routes"] == 1 and stats["namesrv_warming"] is True
    assert stats["untrusted_retries_pending"] == 1 and stats["negative_entries"] == 0

    await d.advance(1.0)  # the first retry, at most 1 s later: still not ready
    await until(lambda: fresh.count(GET, "T") == 2)
    await d.barrier()
    assert stale(d, "T")
    fresh.set_route("T", make_route(queues=2))  # the broker registers
    await d.advance(2.0)  # the second retry, at most 2 s after the first
    await until(lambda: not stale(d, "T"))
    assert d.client.cached_route("T").route == make_route(queues=2)
    assert d.events[-1].exists and not d.events[-1].stale and d.events[-1].cause == "retry"
    assert "stale" not in event_line(d.events[-1])
    assert (await d.call(d.client.stats))["untrusted_retries_pending"] == 0


@pytest_twisted.ensureDeferred
async def test_a_rolling_restart_of_two_servers_3_s_apart_keeps_the_route(world):
    a = world.server(uptime_ms=600_000)
    b = world.server(epoch="e2", uptime_ms=600_000)
    d = await world.client(a, b)
    await until(lambda: d.client.connected)
    first, second = (a, b) if d.client.namesrv == a.addr else (b, a)
    second.set_route("T", make_route())
    await held(d, first, "T")
    await d.listen("T")

    first = await world.restart(first, "e3", warming=True, uptime_ms=100)
    await reconnected(d, second)  # failed over to the server still up
    await until(lambda: second.count(GET, "T") == 1)
    await d.advance(3.0)
    first.uptime_ms = 3_100
    second = await world.restart(second, "e4", warming=True, uptime_ms=100)
    await reconnected(d, first)  # back on the one up longer, warming: it stays there
    await until(lambda: first.count(GET, "T") == 1)
    await d.barrier()
    assert d.client.namesrv == first.addr
    assert d.client.counters["moved_from_warming_server"] == 0
    assert all(e.exists for e in d.events) and stale(d, "T")
    assert (await d.get("T")).route == make_route()

    first.set_route("T", make_route())  # the broker's register reaches the warming server
    await d.advance(2.0)
    await until(lambda: not stale(d, "T"))
    assert all(e.exists for e in d.events)


@pytest_twisted.ensureDeferred
async def test_a_client_on_a_warming_server_moves_to_the_one_up_longer(world):
    up = world.server(uptime_ms=600_000)
    warming = world.server(epoch="e2", warming=True, uptime_ms=500)
    up.set_route("T", make_route())
    d = await world.client(up, warming)
    await until(lambda: d.client.connected)
    picked_warming = d.client.namesrv == warming.addr
    outcomes: list[str] = []
    await d.ask(["T"], outcomes)  # at the warming server: "not ready"; the ack moves it
    await until(lambda: d.client.push_active and up.subscribed() == {"T"})
    assert (await d.get("T")).route == make_route()
    if picked_warming:
        assert outcomes == ["NameServerError"]
        assert d.client.counters["moved_from_warming_server"] == 1
        assert warming.count(RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED) == 1
    await d.advance(30.0)  # version checks there: no move back
    await d.barrier()
    assert d.client.namesrv == up.addr and not stale(d, "T")


@pytest_twisted.ensureDeferred
async def test_deleted_during_the_window_drops_the_route(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    fresh = await world.restart(ns, "e2", warming=True, uptime_ms=200)
    await reconnected(d, fresh)
    await until(lambda: stale(d, "T"))
    fresh.notify([("T", fresh.delete("T"), ChangeKind.DELETED)])
    await until(lambda: d.client.cached_route("T") is None)
    gets = fresh.count(GET, "T")
    with pytest.raises(TopicNotExistError):
        await d.get("T")
    assert fresh.count(GET, "T") == gets  # remembered: sends fail as for an unknown topic
    assert (await d.call(d.client.stats))["untrusted_retries_pending"] == 0


# -- a topic deleted for real ---------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_deletion_learned_by_the_version_check_drops_the_route(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    ns.delete("T")  # its notification lost: the version check's ack says deleted
    await d.advance(30.0)
    await until(lambda: d.client.cached_route("T") is None)
    with pytest.raises(TopicNotExistError):
        await d.get("T")
    assert d.client.counters["routes_dropped_deleted"] == 1


@pytest_twisted.ensureDeferred
async def test_a_topic_deleted_answer_drops_the_route_at_the_poll(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    ns.delete("T")
    ns.drop_subscribes = 10  # push silent: only the answer to a fetch can tell
    await d.advance(120.0)  # the safety-net poll asks; TOPIC_NOT_EXIST with topicDeleted
    await until(lambda: d.client.cached_route("T") is None)
    with pytest.raises(TopicNotExistError) as caught:
        await d.get("T")
    assert caught.value.cached


# -- absence that is not a deletion ---------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_unrouted_keeps_the_route_stale_until_the_brokers_are_back(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    await d.listen("T")
    ns.notify([("T", ns.unroute("T"), ChangeKind.UNROUTED)])
    await until(lambda: stale(d, "T"))
    assert (await d.get("T")).route == make_route()
    assert d.events[-1].stale and d.events[-1].cause == "notify"
    assert (await d.call(d.client.stats))["negative_entries"] == 0
    back = ns.set_route("T", make_route())
    ns.notify([("T", back, ChangeKind.UPDATED)])
    await until(lambda: not stale(d, "T") and d.client.cached_route("T").version == back)


@pytest_twisted.ensureDeferred
async def test_a_departure_of_the_last_broker_keeps_the_route_stale(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")  # one broker, broker-a at 10.0.0.1:10911
    await d.listen("T")
    await d.listen_brokers()
    gone = ns.unroute("T")
    entry = (
        int(BrokerChangeKind.DEPARTED),
        "broker-a",
        "DefaultCluster",
        ((0, "10.0.0.1:10911"),),
        "channel_close",
        True,
        False,
        (("T", gone, gone - 1),),
        0,
    )
    conn = ns.conns[0]
    conn.sequence += 1
    body = encode_notification([], conn.sequence, 1_000, ns.epoch, [entry])
    notify = RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED
    conn.push(RemotingCommand.request(notify, body=body, oneway=True))
    await until(lambda: stale(d, "T"))
    assert d.client.cached_route("T").route == make_route()  # its brokers may still serve it
    assert d.events[-1].cause == "broker_gone" and d.events[-1].stale
    assert [b.kind for b in d.brokers] == ["departed"]
    await d.advance(11.5)  # the confirming refetch: TOPIC_NOT_EXIST, still kept
    await until(lambda: ns.count(GET, "T") == 2)
    await d.barrier()
    assert stale(d, "T") and d.client.counters["routes_dropped_deleted"] == 0


@pytest_twisted.ensureDeferred
async def test_topic_not_exist_from_a_server_without_push_keeps_the_route(world):
    ns = world.server(push=False)
    d = await world.client(ns, topic_idle_expiry_ms=10_000_000)
    ns.set_route("T", make_route())
    await d.get("T")
    await until(lambda: ns.count(SUBSCRIBE) == 1)
    await d.barrier()
    ns.unroute("T")  # as upstream answers, deleted or not: no topicDeleted
    await d.advance(30.0)
    await until(lambda: ns.count(GET, "T") == 2)
    await d.barrier()
    assert stale(d, "T") and (await d.get("T")).route == make_route()
    assert (await d.call(d.client.stats))["negative_entries"] == 0


@pytest_twisted.ensureDeferred
async def test_a_topic_never_routed_is_remembered_absent_but_not_from_a_warming_server(world):
    ns = world.server(warming=True, uptime_ms=100)
    d = await world.client(ns)
    for _ in range(2):
        with pytest.raises(Exception, match="not ready"):
            await d.get("new")
    assert ns.count(GET, "new") == 2  # nothing remembered: each lookup asks
    ns.warming = False
    await d.advance(46.0)  # past the window its ack announced
    await d.barrier()
    with pytest.raises(TopicNotExistError):
        await d.get("other")
    with pytest.raises(TopicNotExistError):
        await d.get("other")
    assert ns.count(GET, "other") == 1
