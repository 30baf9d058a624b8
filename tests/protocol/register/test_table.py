"""What a read yields: a table less some topics."""

from __future__ import annotations

from protocol.register.table import RegisterTable, TablePart, TopicQueueSpec
from protocol.route_model import DataVersion


def test_a_table_less_some_topics_keeps_the_rest_and_drops_its_chunks():
    a, b = TopicQueueSpec(8, 8, 6, 0), TopicQueueSpec(4, 4, 6, 0)
    part = TablePart.of((3, 7), ["T1", "bad name", "T2"], [a, b, a], {"T2": "X"}, (a, b))
    table = RegisterTable(
        dict(part.topics), DataVersion(1, 2, 3), ["f:1"], {}, (a, b), {"T2": "X"}, (part,)
    )
    less = table.without({"bad name", "T2"})
    assert less.topic_queues == {"T1": a}
    assert less.specs == (a,)
    assert less.renamed == {}
    assert less.parts is None  # the chunks read hold the dropped topics
    assert (less.data_version, less.filter_server_list) == (table.data_version, ["f:1"])
    assert table.topic_queues == part.topics  # the table read is left as it was
