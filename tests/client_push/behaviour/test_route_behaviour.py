"""The route-push behaviour both route clients must show, written once and run against each:
the Twisted ``RouteClient`` on the reactor and the asyncio one on plain asyncio and on uvloop
(``support.route_drivers``), each against the frame-speaking ``FakeNamesrv`` over loopback.

Client timers run on a fake clock the test advances; only bytes move on their own.
"""

from __future__ import annotations

import pytest
import pytest_twisted
from support.departures import ONLY_B, TWO, departure
from support.fake_namesrv import make_route
from support.memory_route_world import MemoryDriver as RouteDriver
from support.memory_route_world import held, until

from client_push.errors import TopicNotExistError
from protocol.codes import Perm, RequestCode
from protocol.push_codec import ChangeKind

GET = RequestCode.GET_ROUTEINFO_BY_TOPIC


def version(d: RouteDriver, topic: str) -> int | None:
    entry = d.client.cached_route(topic)
    return None if entry is None else entry.version


# -- refetch on notify ----------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_notify_of_a_newer_version_refetches_and_tells_listeners(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    await d.listen("T")
    v2 = ns.set_route("T", make_route(perm=Perm.READ))
    ns.notify([("T", v2, ChangeKind.UPDATED)])
    await until(lambda: len(d.events) == 2)
    assert [(e.cause, e.version) for e in d.events] == [("cached", 1), ("notify", v2)]
    assert not d.client.cached_route("T").publish_info.ok
    assert ns.count(GET) == 2


@pytest_twisted.ensureDeferred
async def test_notify_of_a_version_already_held_sends_no_request(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    ns.notify([("T", 1, ChangeKind.UPDATED)])
    await until(lambda: d.client.counters["notify_already_held"] == 1)
    await d.barrier()
    assert ns.count(GET) == 1


@pytest_twisted.ensureDeferred
async def test_a_sequence_gap_refetches_every_held_topic(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "A")
    await held(d, ns, "B")
    ns.notify([("A", 1, ChangeKind.UPDATED)], sequence=1)
    ns.notify([("A", 1, ChangeKind.UPDATED)], sequence=3)
    await until(lambda: ns.count(GET) == 4)
    assert d.client.counters["fetch.gap"] == 2


@pytest_twisted.ensureDeferred
async def test_deleted_drops_the_route_and_lookups_then_fail_without_a_request(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    ns.notify([("T", ns.delete("T"), ChangeKind.DELETED)])
    await until(lambda: d.client.cached_route("T") is None)
    with pytest.raises(TopicNotExistError):
        await d.get("T")
    assert ns.count(GET) == 1


# -- polling, the safety net ----------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_server_without_push_is_polled_every_30_s(world):
    ns = world.server(push=False)
    d = await world.client(ns, topic_idle_expiry_ms=10_000_000)
    ns.set_route("T", make_route())
    await d.get("T")
    await d.listen("T")
    await until(lambda: ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED) == 1)
    await d.barrier()
    ns.set_route("T", make_route(perm=Perm.READ))
    await d.advance(30.0)
    await until(lambda: len(d.events) == 2)
    assert d.events[-1].cause == "poll"
    assert not d.client.cached_route("T").publish_info.ok
    assert not d.client.push_active


@pytest_twisted.ensureDeferred
async def test_while_push_works_the_full_poll_waits_120_s_and_version_checks_run_meanwhile(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    for _ in range(11):  # 110 s: version checks (re-SUBSCRIBE), no route request
        await d.advance(10.0)
        await d.barrier()
    assert ns.count(GET) == 1
    assert d.client.counters["version_checks"] >= 3
    await d.advance(10.0)
    await until(lambda: ns.count(GET) == 2)
    assert d.client.counters["fetch.poll"] == 1
    assert d.client.counters["subscribe_failed"] == 0


@pytest_twisted.ensureDeferred
async def test_a_version_check_left_unanswered_is_subscribed_again_by_the_next_poll(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    ns.drop_subscribes = 1
    await d.advance(30.0)  # the version check goes out and is never answered
    await until(lambda: ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED) == 2)
    await d.advance(d.client.config.request_timeout_ms / 1000)
    await until(lambda: not d.client.push_active)
    assert d.client.counters["subscribe_failed"] == 1
    await d.advance(30.0)  # the poll while push is off: the topic is subscribed again
    await until(lambda: d.client.push_active)
    assert ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED) == 3


# -- expiry ---------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_an_idle_topic_expires_and_is_unsubscribed_at_the_name_server(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "idle")
    await held(d, ns, "busy")
    for _ in range(30):
        await d.advance(10.0)
        await d.get("busy")
        await d.barrier()  # version checks and polls answered before the clock jumps again
    await until(lambda: ns.subscribed() == {"busy"})
    assert ns.count(RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED) >= 1
    assert d.client.held_topics() == ["busy"]
    assert d.client.counters["topics_expired"] == 1


# -- negative cache -------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_lookups_of_an_absent_topic_within_the_ttl_send_one_request(world):
    ns = world.server()
    d = await world.client(ns)
    for _ in range(200):
        with pytest.raises(TopicNotExistError):
            await d.get("missing")
    assert ns.count(GET, "missing") == 1
    assert d.client.stats()["negative_hits"] == 199


@pytest_twisted.ensureDeferred
async def test_created_clears_a_remembered_absence_before_its_ttl(world):
    ns = world.server()
    d = await world.client(ns)
    with pytest.raises(TopicNotExistError):
        await d.get("T")
    await until(lambda: "T" in ns.subscribed())
    created = ns.set_route("T", make_route())
    ns.notify([("T", created, ChangeKind.CREATED)])
    await until(lambda: version(d, "T") == created)
    assert (await d.get("T")).version == created


@pytest_twisted.ensureDeferred
async def test_after_the_ttl_an_absent_topic_is_asked_again(world):
    ns = world.server()
    d = await world.client(ns)
    with pytest.raises(TopicNotExistError):
        await d.get("T")
    ns.set_route("T", make_route())
    await d.advance(31.0)
    assert (await d.get("T")).version == 1
    assert ns.count(GET, "T") == 2


# -- broker departure -----------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_departure_is_applied_without_a_request_and_confirmed_later(world):
    ns = world.server()
    d = await world.client(ns)
    ns.set_route("T", TWO)
    await held(d, ns, "T")
    await d.listen_brokers()
    v2 = ns.set_route("T", ONLY_B)
    departure(ns, (("T", v2, v2 - 1),))
    await until(lambda: version(d, "T") == v2)
    assert d.client.cached_route("T").route == ONLY_B
    assert ns.count(GET) == 1
    assert [(b.kind, b.topics) for b in d.brokers] == [("departed", ("T",))]
    await d.advance(11.5)  # past the confirmation delay and window
    await until(lambda: ns.count(GET) == 2)
    assert d.client.counters["fetch.confirm"] == 1


# -- GoAway ---------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_go_away_moves_to_a_named_alternative_with_the_subscriptions(world):
    ns = world.server()
    other = world.server(epoch="e2")
    d = await world.client(ns)
    await held(d, ns, "T")
    other.set_route("T", make_route())
    ns.go_away([other.addr])
    await until(lambda: other.subscribed() == {"T"})
    assert d.client.namesrv == other.addr
    await until(lambda: other.count(GET) == 1)  # another epoch: held versions are refetched
    assert d.client.counters["go_away_received"] == 1


@pytest_twisted.ensureDeferred
async def test_after_a_go_away_the_old_server_serves_until_another_connection_is_up(world):
    ns = world.server()
    unreachable = world.server()
    await unreachable.close()  # the named alternative refuses connections
    d = await world.client(ns)
    await held(d, ns, "T")
    ns.set_route("U", make_route())
    ns.go_away([unreachable.addr])
    await until(lambda: d.client.namesrv == unreachable.addr and not d.client.connected)
    assert (await d.get("U")).version == 1  # asked of the server in its grace period
    assert ns.count(GET, "U") == 1


@pytest_twisted.ensureDeferred
async def test_a_go_away_answer_is_retried_once_on_a_new_connection(world):
    ns = world.server()
    d = await world.client(ns)
    ns.set_route("T", make_route())
    await until(lambda: d.client.connected and bool(ns.conns))
    first = ns.conns[0]
    ns.go_away_gets = 1
    assert (await d.get("T")).version == 1
    assert d.client.connected and ns.conns[-1] is not first


# -- name-server failover -------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_lost_connection_is_reconnected_resubscribed_and_the_change_learned(world):
    ns = world.server()
    d = await world.client(ns)
    await held(d, ns, "T")
    for conn in list(ns.conns):
        conn.transport.loseConnection()
    await until(lambda: not d.client.connected)
    v2 = ns.set_route("T", make_route(queues=1))
    await d.advance(0.2)  # the first reconnect delay is at most reconnect_initial_ms
    await until(lambda: version(d, "T") == v2)
    assert ns.subscribed() == {"T"}
    assert d.client.counters["fetch.reconnect"] == 1


@pytest_twisted.ensureDeferred
async def test_when_the_chosen_name_server_stops_the_client_fails_over_to_the_other(world):
    first, second = world.server(), world.server(epoch="e2")
    d = await world.client(first, second)
    await until(lambda: d.client.connected)
    chosen, other = (first, second) if d.client.namesrv == first.addr else (second, first)
    chosen.set_route("T", make_route())
    await held(d, chosen, "T")
    other.set_route("T", make_route(queues=2))
    other.set_route("T", make_route(queues=2))
    await chosen.close()
    await until(lambda: not d.client.connected)
    await d.advance(0.2)
    await until(lambda: version(d, "T") == 2)
    assert d.client.namesrv == other.addr
    await until(lambda: other.subscribed() == {"T"})
