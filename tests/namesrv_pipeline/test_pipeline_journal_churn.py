"""A churn of 10,000 topics in one tick, journaled by a real name server and read by the job:
every change is in the journal and in the summary, and the journal's bytes follow the tick."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest_twisted
from support.register_bodies import plain_body, register, topic_names
from support.wire_client import connect
from twisted.internet import reactor, task

from namesrv.ops.journal_routes import ROUTE_CHANGES_EVENT
from namesrv_pipeline.cli import parse
from namesrv_pipeline.spark.job import run
from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import encode_subscribe

TOPICS = 10_000
PER_RECORD = 1_000
RECORD_OVERHEAD = 200
"""Bytes of a route_changes record besides its lists: time, event, kind, causes, notify."""
BYTES_PER_TOPIC = len(topic_names(1)[0]) + 3 + 10
"""A quoted name and comma; a version (< 10) and comma; a detection wait, at most 8 digits."""


def pump(ns: Any, done: Any) -> Any:
    """Give the reactor turns and run the server's continuations until ``done()``."""
    for _ in range(100_000):
        if done():
            return
        ns.clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    raise AssertionError("the server never got there")


def journal_lines(directory: Any) -> list[bytes]:
    return [
        line
        for path in sorted(directory.glob("journal-*.jsonl"))
        for line in path.read_bytes().splitlines()
    ]


@pytest_twisted.inlineCallbacks
def test_a_10000_topic_churn_in_one_tick_is_whole_in_the_journal_and_the_summary(
    make_server, spark, tmp_path
):
    journal = tmp_path / "journal"
    # A flood cut far below the churn: a record per change would lose all but 100 a second.
    ns = make_server(
        {
            "push": {"tick_interval_ms": 200},
            "journal": {
                "directory": str(journal),
                "max_records_per_second": 100,
                "max_topics_per_record": PER_RECORD,
            },
        }
    )
    server = ns.server
    tick = server.config.push.tick_interval_ms / 1000
    names = topic_names(TOPICS)
    broker = yield connect(ns.port)
    answer = broker.request(register(plain_body(names, 1)))
    yield from pump(ns, lambda: answer.called)
    assert (yield answer).code == ResponseCode.SUCCESS
    ns.clock.advance(tick)
    yield from pump(ns, lambda: server.detector.dirty_count == 0)
    # Per-connection records in the same second, 300 of them: the cut still bounds these.
    client = yield connect(ns.port)
    for topic in names[:300]:
        resp = yield client.call(
            RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe([topic], "t")
        )
        assert resp.code == ResponseCode.SUCCESS
    server.journal.flush()
    before = len(journal_lines(journal))

    # One tick: the broker's write permission is wiped, so every topic's route changes.
    resp = yield broker.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
    assert resp.code == ResponseCode.SUCCESS
    ns.clock.advance(tick)
    yield from pump(ns, lambda: server.detector.dirty_count == 0)
    server.journal.flush()
    tick_lines = journal_lines(journal)[before:]

    tick_changes = [json.loads(line) for line in tick_lines]
    batches = [r for r in tick_changes if r["event"] == ROUTE_CHANGES_EVENT]
    assert sorted(t for r in batches for t in r["topics"]) == names
    assert {v for r in batches for v in r["versions"]} == {2}
    assert {tuple(r["causes"]) for r in batches} == {("wipe_write_perm",)}
    # Bounded: records follow the tick (the clock stands still through it), not the topics.
    assert len(batches) == math.ceil(TOPICS / PER_RECORD)
    assert max(len(line) for line in tick_lines) <= PER_RECORD * BYTES_PER_TOPIC + RECORD_OVERHEAD
    assert sum(map(len, tick_lines)) <= TOPICS * BYTES_PER_TOPIC + len(tick_lines) * RECORD_OVERHEAD

    ns.clock.advance(1.0)  # the second is over: its drops are summarized at the next tick
    records = [json.loads(line) for line in journal_lines(journal)]
    kept = [r["event"] for r in records].count("subscribe")
    [cut] = [r for r in records if r["event"] == "journal_suppressed"]
    assert kept < 300 and cut["events"] == {"subscribe": 300 - kept}
    yield server.stop(grace_ms=0)  # writes what is left

    outputs = run(spark, parse(["--journal", str(journal), "--out", str(tmp_path / "out")]))
    s = json.loads(outputs.summary.read_text())["summary"]
    assert s["changes"] == 2 * TOPICS  # created by the register, then the wipe
    assert s["changes_by_cause"] == {"broker_startup": TOPICS, "wipe_write_perm": TOPICS}
    assert s["changes_by_kind"] == {"CREATED": TOPICS, "UPDATED": TOPICS}
    assert s["suppressed_by_rule"] == {"broker_startup": TOPICS}
    assert s["notified_changes"] == TOPICS
    assert spark.read.parquet(str(tmp_path / "out" / "changes")).count() == 2 * TOPICS
