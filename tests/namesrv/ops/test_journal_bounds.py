"""The journal bytes clients can cause per second are bounded, per connection and in total;
what is cut is counted in the journal itself. The server case runs in the deterministic world
(``support.memory_world``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest_twisted
from support.journal_files import journal_files, journal_records
from support.memory_world import MemoryWorld, connect
from support.push_wire import subscribe

from namesrv.ops.events import RouteChanged
from namesrv.ops.journal import TOPIC_LIST_LIMIT, EventJournal, topic_list_fields
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import encode_unsubscribe

LONG_TOPICS = [f"T{i:05d}" + "x" * 120 for i in range(10_000)]


def _journal_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in journal_files(directory))


class _Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def _journal(tmp_path: Path, clock: _Clock, **bounds: int) -> EventJournal:
    return EventJournal(
        tmp_path,
        max_file_bytes=64 << 20,
        max_files=0,
        clock_ms=clock,
        max_records_per_second=1_000,
        **bounds,
    )


def test_a_subscribe_record_lists_its_first_topics_and_counts_the_rest():
    assert topic_list_fields(["a", "b"]) == {"topics": ["a", "b"]}
    fields = topic_list_fields(LONG_TOPICS)
    assert fields["topics"] == LONG_TOPICS[:TOPIC_LIST_LIMIT]
    assert fields["topics_omitted"] == 10_000 - TOPIC_LIST_LIMIT


def test_one_connection_churning_long_topics_for_30_s_writes_at_most_its_share(tmp_path):
    clock = _Clock()
    per_conn = 32 * 1024
    journal = _journal(
        tmp_path,
        clock,
        max_bytes_per_second=256 * 1024,
        max_bytes_per_connection_per_second=per_conn,
    )
    fields = topic_list_fields(LONG_TOPICS)
    attempts = 0
    for _ in range(30 * 100):  # 100 requests a second for 30 s
        journal.record("subscribe", conn=7, **fields)
        journal.record("unsubscribe", conn=7, **fields)
        attempts += 2
        clock.ms += 10
        journal.flush()
    journal.close()
    written = _journal_bytes(tmp_path)
    # 30 s at the connection's share, plus one summary a second.
    assert written <= 31 * (per_conn + 512)
    records = journal_records(tmp_path)
    kept = [r for r in records if r["event"] in ("subscribe", "unsubscribe")]
    summaries = [r for r in records if r["event"] == "journal_suppressed"]
    assert all(len(r["topics"]) == TOPIC_LIST_LIMIT for r in kept)
    assert all(r["topics_omitted"] == 10_000 - TOPIC_LIST_LIMIT for r in kept)
    # Nothing silently lost: every attempt is either written or counted in a summary.
    assert len(kept) + sum(s["dropped"] for s in summaries) == attempts
    assert sum(s["connection_limited"] for s in summaries) == attempts - len(kept)
    assert all(s["dropped_bytes"] > 0 for s in summaries)


def test_many_connections_together_write_at_most_the_global_bound(tmp_path):
    clock = _Clock()
    total = 256 * 1024
    journal = _journal(
        tmp_path, clock, max_bytes_per_second=total, max_bytes_per_connection_per_second=32 * 1024
    )
    fields = topic_list_fields(LONG_TOPICS)
    attempts = 0
    for _ in range(10 * 20):  # 10 s, 20 rounds a second, 200 connections each round
        for conn in range(200):
            journal.record("subscribe", conn=conn, **fields)
            attempts += 1
        clock.ms += 50
        journal.flush()
    journal.close()
    assert _journal_bytes(tmp_path) <= 11 * (total + 512)
    records = journal_records(tmp_path)
    kept = sum(r["event"] == "subscribe" for r in records)
    dropped = sum(r["dropped"] for r in records if r["event"] == "journal_suppressed")
    assert kept + dropped == attempts


def test_route_changes_are_never_cut_by_the_byte_bounds(tmp_path):
    clock = _Clock()
    journal = _journal(
        tmp_path, clock, max_bytes_per_second=1024, max_bytes_per_connection_per_second=512
    )
    for i in range(2_000):
        journal.route_changed(RouteChanged(f"T{i}", 1, "CREATED", ["register"], True))
    journal.close()
    listed = sum(len(r["topics"]) for r in journal_records(tmp_path, "route_changes"))
    assert listed == 2_000


@pytest_twisted.ensureDeferred
async def test_a_connection_churning_subscriptions_on_a_server_is_held_to_its_share(
    make_world_server, memory_world: MemoryWorld, tmp_path
):
    ns = make_world_server({"journal": {"directory": str(tmp_path)}})
    client = await connect(ns.port)
    topics = LONG_TOPICS[:2_000]
    for _ in range(20):  # inside one second of the clock (it stands still): 20 rounds
        memory_world.run(subscribe(client, *topics), within=0)
        resp = await client.call(
            RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_unsubscribe(topics)
        )
        assert resp.code == ResponseCode.SUCCESS
    assert memory_world.now() == 0
    ns.clock.advance(1.5)
    ns.server.journal.flush()
    share = ns.server.config.journal.max_bytes_per_connection_per_second
    records = journal_records(tmp_path)
    churn = [r for r in records if r["event"] in ("subscribe", "unsubscribe")]
    assert sum(len(json.dumps(r)) for r in churn) <= share
    assert all(r["topics_omitted"] == 2_000 - TOPIC_LIST_LIMIT for r in churn)
    (summary,) = [r for r in records if r["event"] == "journal_suppressed"]
    assert summary["dropped"] == 40 - len(churn)
