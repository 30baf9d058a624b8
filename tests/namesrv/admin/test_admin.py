"""``namesrv-admin`` against name servers in the deterministic world (``support.memory_world``):
the command runs in the test's thread, its socket a connection of the world
(``support.memory_admin``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from click.testing import Result
from support.fake_broker import register_request, topic_configs
from support.memory_admin import namesrv_admin
from support.memory_world import connect, the_world

from protocol.codes import RequestCode, ResponseCode
from protocol.push_codec import encode_subscribe

TICK = 1.0


def admin(port: int, *args: str) -> Result:
    return namesrv_admin(the_world(), ["--namesrv", f"127.0.0.1:{port}", *args])


async def with_broker(port: int) -> Any:
    broker = await connect(port)
    resp = await broker.request(register_request(topic_configs("T", "U", queues=8)))
    assert resp.code == ResponseCode.SUCCESS
    return broker


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


@pytest_twisted.ensureDeferred
async def test_topic_route_json_prints_the_route_and_the_table_names_the_broker(ns):
    await with_broker(ns.port)
    result = admin(ns.port, "--json", "topic-route", "T")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["topic"] == "T"
    assert doc["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
    assert doc["queueDatas"][0]["writeQueueNums"] == 8
    assert doc["routeVersion"] >= 1
    after_verb = admin(ns.port, "topic-route", "T", "--json")
    assert after_verb.exit_code == 0, after_verb.output
    assert json.loads(after_verb.stdout) == doc
    result = admin(ns.port, "topic-route", "T")
    assert result.exit_code == 0
    assert "broker-a" in result.stdout and "10.0.0.1:10911" in result.stdout
    assert "RW-" in result.stdout


@pytest_twisted.ensureDeferred
async def test_push_status_shows_counters_moving_when_a_change_is_notified(ns):
    await with_broker(ns.port)
    client = await connect(ns.port)
    resp = await client.call(
        RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_subscribe(["T"], "watcher")
    )
    assert resp.code == ResponseCode.SUCCESS
    the_world().advance(TICK)
    result = admin(ns.port, "--json", "push-status")
    assert result.exit_code == 0, result.output
    before = json.loads(result.stdout)
    assert before["epoch"] == "e1" and before["degraded"] is False
    assert before["subscriptions"] == 1
    result = admin(ns.port, "wipe-write-perm", "broker-a")
    assert result.exit_code == 0, result.output
    assert "wiped write perm of broker broker-a: 2 topics" in result.stdout
    result = admin(ns.port, "--json", "push-status")
    pending = json.loads(result.stdout)
    assert pending["debt"]["dirtyTopics"] == 2
    the_world().advance(TICK)
    await client.wait_pushed(1)
    result = admin(ns.port, "--json", "push-status")
    after = json.loads(result.stdout)
    assert after["ticks"] == before["ticks"] + 1
    sent = after["counters"]["notifications_sent"]
    assert sent == before["counters"].get("notifications_sent", 0) + 1
    assert after["debt"] == {"connections": 0, "topics": 0, "dirtyTopics": 0}
    result = admin(ns.port, "push-status")
    assert "notifications_sent" in result.stdout
    result = admin(ns.port, "--json", "subscriptions", "--topic", "T")
    subs = json.loads(result.stdout)
    assert subs["total"] == 1 and subs["connections"][0]["topics"] == ["T"]
    result = admin(ns.port, "subscriptions", "--topic", "nobody-has-this")
    assert result.exit_code == 0 and "PEER" in result.stdout


@pytest_twisted.ensureDeferred
async def test_standard_verbs_work_and_extension_verbs_exit_2_against_a_server_without_it(
    make_world_server,
):
    upstream_like = make_world_server({"push": {"enabled": False}})
    port = upstream_like.port
    await with_broker(port)
    result = admin(port, "--json", "topic-route", "U")
    assert result.exit_code == 0, result.output
    result = admin(port, "--json", "topic-list")
    assert set(json.loads(result.stdout)) >= {"T", "U"}
    result = admin(port, "--json", "cluster-list")
    assert json.loads(result.stdout)["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    result = admin(port, "cluster-list")
    assert "DefaultCluster" in result.stdout
    for args in (
        ("kv", "put", "ns1", "k", "v 1"),
        ("wipe-write-perm", "broker-a"),
        ("add-write-perm", "broker-a"),
        ("delete-topic", "U"),
    ):
        result = admin(port, *args)
        assert result.exit_code == 0, (args, result.output)
    result = admin(port, "kv", "get", "ns1", "k")
    assert result.stdout.strip() == "v 1"
    result = admin(port, "--json", "kv", "list", "ns1")
    assert json.loads(result.stdout) == {"k": "v 1"}
    result = admin(port, "--json", "namesrv-config")
    assert json.loads(result.stdout)["push.enabled"] == "false"
    result = admin(port, "kv", "delete", "ns1", "k")
    assert result.exit_code == 0
    result = admin(port, "kv", "get", "ns1", "k")
    assert result.exit_code == 1
    assert "QUERY_NOT_FOUND (22)" in result.stderr
    for verb in ("push-status", "subscriptions"):
        result = admin(port, verb)
        assert result.exit_code == 2, result.output
        assert "does not support" in result.stderr


@pytest_twisted.ensureDeferred
async def test_errors_name_the_response_code_and_remark_and_exit_non_zero(ns):
    result = admin(ns.port, "topic-route", "NoSuchTopic")
    assert result.exit_code == 1
    assert "TOPIC_NOT_EXIST (17)" in result.stderr and "NoSuchTopic" in result.stderr
    result = admin(1, "topic-list")
    assert result.exit_code == 1 and "cannot connect" in result.stderr
    result = admin(ns.port, "--access-key", "a", "topic-list")
    assert result.exit_code == 2  # usage error: the secret is missing


@pytest_twisted.ensureDeferred
async def test_signed_admin_requests_pass_access_control(make_world_server):
    acl = {
        "enabled": True,
        "server_identity": "ns-admin-test",
        "accounts": [
            {"access_key": "brk", "secret_key": "brk-secret", "brokers": ["*"]},
            {"access_key": "ops", "secret_key": "ops-secret", "admin": True},
        ],
    }
    running = make_world_server({"acl": acl})
    result = admin(running.port, "wipe-write-perm", "broker-a")
    assert result.exit_code == 1
    assert "NO_PERMISSION (16)" in result.stderr
    signed = ("--access-key", "ops", "--secret-key", "ops-secret")
    result = admin(running.port, *signed, "wipe-write-perm", "broker-a")
    assert result.exit_code == 2 and "--server-identity" in result.output
    result = admin(
        running.port, *signed, "--server-identity", "ns-other", "wipe-write-perm", "broker-a"
    )
    assert result.exit_code == 1
    assert "signed for name server 'ns-other'; this one is 'ns-admin-test'" in result.stderr
    signed += ("--server-identity", "ns-admin-test")
    result = admin(running.port, *signed, "wipe-write-perm", "broker-a")
    # Let through: the server answered the wipe, and no broker-a is registered.
    assert "knows no broker broker-a" in result.stderr, result.output
    result = admin(running.port, *signed, "--json", "push-status")
    counters = json.loads(result.stdout)["counters"]
    assert counters["rejected.acl_unsigned"] == 1 and counters["rejected.acl_wrong_server"] == 1
    result = admin(running.port, "topic-list")
    assert result.exit_code == 0


def admin_n(namesrv: str, *args: str) -> Result:
    return namesrv_admin(the_world(), ["-n", namesrv, *args])


@pytest_twisted.ensureDeferred
async def test_writes_go_to_every_name_server_with_a_line_each_and_fail_if_one_did(
    make_world_server,
):
    first, second = make_world_server(), make_world_server()
    down = "127.0.0.1:1"
    both = f"127.0.0.1:{first.port};127.0.0.1:{second.port}"
    result = admin_n(both, "updateKvConfig", "-s", "ns1", "-k", "k", "-v", "v")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"127.0.0.1:{first.port}: put ns1/k",
        f"127.0.0.1:{second.port}: put ns1/k",
    ]
    assert first.server.kv.get("ns1", "k") == second.server.kv.get("ns1", "k") == "v"
    result = admin_n(f"{down};{both}", "update-namesrv-config", "orderMessageEnable=true")
    assert result.exit_code == 1
    assert f"127.0.0.1:{second.port}: updated orderMessageEnable=true" in result.stdout
    assert f"namesrv-admin: {down}: cannot connect" in result.stderr
    assert first.server.config.registry.order_message_enable
    assert second.server.config.registry.order_message_enable
    result = admin_n(f"{down};{both}", "--json", "kv", "delete", "ns1", "k")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert [(n["namesrv"], n["ok"]) for n in doc["namesrvs"]] == [
        (down, False),
        (f"127.0.0.1:{first.port}", True),
        (f"127.0.0.1:{second.port}", True),
    ]


@pytest_twisted.ensureDeferred
async def test_reads_fail_over_to_the_next_name_server(make_world_server):
    up = make_world_server()
    await with_broker(up.port)
    result = admin_n(f"127.0.0.1:1;127.0.0.1:{up.port}", "--json", "topic-list")
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) >= {"T", "U"}
    assert "127.0.0.1:1: cannot connect" in result.stderr and "trying the next" in result.stderr
    result = admin_n("127.0.0.1:1;127.0.0.1:2", "topic-list")
    assert result.exit_code == 1
    assert "no name server of 127.0.0.1:1;127.0.0.1:2 could be reached" in result.stderr


def test_cluster_list_m_and_topic_list_c_show_mqadmins_columns(memory_world):
    _server, addr = memory_world.server()
    port = int(addr.rpartition(":")[2])
    broker = memory_world.broker("broker-s", {"TopicS": 2}, addr)
    broker.counters["messages_received"] = 7
    result = admin(port, "cluster-list", "-m")
    assert result.exit_code == 0, result.output
    head, row = result.stdout.splitlines()
    assert head.split("  ")[0] == "#Cluster Name" and "#InTotalToday" in head
    assert row.split() == ["DefaultCluster", "broker-s", "0", "0", "7", "0"]
    result = admin(port, "topic-list", "-c")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [c.strip() for c in lines[0].split("  ") if c.strip()] == [
        "#Cluster Name",
        "#Topic",
        "#Consumer Group",
    ]
    assert lines[1].split() == ["DefaultCluster", "TopicS"]


@pytest_twisted.ensureDeferred
async def test_booleans_print_one_way_and_bad_topic_names_are_refused_before_sending(ns):
    result = admin(ns.port, "--json", "namesrv-config")
    values = json.loads(result.stdout).values()
    assert "True" not in values and "False" not in values
    result = admin(ns.port, "push-status")
    assert " False" not in result.stdout and " True" not in result.stdout
    for args in (
        ("update-topic", "-c", "DefaultCluster", "-t", "bad topic!"),
        ("delete-topic", "bad topic!"),
        ("topic-route", "x" * 128),
    ):
        result = admin(ns.port, *args)
        assert result.exit_code == 2, result.output
        assert "topic name" in result.stderr
