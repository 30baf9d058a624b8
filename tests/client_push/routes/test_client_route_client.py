"""RouteClient over loopback against a small in-test name server that speaks the frames.

The client's timers run on a ``task.Clock``: polls, expiry, backoff and timeouts happen only
when a test advances it. Waiting for bytes to cross loopback uses the real reactor.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from support.fake_namesrv import (
    FakeConn,
    FakeNamesrv,
    Harness,
    get,
    held,
    make_client,
    make_route,
    started_client,
)
from support.loopback_wait import settle, until
from twisted.internet import defer, reactor, task

from client_push.config import ClientConfig
from client_push.errors import (
    NameServerError,
    RequestTimeoutError,
    RouteClientError,
    TopicNotExistError,
)
from client_push.routes.client import RouteClient
from client_push.routes.events import RouteEvent
from protocol.codes import Perm, RequestCode
from protocol.frame import RemotingCommand
from protocol.push_codec import (
    ChangeKind,
)

# -- the fake name server -------------------------------------------------------------------------


# -- helpers --------------------------------------------------------------------------------------


@pytest.fixture
def harness():
    ns = FakeNamesrv()
    ns.listen()
    clock = task.Clock()
    client = make_client([ns.addr], clock)
    client.start()
    h = Harness(ns, client, clock)
    yield h
    pytest_twisted.blockon(client.stop())
    pytest_twisted.blockon(ns.close())


# -- first lookups --------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_first_lookup_fetches_the_route_with_its_version_and_publish_info(harness):
    harness.ns.set_route("T", make_route())
    entry = await get(harness.client, "T")
    assert entry.version == 1
    assert len(entry.publish_info.message_queues) == 4
    again = await get(harness.client, "T")
    assert again is entry
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 1
    request = next(r for r in harness.ns.requests if r.code == RequestCode.GET_ROUTEINFO_BY_TOPIC)
    assert request.ext_fields["acceptStandardJsonOnly"] == "true"


@pytest_twisted.ensureDeferred
async def test_hundred_concurrent_first_lookups_send_one_route_request(harness):
    harness.ns.set_route("T", make_route())
    await harness.connected()
    harness.ns.hold_gets = True
    lookups = [get(harness.client, "T") for _ in range(100)]
    await until(lambda: len(harness.ns.held_gets) == 1)
    harness.ns.hold_gets = False
    harness.ns.release_gets()
    results = await defer.gatherResults(lookups)
    assert len({id(r) for r in results}) == 1
    await settle()
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 1


@pytest_twisted.ensureDeferred
async def test_lookups_before_the_connection_is_up_wait_for_it():
    ns = FakeNamesrv()
    ns.listen()
    ns.set_route("T", make_route())
    clock = task.Clock()
    client = make_client([ns.addr], clock)
    client.start()
    try:
        entry = await get(client, "T")
        assert entry.version == 1
    finally:
        await client.stop()
        await ns.close()


@pytest_twisted.ensureDeferred
async def test_publish_info_leaves_out_brokers_without_write_perm(harness):
    harness.ns.set_route("T", make_route(perm=Perm.READ))
    info = await defer.ensureDeferred(harness.client.get_publish_info("T"))
    assert not info.ok


@pytest_twisted.ensureDeferred
async def test_an_error_answer_fails_the_lookup_with_the_code_and_remark(harness):
    await harness.connected()
    harness.ns.go_away_gets = 2  # GO_AWAY twice: the retry fails too
    with pytest.raises(NameServerError, match="GO_AWAY"):
        await get(harness.client, "T")


@pytest_twisted.ensureDeferred
async def test_a_lookup_fails_with_a_timeout_when_the_server_never_answers(harness):
    await harness.connected()
    harness.ns.hold_gets = True
    d = get(harness.client, "T")
    await until(lambda: len(harness.ns.held_gets) == 1)
    harness.clock.advance(3.0)
    with pytest.raises(RequestTimeoutError):
        await d


# -- negative cache -------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_thousand_lookups_of_an_absent_topic_within_ttl_send_one_request(harness):
    for _ in range(1000):
        with pytest.raises(TopicNotExistError):
            await get(harness.client, "missing")
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC, "missing") == 1
    harness.clock.advance(30.0)
    with pytest.raises(TopicNotExistError):
        await get(harness.client, "missing")
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC, "missing") == 2


@pytest_twisted.ensureDeferred
async def test_absence_errors_say_how_long_until_the_name_server_is_asked_again(harness):
    await harness.connected()
    harness.clock.advance(12.0)
    with pytest.raises(TopicNotExistError) as answered:
        await get(harness.client, "missing")
    assert answered.value.retry_at_ms == 42_000 and not answered.value.cached
    assert "asked again in 30000 ms" in str(answered.value)
    harness.clock.advance(12.0)
    with pytest.raises(TopicNotExistError) as remembered:
        await get(harness.client, "missing")
    assert remembered.value.retry_at_ms == 42_000 and remembered.value.cached
    assert "asked again in 18000 ms" in str(remembered.value)
    assert "42000" not in str(remembered.value)


@pytest_twisted.ensureDeferred
async def test_absent_topic_is_subscribed_so_created_clears_it_before_the_ttl(harness):
    with pytest.raises(TopicNotExistError):
        await get(harness.client, "later")
    await until(lambda: "later" in harness.ns.subscribed())
    version = harness.ns.set_route("later", make_route())
    harness.ns.notify([("later", version, ChangeKind.CREATED)])
    await until(lambda: harness.client.cached_route("later") is not None)
    entry = await get(harness.client, "later")
    assert entry.version == version
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC, "later") == 2


# -- notifications --------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_notify_of_a_newer_version_refetches_and_tells_listeners(harness):
    await held(harness, "T")
    harness.listen("T")
    version = harness.ns.set_route("T", make_route(perm=Perm.READ))
    harness.ns.notify([("T", version, ChangeKind.UPDATED)])
    await until(lambda: len(harness.events) == 2)
    replay, change = harness.events
    assert (replay.cause, replay.version) == ("cached", 1)
    assert (change.cause, change.version, change.exists) == ("notify", version, True)
    assert not harness.client.cached_route("T").publish_info.ok  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_notify_of_a_version_already_held_sends_nothing(harness):
    await held(harness, "T")
    harness.ns.notify([("T", 1, ChangeKind.UPDATED)])
    await until(lambda: harness.client.counters["notify_already_held"] == 1)
    await settle()
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 1


@pytest_twisted.ensureDeferred
async def test_a_sequence_gap_refetches_every_held_topic(harness):
    await held(harness, "A")
    await held(harness, "B")
    harness.ns.notify([("A", 1, ChangeKind.UPDATED)], sequence=1)
    harness.ns.notify([("A", 1, ChangeKind.UPDATED)], sequence=3)
    await until(lambda: harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 4)
    assert harness.client.counters["fetch.gap"] == 2


@pytest_twisted.ensureDeferred
async def test_a_new_epoch_in_a_notify_refetches_every_held_topic(harness):
    await held(harness, "A")
    await held(harness, "B")
    harness.ns.notify([], epoch="e2")
    await until(lambda: harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 4)
    assert harness.client.counters["fetch.epoch"] == 2


@pytest_twisted.ensureDeferred
async def test_deleted_drops_the_route_and_remembers_the_absence(harness):
    await held(harness, "T")
    harness.listen("T")
    version = harness.ns.delete("T")
    harness.ns.notify([("T", version, ChangeKind.DELETED)])
    await until(lambda: harness.client.cached_route("T") is None)
    with pytest.raises(TopicNotExistError):
        await get(harness.client, "T")
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 1
    assert [(e.exists, e.cause) for e in harness.events] == [(True, "cached"), (False, "notify")]


@pytest_twisted.ensureDeferred
async def test_notifies_during_a_fetch_share_it_and_refetch_once_if_it_was_older(harness):
    await held(harness, "T")
    harness.ns.hold_gets = True
    v2 = harness.ns.set_route("T", make_route(queues=2))
    harness.ns.notify([("T", v2, ChangeKind.UPDATED)])
    await until(lambda: len(harness.ns.held_gets) == 1)
    v3 = harness.ns.set_route("T", make_route(queues=3))
    harness.ns.notify([("T", v3, ChangeKind.UPDATED)])
    await until(lambda: harness.client.counters["fetch_joined"] >= 1)
    # Answer the first refetch with v2's route although v3 exists by now.
    conn, cmd = harness.ns.held_gets.pop()
    harness.ns.routes["T"] = (make_route(queues=2), v2)
    harness.ns.versions["T"] = v2
    conn.push(harness.ns.route_answer(cmd))
    await until(lambda: len(harness.ns.held_gets) == 1)
    harness.ns.routes["T"] = (make_route(queues=3), v3)
    harness.ns.versions["T"] = v3
    harness.ns.hold_gets = False
    harness.ns.release_gets()
    await until(lambda: harness.client.cached_route("T").version == v3)  # type: ignore[union-attr]
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 3


@pytest_twisted.ensureDeferred
async def test_a_change_racing_the_first_fetch_is_caught_by_the_subscribe_ack(harness):
    harness.ns.set_route("T", make_route())
    await harness.connected()
    # The route answer says v1; by the time SUBSCRIBE is processed the topic is at v2.
    real_answer = harness.ns.answer

    def answer(conn: FakeConn, cmd: RemotingCommand) -> RemotingCommand | None:
        response = real_answer(conn, cmd)
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC and harness.ns.versions["T"] == 1:
            harness.ns.set_route("T", make_route(queues=8))
        return response

    harness.ns.answer = answer  # type: ignore[method-assign]
    await get(harness.client, "T")
    await until(lambda: harness.client.cached_route("T").version == 2)  # type: ignore[union-attr]
    assert harness.client.counters["fetch.subscribe"] == 1


# -- polling --------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_with_push_healthy_the_poll_runs_at_the_longer_interval(harness):
    await held(harness, "T")
    harness.clock.advance(30.0)
    await settle()
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 1
    harness.clock.advance(90.0)
    await until(lambda: harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 2)


@pytest_twisted.ensureDeferred
async def test_server_without_push_is_polled_every_poll_interval_and_not_resubscribed():
    ns = FakeNamesrv(push=False)
    ns.listen()
    clock = task.Clock()
    client = make_client([ns.addr], clock, topic_idle_expiry_ms=10_000_000)
    client.start()
    events: list[RouteEvent] = []
    try:
        ns.set_route("T", make_route())
        await get(client, "T")
        client.add_listener("T", events.append)
        await until(lambda: ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED) == 1)
        await settle()
        ns.set_route("T", make_route(perm=Perm.READ))
        clock.advance(30.0)
        await until(lambda: len(events) == 2)
        assert events[-1].cause == "poll" and events[-1].route is not None
        assert not events[-1].route.publish_info.ok
        ns.set_route("U", make_route())
        await get(client, "U")
        clock.advance(30.0)
        await until(lambda: ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 5)
        assert ns.count(RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED) == 1
        assert not client.push_active
    finally:
        await client.stop()
        await ns.close()


@pytest_twisted.ensureDeferred
async def test_poll_asks_about_an_absent_topic_only_after_its_ttl(harness):
    with pytest.raises(TopicNotExistError):
        await get(harness.client, "missing")
    await until(lambda: harness.client.push_active)
    harness.clock.advance(120.0)  # the push-healthy poll; the 30 s TTL is over by then
    await until(lambda: harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC, "missing") == 2)


# -- expiry ---------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_idle_topic_expires_from_cache_and_is_unsubscribed(harness):
    await held(harness, "idle")
    await held(harness, "busy")
    for _ in range(30):
        harness.clock.advance(10.0)
        await get(harness.client, "busy")
    await until(lambda: harness.ns.count(RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED) == 1)
    assert harness.client.held_topics() == ["busy"]
    assert harness.ns.subscribed() == {"busy"}


@pytest_twisted.ensureDeferred
async def test_a_topic_with_a_listener_never_expires(harness):
    await held(harness, "watched")
    remove = harness.client.add_listener("watched", lambda e: None)
    harness.clock.advance(600.0)
    assert harness.client.held_topics() == ["watched"]
    remove()
    harness.clock.advance(600.0)
    assert harness.client.held_topics() == []


# -- connection: reconnect, GoAway, switching -----------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_after_a_lost_connection_the_client_reconnects_and_resubscribes(harness):
    await held(harness, "T")
    for conn in list(harness.ns.conns):
        conn.transport.loseConnection()  # type: ignore[union-attr]
    await until(lambda: not harness.client.connected)
    version = harness.ns.set_route("T", make_route(queues=1))
    harness.clock.advance(0.2)  # the first reconnect delay is at most reconnect_initial_ms
    await until(lambda: harness.client.cached_route("T").version == version)  # type: ignore[union-attr]
    assert harness.ns.subscribed() == {"T"}
    assert harness.client.counters["fetch.reconnect"] == 1


@pytest_twisted.ensureDeferred
async def test_reconnect_to_the_same_epoch_skips_topics_whose_version_is_unchanged(harness):
    await held(harness, "T")
    for conn in list(harness.ns.conns):
        conn.transport.loseConnection()  # type: ignore[union-attr]
    await until(lambda: not harness.client.connected)
    harness.clock.advance(0.2)
    await until(lambda: harness.client.push_active)
    await settle()
    assert harness.ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 1


@pytest_twisted.ensureDeferred
async def test_reconnect_backs_off_while_the_server_is_down():
    ns = FakeNamesrv()
    ns.listen()
    port = ns.port
    clock = task.Clock()
    client = make_client([ns.addr], clock)
    client.start()
    try:
        ns.set_route("T", make_route())
        await get(client, "T")
        await ns.close()
        await until(lambda: not client.connected)
        for attempt in range(1, 5):  # refused each time; the delays grow
            clock.advance(10.0)
            await until(lambda n=attempt: client.stats()["connect_failures"] == n)  # type: ignore[misc]
        ns2 = FakeNamesrv(epoch="e2")
        ns2.listen(port)
        ns2.set_route("T", make_route(queues=2))
        ns2.set_route("T", make_route(queues=2))
        clock.advance(10.0)
        await until(lambda: client.cached_route("T").version == 2)  # type: ignore[union-attr]
        assert ns2.subscribed() == {"T"}
        await ns2.close()
    finally:
        await client.stop()


@pytest_twisted.ensureDeferred
async def test_go_away_moves_to_a_named_alternative_with_the_subscriptions(harness):
    other = FakeNamesrv(epoch="e2")
    other.listen()
    try:
        await held(harness, "T")
        other.set_route("T", make_route())
        harness.ns.go_away([other.addr])
        await until(lambda: other.subscribed() == {"T"})
        assert harness.client.namesrv == other.addr
        await until(lambda: other.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 1)
        assert harness.client.counters["fetch.reconnect"] == 1
    finally:
        await other.close()


@pytest_twisted.ensureDeferred
async def test_go_away_answer_to_a_request_retries_it_once_on_a_new_connection(harness):
    harness.ns.set_route("T", make_route())
    await harness.connected()
    first_conn = harness.ns.conns[0]
    harness.ns.go_away_gets = 1
    entry = await get(harness.client, "T")
    assert entry.version == 1
    assert harness.client.connected and harness.ns.conns[-1] is not first_conn


@pytest_twisted.ensureDeferred
async def test_a_changed_address_list_unsubscribes_at_the_old_server_and_subscribes_at_the_new(
    harness,
):
    other = FakeNamesrv(epoch="e2")
    other.listen()
    try:
        await held(harness, "T")
        other.set_route("T", make_route())
        harness.client.update_namesrv_addrs([other.addr])
        await until(lambda: other.subscribed() == {"T"})
        await until(lambda: harness.ns.count(RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED) == 1)
        await until(lambda: not harness.ns.conns)  # the old connection closes once idle
    finally:
        await other.close()


# -- telemetry ------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_telemetry_writes_one_json_line_per_refetch_with_its_cause(tmp_path):
    ns, clock, path, client = started_client(tmp_path)
    try:
        ns.set_route("T", make_route())
        await get(client, "T")
        await until(lambda: client.push_active)
        clock.advance(5.0)
        version = ns.set_route("T", make_route(queues=2))
        ns.notify([("T", version, ChangeKind.UPDATED)], emitted_at_ms=4_321)
        await until(lambda: client.cached_route("T").version == version)  # type: ignore[union-attr]
    finally:
        await client.stop()
        await ns.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["cause"], r["version"], r["notified_at_ms"]) for r in lines] == [
        ("first", 1, None),
        ("notify", 2, 4_321),
    ]
    assert lines[1]["fetched_at_ms"] == 5_000
    assert lines[1]["namesrv"] == ns.addr
    assert set(lines[0]) == {
        "topic",
        "version",
        "exists",
        "cause",
        "notified_at_ms",
        "requested_at_ms",
        "fetched_at_ms",
        "namesrv",
        "news",
        "client_id",
        "host",
    }


def test_telemetry_is_off_by_default():
    client = RouteClient(ClientConfig(namesrv_addrs=("127.0.0.1:1",)), reactor, clock=task.Clock())
    assert type(client._telemetry).__name__ == "NullTelemetry"


# -- untrusted routes -----------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_route_with_an_absurd_queue_count_fails_the_call_at_once(harness):
    # Queue counts are untrusted: a route claiming 100,000,000 queues fails, never allocates.
    harness.ns.set_route("T", make_route(queues=100_000_000))
    lookup = defer.ensureDeferred(harness.client.get_publish_info("T"))
    with pytest.raises(RouteClientError, match="QueueNums=100000000"):
        await lookup
    assert harness.client.stats()["routes_refused"] == 1
    assert harness.client.cached_route("T") is None
    harness.ns.set_route("T", make_route(queues=8))  # a sane route is taken on the next lookup
    harness.clock.advance(1)
    info = await defer.ensureDeferred(harness.client.get_publish_info("T"))
    assert len(info.message_queues) == 8


@pytest_twisted.ensureDeferred
async def test_any_error_while_handling_a_route_fails_the_waiting_call(harness, monkeypatch):
    harness.ns.set_route("T", make_route())

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(harness.client._cache, "put", broken)
    with pytest.raises(RouteClientError, match="MemoryError"):
        await defer.ensureDeferred(harness.client.get_route("T"))
    assert harness.client.stats()["internal_errors"] == 1
