"""The client's pure halves of broker events: dropping a departed broker, spreading refetches,
backing off after answers that cannot be trusted."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from client_push.config import ClientConfig, ClientConfigError
from client_push.routes.push_session import without_broker
from client_push.routes.refetch_schedule import RefetchSchedule
from protocol.codes import Perm
from protocol.push_events import BrokerChange, BrokerChangeKind
from protocol.route_model import BrokerData, QueueData, TopicRouteData

RW = int(Perm.READ | Perm.WRITE)


def route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("a", 4, 4, RW), QueueData("b", 4, 4, RW)],
        broker_datas=[
            BrokerData("c", "a", {0: "a0:1", 1: "a1:1"}, enable_acting_master=True),
            BrokerData("c", "b", {0: "b0:1"}),
        ],
        filter_server_table={"a0:1": ["f:1"], "b0:1": ["g:1"]},
        topic_queue_mapping_by_broker={"a": {"x": 1}, "b": {"y": 2}},
    )


def leaving(name: str, *, name_gone: bool, read_only: bool = False) -> BrokerChange:
    return BrokerChange(
        BrokerChangeKind.DEPARTED, name, "c", (), "expiry", name_gone, read_only, (), 0
    )


def test_a_gone_broker_name_leaves_queues_addresses_filters_and_mapping():
    after = without_broker(route(), leaving("a", name_gone=True), {"a0:1", "a1:1"})
    assert after is not None
    assert [q.broker_name for q in after.queue_datas] == ["b"]
    assert [b.broker_name for b in after.broker_datas] == ["b"]
    assert after.filter_server_table == {"b0:1": ["g:1"]}
    assert after.topic_queue_mapping_by_broker == {"b": {"y": 2}}


def test_a_master_leaving_under_acting_master_keeps_the_slave_and_turns_queues_read_only():
    after = without_broker(route(), leaving("a", name_gone=False, read_only=True), {"a0:1"})
    assert after is not None
    assert after.broker_datas[0].broker_addrs == {1: "a1:1"}
    assert after.queue_datas[0].perm == Perm.READ and after.queue_datas[1].perm == RW
    assert "a0:1" not in after.filter_server_table


def test_a_route_without_the_broker_is_returned_as_is_and_the_last_broker_empties_it():
    r = route()
    assert without_broker(r, leaving("z", name_gone=True), {"z:1"}) is r
    only_a = TopicRouteData(queue_datas=[r.queue_datas[0]], broker_datas=[r.broker_datas[0]])
    assert without_broker(only_a, leaving("a", name_gone=True), {"a0:1", "a1:1"}) is None


def test_spread_lays_a_batch_out_evenly_inside_the_window_and_coalesces():
    q = RefetchSchedule(1_000, 60_000, random.Random(3))
    topics = [(f"t{i}", i) for i in range(10)]
    assert q.spread(topics, "arrived", now_ms=0, delay_ms=1_000, window_ms=10_000) == 10
    assert q.spread([("t1", 50), ("new", None)], "confirm", now_ms=0, delay_ms=0, window_ms=10) == 1
    first = q.next_due_ms()
    assert first is not None and first < 1_000  # "new" alone in a 10 ms window
    due_times = []
    now = 0.0
    while len(q):
        now += 100
        for topic, cause, wanted in q.pop_due(now):
            due_times.append((now, topic, cause, wanted))
    batch = [t for t in due_times if t[2] == "arrived"]
    assert len(batch) == 10 and all(1_000 < at <= 11_100 for at, *_ in batch)
    assert ("t1" in {t for _, t, _, _ in batch}) and dict((t, w) for _, t, _, w in batch)[
        "t1"
    ] == 50
    q.spread([("x", None)], "c", now_ms=0, delay_ms=0, window_ms=10)
    q.discard("x")
    assert q.next_due_ms() is None and q.pop_due(1e9) == []


@given(
    clients=st.integers(1, 30),
    topics=st.integers(1, 40),
    window_s=st.integers(1, 20),
    seed=st.integers(0, 2**32),
)
def test_no_second_holds_more_than_the_even_share_of_requests(clients, topics, window_s, seed):
    rng = random.Random(seed)
    times: list[float] = []
    for _ in range(clients):
        q = RefetchSchedule(1_000, 60_000, rng)
        q.spread(
            [(f"t{i}", None) for i in range(topics)],
            "arrived",
            now_ms=0,
            delay_ms=0,
            window_ms=window_s * 1000,
        )
        times.extend(due for due, _ in q._heap)
    times.sort()
    per_client = -(-topics // window_s)  # ceil(T / W): one client's most in any second
    worst = 0
    j = 0
    for i, t in enumerate(times):
        while times[j] <= t - 1000 + 1e-6:  # (t - 1 s, t], float rounding aside
            j += 1
        worst = max(worst, i - j + 1)
    assert worst <= clients * per_client
    assert all(0 <= t < window_s * 1000 for t in times)


def test_backoff_doubles_per_untrusted_answer_up_to_the_cap_and_a_trusted_one_ends_it():
    q = RefetchSchedule(1_000, 4_000, random.Random(7))
    delays = [q.back_off_ms("T") for _ in range(5)]
    for delay, full in zip(delays, (1_000, 2_000, 4_000, 4_000, 4_000), strict=True):
        assert full / 2 <= delay <= full
    assert q.backing_off == 1
    assert q.trusted("T") and not q.trusted("T") and q.backing_off == 0
    assert q.back_off_ms("T") <= 1_000  # a new run starts from the initial pause
    q.discard("T")
    assert q.backing_off == 0


def test_client_config_refuses_a_zero_window_and_a_negative_delay():
    import pytest

    with pytest.raises(ClientConfigError, match="arrival_refetch_window_ms"):
        ClientConfig(namesrv_addrs=("h:1",), arrival_refetch_window_ms=0)
    with pytest.raises(ClientConfigError, match="departure_confirm_delay_ms"):
        ClientConfig(namesrv_addrs=("h:1",), departure_confirm_delay_ms=-1)
