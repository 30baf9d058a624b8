"""What a broker may register: a table less the topics whose names are no topic names, and the
chunks whose names passed once not checked again."""

from __future__ import annotations

import pytest

from namesrv.requests.register import validation
from protocol.register.table import RegisterTable, TablePart, TopicQueueSpec
from protocol.route_model import DataVersion

A, B = TopicQueueSpec(8, 8, 6, 0), TopicQueueSpec(4, 4, 6, 0)


def _table(*parts: TablePart, servers: tuple[str, ...] = ("f:1",)) -> RegisterTable:
    topics = {name: spec for part in parts for name, spec in part.topics.items()}
    renamed = {k: v for part in parts for k, v in part.renamed.items()}
    return RegisterTable(topics, DataVersion(1, 2, 3), list(servers), {}, (A, B), renamed, parts)


def test_a_table_less_some_topics_keeps_the_rest_and_drops_its_chunks():
    part = TablePart.of((3, 7), ["T1", "bad name", "T2"], [A, B, A], {"T2": "X"}, (A, B))
    table = _table(part)
    less = validation.without(table, {"bad name", "T2"})
    assert less.topic_queues == {"T1": A}
    assert less.specs == (A,)
    assert less.renamed == {}
    assert less.parts is None  # the chunks read hold the dropped topics
    assert (less.data_version, less.filter_server_list) == (table.data_version, ["f:1"])
    assert table.topic_queues == part.topics  # the table read is left as it was
    assert validation.unchecked_names(less) == ["T1"]


def test_the_names_of_a_chunk_that_passed_are_not_checked_again():
    first = TablePart.of((1, 1), ["T1", "T2"], [A, A], {}, (A,))
    second = TablePart.of((2, 2), ["T3"], [B], {}, (B,))
    assert validation.unchecked_names(_table(first)) == ["T1", "T2"]
    validation.check_table(_table(first), max_queue_nums=64)
    assert validation.unchecked_names(_table(first, second)) == ["T3"]


def test_a_table_refused_leaves_its_chunks_unchecked():
    part = TablePart.of((1, 1), ["T1"], [A], {}, (A,))
    with pytest.raises(validation.RegisterError, match=r"filterServerList\[0\] must be HOST:PORT"):
        validation.check_table(_table(part, servers=("no port",)), max_queue_nums=64)
    assert validation.unchecked_names(_table(part)) == ["T1"]


def test_bad_names_are_found_a_slice_per_step():
    names = ["ok", "bad name", "fine", "also bad!", "T"]
    steps = validation.bad_names_steps(names, 2, 64)
    yielded = 0
    try:
        while True:
            next(steps)
            yielded += 1
    except StopIteration as done:
        bad = done.value
    assert yielded == 2  # three slices of two names, a step between two slices
    assert set(bad) == {"bad name", "also bad!"}


@pytest.mark.parametrize(
    "addr",
    ["10.0.0.1:10911", "[::1]:10911", "broker-a.example:1"],
)
def test_an_address_is_checked_alike_the_first_time_and_after(addr):
    for _ in range(2):
        validation.check_address("brokerAddr", addr)


@pytest.mark.parametrize(
    "addr",
    [
        "10.0.0.1",
        "10.0.0.1:0",
        "10.0.0.1:70000",
        ":10911",
        "10.0.0.1 :10911",
        "a\u2028b:1",
        "h:1" + "1" * 300,
    ],
)
def test_a_refused_address_is_refused_each_time(addr):
    for _ in range(2):
        with pytest.raises(validation.RegisterError, match="must be HOST:PORT"):
            validation.check_address("brokerAddr", addr)


def test_the_addresses_remembered_stay_bounded_whatever_brokers_send():
    for i in range(validation.ADDRESSES_REMEMBERED + 500):
        validation.check_address("brokerAddr", f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:1")
    held = validation._is_address.cache_info().currsize
    assert held <= validation.ADDRESSES_REMEMBERED
