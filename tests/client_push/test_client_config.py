"""Client configuration: defaults as upstream, bad values refused naming the setting."""

from __future__ import annotations

import pytest

from client_push.config import ClientConfig, ClientConfigError, parse_namesrv_addrs


def test_defaults_follow_upstream_and_the_push_requirements():
    cfg = ClientConfig(namesrv_addrs=("127.0.0.1:9876",))
    assert cfg.poll_interval_ms == 30_000
    assert cfg.topic_idle_expiry_ms == 300_000
    assert cfg.request_timeout_ms == 3_000
    assert cfg.poll_interval_with_push_ms > cfg.poll_interval_ms
    assert cfg.telemetry_path == ""


def test_upstream_semicolon_list_is_accepted():
    assert parse_namesrv_addrs("a:1; b:2;") == ("a:1", "b:2")
    assert ClientConfig(namesrv_addrs="a:1;b:2").namesrv_addrs == ("a:1", "b:2")  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", ";", "host", "host:", ":9876", "host:port", "h:70000"])
def test_malformed_addresses_are_refused(text):
    with pytest.raises(ClientConfigError):
        parse_namesrv_addrs(text)


def test_ipv6_addresses_in_brackets_are_accepted():
    assert parse_namesrv_addrs("[::1]:9876") == ("[::1]:9876",)


@pytest.mark.parametrize(
    "field", ["poll_interval_ms", "topic_idle_expiry_ms", "request_timeout_ms", "max_frame_size"]
)
def test_non_positive_values_are_refused_naming_the_setting(field):
    with pytest.raises(ClientConfigError, match=field):
        ClientConfig(namesrv_addrs=("a:1",), **{field: 0})


def test_backoff_maximum_below_initial_is_refused():
    with pytest.raises(ClientConfigError, match="reconnect_max_ms"):
        ClientConfig(namesrv_addrs=("a:1",), reconnect_initial_ms=500, reconnect_max_ms=100)
