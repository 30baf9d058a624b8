"""``namesrv-admin update-topic`` / ``delete-topic`` against brokers that serve topic admin
(stand-ins registered with a name server), all in the deterministic world
(``support.memory_world``); the command runs in the test's thread (``support.memory_admin``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from click.testing import Result
from support.memory_admin import namesrv_admin
from support.memory_world import connect, the_world
from support.topic_admin_broker import TopicAdminBroker

from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.signing import SIGNATURE_FORM, upstream_signature


def admin(port: int, *args: str) -> Result:
    return namesrv_admin(the_world(), ["--namesrv", f"127.0.0.1:{port}", *args])


async def route_brokers(port: int, topic: str) -> dict[str, int]:
    """Broker name -> write queues of ``topic``'s route; empty when the topic has none."""
    client = await connect(port)
    try:
        resp = await client.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    finally:
        client.transport.loseConnection()
    if resp.code != ResponseCode.SUCCESS:
        return {}
    return {q.broker_name: q.write_queue_nums for q in bodies.decode_route(resp.body).queue_datas}


async def until_route(port: int, topic: str, expected: dict[str, int]) -> None:
    for _ in range(400):
        if await route_brokers(port, topic) == expected:
            return
        the_world().advance(0.01)
    raise AssertionError(f"route of {topic} is {await route_brokers(port, topic)}")


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


@pytest.fixture
def cluster(ns, memory_world):
    """Two stand-ins registered with ``ns``; the world stops them."""
    brokers = [
        TopicAdminBroker(
            name, {"Existing": 4}, [f"127.0.0.1:{ns.port}"], reactor=memory_world.reactor
        )
        for name in ("broker-a", "broker-b")
    ]
    for broker in brokers:
        memory_world.wait(broker.start())
        memory_world.brokers.append(broker)
    return brokers


def kv(ns: Any, topic: str) -> str | None:
    return ns.server.kv.get("ORDER_TOPIC_CONFIG", topic)


@pytest_twisted.ensureDeferred
async def test_update_topic_on_a_cluster_creates_it_on_every_master_with_upstream_fields(
    ns, cluster
):
    a, b = cluster
    result = admin(
        ns.port, "update-topic", "-c", "DefaultCluster", "-t", "NEW", "-r", "4", "-w", "4"
    )
    assert result.exit_code == 0, result.output
    assert f"broker broker-a at {a.addr}: ok" in result.stdout
    assert f"broker broker-b at {b.addr}: ok" in result.stdout
    for broker in cluster:
        (header,) = broker.created
        assert header.to_wire() == {
            "topic": "NEW",
            "defaultTopic": "TBW102",
            "readQueueNums": "4",
            "writeQueueNums": "4",
            "perm": "6",
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0",
            "order": "false",
        }
    await until_route(ns.port, "NEW", {"broker-a": 4, "broker-b": 4})
    assert kv(ns, "NEW") is None

    result = admin(ns.port, "--json", "update-topic", "-b", a.addr, "-t", "ONE", "-p", "4")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["perm"] == "4" and doc["readQueueNums"] == "8"
    assert doc["brokers"] == [{"brokerName": "broker-a", "addr": a.addr, "code": 0, "remark": ""}]
    assert [h.topic for h in b.created] == ["NEW"]
    await until_route(ns.port, "ONE", {"broker-a": 8})

    result = admin(ns.port, "update-topic", "-b", b.addr, "-t", "UNIT", "-u", "true")
    assert result.exit_code == 0, result.output
    assert b.created[-1].topic_sys_flag == 1  # TopicSysFlag: unit
    result = admin(ns.port, "update-topic", "-b", b.addr, "-t", "UNIT", "-s", "true")
    assert b.created[-1].topic_sys_flag == 2  # TopicSysFlag: has unit subscriptions


@pytest_twisted.ensureDeferred
async def test_order_writes_the_order_conf_on_the_name_server_as_upstream(ns, cluster):
    a, _b = cluster
    result = admin(ns.port, "update-topic", "-c", "DefaultCluster", "-t", "ORD", "-o", "true")
    assert result.exit_code == 0, result.output
    assert all(broker.created[0].order for broker in cluster)
    assert kv(ns, "ORD") == "broker-a:8;broker-b:8"
    # One broker: its entry is replaced, the others' kept.
    result = admin(ns.port, "update-topic", "-b", a.addr, "-t", "ORD", "-w", "2", "-o", "true")
    assert result.exit_code == 0, result.output
    assert kv(ns, "ORD") == "broker-a:2;broker-b:8"


@pytest_twisted.ensureDeferred
async def test_a_refusing_broker_is_named_with_its_remark_and_the_others_still_asked(ns, cluster):
    a, b = cluster
    b.refuse_topic_admin(ResponseCode.SYSTEM_ERROR, "The specified topic is a system topic.")
    result = admin(ns.port, "update-topic", "-c", "DefaultCluster", "-t", "NEW", "-o", "true")
    assert result.exit_code == 1
    assert [h.topic for h in a.created] == ["NEW"]
    assert (
        f"broker broker-b at {b.addr}: refused, SYSTEM_ERROR (1): "
        "The specified topic is a system topic." in result.stderr
    )
    assert "refused" not in result.stdout  # said once, on stderr
    assert f"broker broker-a at {a.addr}: ok" in result.stdout
    assert kv(ns, "NEW") is None  # not every broker has it: no order conf

    await until_route(ns.port, "NEW", {"broker-a": 8})
    result = admin(ns.port, "delete-topic", "-c", "DefaultCluster", "-t", "NEW")
    assert result.exit_code == 1
    assert "the name server's route is kept" in result.stderr
    assert a.deleted == ["NEW"]
    await until_route(ns.port, "Existing", {"broker-a": 4, "broker-b": 4})

    b.refusal = None
    the_world().wait(b.kill())
    result = admin(ns.port, "update-topic", "-b", b.addr, "-t", "Z")
    assert result.exit_code == 1
    assert f"{b.addr}: not reached: cannot connect" in result.stderr


@pytest_twisted.ensureDeferred
async def test_delete_topic_on_a_cluster_deletes_on_each_master_then_on_the_name_server(
    ns, cluster
):
    a, b = cluster
    await until_route(ns.port, "Existing", {"broker-a": 4, "broker-b": 4})
    result = admin(ns.port, "--json", "delete-topic", "-c", "DefaultCluster", "-t", "Existing")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["deleted"] is True and [x["code"] for x in doc["brokers"]] == [0, 0]
    assert a.deleted == b.deleted == ["Existing"]
    assert await route_brokers(ns.port, "Existing") == {}


@pytest_twisted.ensureDeferred
async def test_bad_invocations_are_refused_before_anything_is_sent(ns, cluster):
    result = admin(ns.port, "update-topic", "-t", "T")
    assert result.exit_code == 2 and "exactly one of --cluster/-c and --broker/-b" in result.output
    result = admin(ns.port, "update-topic", "-c", "DefaultCluster", "-t", "T", "-p", "9")
    assert result.exit_code == 2 and "perm must be 0..7" in result.output
    result = admin(ns.port, "update-topic", "-c", "Nope", "-t", "T")
    assert result.exit_code == 1
    assert "no cluster 'Nope' (clusters: DefaultCluster)" in result.stderr
    result = admin(ns.port, "delete-topic", "A", "-t", "B")
    assert result.exit_code == 2
    assert all(not broker.created and not broker.deleted for broker in cluster)


@pytest_twisted.ensureDeferred
async def test_brokers_get_upstream_signatures_while_the_name_server_gets_the_strong_form(
    ns, cluster
):
    a, _b = cluster
    result = admin(
        ns.port,
        "--access-key",
        "ops",
        "--secret-key",
        "ops-secret",
        "--server-identity",
        "ns-1",
        "update-topic",
        "-b",
        f"127.0.0.1:{a.port}",
        "-t",
        "SIGNED",
    )
    assert result.exit_code == 0, result.output
    fields = a.admin_fields[-1]
    assert SIGNATURE_FORM not in fields  # Apache brokers check only upstream's form
    assert fields["AccessKey"] == "ops"
    unsigned = {k: v for k, v in fields.items() if k != "Signature"}
    assert fields["Signature"] == upstream_signature(unsigned, b"", "ops-secret")
