"""Log lines a peer can cause: paced per kind, its strings cut short, no control character.

Each test plays a broker or client that tries to flood the log or forge a line in it, and
measures the log it got: lines, bytes, and whether any line holds a peer's line break. The
server and the peers live in the deterministic world (``support.memory_world``).
"""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest_twisted
from support.memory_world import connect, kept_in_use
from support.register_bodies import plain_body, register
from twisted.internet import defer, task

from namesrv.cli import MAX_LINE_CHARS, EscapingFilter
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.paced_log import PacedLog
from protocol.peer_text import printable
from protocol.route_model import QueueData, TopicRouteData

FORGED = "x\n2026-01-01 00:00:00,000 ERROR namesrv.server: FORGED"


async def _answered(ns: Any, d: defer.Deferred[Any]) -> Any:
    """The answer to a request, once the world has run the server's slices of it."""
    return await d


def _logged(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def _no_forged_line(lines: list[str]) -> None:
    for line in lines:
        assert "\n" not in line and "\r" not in line, line
    assert any("FORGED" in line for line in lines)  # the name was logged, escaped


@pytest_twisted.ensureDeferred
async def test_a_topic_registered_for_thousands_of_unknown_brokers_logs_one_short_paced_line_each(
    make_world_server, caplog
):
    ns = make_world_server()
    client = await connect(ns.port)
    unknown = [QueueData(f"{'b' * 50}{i}", 4, 4, 6, 0) for i in range(7_747)]
    body = bodies.encode_route(
        TopicRouteData(queue_datas=unknown, broker_datas=[]), standard_json=True
    )
    with caplog.at_level(logging.INFO):
        for i in range(50):
            resp = await client.call(
                RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": f"T{i}"}, body
            )
            assert resp.code == ResponseCode.SUCCESS
    lines = [line for line in _logged(caplog) if "REGISTER_TOPIC_IN_NAMESRV" in line]
    assert len(lines) == 5  # the burst of one kind in its period
    assert all("7747 unknown brokers" in line for line in lines)
    assert sum(len(line) for line in lines) < 5 * 500  # was 1.25 MB per request
    ns.clock.advance(10)
    with caplog.at_level(logging.INFO):
        await client.call(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "again"}, body)
    assert "45 more like this" in _logged(caplog)[-1]


@pytest_twisted.ensureDeferred
async def test_a_broker_heartbeat_timeout_below_the_floor_is_raised_to_it(
    make_world_server, caplog
):
    ns = make_world_server({"registry": {"scan_interval_ms": 100}})
    broker = await connect(ns.port)
    request = register(plain_body(["T1"], 1), name="b" * 30_000)
    request.ext_fields["heartbeatTimeoutMillis"] = "10"
    assert (await _answered(ns, broker.request(request))).code == ResponseCode.SUCCESS
    ns.clock.advance(0.9)  # nine scans past the broker's 10 ms, under the 1,000 ms floor
    assert ns.server.registry.broker_count == 1
    with caplog.at_level(logging.INFO):
        ns.clock.advance(0.2)
    assert ns.server.registry.broker_count == 0
    lines = [line for line in _logged(caplog) if "expired" in line]
    assert lines and all(len(line) < 600 for line in lines)  # a 30 KB name, cut


@pytest_twisted.ensureDeferred
async def test_names_carrying_a_forged_line_are_escaped_on_every_path(make_world_server, caplog):
    ns = make_world_server({"registry": {"scan_interval_ms": 100}})
    client = await connect(ns.port)
    with caplog.at_level(logging.INFO):
        # wipe perm of a made-up broker
        wipe = await client.call(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": FORGED})
        assert wipe.code == ResponseCode.SUCCESS
        # a topic registered for an unknown broker
        body = bodies.encode_route(
            TopicRouteData(queue_datas=[QueueData(FORGED, 4, 4, 6, 0)], broker_datas=[]),
            standard_json=True,
        )
        await client.call(RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "T"}, body)
        # a broker that expires
        request = register(plain_body(["T1"], 1), name=FORGED)
        request.ext_fields["clusterName"] = FORGED
        assert (await _answered(ns, client.request(request))).code == ResponseCode.SUCCESS
        # Silent, its connection in use: it leaves by expiry.
        await kept_in_use(ns.server.config.registry.broker_expiry_ms / 1000 + 1, client)
    assert ns.server.registry.broker_count == 0
    lines = _logged(caplog)
    _no_forged_line(lines)
    assert sum("FORGED" in line for line in lines) >= 3
    assert any("expired" in line and "FORGED" in line for line in lines)


def test_the_escaping_filter_keeps_every_line_one_line_and_cut(caplog):
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(EscapingFilter())
    logger = logging.getLogger("test.escaping")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("unpaced line naming %s and \x1b]0;title\x07", FORGED)
        logger.warning("huge %s", "y" * 100_000)
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    written = out.getvalue().splitlines()
    assert len(written) == 2
    assert "\\n2026-01-01" in written[0] and "\\x1b]0;title\\x07" in written[0]
    assert len(written[1]) < MAX_LINE_CHARS + 100


def test_printable_escapes_controls_separators_and_bidi_and_cuts():
    shown = printable("a\nb\rc\x00d\x7fe\x9bf\u2028g\u202eh\ud800i", None)
    assert shown == "a\\nb\\rc\\x00d\\x7fe\\x9bf\\u2028g\\u202eh\\ud800i"
    assert printable("z" * 300, 10) == "zzzzzzzzzz...(+290 chars)"
    assert printable("Topic_中文-ok") == "Topic_中文-ok"


def test_the_pacer_escapes_and_cuts_its_string_arguments(caplog):
    paced = PacedLog(logging.getLogger("paced.escape"), task.Clock().seconds, shown_chars=20)
    with caplog.at_level(logging.INFO, logger="paced.escape"):
        paced.warning("k", "refused %s (%d)", FORGED, 7)
    (line,) = _logged(caplog)
    assert "\n" not in line and line.endswith("chars) (7)")
