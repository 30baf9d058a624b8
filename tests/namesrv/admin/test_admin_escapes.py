"""``namesrv-admin`` shows what a server sent with its control characters escaped: a broker,
cluster, KV value or remark holding a terminal escape sequence reaches the terminal (or the
pipe the output goes through) as visible text, never as the sequence. Server and command share
the deterministic world (``support.memory_world``, ``support.memory_admin``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import pytest_twisted
from click.testing import Result
from support.fake_broker import register_request, topic_configs
from support.memory_admin import namesrv_admin
from support.memory_world import connect, the_world

from namesrv.admin.broker_topics import BrokerOutcome
from protocol.codes import RequestCode, ResponseCode

TITLE = "\x1b]0;owned\x07"
"""Sets the terminal window's title: passes a pipe too when printed raw."""
EVIL_BROKER = f"b{TITLE}\x1b[2J\nFORGED\x9b31m\u202e"
EVIL_CLUSTER = f"c\x1b[31m{TITLE}"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def admin(port: int, *args: str) -> Result:
    return namesrv_admin(the_world(), ["--namesrv", f"127.0.0.1:{port}", *args])


def _no_raw_controls(text: str) -> None:
    for char in RAW:
        assert char not in text, repr(text)


def _strings(doc: Any) -> set[str]:
    if isinstance(doc, dict):
        return set(doc).union(*(_strings(v) for v in doc.values()))
    if isinstance(doc, list):
        return set().union(*(_strings(v) for v in doc))
    return {doc} if isinstance(doc, str) else set()


@pytest.fixture
def ns(make_world_server):
    return make_world_server()


@pytest_twisted.ensureDeferred
async def test_broker_and_cluster_names_holding_escape_sequences_print_escaped(ns):
    broker = await connect(ns.port)
    request = register_request(
        topic_configs("T", queues=4), cluster=EVIL_CLUSTER, broker_name=EVIL_BROKER
    )
    assert (await broker.request(request)).code == ResponseCode.SUCCESS
    for verb in (("cluster-list",), ("topic-route", "T")):
        text = admin(ns.port, *verb)
        assert text.exit_code == 0, text.output
        _no_raw_controls(text.stdout)
        assert "\\x1b]0;owned\\x07" in text.stdout
        assert "\\nFORGED" in text.stdout  # the name stays on its row
        as_json = admin(ns.port, "--json", *verb)
        assert as_json.exit_code == 0
        _no_raw_controls(as_json.stdout)
        assert EVIL_BROKER in _strings(json.loads(as_json.stdout))  # the same JSON document


@pytest_twisted.ensureDeferred
async def test_a_kv_value_and_a_remark_holding_escape_sequences_print_escaped(ns):
    client = await connect(ns.port)
    put = await client.call(
        RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": f"v{TITLE}"}
    )
    assert put.code == ResponseCode.SUCCESS
    value = admin(ns.port, "kv", "get", "n", "k")
    assert value.exit_code == 0
    _no_raw_controls(value.stdout)
    assert "\\x1b]0;owned" in value.stdout


def test_a_brokers_refusal_prints_its_remark_escaped():
    outcome = BrokerOutcome(f"10.0.0.1:1{TITLE}", EVIL_BROKER, 1, f"no{TITLE}\nFORGED")
    line = outcome.describe()
    _no_raw_controls(line)
    assert "\n" not in line
