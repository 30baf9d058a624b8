"""The fetches in flight as a pure table (``FetchTable``): joining, follow-ups, answers and
abandoning, with no event loop; both clients' glue only sends and settles what it decides."""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest
from support.departures import TWO

from client_push.config import ClientConfig
from client_push.errors import NameServerError, RouteClientError, TopicNotExistError
from client_push.routes.events import GAP, NOTIFY, Listeners, RouteEvent
from client_push.routes.fetch_table import FetchTable, route_request, route_version
from client_push.routes.held_routes import HeldRoutes
from client_push.routes.negative_cache import NegativeCache
from client_push.routes.push_actions import Refetch
from client_push.routes.push_session import PushSession
from client_push.routes.refetch_schedule import RefetchSchedule
from client_push.routes.route_cache import CachedRoute, RouteCache
from client_push.routes.telemetry import NullTelemetry
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand


class Table:
    def __init__(self) -> None:
        config = ClientConfig(namesrv_addrs=("10.0.0.9:9876",))
        self.cache = RouteCache(config.topic_idle_expiry_ms)
        self.routes = HeldRoutes(
            self.cache, NegativeCache(config.negative_ttl_ms), NullTelemetry(), lambda: "ns"
        )
        self.counters: Counter[str] = Counter()
        self.listeners = Listeners(self.counters)
        self.events: list[RouteEvent] = []
        marks = itertools.count(1)
        session = PushSession(
            config, self.cache, clock=lambda: 1.0, counters=self.counters, namesrv=lambda: "ns"
        )
        self.schedule = RefetchSchedule(1_000, 60_000, random.Random(1))
        self.warming = False
        self.table: FetchTable[str] = FetchTable(
            self.routes,
            session,
            self.schedule,
            self.listeners,
            counters=self.counters,
            marks=marks,
            warming=lambda: self.warming,
        )

    def hold(self, topic: str) -> None:
        self.cache.touch(topic, 1_000)
        self.listeners.add_route(topic, self.events.append)


def answer(version: int, code: int = ResponseCode.SUCCESS, body: bytes | None = None):
    request = route_request("T")
    if body is None and code == ResponseCode.SUCCESS:
        body = bodies.encode_route(TWO, standard_json=True)
    return request.make_response(code, ext_fields={"routeVersion": str(version)}, body=body)


def test_the_request_asks_for_the_topic_in_standard_json():
    request = route_request("T")
    assert request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC
    assert request.ext_fields == {"topic": "T", "acceptStandardJsonOnly": "true"}


def test_a_second_reason_joins_the_fetch_in_flight_and_fetches_again_if_the_answer_is_older():
    t = Table()
    t.hold("T")
    fetch, new = t.table.begin("T", "first", 1_000)
    joined, again = t.table.begin("T", NOTIFY, 1_001, wanted_version=3)
    assert (new, again, joined is fetch) == (True, False, True)
    fetch.waiters.append("caller")
    outcome = t.table.answered(fetch, answer(2), 1_002)
    assert isinstance(outcome, CachedRoute) and outcome.version == 2
    waiters, follow_up = t.table.finish(fetch, outcome)
    assert waiters == ["caller"]
    assert follow_up == Refetch("T", NOTIFY, None, None)
    assert t.counters["fetch_joined"] == 1 and t.counters["fetch_follow_up"] == 1
    assert [e.version for e in t.events] == [2]


def test_no_follow_up_when_the_answer_is_as_new_as_the_reason_unless_versions_are_untrusted():
    t = Table()
    t.hold("T")
    fetch, _ = t.table.begin("T", "first", 1_000)
    t.table.follow_up("T", NOTIFY, None, 2)
    assert t.table.finish(fetch, t.table.answered(fetch, answer(2), 1_001))[1] is None
    fetch, _ = t.table.begin("T", "first", 1_002)
    t.table.begin("T", GAP, 1_003)
    assert t.table.finish(fetch, t.table.answered(fetch, answer(5), 1_004))[1] == Refetch(
        "T", GAP, None, None
    )


def test_an_answer_older_than_a_departure_applied_here_does_not_undo_it():
    t = Table()
    t.hold("T")
    t.cache.put("T", TWO, 4, 1_000)
    before, _ = t.table.begin("T", "first", 1_000)  # sent before the departure
    t.table.await_version("T", 6)
    kept = t.table.answered(before, answer(4), 1_001)
    assert isinstance(kept, CachedRoute) and kept.version == 4
    assert t.counters["fetch_older_than_local"] == 1
    t.table.finish(before, kept)
    after, _ = t.table.begin("T", "confirm", 1_002)
    taken = t.table.answered(after, answer(6), 1_003)
    assert isinstance(taken, CachedRoute) and taken.version == 6
    t.table.finish(after, taken)
    late, _ = t.table.begin("T", "poll", 1_004)  # sent before the next departure
    t.table.await_version("T", 9)
    t.table.forget_awaited()  # a new connection or epoch: nothing awaited any more
    assert t.table.answered(late, answer(7), 1_005).version == 7  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("response", "error"),
    [
        (answer(4, ResponseCode.TOPIC_NOT_EXIST), TopicNotExistError),
        (answer(0, ResponseCode.SYSTEM_ERROR), NameServerError),
        (answer(3, body=b"{not json"), RouteClientError),
    ],
)
def test_an_answer_that_is_no_route_is_the_fetchs_error(response, error):
    t = Table()
    t.hold("T")
    fetch, _ = t.table.begin("T", "first", 1_000)
    outcome = t.table.answered(fetch, response, 1_001)
    assert isinstance(outcome, error)
    assert t.cache.peek("T") is None


def test_an_error_while_taking_an_answer_is_counted_and_fails_the_fetch(monkeypatch):
    t = Table()
    t.hold("T")
    fetch, _ = t.table.begin("T", "first", 1_000)

    def broken(*args: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(t.routes, "learn_route", broken)
    outcome = t.table.answered(fetch, answer(1), 1_001)
    assert isinstance(outcome, RouteClientError) and "KeyError" in str(outcome)
    assert t.counters["internal_errors"] == 1


def test_only_a_fetch_nobody_waits_for_of_a_topic_not_held_is_abandoned():
    t = Table()
    t.hold("T")
    fetch, _ = t.table.begin("T", "first", 1_000)
    fetch.waiters.append("caller")
    assert not t.table.abandon(fetch)
    fetch.waiters.clear()
    assert not t.table.abandon(fetch)  # still held: its answer is wanted
    t.cache.forget("T")
    assert t.table.abandon(fetch)
    assert t.table.inflight == {} and t.counters["fetch_abandoned"] == 1
    assert isinstance(t.table.answered(fetch, answer(1), 1_001), RouteClientError)
    assert t.table.finish(fetch, RouteClientError("late")) == ([], None)


def test_after_stop_no_follow_up_is_started():
    t = Table()
    t.hold("T")
    fetch, _ = t.table.begin("T", "first", 1_000)
    t.table.begin("T", GAP, 1_001)
    assert t.table.stop() == [fetch]
    assert t.table.finish(fetch, RouteClientError("stopped"))[1] is None


def test_a_route_answer_without_a_version_is_version_zero():
    response = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC).make_response(
        ResponseCode.SUCCESS
    )
    assert route_version(response) == 0
