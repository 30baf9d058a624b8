"""The broker stand-in itself: registration on a kept connection, refusing connections, and the
topic admin requests a broker answers (the benchmarks and the sandbox rely on them)."""

from __future__ import annotations

import os
from typing import Any

import pytest_twisted
from support.loopback_wait import until
from support.wire_client import connect
from twisted.internet import reactor
from twisted.internet.error import ConnectionRefusedError

from namesrv_sandbox.standin import BrokerStandIn, message_cost
from protocol.codes import RequestCode, ResponseCode
from protocol.message import encode_message, send_header

MIB = 1024 * 1024


def broker_names(server: Any) -> set[str]:
    return set(server.registry.cluster_info().broker_addr_table)


@pytest_twisted.ensureDeferred
async def test_it_registers_and_re_registers_every_interval_on_one_connection(cluster):
    server, port = cluster.start_server()
    broker = BrokerStandIn(
        "broker-x", {"T": 2}, [f"127.0.0.1:{port}"], reactor=reactor, clock=cluster.clock
    )
    try:
        await broker.start()
        assert "broker-x" in broker_names(server)
        opened = server.counters["connections_opened"]
        cluster.clock.advance(30)
        await until(lambda: broker.counters["registered"] == 2)
        assert server.counters["connections_opened"] == opened  # the connection was kept
    finally:
        await broker.shutdown(grace_ms=0)
    assert broker.counters["unregistered"] == 1 and "broker-x" not in broker_names(server)


@pytest_twisted.ensureDeferred
async def test_refuse_closes_the_port_and_accept_opens_it_again():
    broker = BrokerStandIn("broker-x", {"T": 2}, reactor=reactor)
    await broker.start()
    try:
        conn = await connect(broker.port)
        answer = await conn.call(RequestCode.HEART_BEAT, {})
        assert answer.code == ResponseCode.SUCCESS
        await broker.refuse()
        await conn.lost
        try:
            await connect(broker.port)
            raise AssertionError("the port still accepts")
        except ConnectionRefusedError:
            pass
        broker.accept()
        again = await connect(broker.port)
        assert (await again.call(RequestCode.HEART_BEAT, {})).code == ResponseCode.SUCCESS
        again.transport.loseConnection()  # type: ignore[union-attr]
    finally:
        await broker.kill()


@pytest_twisted.ensureDeferred
async def test_topic_admin_requests_change_its_topics_and_register_them(cluster):
    server, port = cluster.start_server()
    broker = BrokerStandIn("broker-x", {"T": 2}, [f"127.0.0.1:{port}"], reactor=reactor)
    seen: list[tuple[str, str]] = []
    broker.on_topic_change = lambda verb, topic: seen.append((verb, topic))
    await broker.start()
    try:
        conn = await connect(broker.port)
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
        await broker.kill()


@pytest_twisted.ensureDeferred
async def test_a_topic_name_upstream_refuses_is_refused_at_creation_and_never_registered(cluster):
    server, port = cluster.start_server()
    broker = BrokerStandIn("broker-x", {"T": 2}, [f"127.0.0.1:{port}"], reactor=reactor)
    await broker.start()
    try:
        conn = await connect(broker.port)
        create = {
            "topic": "bad topic!", "defaultTopic": "TBW102", "readQueueNums": "4",
            "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG", "order": "false",
        }  # fmt: skip
        answer = await conn.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert "characters outside" in (answer.remark or "")
        assert broker.topics == {"T": 2} and broker.counters["topics_refused"] == 1
        assert broker.registers == {f"127.0.0.1:{port}": "ok"}
        assert server.registry.all_topics() == ["T"]
        conn.transport.loseConnection()  # type: ignore[union-attr]
    finally:
        await broker.kill()


def test_the_topic_option_refuses_a_bad_name():
    import pytest

    from namesrv_sandbox.standin import parse_topics

    assert parse_topics(["Good_1%|-:3"]) == {"Good_1%|-": 3}
    for bad in ("bad topic!", "x" * 128):
        with pytest.raises(ValueError, match="topic name"):
            parse_topics([bad])


@pytest_twisted.ensureDeferred
async def test_stats_show_the_name_servers_view_and_a_refused_register_as_refused(cluster):
    from namesrv_sandbox.fleet import Fleet

    _server, port = cluster.start_server(registry={"max_queue_nums": 4})
    addr = f"127.0.0.1:{port}"
    said: list[str] = []
    fleet = Fleet(reactor, [addr], "DefaultCluster", {"Small": 4}, say=said.append)
    try:
        await fleet.command("start ok-broker")
        fleet.topics = {"Big": 8}  # more queues than the name server takes: refused whole
        await fleet.command("start big-broker")
        stats = await fleet.command("stats")
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
        await fleet.stop_all()


@pytest_twisted.ensureDeferred
async def test_the_messages_it_keeps_are_bounded_in_bytes_as_well_as_count():
    broker = BrokerStandIn(
        "broker-m", {"T": 1}, [], reactor=reactor, keep_messages=1_000, keep_message_bytes=4 * MIB
    )
    await broker.start()
    client = await connect(broker.port)
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
        client.transport.loseConnection()
        await broker.shutdown(grace_ms=0)


@pytest_twisted.ensureDeferred
async def test_a_frozen_stand_in_keeps_its_connection_and_is_expired_then_thawed_registers(cluster):
    """``freeze`` is a hung broker: no registers, no answers, the connection kept open, so the
    name server drops it only at its broker expiry; ``normal`` registers again at once."""
    server, port = cluster.start_server()
    broker = BrokerStandIn(
        "broker-x", {"T": 2}, [f"127.0.0.1:{port}"], reactor=reactor, clock=cluster.clock
    )
    try:
        await broker.start()
        opened = server.counters["connections_opened"]
        broker.freeze()
        expiry_s = server.config.registry.broker_expiry_ms / 1000
        cluster.clock.advance(expiry_s - 5)
        assert "broker-x" in broker_names(server)  # registers stopped, not yet overdue
        assert server.counters["connections_opened"] == opened
        for _ in range(3):  # past the expiry, through the scans that follow it
            cluster.clock.advance(server.config.registry.scan_interval_ms / 1000 + 1)
        await until(lambda: "broker-x" not in broker_names(server))
        assert broker.counters["registered"] == 1
        registered = broker.counters["registered"]
        broker.normal()
        await until(lambda: broker.counters["registered"] == registered + 1)
        assert "broker-x" in broker_names(server)
    finally:
        await broker.shutdown(grace_ms=0)
