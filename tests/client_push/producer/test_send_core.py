"""What an answer means and what it reports (``SendCore``, on the producer's own routing and
connections, nothing sent), the kept-connection table and the probes in flight
(``broker_wire``)."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from twisted.internet import reactor, task

from client_push.config import ClientConfig
from client_push.producer.broker_conns import BrokerConnections
from client_push.producer.broker_wire import KeptConnections, ProbesInFlight
from client_push.producer.config import ProducerConfig
from client_push.producer.routing_core import RoutingCore
from client_push.producer.send_attempts import SendAttempts, Step
from client_push.producer.send_core import BrokerRefusedError, SendCore, SendError, SendResult
from client_push.routes.client import RouteClient
from client_push.routes.route_cache import MessageQueue
from client_push.runtime.twisted_loop import TwistedRuntime
from protocol.codes import ResponseCode
from protocol.frame import RemotingCommand
from protocol.message import EncodedMessage, encode_message

QUEUE = MessageQueue("T", "broker-a", 1)
NOW = 100


def answer(code: int, remark: str | None = None, **fields: str) -> RemotingCommand:
    request = RemotingCommand.request(310, {})
    response = request.make_response(code, remark)
    response.ext_fields = dict(fields)
    return response


def message() -> EncodedMessage:
    return encode_message("T", b"x", uniq_key="0A0000010000000000000000000000AA")


def setup(**config: object) -> tuple[SendCore, RoutingCore, SendAttempts]:
    """A send core on a routing and connections of its own, on a clock at ``NOW`` ms; no route
    client started, nothing connected."""
    clock = task.Clock()
    clock.advance(NOW / 1000)
    runtime = TwistedRuntime(reactor, clock)
    cfg = ProducerConfig(**config)  # type: ignore[arg-type]
    client = RouteClient(ClientConfig(namesrv_addrs=("127.0.0.1:1",)), reactor, clock=clock)
    routing = RoutingCore(client, cfg.fault, runtime=runtime, rng=random.Random(1))
    connections = BrokerConnections(runtime, lambda _addr, _grace: None)
    core = SendCore(cfg, "pg", runtime, routing, connections)
    plan = SendAttempts(cfg, cfg.send_timeout_ms, 0)
    plan.begin("broker-a")
    return core, routing, plan


def reported(routing: RoutingCore) -> dict[str, int]:
    """What was reported to the fault table, by outcome."""
    return {k: v for k, v in routing.table.counters.items() if k.startswith("reported.")}


def test_a_stored_answer_is_the_result_and_reports_the_latency():
    core, routing, plan = setup()
    sent = message()
    stored = answer(ResponseCode.SUCCESS, msgId="ID", queueId="1", queueOffset="7")
    result = core.answered(plan, sent, QUEUE, stored, 12, NOW)
    assert isinstance(result, SendResult) and result.queue_offset == 7
    assert result.msg_id == sent.uniq_key and result.attempts == 1
    item = routing.table.item("broker-a")
    assert item is not None and item.latency_ms == 12 and item.heard_from
    assert routing.table.counters == {"reported.ok": 1}
    assert core.counters["sent_ok"] == 1


def test_a_go_away_answer_avoids_the_broker_without_isolating_it():
    core, routing, plan = setup(go_away_answer_avoid_ms=7_000)
    decision = core.answered(plan, message(), QUEUE, answer(1500, "bye"), 3, NOW)
    assert decision.step is Step.AVOID  # type: ignore[union-attr]
    assert routing.counters["brokers_going_away"] == 1 and reported(routing) == {}
    assert routing.table.is_going_away("broker-a", NOW + 6_999)
    assert not routing.table.is_going_away("broker-a", NOW + 7_000)


def test_a_busy_answer_is_retried_after_a_backoff_and_isolates_the_broker():
    core, routing, plan = setup(busy_backoff_ms=40)
    decision = core.answered(
        plan, message(), QUEUE, answer(ResponseCode.SYSTEM_BUSY, "busy"), 5, NOW
    )
    assert (decision.step, decision.delay_ms) == (Step.RETRY, 40)  # type: ignore[union-attr]
    assert routing.table.counters == {"reported.failed": 1}
    assert not routing.table.is_available("broker-a", NOW)
    assert core.counters["answers_busy"] == 1


def test_a_refused_message_ends_the_send_and_a_malformed_store_is_not_retried():
    core, _routing, plan = setup()
    with pytest.raises(BrokerRefusedError, match="illegal"):
        core.answered(
            plan, message(), QUEUE, answer(ResponseCode.MESSAGE_ILLEGAL, "illegal"), 1, NOW
        )
    core, routing, plan = setup()
    with pytest.raises(SendError, match="malformed"):
        core.answered(plan, message(), QUEUE, answer(ResponseCode.SUCCESS), 1, NOW)
    assert core.counters["malformed_answers"] == 1 and len(routing.table) == 0


def test_an_attempt_still_unanswered_at_an_isolating_latency_isolates_its_broker_at_once():
    core, routing, _plan = setup()
    waited = core.watch_after_ms
    assert waited is not None and waited == routing.table.first_isolating_latency() == 550
    core.unanswered("broker-a", waited)
    assert not routing.table.is_available("broker-a", NOW)
    assert routing.table.counters == {"reported.waiting": 1}


def test_a_go_away_on_a_send_connection_reaches_the_broker_sent_to_there():
    core, routing, _plan = setup()
    core.addr_names["10.0.0.1:10911"] = "broker-a"
    core.go_away("10.0.0.1:10911", 3_000)
    core.go_away("10.0.0.9:10911", 3_000)  # no send went there: counted only
    assert routing.counters["brokers_going_away"] == 1 and len(routing.table) == 1
    assert routing.table.is_going_away("broker-a", NOW + 2_999)
    assert not routing.table.is_going_away("broker-a", NOW + 3_000)
    assert core.counters["go_away_received"] == 2
    core.tidy(set())
    core.go_away("10.0.0.1:10911", 3_000)
    assert routing.counters["brokers_going_away"] == 1


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
