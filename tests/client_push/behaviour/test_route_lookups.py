"""Lookups, the negative cache, fetch sharing, polls, expiry, reconnects, address changes,
telemetry and untrusted routes: what every route client does, run on each kind (Twisted,
asyncio, uvloop; ``support.route_drivers``) against the frame-speaking ``FakeNamesrv``.

Client timers run on a fake clock the test advances; only bytes move on their own. That
nothing more happened is proved by a round trip on the client's connection (``barrier``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import pytest_twisted
from support.fake_namesrv import FakeConn, FakeNamesrv, make_route
from support.memory_route_world import MemoryDriver as RouteDriver
from support.memory_route_world import MemoryRouteWorld as World
from support.memory_route_world import held, until
from support.route_drivers import nothing_in_flight

from client_push.errors import (
    NameServerError,
    RequestTimeoutError,
    RouteClientError,
    TopicNotExistError,
)
from protocol.codes import Perm, RequestCode
from protocol.frame import RemotingCommand
from protocol.push_codec import ChangeKind

GET = RequestCode.GET_ROUTEINFO_BY_TOPIC
SUBSCRIBE = RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED
UNSUBSCRIBE = RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED


async def one(world: World, **overrides: Any) -> tuple[FakeNamesrv, RouteDriver]:
    ns = world.server()
    return ns, await world.client(ns, **overrides)


async def connected(d: RouteDriver, ns: FakeNamesrv) -> None:
    await until(lambda: d.client.connected and bool(ns.conns))


def version(d: RouteDriver, topic: str) -> int | None:
    entry = d.client.cached_route(topic)
    return None if entry is None else entry.version


# -- first lookups --------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_first_lookup_fetches_the_route_with_its_version_and_publish_info(world):
    ns, d = await one(world)
    ns.set_route("T", make_route())
    entry = await d.get("T")
    assert entry.version == 1 and entry.publish_info.ok
    assert len(entry.publish_info.message_queues) == 4
    request = next(r for r in ns.requests if r.code == GET)
    assert request.ext_fields["topic"] == "T"


@pytest_twisted.ensureDeferred
async def test_hundred_concurrent_first_lookups_send_one_route_request(world):
    ns, d = await one(world)
    ns.set_route("T", make_route())
    await connected(d, ns)
    ns.hold_gets = True
    outcomes: list[str] = []
    await d.ask(["T"] * 100, outcomes)
    await until(lambda: len(ns.held_gets) == 1)
    ns.hold_gets = False
    ns.release_gets()
    await until(lambda: len(outcomes) == 100)
    assert outcomes == ["ok"] * 100
    await d.barrier()
    assert ns.count(GET) == 1


@pytest_twisted.ensureDeferred
async def test_publish_info_leaves_out_brokers_without_write_perm(world):
    ns, d = await one(world)
    ns.set_route("T", make_route(perm=Perm.READ))
    info = await d.run(d.client.get_publish_info("T"))
    assert not info.ok


@pytest_twisted.ensureDeferred
async def test_an_error_answer_fails_the_lookup_with_the_code_and_remark(world):
    ns, d = await one(world)
    await connected(d, ns)
    ns.go_away_gets = 2  # GO_AWAY twice: the retry fails too
    with pytest.raises(NameServerError, match="GO_AWAY"):
        await d.get("T")


@pytest_twisted.ensureDeferred
async def test_a_lookup_fails_with_a_timeout_when_the_server_never_answers(world):
    ns, d = await one(world)
    await connected(d, ns)
    ns.hold_gets = True
    lookup = d.run(d.client.get_route("T"))
    await until(lambda: len(ns.held_gets) == 1)
    await d.advance(3.0)
    with pytest.raises(RequestTimeoutError):
        await lookup


# -- negative cache -------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_absence_errors_say_how_long_until_the_name_server_is_asked_again(world):
    ns, d = await one(world)
    await connected(d, ns)
    await d.advance(12.0)
    with pytest.raises(TopicNotExistError) as answered:
        await d.get("missing")
    assert answered.value.retry_at_ms == 42_000 and not answered.value.cached
    assert "asked again in 30000 ms" in str(answered.value)
    await d.advance(12.0)
    with pytest.raises(TopicNotExistError) as remembered:
        await d.get("missing")
    assert remembered.value.retry_at_ms == 42_000 and remembered.value.cached
    assert "asked again in 18000 ms" in str(remembered.value)
    assert "42000" not in str(remembered.value)


# -- notifications --------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_new_epoch_in_a_notify_refetches_every_held_topic(world):
    ns, d = await one(world)
    await held(d, ns, "A")
    await held(d, ns, "B")
    ns.notify([], epoch="e2")
    await until(lambda: ns.count(GET) == 4)
    assert d.client.counters["fetch.epoch"] == 2


@pytest_twisted.ensureDeferred
async def test_deleted_tells_listeners_the_topic_is_gone(world):
    ns, d = await one(world)
    await held(d, ns, "T")
    await d.listen("T")
    ns.notify([("T", ns.delete("T"), ChangeKind.DELETED)])
    await until(lambda: len(d.events) == 2)
    assert [(e.exists, e.cause) for e in d.events] == [(True, "cached"), (False, "notify")]


@pytest_twisted.ensureDeferred
async def test_notifies_during_a_fetch_share_it_and_refetch_once_if_it_was_older(world):
    ns, d = await one(world)
    await held(d, ns, "T")
    ns.hold_gets = True
    v2 = ns.set_route("T", make_route(queues=2))
    ns.notify([("T", v2, ChangeKind.UPDATED)])
    await until(lambda: len(ns.held_gets) == 1)
    v3 = ns.set_route("T", make_route(queues=3))
    ns.notify([("T", v3, ChangeKind.UPDATED)])
    await until(lambda: d.client.counters["fetch_joined"] >= 1)
    # Answer the first refetch with v2's route although v3 exists by now.
    conn, cmd = ns.held_gets.pop()
    ns.routes["T"] = (make_route(queues=2), v2)
    ns.versions["T"] = v2
    conn.push(ns.route_answer(cmd))
    await until(lambda: len(ns.held_gets) == 1)
    ns.routes["T"] = (make_route(queues=3), v3)
    ns.versions["T"] = v3
    ns.hold_gets = False
    ns.release_gets()
    await until(lambda: version(d, "T") == v3)
    assert ns.count(GET) == 3


@pytest_twisted.ensureDeferred
async def test_a_change_racing_the_first_fetch_is_caught_by_the_subscribe_ack(world):
    ns, d = await one(world)
    ns.set_route("T", make_route())
    await connected(d, ns)
    # The route answer says v1; by the time SUBSCRIBE is processed the topic is at v2.
    real_answer = ns.answer

    def answer(conn: FakeConn, cmd: RemotingCommand) -> RemotingCommand | None:
        response = real_answer(conn, cmd)
        if cmd.code == GET and ns.versions["T"] == 1:
            ns.set_route("T", make_route(queues=8))
        return response

    ns.answer = answer  # type: ignore[method-assign]
    await d.get("T")
    await until(lambda: version(d, "T") == 2)
    assert d.client.counters["fetch.subscribe"] == 1


# -- polling --------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_server_without_push_is_polled_for_every_topic_and_not_resubscribed(world):
    ns = world.server(push=False)
    d = await world.client(ns, topic_idle_expiry_ms=10_000_000)
    ns.set_route("T", make_route())
    await d.get("T")
    await until(lambda: ns.count(SUBSCRIBE) == 1)
    await d.barrier()  # the refusal of push is processed
    ns.set_route("U", make_route())
    await d.get("U")
    await d.advance(30.0)
    await until(lambda: ns.count(GET) == 4)
    await d.barrier()
    assert ns.count(SUBSCRIBE) == 1
    assert not d.client.push_active


@pytest_twisted.ensureDeferred
async def test_poll_asks_about_an_absent_topic_only_after_its_ttl(world):
    ns, d = await one(world)
    with pytest.raises(TopicNotExistError):
        await d.get("missing")
    await until(lambda: d.client.push_active)
    await d.advance(120.0)  # the push-healthy poll; the 30 s TTL is over by then
    await until(lambda: ns.count(GET, "missing") == 2)


# -- expiry ---------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_topic_with_a_listener_never_expires(world):
    ns, d = await one(world)
    await held(d, ns, "watched")
    remove = await d.call(d.client.add_listener, "watched", lambda e: None)
    await d.advance(600.0)
    assert d.client.held_topics() == ["watched"]
    await d.call(remove)
    await d.advance(600.0)
    assert d.client.held_topics() == []


# -- connection: reconnect, switching -------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_reconnect_to_the_same_epoch_skips_topics_whose_version_is_unchanged(world):
    ns, d = await one(world)
    await held(d, ns, "T")
    for conn in list(ns.conns):
        conn.transport.loseConnection()  # type: ignore[union-attr]
    await until(lambda: not d.client.connected)
    await d.advance(0.2)
    await until(lambda: d.client.push_active)
    await d.barrier()
    assert ns.count(GET) == 1


@pytest_twisted.ensureDeferred
async def test_reconnect_backs_off_while_the_server_is_down(world):
    ns, d = await one(world)
    port = ns.port
    ns.set_route("T", make_route())
    await d.get("T")
    await ns.close()
    await until(lambda: not d.client.connected)
    failed_at = []
    for attempt in range(1, 6):  # refused each time, at once; the delays between grow
        world.world.run_until(
            lambda n=attempt: d.client.stats()["connect_failures"] == n,  # type: ignore[misc]
            within=d.client.config.reconnect_max_ms / 1000,
        )
        failed_at.append(world.world.now())
    delays = [later - earlier for earlier, later in itertools.pairwise(failed_at)]
    assert delays == sorted(delays) and delays[-1] > 2 * delays[0], delays
    ns2 = world.server(epoch="e2", port=port)
    ns2.set_route("T", make_route(queues=2))
    ns2.set_route("T", make_route(queues=2))
    await d.advance(10.0)
    await until(lambda: version(d, "T") == 2)
    assert ns2.subscribed() == {"T"}


@pytest_twisted.ensureDeferred
async def test_a_changed_address_list_unsubscribes_at_the_old_server_and_subscribes_at_the_new(
    world,
):
    ns, d = await one(world)
    other = world.server(epoch="e2")
    await held(d, ns, "T")
    other.set_route("T", make_route())
    await d.update_addrs([other.addr])
    await until(lambda: other.subscribed() == {"T"})
    await until(lambda: not ns.conns)  # the old connection closes once idle
    assert ns.count(UNSUBSCRIBE) == 1, [r.code for r in ns.requests]


# -- telemetry ------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_telemetry_writes_one_json_line_per_refetch_with_its_cause(world, tmp_path):
    path = tmp_path / "telemetry.jsonl"
    ns, d = await one(world, telemetry_path=str(path))
    ns.set_route("T", make_route())
    await d.get("T")
    await until(lambda: d.client.push_active)
    await d.advance(5.0)
    v2 = ns.set_route("T", make_route(queues=2))
    ns.notify([("T", v2, ChangeKind.UPDATED)], emitted_at_ms=4_321)
    await until(lambda: version(d, "T") == v2)
    await d.stop()
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


@pytest_twisted.ensureDeferred
async def test_telemetry_is_off_by_default(world):
    _ns, d = await one(world)
    assert type(d.client._telemetry).__name__ == "NullTelemetry"


# -- untrusted routes -----------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_route_with_an_absurd_queue_count_fails_the_call_at_once(world):
    # Queue counts are untrusted: a route claiming 100,000,000 queues fails, never allocates.
    ns, d = await one(world)
    ns.set_route("T", make_route(queues=100_000_000))
    with pytest.raises(RouteClientError, match="QueueNums=100000000"):
        await d.run(d.client.get_publish_info("T"))
    assert d.client.cached_route("T") is None
    # The lookup's SUBSCRIBE, and a fetch its answer may have started (answered with the same
    # route), end first: a later lookup would join that fetch. Each answer carrying the absurd
    # route is refused once, the lookup's and that background fetch's alike.
    await until(lambda: nothing_in_flight(d.client.outstanding()))
    answered = ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC, "T")
    assert answered >= 1
    assert d.client.stats()["routes_refused"] == answered
    assert d.client.cached_route("T") is None
    ns.set_route("T", make_route(queues=8))  # a sane route is taken on the next lookup
    await d.advance(1)
    info = await d.run(d.client.get_publish_info("T"))
    assert len(info.message_queues) == 8


@pytest_twisted.ensureDeferred
async def test_any_error_while_handling_a_route_fails_the_waiting_call(world, monkeypatch):
    ns, d = await one(world)
    ns.set_route("T", make_route())

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    monkeypatch.setattr(d.client._cache, "put", broken)
    with pytest.raises(RouteClientError, match="MemoryError"):
        await d.get("T")
    assert d.client.stats()["internal_errors"] >= 1  # the SUBSCRIBE ack's refetch may fail too
    monkeypatch.undo()
    await d.barrier()
    d.client.counters["internal_errors"] = 0  # counted as they should be; the world checks zero
