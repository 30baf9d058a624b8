"""The pure parts both producers share, on their own: what an answer means and what it reports
(``SendCore``), the kept-connection table and the probes in flight (``broker_wire``)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from client_push.producer.auto_create import AutoCreateTopic
from client_push.producer.broker_wire import KeptConnections, ProbesInFlight
from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultTable
from client_push.producer.send_attempts import SendAttempts, Step
from client_push.producer.send_core import BrokerRefusedError, SendCore, SendError, SendResult
from client_push.routes.route_cache import MessageQueue
from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand

QUEUE = MessageQueue("T", "broker-a", 1)


class Reports:
    """A producer's routing as the core sees it: records what it is told; sends are reported
    to its fault table."""

    def __init__(self) -> None:
        self.auto_create: AutoCreateTopic | None = None
        self.table = FaultTable()
        self.going_away: list[tuple[str, int]] = []

    def broker_going_away(self, broker_name: str, grace_ms: int) -> None:
        self.going_away.append((broker_name, grace_ms))

    def via_default_topic(self, topic: str) -> bool:
        return False


def answer(code: int, remark: str | None = None, **fields: str) -> RemotingCommand:
    request = RemotingCommand.request(310, {})
    response = request.make_response(code, remark)
    response.ext_fields = dict(fields)
    return response


def setup(**config: object) -> tuple[SendCore, Reports, SendAttempts]:
    reports = Reports()
    cfg = ProducerConfig(**config)  # type: ignore[arg-type]
    core = SendCore(cfg, "pg", random.Random(1), reports, reports.table)
    plan = SendAttempts(cfg, cfg.send_timeout_ms, 0)
    plan.begin("broker-a")
    return core, reports, plan


def test_a_stored_answer_is_the_result_and_reports_the_latency():
    core, reports, plan = setup()
    message = core.encode("T", b"x")
    stored = answer(ResponseCode.SUCCESS, msgId="ID", queueId="1", queueOffset="7")
    result = core.answered(plan, message, QUEUE, stored, 12, 100)
    assert isinstance(result, SendResult) and result.queue_offset == 7
    assert result.msg_id == message.uniq_key and result.attempts == 1
    item = reports.table.item("broker-a")
    assert item is not None and item.latency_ms == 12 and item.heard_from
    assert reports.table.counters == {"reported.ok": 1}
    assert core.counters["sent_ok"] == 1


def test_a_go_away_answer_avoids_the_broker_without_isolating_it():
    core, reports, plan = setup(go_away_answer_avoid_ms=7_000)
    decision = core.answered(plan, core.encode("T", b"x"), QUEUE, answer(1500, "bye"), 3, 100)
    assert decision.step is Step.AVOID  # type: ignore[union-attr]
    assert reports.going_away == [("broker-a", 7_000)] and len(reports.table) == 0


def test_a_busy_answer_is_retried_after_a_backoff_and_isolates_the_broker():
    core, reports, plan = setup(busy_backoff_ms=40)
    decision = core.answered(
        plan, core.encode("T", b"x"), QUEUE, answer(ResponseCode.SYSTEM_BUSY, "busy"), 5, 100
    )
    assert (decision.step, decision.delay_ms) == (Step.RETRY, 40)  # type: ignore[union-attr]
    assert reports.table.counters == {"reported.failed": 1}
    assert not reports.table.is_available("broker-a", 100)
    assert core.counters["answers_busy"] == 1


def test_a_refused_message_ends_the_send_and_a_malformed_store_is_not_retried():
    core, _reports, plan = setup()
    with pytest.raises(BrokerRefusedError, match="illegal"):
        core.answered(
            plan,
            core.encode("T", b"x"),
            QUEUE,
            answer(ResponseCode.MESSAGE_ILLEGAL, "illegal"),
            1,
            100,
        )
    core, reports, plan = setup()
    with pytest.raises(SendError, match="malformed"):
        core.answered(plan, core.encode("T", b"x"), QUEUE, answer(ResponseCode.SUCCESS), 1, 100)
    assert core.counters["malformed_answers"] == 1 and len(reports.table) == 0


def test_an_attempt_still_unanswered_at_an_isolating_latency_isolates_its_broker_at_once():
    core, reports, _plan = setup()
    waited = core.watch_after_ms
    assert waited == reports.table.first_isolating_latency() == 550
    core.unanswered("broker-a", waited, 100)
    assert not reports.table.is_available("broker-a", 100)
    assert reports.table.counters == {"reported.waiting": 1}


def test_a_go_away_on_a_send_connection_reaches_the_broker_sent_to_there():
    core, reports, _plan = setup()
    core.addr_names["10.0.0.1:10911"] = "broker-a"
    core.go_away("10.0.0.1:10911", 3_000)
    core.go_away("10.0.0.9:10911", 3_000)  # no send went there: counted only
    assert reports.going_away == [("broker-a", 3_000)]
    assert core.counters["go_away_received"] == 2
    core.tidy(set())
    core.go_away("10.0.0.1:10911", 3_000)
    assert len(reports.going_away) == 1


class Conn:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_kept_connections_forget_only_the_connection_that_serves_an_address():
    conns: KeptConnections[Conn] = KeptConnections()
    old, new, other = Conn(), Conn(), Conn()
    conns.keep("a", old)
    conns.keep("a", new)
    conns.keep("b", other)
    assert not conns.forget("a", old)  # a late close of the replaced one changes nothing
    assert conns.get("a") is new
    assert conns.not_in({"a"}) == [other] and len(conns) == 1
    assert conns.stop() == [new] and conns.stopped and len(conns) == 0


def test_one_probe_per_address_is_in_flight_and_skips_are_counted():
    counters: Counter[str] = Counter()
    probes = ProbesInFlight(counters)
    assert probes.begin("a", stopped=False)
    assert not probes.begin("a", stopped=False)
    assert not probes.begin("b", stopped=True)
    assert probes.end("a", True) and len(probes) == 0
    assert counters == {"probes_sent": 1, "probes_skipped": 2, "probes_answered": 1}
