"""The producer behaviour both producers must show, written once and run against each: the
Twisted ``Producer`` on the reactor and the asyncio one on plain asyncio and on uvloop
(``support.producer_drivers``), each against the real name server with route push and broker
stand-ins on loopback. Every timer runs on fake clocks the cases advance.
"""

from __future__ import annotations

from collections import Counter

import pytest
import pytest_twisted
from support.memory_world import until
from support.producer_drivers import ProducerDriver

from client_push.errors import TopicNotExistError
from client_push.producer.auto_create import NoDefaultTopicError
from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig, SendOutcome
from client_push.producer.routing_core import NoMasterError
from client_push.producer.send_answer import SendStatus
from client_push.producer.send_core import SendError
from protocol.codes import Perm, ResponseCode

TICK_S = 0.1
NO_DETECTOR = FaultStrategyConfig(detector_enabled=False)


async def two_brokers(rig: ProducerDriver, config: ProducerConfig) -> None:
    await rig.broker("broker-a", {"T": 4})
    await rig.broker("broker-b", {"T": 4})
    await rig.start(config)


# -- sending ---------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_message_reaches_the_broker_intact_and_oneway_sends_are_written_once(rig):
    broker = await rig.broker("broker-a", {"T": 4})
    await rig.start(ProducerConfig())
    result = await rig.send("T", b"hello", keys=["k1", "k2"], tags="TagA", properties={"p": "v"})
    assert result.status is SendStatus.SEND_OK and result.attempts == 1
    got = broker.messages[-1]
    assert (got.body, got.keys, got.tags, got.properties["p"]) == (
        b"hello",
        ("k1", "k2"),
        "TagA",
        "v",
    )
    assert got.uniq_key == result.msg_id and len(result.msg_id) == 32
    assert result.queue.broker_name == "broker-a" and result.queue_offset == 0
    assert got.queue_id == result.queue.queue_id and got.producer_group == "pg"
    big = bytes(range(256)) * 64
    await rig.send("T", big)
    assert broker.messages[-1].body == big and broker.messages[-1].sys_flag & 0x1

    await rig.finish(rig.start_oneway("T", b"fire", tags="TagO"))
    await until(lambda: broker.received == 3)
    assert broker.messages[-1].body == b"fire" and rig.producer.counters["oneway_sent"] == 1
    assert rig.producer.counters["retries"] == 0 and broker.counters["requests.310"] == 3


# -- fault isolation -------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_broker_that_stops_answering_is_isolated_and_every_send_succeeds_elsewhere(rig):
    await two_brokers(rig, ProducerConfig(fault=FaultStrategyConfig.preset("5x")))
    await rig.send_many(4)
    rig.brokers[0].black_hole()
    results = await rig.send_many(30)
    assert all(r.status is SendStatus.SEND_OK for r in results)
    firsts = rig.producer.first_attempts_by_broker
    # one attempt meets the silence, then the fault table keeps first attempts off it
    assert rig.brokers[0].counters["swallowed"] <= 2
    assert firsts["broker-b"] >= 30 and rig.producer.counters["failed"] == 0
    assert rig.producer.counters["attempts_unreachable"] >= 1


# -- GoAway ----------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_broker_going_away_gets_no_new_sends_and_finishes_those_in_flight(rig):
    await two_brokers(rig, ProducerConfig(fault=NO_DETECTOR))
    await rig.send_many(8)  # both connections open
    a = rig.brokers[0]
    a.slow(300)
    in_flight = [rig.start_send("T", b"x%d" % i) for i in range(8)]
    await until(lambda: a.counters["requests.310"] >= 4 + 4)
    a.shutdown(grace_ms=5_000)
    await until(lambda: rig.producer.counters["go_away_received"] == 1)
    results = [await rig.finish(d) for d in in_flight]
    assert all(r.status is SendStatus.SEND_OK and r.attempts == 1 for r in results)
    assert Counter(r.queue.broker_name for r in results) == {"broker-a": 4, "broker-b": 4}
    after = await rig.send_many(20)
    assert Counter(r.queue.broker_name for r in after) == {"broker-b": 20}


@pytest_twisted.ensureDeferred
async def test_a_go_away_answer_retries_elsewhere_and_avoids_the_broker(rig):
    await two_brokers(rig, ProducerConfig(fault=NO_DETECTOR, go_away_answer_avoid_ms=10_000))
    a = rig.brokers[0]
    a.answer_go_away = True
    a.stopping = True
    results = await rig.send_many(20)
    assert {r.queue.broker_name for r in results} == {"broker-b"}
    assert a.received == 0 and rig.producer.counters["failed"] == 0
    assert rig.producer.counters["answers_go_away"] == 1


# -- failover --------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_send_to_a_group_without_master_waits_and_goes_to_the_new_master_at_once(rig):
    master = await rig.broker("broker-a", {"T": 4})
    slave = await rig.broker("broker-a", {"T": 4}, broker_id=1)
    await rig.start(ProducerConfig(fault=NO_DETECTOR, send_timeout_ms=10_000))
    assert (await rig.send("T", b"m")).queue.broker_name == "broker-a"
    assert master.received == 1
    await rig.kill_master(master)

    pending = rig.start_send("T", b"during the election")
    await rig.run_for(3.0)  # longer than an attempt's share, shorter than the send's timeout
    assert not pending.called  # waiting, not failing with "no writable queue"
    assert rig.producer.routing.stats()["awaiting_master"] >= 1

    promoted_at = rig.now()
    await rig.settled(slave.promote())
    result = await rig.finish(pending)
    assert rig.now() - promoted_at <= 2 * TICK_S + 0.05  # the announcement's tick
    assert result.queue.broker_name == "broker-a" and result.attempts == 1
    assert slave.messages[-1].body == b"during the election"
    assert rig.producer.counters["failed"] == 0


@pytest_twisted.ensureDeferred
async def test_without_a_new_master_the_send_fails_at_its_timeout_naming_the_group(rig):
    master = await rig.broker("broker-a", {"T": 4})
    await rig.broker("broker-a", {"T": 4}, broker_id=1)
    await rig.start(ProducerConfig(fault=NO_DETECTOR))
    await rig.send("T", b"m")
    await rig.kill_master(master)
    started = rig.now()
    with pytest.raises(NoMasterError) as caught:
        await rig.send("T", b"m", timeout_ms=2_000)
    assert rig.now() - started == pytest.approx(2.0)  # at the send's timeout, not before
    assert caught.value.groups == ("broker-a",)
    assert rig.producer.counters["failed_no_route"] == 1


@pytest_twisted.ensureDeferred
async def test_groups_with_a_master_keep_taking_sends_while_another_has_none(rig):
    master = await rig.broker("broker-a", {"T": 4})
    slave = await rig.broker("broker-a", {"T": 4}, broker_id=1)
    await rig.broker("broker-b", {"T": 4})
    await rig.start(ProducerConfig(fault=NO_DETECTOR))
    await rig.send("T", b"m")
    # A send met the master as it died: the fault strategy isolates the group's name.
    await rig.call(rig.producer.routing.report_send, "broker-a", 5, SendOutcome.UNREACHABLE)
    await rig.kill_master(master)
    results = [await rig.send("T", b"m") for _ in range(10)]
    assert {r.queue.broker_name for r in results} == {"broker-b"}
    assert all(r.attempts == 1 for r in results)
    assert "awaiting_master" not in await rig.call(rig.producer.routing.stats)

    await rig.settled(slave.promote())
    await rig.run_for(2 * TICK_S)
    await rig.until(lambda: rig.producer.routing.broker_addr("T", "broker-a") is not None)
    after = [(await rig.send("T", b"m")).queue.broker_name for _ in range(16)]
    # The new master (another address) inherits nothing of the dead one's isolation.
    assert after.count("broker-a") == 8 and slave.received == 8
    assert (await rig.call(rig.producer.routing.stats))["new_masters"] == 1


@pytest_twisted.ensureDeferred
async def test_a_send_in_flight_to_the_dead_master_is_retried_on_the_new_master(rig):
    master = await rig.broker("broker-a", {"T": 4})
    slave = await rig.broker("broker-a", {"T": 4}, broker_id=1)
    await rig.start(ProducerConfig(fault=NO_DETECTOR, send_timeout_ms=5_000))
    await rig.send("T", b"m")
    master.black_hole()  # the next send stays in flight until the master dies
    pending = rig.start_send("T", b"in flight")
    await until(lambda: master.counters["swallowed"] == 1)
    await rig.kill_master(master)
    await rig.settle()
    assert not pending.called
    await rig.settled(slave.promote())
    result = await rig.finish(pending)
    assert result.attempts == 2 and slave.messages[-1].body == b"in flight"
    assert rig.producer.counters["attempts_unreachable"] == 1
    assert rig.producer.counters["failed"] == 0


# -- auto-creation ---------------------------------------------------------------------------------


ALL = int(Perm.READ | Perm.WRITE | Perm.INHERIT)


@pytest_twisted.ensureDeferred
async def test_with_auto_create_a_new_topic_is_created_through_tbw102(rig):
    broker = await rig.broker("broker-a", {"TBW102": 8, "T": 4}, auto_create_topic_enable=True)
    broker.perms["TBW102"] = ALL
    await rig.start(
        ProducerConfig(fault=NO_DETECTOR, auto_create_topic=True, default_topic_queue_nums=3)
    )
    result = await rig.send("NEW", b"first")
    assert result.queue.topic == "NEW" and 0 <= result.queue.queue_id < 3
    assert broker.topics["NEW"] == 3
    assert (broker.last_send_fields["c"], broker.last_send_fields["d"]) == ("TBW102", "3")
    assert rig.producer.routing.via_default_topic("NEW")
    await rig.run_for(1.0)  # the broker registered it; the name server announces its route
    await rig.send("NEW", b"second")
    assert not rig.producer.routing.via_default_topic("NEW")


@pytest_twisted.ensureDeferred
async def test_auto_create_refused_by_the_broker_says_what_it_must_allow(rig):
    broker = await rig.broker("broker-a", {"TBW102": 8, "T": 4}, auto_create_topic_enable=False)
    broker.perms["TBW102"] = ALL
    await rig.start(ProducerConfig(fault=NO_DETECTOR, auto_create_topic=True))
    with pytest.raises(SendError) as caught:
        await rig.send("NEW", b"x")
    assert "broker broker-a did not create topic NEW from TBW102" in str(caught.value)
    assert "autoCreateTopicEnable=true" in str(caught.value)
    assert caught.value.code == ResponseCode.TOPIC_NOT_EXIST


@pytest_twisted.ensureDeferred
async def test_without_auto_create_a_send_to_an_unknown_topic_fails_with_topic_not_exist(rig):
    broker = await rig.broker("broker-a", {"TBW102": 8, "T": 4}, auto_create_topic_enable=True)
    await rig.start(ProducerConfig(fault=NO_DETECTOR))
    with pytest.raises(TopicNotExistError):
        await rig.send("NEW", b"x")
    assert "NEW" not in broker.topics


@pytest_twisted.ensureDeferred
async def test_a_default_topic_without_inherit_is_refused_by_the_broker(rig):
    broker = await rig.broker("broker-a", {"TBW102": 8, "T": 4}, auto_create_topic_enable=True)
    broker.perms["TBW102"] = int(Perm.READ | Perm.WRITE)
    await rig.start(ProducerConfig(fault=NO_DETECTOR, auto_create_topic=True))
    with pytest.raises(SendError, match="did not create topic NEW"):
        await rig.send("NEW", b"x")
    assert "NEW" not in broker.topics


@pytest_twisted.ensureDeferred
async def test_without_a_default_topic_route_the_error_names_it(rig):
    await rig.start(
        ProducerConfig(fault=NO_DETECTOR, auto_create_topic=True, create_topic_key="MyDefault")
    )
    broker = await rig.broker("broker-a", {"TBW102": 8, "T": 4}, auto_create_topic_enable=True)
    broker.perms["TBW102"] = ALL
    with pytest.raises(NoDefaultTopicError) as caught:
        await rig.send("NEW", b"x")
    assert isinstance(caught.value, TopicNotExistError)
    assert "default topic MyDefault has no route" in str(caught.value)
