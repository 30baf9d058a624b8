"""GET_NAMESRV_CONFIG and UPDATE_NAMESRV_CONFIG over the wire, as mqadmin sends them, against the
real server in the deterministic world (``support.memory_world``)."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from support.acl_signing import ACL, independent_sign
from support.fake_broker import register_request, topic_configs
from support.memory_world import connect
from support.push_wire import TICK, changes, round_trip, subscribe

from namesrv.config import NamesrvConfig, from_mapping
from namesrv.properties import parse_properties, resolve_key, upstream_properties
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand
from protocol.push_codec import ChangeKind


def update(**props: str) -> RemotingCommand:
    """``mqadmin updateNamesrvConfig -k K -v V``: the properties text as the body."""
    body = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
    return RemotingCommand.request(RequestCode.UPDATE_NAMESRV_CONFIG, {}, body)


async def get_config(peer: Any) -> Any:
    resp = await peer.call(RequestCode.GET_NAMESRV_CONFIG)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return parse_properties(resp.body.decode())


async def route_of(peer: Any, topic: str) -> Any:
    resp = await peer.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return bodies.decode_route(resp.body)


@pytest_twisted.ensureDeferred
async def test_get_answers_upstream_keys_with_running_values_and_our_dotted_keys(
    make_world_server, tmp_path
):
    kv_path = str(tmp_path / "kv.json")
    ns = make_world_server({"registry": {"kv_config_path": kv_path, "scan_interval_ms": 7_000}})
    props = await get_config(await connect(ns.port))
    assert props["listenPort"] == str(ns.port)  # the bound port, not the configured 0
    assert props["bindAddress"] == "127.0.0.1"
    assert props["orderMessageEnable"] == "false"
    assert props["kvConfigPath"] == kv_path
    assert props["scanNotActiveBrokerInterval"] == "7000"
    assert props["deleteTopicWithBrokerRegistration"] == "false"
    assert props["server.listen"] == f"127.0.0.1:{ns.port}"
    assert props["registry.order_message_enable"] == "false"
    assert props["registry.kv_config_path"] == kv_path


def test_upstream_keys_read_at_start_up_are_the_keys_answered():
    """One declaration: every upstream key a properties file may set is one GET answers."""
    shown = dict(upstream_properties(NamesrvConfig()))
    for key in shown:
        assert resolve_key(key) is not None, key
    assert {"listenPort", "bindAddress", "orderMessageEnable", "kvConfigPath"} <= set(shown)
    assert resolve_key("orderMessageEnable") == resolve_key("registry.order_message_enable")
    assert resolve_key("push.suppress.broker_startup") is not None
    assert resolve_key("registry") is None
    assert resolve_key("noSuchKey") is None


def test_the_start_up_window_is_answered_under_upstreams_two_keys():
    shown = dict(upstream_properties(NamesrvConfig()))
    assert (shown["needWaitForService"], shown["waitSecondsForService"]) == ("true", "45")
    off = from_mapping({"server": {"wait_for_service_ms": 0}})
    shown = dict(upstream_properties(off))
    assert (shown["needWaitForService"], shown["waitSecondsForService"]) == ("false", "0")
    assert not resolve_key("needWaitForService").runtime  # type: ignore[union-attr]


@pytest_twisted.ensureDeferred
async def test_update_order_message_enable_puts_order_conf_in_routes_and_notifies_subscribers(
    make_world_server,
):
    ns = make_world_server()
    broker = await connect(ns.port)
    resp = await broker.request(register_request(topic_configs("T1", "T2")))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    await broker.call(
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-a:4"},
    )
    ns.clock.advance(TICK)
    client = await connect(ns.port)
    await subscribe(client, "T1", "T2")
    before = await route_of(client, "T1")  # cached now: the update must drop it
    assert before.order_topic_conf is None
    assert ns.server.stats()["route_cache_entries"] == 1

    resp = await client.request(update(orderMessageEnable="true"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    after = await route_of(client, "T1")
    assert after.order_topic_conf == "broker-a:4"
    ns.clock.advance(TICK)
    await client.wait_pushed(1)
    await round_trip(client)
    assert changes(client) == [("T1", ChangeKind.UPDATED)]  # T2 has no order conf
    props = await get_config(client)
    assert props["orderMessageEnable"] == "true"
    assert props["registry.order_message_enable"] == "true"

    resp = await client.request(update(**{"registry.order_message_enable": "false"}))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert (await route_of(client, "T1")).order_topic_conf is None
    ns.clock.advance(TICK)
    await client.wait_pushed(2)
    assert changes(client)[1:] == [("T1", ChangeKind.UPDATED)]


@pytest_twisted.ensureDeferred
async def test_update_enable_all_topic_list_takes_effect_on_the_next_request(make_world_server):
    ns = make_world_server()
    peer = await connect(ns.port)
    resp = await peer.request(update(enableAllTopicList="false"))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await peer.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    resp = await peer.request(update(**{"registry.enable_all_topic_list": "true"}))
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    resp = await peer.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert resp.code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    ("props", "code", "named"),
    [
        ({"listenPort": "9999"}, ResponseCode.NO_PERMISSION, "listenPort"),
        (
            {"server.output_buffer_bytes": "1"},
            ResponseCode.NO_PERMISSION,
            "server.output_buffer_bytes",
        ),
        # A built-in limit is no key of the config: unknown here as in a file.
        (
            {"server.route_cache_bytes": "1"},
            ResponseCode.INVALID_PARAMETER,
            "server.route_cache_bytes",
        ),
        ({"orderMessageEnable": "maybe"}, ResponseCode.INVALID_PARAMETER, "orderMessageEnable"),
        ({"noSuchKey": "1"}, ResponseCode.INVALID_PARAMETER, "noSuchKey"),
    ],
)
@pytest_twisted.ensureDeferred
async def test_update_of_a_key_that_cannot_change_is_refused_naming_it(
    make_world_server, props, code, named
):
    ns = make_world_server()
    peer = await connect(ns.port)
    before = await get_config(peer)
    resp = await peer.request(update(**props))
    assert resp.code == code
    assert named in resp.remark
    assert (await get_config(peer)) == before
    assert ns.server.config.server.listen == "127.0.0.1:0"


@pytest_twisted.ensureDeferred
async def test_a_body_mixing_accepted_and_refused_keys_changes_nothing(make_world_server):
    ns = make_world_server()
    peer = await connect(ns.port)
    await peer.request(register_request(topic_configs("T1")))
    await peer.call(
        RequestCode.PUT_KV_CONFIG,
        {"namespace": "ORDER_TOPIC_CONFIG", "key": "T1", "value": "broker-a:4"},
    )
    before = await get_config(peer)
    resp = await peer.request(update(orderMessageEnable="true", kvConfigPath="/tmp/elsewhere"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert "kvConfigPath" in resp.remark and "orderMessageEnable" not in resp.remark
    assert (await get_config(peer)) == before
    assert ns.server.config.registry.order_message_enable is False
    assert (await route_of(peer, "T1")).order_topic_conf is None


@pytest_twisted.ensureDeferred
async def test_contradicting_key_forms_or_an_empty_body_change_nothing(make_world_server):
    ns = make_world_server()
    peer = await connect(ns.port)
    resp = await peer.request(
        update(orderMessageEnable="true", **{"registry.order_message_enable": "false"})
    )
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert "registry.order_message_enable" in resp.remark
    resp = await peer.call(RequestCode.UPDATE_NAMESRV_CONFIG)
    assert resp.code == ResponseCode.INVALID_PARAMETER
    assert ns.server.config.registry.order_message_enable is False


@pytest_twisted.ensureDeferred
async def test_with_acl_on_an_unsigned_update_is_refused_a_signed_one_accepted(make_world_server):
    ns = make_world_server({"acl": ACL})
    peer = await connect(ns.port)
    resp = await peer.request(update(orderMessageEnable="true"))
    assert resp.code == ResponseCode.NO_PERMISSION
    assert ns.server.config.registry.order_message_enable is False
    resp = await peer.request(
        independent_sign(update(orderMessageEnable="true"), "ops", "ops-secret")
    )
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    assert ns.server.config.registry.order_message_enable is True


def test_the_config_answer_never_carries_the_metrics_secrets() -> None:
    from namesrv.config import from_mapping
    from namesrv.requests.handlers.server_config import config_properties

    config = from_mapping(
        {
            "metrics": {
                "bearer_token": "TOKEN-SECRET",
                "basic_auth_user": "scraper",
                "basic_auth_password": "PASSWORD-SECRET",
            }
        }
    )
    text = config_properties(config, None)
    assert "TOKEN-SECRET" not in text and "PASSWORD-SECRET" not in text
    assert "metrics.bearer_token=<set>" in text
    assert "metrics.basic_auth_user=scraper" in text
