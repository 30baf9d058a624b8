"""The ``namesrv`` process: flags or TOML config, refusal of bad config, clean stop on signals."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from protocol import routepush_pb2 as pb
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command

ROOT = Path(__file__).resolve().parent.parent


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "namesrv", *args],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        stderr=subprocess.PIPE,
        text=True,
    )


def bound_port(proc: subprocess.Popen[str]) -> int:
    for line in proc.stderr:  # type: ignore[union-attr]
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            return int(match.group(1))
    raise AssertionError(f"the name server never said where it listens (exit {proc.wait()})")


def read_frames(sock: socket.socket, count: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    while len(out) < count:
        data = sock.recv(65536)
        if not data:
            break
        out += decoder.feed(data)
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_sends_go_away_to_subscribers_only_then_the_process_exits_cleanly(tmp_path, sig):
    config = tmp_path / "namesrv.toml"
    config.write_text(
        '[server]\nshutdown_grace_ms = 300\ngo_away_alternatives = ["10.0.0.9:9876"]\n'
    )
    proc = spawn("--listen", "127.0.0.1:0", "--config", str(config))
    try:
        port = bound_port(proc)
        with (
            socket.create_connection(("127.0.0.1", port), timeout=20) as sock,
            socket.create_connection(("127.0.0.1", port), timeout=20) as upstream,
        ):
            subscribe = RemotingCommand.request(
                RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
                body=pb.SubscribeTopicRoute(topics=["T"], client_id="c").SerializeToString(),
            )
            sock.sendall(encode_command(subscribe))
            assert read_frames(sock, 1)[0].code == ResponseCode.SUCCESS
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
            upstream.sendall(encode_command(request))
            [answer] = read_frames(upstream, 1)
            assert answer.code == ResponseCode.TOPIC_NOT_EXIST
            proc.send_signal(sig)
            [go_away] = read_frames(sock, 1)
            assert go_away.code == RequestCode.GO_AWAY and go_away.is_oneway
            body = pb.GoAway.FromString(go_away.body)
            assert body.grace_period_ms == 300
            assert list(body.alternative_addrs) == ["10.0.0.9:9876"]
            # Both still served during the grace period; the upstream-style client never sees
            # 7004 (an Apache client logs an error for a request code it does not know).
            for peer in (sock, upstream):
                peer.sendall(encode_command(request))
                [again] = read_frames(peer, 1)
                assert again.code == ResponseCode.TOPIC_NOT_EXIST
            assert read_frames(sock, 1) == []  # then closed
            assert read_frames(upstream, 1) == []
        assert proc.wait(timeout=20) == 0
    finally:
        proc.kill()


def test_bad_config_is_refused_with_the_key_named(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[push]\ntick_interval_ms = 5\n")
    proc = spawn("--config", str(config))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "push.tick_interval_ms" in err


def test_unknown_listen_address_is_refused():
    proc = spawn("--listen", "nowhere")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "nowhere" in err
