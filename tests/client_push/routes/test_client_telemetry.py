"""Client telemetry's ``news`` field: exactly "differs from the file's previous record of its
topic", the rule the pipeline applies to telemetry written without the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest_twisted
from support.departures import ONLY_B, TWO, departure
from support.fake_namesrv import get, make_route, started_client
from support.loopback_wait import until
from support.route_drivers import barrier

from client_push.routes.telemetry import ENTRY_OVERHEAD_BYTES, JsonLinesTelemetry, RefetchRecord
from protocol.codes import RequestCode
from protocol.push_codec import ChangeKind


def rec(topic: str, version: int, exists: bool = True, cause: str = "poll") -> RefetchRecord:
    return RefetchRecord(topic, version, exists, cause, None, 1, 2, "127.0.0.1:9876")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def news(path: Path) -> list[Any]:
    return [line.get("news", "missing") for line in lines(path)]


def test_news_is_a_change_against_the_previous_record_of_the_same_topic(tmp_path):
    path = tmp_path / "t.jsonl"
    sink = JsonLinesTelemetry(str(path))
    for r in (
        rec("A", 1, cause="first"),  # where the client starts from
        rec("A", 1),  # a poll returning what was held
        rec("B", 1, cause="first"),  # another topic has its own previous record
        rec("A", 2, cause="notify"),
        rec("A", 2, exists=False, cause="notify"),  # same number, now absent
        rec("A", 2, exists=False),
        rec("A", 2, exists=False, cause="epoch"),  # a restarted server's number: news
        rec("B", 1, cause="epoch"),
        rec("C", 5, cause="epoch"),  # but a topic's first record never is
    ):
        sink.record(r)
    sink.close()
    assert news(path) == [False, False, False, True, True, False, True, True, False]


def test_a_client_appending_to_its_file_continues_from_the_records_in_it(tmp_path):
    path = tmp_path / "t.jsonl"
    first = JsonLinesTelemetry(str(path))
    first.record(rec("A", 1, cause="first"))
    first.record(rec("B", 3, cause="first"))
    first.record(rec("B", 4, cause="notify"))
    first.close()
    with path.open("a") as f:
        f.write('{"topic":"B","version":')  # a crash cut the last line short
    second = JsonLinesTelemetry(str(path))
    second.record(rec("A", 1, cause="first"))  # as the file had it: no news
    second.record(rec("B", 5, cause="first"))  # differs from B's last usable record (4)
    second.close()
    text = path.read_text().splitlines()
    assert len(text) == 6 and text[3] == '{"topic":"B","version":'
    assert [line.get("news") for line in map(json.loads, text[:3] + text[4:])] == [
        False,
        False,
        True,
        False,
        True,
    ]


def test_no_news_field_in_a_file_that_holds_records_without_it(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(
        '{"topic":"A","version":1,"exists":true,"cause":"first","notified_at_ms":null,'
        '"requested_at_ms":1,"fetched_at_ms":2,"namesrv":"x:1"}\n'
    )
    sink = JsonLinesTelemetry(str(path))
    assert not sink.writes_news
    sink.record(rec("A", 2, cause="notify"))
    sink.close()
    assert news(path) == ["missing", "missing"]
    assert lines(path)[1]["version"] == 2


def test_past_its_memory_bound_the_writer_leaves_the_field_out(tmp_path):
    path = tmp_path / "t.jsonl"
    sink = JsonLinesTelemetry(str(path), memory_bytes=2 * (1 + ENTRY_OVERHEAD_BYTES))
    for r in (rec("A", 1), rec("B", 1), rec("A", 2), rec("C", 1), rec("A", 3)):
        sink.record(r)
    sink.close()
    assert news(path) == [False, False, True, "missing", "missing"]
    # A later writer finds records without it and keeps it out: the file stays one format
    # from the reader's point of view at its first and last line.
    again = JsonLinesTelemetry(str(path))
    assert not again.writes_news
    again.close()


# -- the route client writing it ------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_the_client_marks_the_fetches_that_taught_it_something(tmp_path):
    ns, clock, path, client = started_client(tmp_path)
    try:
        ns.set_route("T", make_route())
        await get(client, "T")
        await until(lambda: client.push_active)
        clock.advance(130.0)  # the poll: the same version again
        await until(lambda: ns.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 2)
        version = ns.set_route("T", make_route(queues=2))
        ns.notify([("T", version, ChangeKind.UPDATED)], emitted_at_ms=4_321)
        await until(lambda: client.cached_route("T").version == version)  # type: ignore[union-attr]
        gone = ns.delete("T")
        ns.notify([("T", gone, ChangeKind.DELETED)])
        await until(lambda: client.cached_route("T") is None)
        await until(lambda: len(lines(path)) == 4)
    finally:
        await client.stop()
        await ns.close()
    assert [(r["cause"], r["version"], r["exists"], r["news"]) for r in lines(path)] == [
        ("first", 1, True, False),
        ("poll", 1, True, False),
        ("notify", 2, True, True),
        ("notify", 3, False, True),
    ]


@pytest_twisted.ensureDeferred
async def test_a_departure_applied_locally_leaves_no_record_so_its_confirmation_is_news(
    tmp_path,
):
    # The client held the departed route before the confirming fetch, but the file's previous
    # record of the topic is the route before the departure: news, as the pipeline counts it.
    ns, clock, path, client = started_client(tmp_path)
    try:
        ns.set_route("T", TWO)
        await get(client, "T")
        await until(lambda: "T" in ns.subscribed() and client.push_active)
        version = ns.set_route("T", ONLY_B)
        departure(ns, (("T", version, version - 1),))
        await until(lambda: client.cached_route("T").version == version)  # type: ignore[union-attr]
        clock.advance(11.5)  # past the confirmation delay and window
        await until(lambda: client.counters["fetch.confirm"] == 1)
        await until(lambda: len(lines(path)) == 2)
    finally:
        await client.stop()
        await ns.close()
    assert [(r["cause"], r["version"], r["news"]) for r in lines(path)] == [
        ("first", 1, False),
        ("confirm", 2, True),
    ]


@pytest_twisted.ensureDeferred
async def test_a_topic_held_again_after_expiry_compares_with_its_record_from_before(tmp_path):
    ns, clock, path, client = started_client(tmp_path)
    try:
        ns.set_route("T", make_route())
        ns.set_route("U", make_route())
        await get(client, "T")
        await get(client, "U")
        await until(lambda: client.push_active)
        clock.advance(310.0)  # both idle past the expiry
        await until(lambda: client.held_topics() == [])
        ns.set_route("T", make_route(queues=2))
        await get(client, "T")  # a new version since: news
        await get(client, "U")  # the same as before: none
        await barrier(client)
    finally:
        await client.stop()
        await ns.close()
    records = [r for r in lines(path) if r["cause"] == "first"]
    assert [(r["topic"], r["version"], r["news"]) for r in records] == [
        ("T", 1, False),
        ("U", 1, False),
        ("T", 2, True),
        ("U", 1, False),
    ]
