"""The broker stand-in itself: registration on a kept connection, refusing connections, and the
topic admin requests a broker answers (the benchmarks and the sandbox rely on them). Stand-ins,
name servers and the test's connections share the deterministic world
(``support.memory_world``): one virtual clock, TCP in memory."""

from __future__ import annotations

import os
from typing import Any

import pytest
import pytest_twisted
from support.memory_world import MemoryWorld, until

from namesrv_sandbox.standin import BrokerStandIn, message_cost
from protocol.codes import RequestCode, ResponseCode
from protocol.message import encode_message, send_header

MIB = 1024 * 1024


def broker_names(server: Any) -> set[str]:
    return set(server.registry.cluster_info().broker_addr_table)


def at(broker: BrokerStandIn) -> str:
    return f"127.0.0.1:{broker.port}"


@pytest_twisted.ensureDeferred
async def test_it_registers_and_re_registers_every_interval_on_one_connection(
    memory_world: MemoryWorld,
):
    w = memory_world
    server, addr = w.server()
    broker = BrokerStandIn("broker-x", {"T": 2}, [addr], reactor=w.reactor)
    try:
        w.wait(broker.start(), within=0)
        assert "broker-x" in broker_names(server)
        opened = server.counters["connections_opened"]
        w.advance(29.999)
        assert broker.counters["registered"] == 1
        w.advance(0.001)  # the interval to the millisecond
        assert broker.counters["registered"] == 2
        assert server.counters["connections_opened"] == opened  # the connection was kept
    finally:
        w.wait(broker.shutdown(grace_ms=0))
    assert broker.counters["unregistered"] == 1 and "broker-x" not in broker_names(server)


@pytest_twisted.ensureDeferred
async def test_refuse_closes_the_port_and_accept_opens_it_again(memory_world: MemoryWorld):
    w = memory_world
    broker = BrokerStandIn("broker-x", {"T": 2}, reactor=w.reactor)
    w.wait(broker.start(), within=0)
    try:
        conn = w.connect(at(broker))
        answer = await conn.call(RequestCode.HEART_BEAT, {})
        assert answer.code == ResponseCode.SUCCESS
        w.wait(broker.refuse(), within=0)
        w.wait(conn.lost, within=0)
        with pytest.raises(ConnectionRefusedError):
            w.connect(at(broker))
        broker.accept()
        again = w.connect(at(broker))
        assert (await again.call(RequestCode.HEART_BEAT, {})).code == ResponseCode.SUCCESS
        again.transport.loseConnection()  # type: ignore[union-attr]
    finally:
        w.wait(broker.kill())


@pytest_twisted.ensureDeferred
async def test_topic_admin_requests_change_its_topics_and_register_them(
    memory_world: MemoryWorld,
):
    w = memory_world
    server, addr = w.server()
    broker = BrokerStandIn("broker-x", {"T": 2}, [addr], reactor=w.reactor)
    seen: list[tuple[str, str]] = []
    broker.on_topic_change = lambda verb, topic: seen.append((verb, topic))
    w.wait(broker.start(), within=0)
    try:
        conn = w.connect(at(broker))
        create = {
            "topic": "New", "defaultTopic": "TBW102", "readQueueNums": "3",
            "writeQueueNums": "3", "perm": "4", "topicFilterType": "SINGLE_TAG", "order": "false",
        }  # fmt: skip
        answer = await conn.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        assert answer.code == ResponseCode.SUCCESS
        await until(lambda: "New" in server.registry.all_topics())
        route = server.registry.get_route("New")
        assert route is not None
        assert [(q.write_queue_nums, q.perm) for q in route.queue_datas] == [(3, 4)]
        answer = await conn.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "T"})
        assert answer.code == ResponseCode.SUCCESS
        await until(lambda: broker.counters["registered"] == 3)
        assert broker.topics == {"New": 3}
        bad = await conn.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "X"})
        assert bad.code == ResponseCode.INVALID_PARAMETER
        # mqadmin's updateTopic -w 2 keeps its default of 8 read queues: the route says so.
        answer = await conn.call(
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {**create, "readQueueNums": "8", "writeQueueNums": "2", "perm": "6"},
        )
        assert answer.code == ResponseCode.SUCCESS
        await until(lambda: broker.counters["registered"] == 4)
        route = server.registry.get_route("New")
        assert route is not None
        assert [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(8, 2)]
        assert seen == [("created", "New"), ("deleted", "T"), ("updated", "New")]
        conn.transport.loseConnection()  # type: ignore[union-attr]
    finally:
        w.wait(broker.kill())


@pytest_twisted.ensureDeferred
async def test_a_topic_name_upstream_refuses_is_refused_at_creation_and_never_registered(
    memory_world: MemoryWorld,
):
    w = memory_world
    server, addr = w.server()
    broker = BrokerStandIn("broker-x", {"T": 2}, [addr], reactor=w.reactor)
    w.wait(broker.start(), within=0)
    try:
        conn = w.connect(at(broker))
        create = {
            "topic": "bad topic!", "defaultTopic": "TBW102", "readQueueNums": "4",
            "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG", "order": "false",
        }  # fmt: skip
        answer = await conn.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "characters outside" in (answer.remark or "")
        assert broker.topics == {"T": 2} and broker.counters["topics_refused"] == 1
        assert broker.registers == {addr: "ok"}
        assert server.registry.all_topics() == ["T"]
        conn.transport.loseConnection()  # type: ignore[union-attr]
    finally:
        w.wait(broker.kill())


def test_the_topic_option_refuses_a_bad_name():
    from namesrv_sandbox.standin import parse_topics

    assert parse_topics(["Good_1%|-:3"]) == {"Good_1%|-": 3}
    for bad in ("bad topic!", "x" * 128):
        with pytest.raises(ValueError, match="topic name"):
            parse_topics([bad])


@pytest_twisted.ensureDeferred
async def test_stats_show_the_name_servers_view_and_a_refused_register_as_refused(
    memory_world: MemoryWorld,
):
    from namesrv_sandbox.fleet import Fleet

    w = memory_world
    _server, addr = w.server(registry={"max_queue_nums": 4})
    said: list[str] = []
    fleet = Fleet(w.reactor, [addr], "DefaultCluster", {"Small": 4}, say=said.append)
    try:
        w.run(fleet.command("start ok-broker"), within=0)
        fleet.topics = {"Big": 8}  # more queues than the name server takes: refused whole
        w.run(fleet.command("start big-broker"), within=0)
        stats = w.run(fleet.command("stats"), within=0)
        by_name = {b["broker"]: b for b in stats["brokers"]}
        good, big = by_name["ok-broker"], by_name["big-broker"]
        assert good["last_register"] == {addr: "ok"}
        assert good["namesrv"][addr] == {
            "registered": True, "topics_routed": ["Small"], "topics_not_routed": []
        }  # fmt: skip
        assert big["last_register"][addr].startswith("refused: ")
        assert "max_queue_nums" in big["last_register"][addr]
        assert big["namesrv"][addr] == {
            "registered": False, "topics_routed": [], "topics_not_routed": ["Big"]
        }  # fmt: skip
        assert any("big-broker" in line and "NOT registered" in line for line in said)
        assert not any("big-broker" in line and " registered Big" in line for line in said)
    finally:
        w.wait(fleet.stop_all())


@pytest_twisted.ensureDeferred
async def test_the_messages_it_keeps_are_bounded_in_bytes_as_well_as_count(
    memory_world: MemoryWorld,
):
    w = memory_world
    broker = BrokerStandIn(
        "broker-m", {"T": 1}, [], reactor=w.reactor, keep_messages=1_000, keep_message_bytes=4 * MIB
    )
    w.wait(broker.start(), within=0)
    client = w.connect(at(broker))
    try:
        for i in range(40):  # 40 MiB of bodies, each too random to compress
            message = encode_message("T", os.urandom(MIB), uniq_key=f"u{i}", compress_over=MIB + 1)
            header = send_header(
                message,
                producer_group="g",
                queue_id=0,
                broker_name="broker-m",
                born_timestamp_ms=1,
            )
            resp = await client.call(RequestCode.SEND_MESSAGE_V2, header.to_wire(), message.body)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert broker.received == 40
        assert broker.messages_bytes <= 4 * MIB
        assert broker.messages_bytes == sum(message_cost(m) for m in broker.messages)
        assert len(broker.messages) == 3  # the newest that fit
        assert broker.messages[-1].uniq_key == "u39"
        big = encode_message("T", os.urandom(MIB), uniq_key="big", compress_over=MIB + 1)
        broker.keep_message_bytes = MIB  # a message larger than the whole bound: counted only
        header = send_header(
            big, producer_group="g", queue_id=0, broker_name="broker-m", born_timestamp_ms=1
        )
        await client.call(RequestCode.SEND_MESSAGE_V2, header.to_wire(), big.body)
        assert broker.counters["messages_not_kept"] == 1
        assert broker.messages[-1].uniq_key == "u39"
    finally:
        client.transport.loseConnection()  # type: ignore[union-attr]
        w.wait(broker.shutdown(grace_ms=0))


@pytest_twisted.ensureDeferred
async def test_a_frozen_stand_in_keeps_its_connection_and_is_expired_then_thawed_registers(
    memory_world: MemoryWorld,
):
    """``freeze`` is a hung broker: no registers, no answers, the connection kept open, so the
    name server drops it only at its broker expiry; ``normal`` registers again at once."""
    w = memory_world
    # The expiry under the idle timeout: only the expiry can drop a connection kept open.
    server, addr = w.server(registry={"broker_expiry_ms": 60_000})
    assert server.config.server.idle_timeout_ms > 60_000
    broker = BrokerStandIn("broker-x", {"T": 2}, [addr], reactor=w.reactor)
    try:
        w.wait(broker.start(), within=0)
        opened = server.counters["connections_opened"]
        broker.freeze()
        expiry_s = server.config.registry.broker_expiry_ms / 1000
        scan_s = server.config.registry.scan_interval_ms / 1000
        w.advance(expiry_s - 5)
        assert "broker-x" in broker_names(server)  # registers stopped, not yet overdue
        assert server.counters["connections_opened"] == opened
        # Dropped past the expiry, by the scan that follows it (registered at 0 s).
        w.run_until(lambda: "broker-x" not in broker_names(server), within=5 + scan_s)
        assert expiry_s < w.now() <= expiry_s + scan_s
        assert broker.counters["registered"] == 1
        registered = broker.counters["registered"]
        broker.normal()
        await until(lambda: broker.counters["registered"] == registered + 1)
        assert "broker-x" in broker_names(server)
    finally:
        w.wait(broker.shutdown(grace_ms=0))
