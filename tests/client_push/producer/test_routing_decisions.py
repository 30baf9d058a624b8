"""The routing decisions alone (sans-I/O): routes in, decisions out, time passed by the test."""

from __future__ import annotations

import random

from client_push.producer.config import ProducerConfig
from client_push.producer.fault_table import FaultStrategyConfig, SendOutcome
from client_push.producer.routing_core import no_queue_error
from client_push.producer.routing_decisions import (
    NO_WRITABLE_QUEUE,
    AwaitRoute,
    RoutingDecisions,
    masterless_groups,
)
from client_push.producer.send_attempts import SendAttempts
from client_push.routes.route_cache import MessageQueue, publish_info
from protocol.codes import Perm
from protocol.route_model import BrokerData, QueueData, TopicRouteData

RW = int(Perm.READ | Perm.WRITE)
A_MASTER = BrokerData("c", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"})
A_SLAVE_ONLY = BrokerData("c", "broker-a", {1: "10.0.0.2:10911"})
A_PROMOTED = BrokerData("c", "broker-a", {0: "10.0.0.2:10911"})
B = BrokerData("c", "broker-b", {0: "10.0.0.3:10911"})


def route(*brokers: BrokerData) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData(b.broker_name, 2, 2, RW) for b in brokers],
        broker_datas=list(brokers),
    )


def select(core: RoutingDecisions, r: TopicRouteData, now: int, last: str | None = None):
    info = publish_info("T", r)
    core.route_used("T", info, r, now)
    return core.select(info, r, last, now)


def test_a_group_without_master_is_waited_for_only_when_no_group_can_take_the_send():
    core = RoutingDecisions(FaultStrategyConfig(detector_enabled=False), random.Random(1))
    assert masterless_groups(route(A_SLAVE_ONLY, B)) == ("broker-a",)
    assert select(core, route(A_SLAVE_ONLY), 0) == AwaitRoute("T", ("broker-a",))
    chosen = {select(core, route(A_SLAVE_ONLY, B), 0).broker_name for _ in range(6)}  # type: ignore[union-attr]
    assert chosen == {"broker-b"}
    assert isinstance(select(core, route(A_PROMOTED), 0), MessageQueue)


def test_a_read_only_route_is_waited_for_and_fails_as_before_when_the_wait_runs_out():
    core = RoutingDecisions(FaultStrategyConfig(detector_enabled=False), random.Random(1))
    read_only = TopicRouteData([QueueData("broker-b", 2, 2, int(Perm.READ))], [B])
    wait = select(core, read_only, 0)
    assert wait == AwaitRoute("T", (), NO_WRITABLE_QUEUE)
    assert isinstance(wait, AwaitRoute)
    assert str(no_queue_error(wait, 3_000)) == "topic T has no writable queue"
    no_master = select(core, route(A_SLAVE_ONLY), 0)
    assert isinstance(no_master, AwaitRoute)
    assert "no master" in str(no_queue_error(no_master, 3_000))


def test_a_new_master_announced_with_the_departure_is_used_at_once_and_starts_clean():
    core = RoutingDecisions(FaultStrategyConfig(detector_enabled=False), random.Random(1))
    select(core, route(A_MASTER, B), 0)
    core.table.report("broker-a", 5, SendOutcome.UNREACHABLE, 10)
    core.broker_gone("broker-a", 20, ["10.0.0.1:10911"])
    assert not core.table.is_available("broker-a", 30)
    # Departure and promotion in one step: no route without the group was ever seen.
    select(core, route(A_PROMOTED, B), 40)
    assert core.table.is_available("broker-a", 40) and core.counters["new_masters"] == 1
    assert core.table.is_reachable("broker-a", 40)

    core.broker_gone("broker-b", 60, ["10.0.0.3:10911"])
    select(core, route(A_PROMOTED, B), 80)  # broker-b still listed at the address that left
    assert not core.table.is_available("broker-b", 80)
    assert core.counters["new_masters"] == 1 and core.counters["brokers_returned"] == 0


def test_a_connection_error_holds_the_retry_to_that_address_once_for_the_next_route():
    plan = SendAttempts(ProducerConfig(send_timeout_ms=3_000), 3_000, 0)
    plan.begin("broker-a")
    plan.unreachable("broker-a", "10.0.0.1:10911", "refused", connection=True)
    assert plan.route_wait("10.0.0.2:10911", 10) == 0  # another address: go at once
    assert plan.route_wait("10.0.0.1:10911", 10) == 1_000  # the dead one: the next route first
    plan.unreachable("broker-a", "10.0.0.1:10911", "refused", connection=True)
    assert plan.route_wait("10.0.0.1:10911", 2_500) == 500  # never past the deadline
    assert plan.route_wait("10.0.0.1:10911", 2_600) == 0  # once: then it is tried again
    plan.unreachable("broker-a", "10.0.0.1:10911", "timed out", connection=False)
    assert plan.route_wait("10.0.0.1:10911", 2_700) == 0  # slow is not dead: no hold
