"""The connection's one door up: a connection built against a fake owner, no server at all.

The owner records every call the connection makes; each test pins what a connection reports
through :class:`~namesrv.net.connection.ConnectionOwner` and when.
"""

from __future__ import annotations

import logging
import struct
from collections import Counter
from collections.abc import Callable
from typing import Any

from twisted.internet import task
from twisted.internet.testing import StringTransport

from namesrv.config import ServerConfig
from namesrv.net.connection import ConnectionOwner, NamesrvConnection
from namesrv.net.input_bounds import InputBounds
from protocol.codes import RequestCode, SerializeType
from protocol.errors import FrameError
from protocol.frame import FrameDecoder, RemotingCommand, SplitFrame, decode_frame, encode_command
from protocol.paced_log import PacedLog


class Cache:
    def __init__(self) -> None:
        self.answers: dict[bytes, bytes] = {}

    def answer(self, frame: bytes) -> bytes | None:
        return self.answers.get(frame)


class Poll:
    dispatching = False


class FakeOwner:
    """Records what its connections tell it; admits unless told not to."""

    def __init__(self, admit: bool = True) -> None:
        self.clock = task.Clock()
        self.route_cache = Cache()
        self.dispatching_reactor: Poll | None = None
        self.admit = admit
        self.calls: list[tuple[Any, ...]] = []
        self.frames: list[RemotingCommand] = []
        self.held: list[NamesrvConnection] = []

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    def call_soon(self, call: Callable[[], object]) -> Any:
        return self.clock.callLater(0, call)

    def connection_made(self, conn: NamesrvConnection) -> bool:
        self.calls.append(("made", conn.conn_id))
        return self.admit

    def connection_lost(self, conn: NamesrvConnection) -> None:
        self.calls.append(("lost", conn.conn_id))

    def input_changed(
        self, conn: NamesrvConnection, partial: int, kept: int, *, frame_begun: bool = False
    ) -> None:
        self.calls.append(("input", partial > 0, kept))

    def stream_refused(self, conn: NamesrvConnection, error: FrameError) -> None:
        self.calls.append(("stream_refused", error.kind))
        conn.close(abort=True)

    def header_refused(
        self, conn: NamesrvConnection, error: FrameError, frame: bytes | SplitFrame
    ) -> None:
        self.calls.append(("header_refused", error.kind))

    def frame_received(
        self, conn: NamesrvConnection, command: RemotingCommand, frame: bytes | SplitFrame
    ) -> None:
        self.frames.append(command)
        conn.send(encode_command(command.make_response(0, f"answer {command.opaque}")))

    def output_held(self, conn: NamesrvConnection) -> None:
        self.held.append(conn)

    def requests_dropped(self, conn: NamesrvConnection, count: int) -> None:
        self.calls.append(("dropped", count))


def connect(
    owner: FakeOwner, config: ServerConfig | None = None
) -> tuple[NamesrvConnection, StringTransport]:
    door: ConnectionOwner = owner
    conn = NamesrvConnection(door, 7, config or ServerConfig())
    transport = StringTransport()
    conn.makeConnection(transport)
    return conn, transport


def request(opaque: int, code: int = RequestCode.GET_BROKER_CLUSTER_INFO) -> bytes:
    return encode_command(RemotingCommand.request(code, opaque=opaque))


def opaques(written: bytes) -> list[int]:
    return [decode_frame(f).opaque for f in FrameDecoder().feed_raw(written)]


def test_frames_the_cache_cannot_answer_are_handed_up_in_order_and_cached_ones_are_not():
    owner = FakeOwner()
    conn, out = connect(owner)
    cached = request(2)
    owner.route_cache.answers[cached[4:]] = encode_command(
        RemotingCommand(code=0, opaque=2, flag=1, remark="from the cache")
    )
    conn.dataReceived(request(1) + cached + request(3))
    assert [c.opaque for c in owner.frames] == [1, 3]
    assert opaques(out.value()) == [1, 2, 3]  # one write for the read, answers in order
    assert owner.calls == [("made", 7)]  # whole frames: no input held, nothing reported


def test_a_partial_frame_is_reported_as_held_input_until_it_completes():
    owner = FakeOwner()
    conn, _ = connect(owner)
    raw = request(1)
    conn.dataReceived(raw[:10])
    conn.dataReceived(raw[10:])
    assert owner.calls[1:] == [("input", True, 0), ("input", False, 0)]
    assert [c.opaque for c in owner.frames] == [1]
    conn.dataReceived(request(2))
    assert len(owner.calls) == 3  # nothing held before or after: no report


def test_a_refused_connection_aborts_and_hands_nothing_up():
    owner = FakeOwner(admit=False)
    conn, out = connect(owner)
    assert conn.closing and out.disconnecting
    conn.dataReceived(request(1))
    assert owner.frames == [] and out.value() == b""


def test_a_bad_header_is_reported_and_the_stream_goes_on_until_it_cannot_be_read():
    owner = FakeOwner()
    conn, _ = connect(owner)
    header = b'{"code":"105","opaque":9,"flag":0}'  # a code that is not a number
    bad = struct.pack(">II", 4 + len(header), len(header)) + header
    conn.dataReceived(bad + request(5))
    assert [c[0] for c in owner.calls[1:]] == ["header_refused"]
    assert [c.opaque for c in owner.frames] == [5]
    conn.dataReceived(b"\xff" * 16)  # a frame length past server.max_frame_size
    assert owner.calls[-1] == ("stream_refused", "frame_too_large")
    assert conn.closing
    conn.dataReceived(request(6))
    assert [c.opaque for c in owner.frames] == [5]


def test_output_of_a_poll_is_held_and_the_owner_told_once_per_poll():
    owner = FakeOwner()
    owner.dispatching_reactor = poll = Poll()
    conn, out = connect(owner)
    poll.dispatching = True
    conn.dataReceived(request(1))
    conn.dataReceived(request(2))
    assert out.value() == b"" and owner.held == [conn]
    poll.dispatching = False
    conn.write_held()
    assert opaques(out.value()) == [1, 2]


def test_a_closing_connection_reports_its_kept_requests_dropped_and_its_loss():
    owner = FakeOwner()
    conn, out = connect(owner, ServerConfig(output_buffer_bytes=1))
    conn.dataReceived(request(1) + request(2) + request(3))
    assert opaques(out.value()) == [1] and conn.kept_requests == 2
    assert owner.calls[-1] == ("input", False, conn.kept_input) and conn.kept_input > 0
    conn.close(abort=False)
    conn.connectionLost(None)
    assert owner.calls[-3:] == [("input", False, 0), ("dropped", 2), ("lost", 7)]


def test_noting_the_extension_records_the_serialize_type_for_notifications():
    conn, _ = connect(FakeOwner())
    assert not conn.speaks_extension and conn.serialize_type == SerializeType.JSON
    conn.note_extension(SerializeType.ROCKETMQ)
    assert conn.speaks_extension and conn.serialize_type == SerializeType.ROCKETMQ


# -- the bound the hub asks ------------------------------------------------------------------


class Held:
    def __init__(self, conn_id: int) -> None:
        self.conn_id = conn_id
        self.peer = f"10.0.0.{conn_id}:1"
        self.closing = False
        self.last_request_ms = 0


def bounds(**server: int) -> tuple[InputBounds, Counter[str]]:
    counters: Counter[str] = Counter()
    config = ServerConfig(output_buffer_bytes=1024, max_frame_size=1024, **server)
    return InputBounds(config, counters, PacedLog(logging.getLogger(__name__))), counters


def test_past_the_input_bound_the_biggest_holders_are_returned_to_shed():
    bound, counters = bounds(max_buffered_input_bytes=4096)  # 3072 once a read is set aside
    small, big, third = Held(1), Held(2), Held(3)
    assert bound.held(small, 1000, 0, 0) == []
    assert bound.held(big, 2000, 0, 0) == []
    assert bound.held(third, 0, 1500, 0) == [big]  # 4500 > 3072: the biggest goes first
    assert bound.buffered == 2500 and counters["input_bound_closes"] == 1
    assert bound.held(big, 0, 0, 0) == []  # its last report after the release changes nothing
    assert bound.buffered == 2500


def test_input_that_shrinks_never_sheds_and_overdue_frames_are_returned():
    bound, counters = bounds(max_buffered_input_bytes=2048, frame_timeout_ms=30_000)  # 1024
    a, b, c = Held(1), Held(2), Held(3)
    a.closing = True  # nobody to shed: the total stays over the bound
    assert bound.held(a, 2000, 0, 0) == [] and bound.buffered == 2000
    a.closing = False
    assert bound.held(a, 1500, 0, 0) == []  # over the bound still, but it shrank
    assert bound.held(b, 10, 0, 5) == [a]  # it grew: the biggest goes
    assert bound.held(c, 0, 10, 5) == []
    assert bound.overdue([a, b, c], 30_004, lambda conn: True) == []
    assert bound.overdue([a, b, c], 30_005, lambda conn: True) == [b]  # kept frames never are
    assert counters["frame_timeouts"] == 1 and bound.buffered == 10


def test_idle_connections_are_returned_unless_kept():
    bound, counters = bounds(idle_timeout_ms=120_000)
    idle, subscribed, busy = Held(1), Held(2), Held(3)
    busy.last_request_ms = 1
    found = bound.overdue([idle, subscribed, busy], 120_000, lambda conn: conn is subscribed)
    assert found == [idle] and counters["idle_closes"] == 1


def test_a_served_connection_keeps_its_state_in_slots_not_a_per_instance_dict():
    """Tens of thousands of idle connections are held: each one's state lives in slots, and
    only what Twisted's base protocol sets itself (its transport) goes to an instance dict."""
    owner = FakeOwner()
    conn, _transport = connect(owner)
    conn.dataReceived(request(1))
    owner.clock.advance(0)
    assert set(vars(conn)) <= {"transport", "connected"}
    assert conn._after_stream is None  # queued output behind a shared answer is made lazily
