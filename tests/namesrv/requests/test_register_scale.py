"""Registers of large brokers cost what changed and never stall.

Sockets are real (loopback); timers and the register slices run on a fake clock, so a test
decides when the next slice of a large register runs (``clock.advance(0)`` is one reactor turn
of the server's slice scheduler). Every figure asserted is a counter, never a duration.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
from support.register_bodies import compressed_body, plain_body, register, topic_names
from support.server_fixtures import FakeSampler, Running, isolated_config
from support.wire_client import WireClient, connect
from twisted.internet import defer, reactor, task

from namesrv.push.change_detector import SETTLE_CHECK
from namesrv.push.tick import QUIET_SETTLE_DEFERRALS
from namesrv.routes.register_request import RegisterRequest
from namesrv.server import NameServer
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.push_codec import ChangeKind, decode_notification, encode_subscribe
from protocol.register.table import TopicQueueSpec
from protocol.route_model import DataVersion

TICK = 1.0


class TurnClock(task.Clock):
    """A fake clock that, like a reactor, runs only the calls due when a turn starts: a call
    scheduled with ``callLater(0)`` during a turn waits for the next one."""

    def advance(self, amount: float) -> None:
        self.rightNow += amount
        self._sortCalls()
        due = [call for call in self.calls if call.getTime() <= self.seconds()]
        for call in due:
            if call in self.calls:  # not cancelled by an earlier call of this turn
                self.calls.remove(call)
                call.called = 1
                call.func(*call.args, **call.kw)


class StepTimer:
    """A timer for the server's time budgets: each reading is ``step`` seconds after the last
    (0: time stands still, so no budget ever runs out and slices are decided by counts)."""

    def __init__(self, step: float = 0.0) -> None:
        self.step = step
        self.now = 0.0
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        self.now += self.step
        return self.now


def turn_server(
    overrides: dict[str, Any] | None = None, timer: StepTimer | None = None
) -> Iterator[Running]:
    raw: dict[str, Any] = {
        "server": {"listen": "127.0.0.1:0", "shutdown_grace_ms": 0, "wait_for_service_ms": 0}
    }
    for section, values in (overrides or {}).items():
        raw.setdefault(section, {}).update(values)
    clock = TurnClock()
    sampler = FakeSampler()
    server = NameServer(
        isolated_config(raw),
        reactor,
        clock=clock,
        sampler=sampler,
        epoch="e1",
        timer=timer or StepTimer(),
    )
    port = server.listen().getHost().port  # type: ignore[attr-defined]
    try:
        yield Running(server, port, clock, sampler)
    finally:
        pytest_twisted.blockon(server.stop(grace_ms=0))


@pytest.fixture
def ns():
    yield from turn_server()


@pytest.fixture
def make_server():
    started: list[Iterator[Running]] = []

    def make(overrides: dict[str, Any] | None = None, timer: StepTimer | None = None) -> Running:
        servers = turn_server(overrides, timer)
        started.append(servers)
        return next(servers)

    yield make
    for servers in started:
        next(servers, None)


@defer.inlineCallbacks
def wait_until(condition: Any) -> Any:
    """Give the reactor turns (no timers, no sleeps) until ``condition()`` holds."""
    for _ in range(100_000):
        if condition():
            return
        yield task.deferLater(reactor, 0, lambda: None)
    raise AssertionError("condition never held")


@defer.inlineCallbacks
def registered(ns: Any, broker: WireClient, request: RemotingCommand) -> Any:
    """Send a register and run the server's slices until it is answered; returns the answer
    and the number of slices it took."""
    answer = broker.request(request)
    slices = 0
    yield wait_until(lambda: answer.called or ns.server.pending_registers)
    while not answer.called:
        if ns.server.pending_registers:
            ns.clock.advance(0)
            slices += 1
        yield task.deferLater(reactor, 0, lambda: None)
    resp = yield answer
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return resp, slices


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
@pytest_twisted.inlineCallbacks
def test_heartbeat_of_an_unchanged_10000_topic_broker_does_no_per_topic_work(ns, compressed):
    names = topic_names(10_000)
    body = compressed_body(names, 1) if compressed else plain_body(names, 1)
    broker = yield connect(ns.port)
    _, slices = yield registered(ns, broker, register(body, compressed=compressed))
    assert slices >= 2  # 10,000 topics > one slice
    ns.clock.advance(TICK)
    while ns.server.detector.dirty_count:
        ns.clock.advance(0)
    server = ns.server
    registry, processor, detector = server.registry, server.processor, server.detector
    writes, reads = registry.stats.topic_writes, processor.register_bodies_read
    bumped, settled = detector.stats.versions_bumped, detector.stats.topics_settled
    assert writes == 10_000 and reads == 1

    for _ in range(3):  # the 30 s heartbeat: the same body, the same data version
        _, slices = yield registered(ns, broker, register(body, compressed=compressed))
        # At most the turns of hashing the body in slices of bytes; no topic is looked at.
        assert slices <= len(body) // ns.server.config.registry.register_read_slice_bytes + 2
    ns.clock.advance(TICK)

    assert registry.stats.topic_writes == writes, "a heartbeat visited topics"
    assert processor.register_bodies_read == reads, "a heartbeat body was parsed again"
    assert registry.stats.register_fast_paths == 3
    assert (detector.stats.versions_bumped, detector.stats.topics_settled) == (bumped, settled)
    assert registry.topic_count == 10_000


@pytest_twisted.inlineCallbacks
def test_a_same_version_body_with_other_bytes_is_read_and_only_adds_what_is_missing(ns):
    names = topic_names(100)
    broker = yield connect(ns.port)
    yield registered(ns, broker, register(plain_body(names, 1)))
    writes = ns.server.registry.stats.topic_writes
    # Same data version, one topic more (upstream's per-topic check adds it).
    yield registered(ns, broker, register(plain_body([*names, "LATE"], 1)))
    assert ns.server.processor.register_bodies_read == 2
    assert ns.server.registry.route_exists("LATE")
    assert ns.server.registry.stats.topic_writes == writes + 101


@pytest_twisted.inlineCallbacks
def test_a_100000_topic_register_is_applied_over_turns_and_a_lookup_meanwhile_is_answered(ns):
    broker = yield connect(ns.port)
    other = yield connect(ns.port)
    yield registered(ns, other, register(plain_body(["OTHER"], 1), name="broker-b"))
    client = yield connect(ns.port)
    names = topic_names(100_000)
    registry = ns.server.registry

    answer = broker.request(register(plain_body(names, 1)))
    yield wait_until(lambda: ns.server.pending_registers)
    # Nothing of the table is applied yet; the server is free to serve others.
    lookup = yield client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "OTHER"})
    assert lookup.code == ResponseCode.SUCCESS
    assert ns.server.pending_registers == 1 and not answer.called

    turns = 0
    while registry.topic_count == 1:  # the body is read in slices first
        ns.clock.advance(0)
        turns += 1
        lookup = yield client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "OTHER"})
        assert lookup.code == ResponseCode.SUCCESS
    assert turns > 2
    half_done = registry.topic_count
    assert 1 < half_done < 100_001
    applied = bodies.decode_route(
        (yield client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": names[0]})).body
    )
    assert [q.read_queue_nums for q in applied.queue_datas] == [8]  # whole, new route
    pending = yield client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": names[-1]})
    assert pending.code == ResponseCode.TOPIC_NOT_EXIST  # not yet applied: its old (no) route
    assert not answer.called

    while not answer.called:
        if ns.server.pending_registers:
            ns.clock.advance(0)
            turns += 1
        yield task.deferLater(reactor, 0, lambda: None)
    resp = yield answer
    assert resp.code == ResponseCode.SUCCESS
    assert turns >= 2 * 100_000 // registry.slice_topics  # read, then applied, in slices
    assert registry.topic_count == 100_001
    last = yield client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": names[-1]})
    assert last.code == ResponseCode.SUCCESS


@pytest_twisted.inlineCallbacks
def test_a_turn_reads_or_applies_one_slice_never_both_while_two_brokers_register(ns):
    """Reading one broker's body and applying another's table share the turns: each turn runs
    one slice, so a request arriving meanwhile waits for one slice, not for one of each."""
    server = ns.server
    steps = []
    step = server.processor.step

    def counted_step(pending: Any) -> Any:
        steps.append(pending.last)
        return step(pending)

    server.processor.step = counted_step  # type: ignore[method-assign]
    first = yield connect(ns.port)
    second = yield connect(ns.port)
    a = first.request(register(plain_body(topic_names(30_000), 1)))
    yield wait_until(lambda: server.pending_registers)
    while not server.registry.pending_jobs:  # a's body read; its table waits to be applied
        ns.clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    b = second.request(register(plain_body(topic_names(30_000), 1), name="broker-b"))
    # a waiting for its table, that table, and b received whole
    yield wait_until(lambda: server.pending_registers == 3)
    kinds = []
    while not (a.called and b.called):
        if server.pending_registers:
            slices, reads = server.counters["register_slices"], len(steps)
            ns.clock.advance(0)
            applied = server.counters["register_slices"] - slices
            read = sum(1 for last in steps[reads:] if last != "wait")
            assert applied + read <= 1, (applied, read)
            kinds.append("apply" if applied else "read" if read else "")
        yield task.deferLater(reactor, 0, lambda: None)
    assert (yield a).code == (yield b).code == ResponseCode.SUCCESS
    # Both went on side by side: b was read between slices of a's table.
    first_read = kinds.index("read")
    assert "apply" in kinds[:first_read] and "apply" in kinds[first_read:]


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "compressed"])
@pytest_twisted.inlineCallbacks
def test_a_compressed_body_is_read_the_read_slice_of_topics_per_turn(make_server, compressed):
    """A compressed body's records are read ``register_read_slice_topics`` per turn, apart
    from the apply slice (reading a topic costs several times writing it); a plain body in the
    usual form is read by bytes (``register_read_slice_bytes``), whatever that setting."""
    names = topic_names(20_000)
    reads = {}
    for per_turn in (1_000, 4_000):
        registry = {"register_read_slice_topics": per_turn, "register_slice_topics": 100_000}
        running = make_server({"registry": registry})
        steps: list[str] = []
        step = running.server.processor.step

        def counted_step(pending: Any, step: Any = step, steps: list[str] = steps) -> Any:
            response = step(pending)
            steps.append(pending.last)
            return response

        running.server.processor.step = counted_step  # type: ignore[method-assign]
        broker = yield connect(running.port)
        body = compressed_body(names, 1) if compressed else plain_body(names, 1)
        yield registered(running, broker, register(body, compressed=compressed))
        assert running.server.registry.topic_count == 20_000
        reads[per_turn] = sum(1 for last in steps if last == "read")
    if compressed:
        assert reads[1_000] >= 15 and reads[4_000] <= 8, reads
    else:
        assert reads[1_000] == reads[4_000], reads


@pytest_twisted.inlineCallbacks
def test_a_register_changing_one_topic_of_10000_notifies_exactly_that_topic(ns):
    names = topic_names(10_000)
    broker = yield connect(ns.port)
    yield registered(ns, broker, register(plain_body(names, 1)))
    ns.clock.advance(TICK)
    client = yield connect(ns.port)
    ack = yield client.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(names, "test")
    )
    assert ack.code == ResponseCode.SUCCESS, ack.remark
    bumped = ns.server.detector.stats.versions_bumped

    changed = names[4_321]
    yield registered(ns, broker, register(plain_body(names, 2, perms={changed: 4})))
    ns.clock.advance(TICK)
    while ns.server.detector.dirty_count:
        ns.clock.advance(0)
    yield client.wait_pushed(1)
    resp = yield client.call(RequestCode.GET_KV_CONFIG, {"namespace": "n", "key": "k"})
    assert resp.code == ResponseCode.QUERY_NOT_FOUND  # everything pushed before is received

    notes = [decode_notification(c.body) for c in client.pushed]
    assert [(c.topic, c.kind) for n in notes for c in n.changes] == [(changed, ChangeKind.UPDATED)]
    assert ns.server.detector.stats.versions_bumped == bumped + 1


@pytest_twisted.inlineCallbacks
def test_a_large_change_set_is_settled_over_turns_and_fanned_out_in_slices(make_server):
    running = make_server({"push": {"settle_slice_topics": 1_000, "notify_slice_connections": 3}})
    server = running.server
    names = topic_names(5_000)
    broker = yield connect(running.port)
    yield registered(running, broker, register(plain_body(names, 1)))
    running.clock.advance(TICK)
    while server.detector.dirty_count:
        running.clock.advance(0)
    clients = yield defer.gatherResults([connect(running.port) for _ in range(7)])
    for client in clients:  # the topic settled last
        yield client.call(
            RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(names[-1:], "t")
        )
    read_only = dict.fromkeys(names, 4)
    yield registered(running, broker, register(plain_body(names, 2, perms=read_only)))
    assert server.detector.dirty_count == 5_000
    running.clock.advance(TICK)
    assert server.detector.dirty_count == 4_000  # one slice settled this turn
    turns = 0
    while server.detector.dirty_count or server.detector.pending_connections:
        running.clock.advance(0)
        turns += 1
    assert turns >= 4 + 2  # 4 more settle slices, then 7 frames three per turn
    yield defer.gatherResults([c.wait_pushed(1) for c in clients])
    assert server.stats()["tick_continuations"] >= turns


@pytest_twisted.inlineCallbacks
def test_settling_stops_when_the_turns_time_budget_is_spent(make_server):
    # Each reading of the timer is 1 ms after the last: 5 ms of settling is a few checks.
    timer = StepTimer(0.001)
    running = make_server({"push": {"settle_slice_topics": 100_000, "settle_slice_ms": 5}}, timer)
    server = running.server
    names = topic_names(20_000)
    broker = yield connect(running.port)
    yield registered(running, broker, register(plain_body(names, 1)))
    running.clock.advance(TICK)
    while server.detector.dirty_count:
        running.clock.advance(0)
    watcher = yield connect(running.port)
    yield watcher.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(names[-1:], "t")
    )
    read_only = dict.fromkeys(names, 4)
    yield registered(running, broker, register(plain_body(names, 2, perms=read_only)))
    assert server.detector.dirty_count == 20_000
    running.clock.advance(TICK)
    settled = 20_000 - server.detector.dirty_count
    # The budget, not the count of 100,000, ended the slice: a few batches, growing from
    # SETTLE_CHECK while nobody subscribes to their topics.
    assert SETTLE_CHECK <= settled < 20_000
    turns = 1
    while server.detector.dirty_count:
        running.clock.advance(0)
        turns += 1
    assert turns >= 20_000 // settled
    yield watcher.wait_pushed(1)
    note = decode_notification(watcher.pushed[0].body)
    assert [(c.topic, c.kind) for c in note.changes] == [(names[-1], ChangeKind.UPDATED)]
    assert server.detector.stats.versions_bumped == 40_000


@pytest_twisted.inlineCallbacks
def test_registers_of_one_address_apply_in_arrival_order_even_when_the_later_is_small(ns):
    broker = yield connect(ns.port)
    big = broker.request(register(plain_body(topic_names(20_000), 1)))
    small = broker.request(register(plain_body(["ONLY"], 2)))
    yield wait_until(lambda: ns.server.pending_registers == 2)
    while not (big.called and small.called):
        if ns.server.pending_registers:
            ns.clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    registry = ns.server.registry
    # The later register (version 2) is what the registry holds last: its data version.
    check = yield broker.call(
        RequestCode.QUERY_DATA_VERSION,
        {
            "brokerAddr": "10.0.0.1:10911",
            "brokerId": "0",
            "brokerName": "broker-a",
            "clusterName": "DefaultCluster",
        },
        body=json.dumps({"counter": 2, "stateVersion": 0, "timestamp": 2}).encode(),
    )
    assert check.ext_fields["changed"] == "false"
    assert registry.route_exists("ONLY")


@pytest_twisted.inlineCallbacks
def test_a_large_body_with_a_wrong_crc_is_refused_after_its_slices_and_changes_nothing(ns):
    broker = yield connect(ns.port)
    request = register(plain_body(topic_names(20_000), 1))
    request.ext_fields["bodyCrc32"] = str(int(request.ext_fields["bodyCrc32"]) ^ 1)
    answer = broker.request(request)
    yield wait_until(lambda: ns.server.pending_registers)
    while not answer.called:
        ns.clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    resp = yield answer
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert ns.server.registry.topic_count == 0 and ns.server.registry.broker_count == 0


@pytest_twisted.inlineCallbacks
def test_a_signed_large_register_binds_its_acl_key_once_it_is_applied(make_server):
    from support.acl_signing import ACL, independent_sign

    running = make_server({"acl": ACL})
    broker = yield connect(running.port)
    request = independent_sign(
        register(plain_body(topic_names(10_000), 1)), "broker-key", "broker-secret"
    )
    answer = broker.request(request)
    yield wait_until(lambda: running.server.pending_registers)
    assert running.server.acl.owner_of("broker-a") is None  # nothing applied yet
    while not answer.called:
        if running.server.pending_registers:
            running.clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    resp = yield answer
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert running.server.acl.owner_of("broker-a") == "broker-key"


@pytest_twisted.inlineCallbacks
def test_a_large_broker_leaving_is_dropped_over_turns_and_lookups_see_old_or_new(ns):
    names = topic_names(10_000)
    other = yield connect(ns.port)
    yield registered(ns, other, register(plain_body(names[:1], 1), name="broker-b"))
    broker = yield connect(ns.port)
    yield registered(ns, broker, register(plain_body(names, 1)))
    client = yield connect(ns.port)
    registry = ns.server.registry
    assert registry.topic_count == 10_000

    broker.transport.loseConnection()  # the channel closes: broker-a leaves
    yield wait_until(lambda: ns.server.pending_registers)
    # broker-a is gone from every route at once; its topics leave a slice per turn.
    shared = yield client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": names[0]})
    assert shared.code == ResponseCode.SUCCESS
    route = bodies.decode_route(shared.body)
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert [q.broker_name for q in route.queue_datas] == ["broker-b"]
    turns = 0
    while ns.server.pending_registers:
        ns.clock.advance(0)
        turns += 1
        lookup = yield client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": names[-1]})
        assert lookup.code == ResponseCode.TOPIC_NOT_EXIST
    assert turns >= 10_000 // registry.slice_topics
    assert registry.topic_count == 1 and registry.all_topics() == [names[0]]


def test_a_broker_re_registering_while_its_old_table_is_dropped_keeps_its_new_topics():
    from namesrv.routes.registry import RouteRegistry

    clock = task.Clock()
    registry = RouteRegistry(clock, slice_topics=10)
    table = {n: TopicQueueSpec(8, 8, 6, 0) for n in topic_names(50)}

    def register_a(topics: dict[str, TopicQueueSpec], version: int) -> None:
        registry.register_broker(
            RegisterRequest(
                cluster_name="C",
                broker_addr="a:1",
                broker_name="broker-a",
                broker_id=0,
                ha_server_addr="a:2",
                topic_configs=topics,
                data_version=DataVersion(0, version, version),
                filter_server_list=[],
                heartbeat_timeout_ms=None,
                enable_acting_master=False,
                channel=1,
                topic_queue_mapping_info={},
            )
        )

    register_a(table, 1)
    while registry.run_jobs():
        pass
    registry.on_channel_close(1)
    registry.run_jobs(budget=10)  # part of the old table is dropped
    kept = topic_names(25)[20:]  # not dropped yet when the broker is back with them
    register_a({n: table[n] for n in kept}, 2)
    while registry.run_jobs():
        pass
    assert registry.all_topics() == kept
    for topic in kept:
        route = registry.get_route(topic)
        assert route is not None and [q.broker_name for q in route.queue_datas] == ["broker-a"]


@pytest_twisted.inlineCallbacks
def test_a_large_register_with_one_bad_queue_count_is_refused_whole_after_its_slices(ns):
    names = topic_names(10_000)
    body = plain_body(names, 1).replace(
        b'"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T009999"',
        b'"readQueueNums":70000,"topicFilterType":"SINGLE_TAG","topicName":"T009999"',
    )
    broker = yield connect(ns.port)
    for _ in range(2):  # the second time its table comes from the cache, and is checked again
        resp = yield _answer_sliced(ns, broker, body)
        assert resp.code == ResponseCode.INVALID_PARAMETER
        assert "readQueueNums is 70000" in resp.remark
        assert ns.server.registry.topic_count == 0 and ns.server.registry.broker_count == 0
    cache = ns.server.processor.chunk_cache
    assert cache is not None and cache.table_hits == 1


@pytest_twisted.inlineCallbacks
def test_a_large_register_with_one_bad_name_applies_the_rest_every_time(ns):
    names = [*topic_names(9_999), "bad name!"]
    body = plain_body(names, 1)
    broker = yield connect(ns.port)
    for _ in range(2):  # the second, the very same body, is a heartbeat of the first
        resp = yield _answer_sliced(ns, broker, body)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert ns.server.registry.topic_count == 9_999
        assert not ns.server.registry.route_exists("bad name!")
    assert ns.server.stats()["register_topics_dropped"] == 1


@pytest_twisted.inlineCallbacks
def test_a_master_and_its_slave_sending_one_large_body_read_it_once_and_both_serve(ns):
    names = topic_names(10_000)
    body = plain_body(names, 3)
    master = yield connect(ns.port)
    slave = yield connect(ns.port)
    slave_side = {"addr": "10.0.0.2:10911", "broker_id": 1}
    for conn, kw in ((master, {}), (slave, slave_side)):
        resp = yield _answer_sliced(ns, conn, body, **kw)
        assert resp.code == ResponseCode.SUCCESS
    cache = ns.server.processor.chunk_cache
    assert cache is not None and cache.table_hits == 1
    assert ns.server.registry.topic_count == 10_000
    for topic in (names[0], names[-1]):
        route = ns.server.registry.get_route(topic)
        assert route is not None
        assert sorted(route.broker_datas[0].broker_addrs.items()) == [
            (0, "10.0.0.1:10911"),
            (1, "10.0.0.2:10911"),
        ]


@defer.inlineCallbacks
def _answer_sliced(ns, broker, body, **kw):
    answer = broker.request(register(body, **kw))
    yield wait_until(lambda: ns.server.pending_registers or answer.called)
    while not answer.called:
        if ns.server.pending_registers:
            ns.clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    resp = yield answer
    return resp


def test_broker_events_of_sliced_tables_name_every_topic_they_will_touch():
    from namesrv.routes.registry import RouteRegistry
    from protocol.push_codec import BrokerChangeKind

    events = []
    registry = RouteRegistry(task.Clock(), slice_topics=10, broker_listener=events.append)
    table = {n: TopicQueueSpec(8, 8, 6, 0) for n in topic_names(50)}
    result = registry.register_broker(
        RegisterRequest(
            cluster_name="C",
            broker_addr="a:1",
            broker_name="broker-a",
            broker_id=0,
            ha_server_addr="a:2",
            topic_configs=table,
            data_version=DataVersion(0, 1, 1),
            filter_server_list=[],
            heartbeat_timeout_ms=None,
            enable_acting_master=False,
            channel=1,
            topic_queue_mapping_info={},
        )
    )
    assert result.job is not None
    while registry.run_jobs():
        pass
    registry.on_channel_close(1)
    assert registry.pending_jobs  # the departure is dropped in slices
    arrived, departed = events
    assert arrived.kind is BrokerChangeKind.ARRIVED and set(arrived.topics) == set(table)
    assert departed.kind is BrokerChangeKind.DEPARTED and set(departed.topics) == set(table)
    assert departed.name_gone


@pytest_twisted.inlineCallbacks
def test_a_silent_startup_of_5000_topics_counts_each_suppression_without_a_journal(make_server):
    running = make_server({"push": {"settle_slice_topics": 1_000}})
    server = running.server
    names = topic_names(5_000)
    client = yield connect(running.port)
    yield client.call(  # one topic has a subscriber: settled the full way, counted the same
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(names[:1], "t")
    )
    broker = yield connect(running.port)
    yield registered(running, broker, register(plain_body(names, 1)))
    running.clock.advance(TICK)
    while server.detector.dirty_count:
        running.clock.advance(0)
    stats = server.stats()
    assert stats["suppressed.broker_startup"] == 5_000
    assert server.detector.stats.suppressed_changes == 5_000
    assert server.detector.stats.versions_bumped == 5_000
    assert server.detector.version(names[0]) == (1, True)
    assert server.detector.version(names[-1]) == (1, True)


@pytest_twisted.inlineCallbacks
def test_ticks_while_registers_are_pending_settle_subscribed_topics_and_defer_the_rest(
    make_server,
):
    running = make_server({"registry": {"register_slice_topics": 1_000}})
    server, clock = running.server, running.clock
    names = topic_names(20_000)
    broker = yield connect(running.port)
    yield registered(running, broker, register(plain_body(names, 1)))
    clock.advance(TICK)
    while server.detector.dirty_count:
        clock.advance(0)
    watcher = yield connect(running.port)
    yield watcher.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(names[:1], "t")
    )
    # Every topic changes; the register is applied a slice (1,000 topics) per reactor turn.
    slices = server.registry.stats.job_slices
    answer = broker.request(register(plain_body(names, 2, perms=dict.fromkeys(names, 4))))
    yield wait_until(lambda: server.pending_registers)
    while server.registry.stats.job_slices < slices + 2:  # names[0]'s slice is applied
        clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    assert server.pending_registers
    marked = server.detector.dirty_count
    clock.advance(TICK)  # a tick with the register still pending
    assert server.counters["settle_deferrals"] == 1
    assert server.detector.dirty_count >= marked - 1  # only the subscribed topic settled
    yield watcher.wait_pushed(1)
    note = decode_notification(watcher.pushed[0].body)
    assert [c.topic for c in note.changes] == [names[0]]
    # A lookup settles its own topic on demand, whatever the tick deferred.
    asker = yield connect(running.port)
    resp = yield asker.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": names[1]})
    assert resp.code == ResponseCode.SUCCESS and resp.ext_fields["routeVersion"] == "2"
    # Deferral is bounded: after QUIET_SETTLE_DEFERRALS ticks in a row, one settles it all.
    for _ in range(QUIET_SETTLE_DEFERRALS):
        clock.advance(TICK)
    assert server.counters["settle_deferrals"] == QUIET_SETTLE_DEFERRALS
    while not answer.called:
        clock.advance(0)
        yield task.deferLater(reactor, 0, lambda: None)
    clock.advance(TICK)
    while server.detector.dirty_count:
        clock.advance(0)
    assert server.detector.stats.versions_bumped == 40_000


@pytest_twisted.inlineCallbacks
def test_the_heap_is_trimmed_once_after_a_sliced_register_and_not_after_its_heartbeats(
    make_server,
):
    # Chunks of 128 KiB (about 1,000 topics): a changed chunk fits one apply slice.
    ns = make_server({"registry": {"register_read_slice_bytes": 128 * 1024}})
    names = topic_names(10_000)
    body = plain_body(names, 1)
    broker = yield connect(ns.port)
    _, slices = yield registered(ns, broker, register(body))
    assert slices >= 2 and ns.server.counters["heap_trims"] == 0
    ns.clock.advance(0.5)
    assert ns.server.counters["heap_trims"] == 0  # not before the quiet period
    ns.clock.advance(0.5)
    assert ns.server.counters["heap_trims"] == 1
    for _ in range(3):  # heartbeats: the same large body, read in slices, nothing applied
        yield registered(ns, broker, register(body))
        ns.clock.advance(1.0)
    assert ns.server.counters["heap_trims"] == 1
    # One topic more: its chunk alone is applied, at once, so nothing is sliced either.
    yield registered(ns, broker, register(plain_body([*names, "T-NEW"], 2)))
    ns.clock.advance(1.0)
    assert ns.server.counters["heap_trims"] == 1
    other = yield connect(ns.port)
    yield registered(ns, other, register(body, name="broker-b"))  # a second large table
    ns.clock.advance(1.0)
    assert ns.server.counters["heap_trims"] == 2
