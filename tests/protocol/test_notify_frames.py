"""NOTIFY frames built from a shared prefix decode exactly as a full serialisation would."""

from __future__ import annotations

import pytest

from protocol import routepush_pb2 as pb
from protocol.codes import RequestCode, SerializeType
from protocol.frame import FrameDecoder
from protocol.notify_frames import NotifyFrames
from protocol.push_codec import decode_notification
from protocol.push_events import TopicChange


@pytest.mark.parametrize("kind", list(SerializeType))
@pytest.mark.parametrize("sequence", [1, 127, 128, 16383, 16384, 2**40])
def test_frame_decodes_to_the_whole_message(kind, sequence):
    frames = NotifyFrames("epoch-1")
    frames.start_tick(1_700_000_000_123)
    changes = (TopicChange("T", 3, 0), TopicChange("U", 1, 1))
    raw = frames.frame(changes, (), sequence, kind)
    [cmd] = FrameDecoder().feed(raw)
    assert cmd.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED and cmd.is_oneway
    assert cmd.serialize_type == kind
    expected = pb.TopicRouteChanged(
        sequence=sequence, emitted_at_ms=1_700_000_000_123, epoch="epoch-1"
    )
    for topic, version, change_kind, _route in changes:
        expected.changes.add(topic=topic, version=version, kind=change_kind)  # type: ignore[arg-type]
    assert pb.TopicRouteChanged.FromString(cmd.body) == expected
    note = decode_notification(cmd.body)
    assert (note.changes, note.sequence, note.epoch) == (changes, sequence, "epoch-1")


def test_topics_of_a_tick_are_collected_and_reset():
    frames = NotifyFrames("e")
    frames.start_tick(1)
    frames.frame((TopicChange("T", 1, 0),), (), 1)
    frames.frame((TopicChange("T", 1, 0), TopicChange("U", 2, 0)), (), 1)
    assert frames.topics == {"T", "U"}
    frames.start_tick(2)
    assert frames.topics == set()


def test_inline_routes_ride_in_their_change_and_plain_frames_stay_shared():
    frames = NotifyFrames("e")
    frames.start_tick(5)
    changes = (("T", 3, 0), ("U", 4, 0), ("V", 2, 2))
    plain = frames.frame(changes, (), 7)
    inline = frames.frame(changes, (), 7, routes=(b'{"route":"T"}', b"", b""))
    assert frames.frame(changes, (), 7) == plain  # the plain frame is not the inline one
    [plain_cmd] = FrameDecoder().feed(plain)
    [inline_cmd] = FrameDecoder().feed(inline)
    assert [c.route for c in decode_notification(plain_cmd.body).changes] == [b"", b"", b""]
    note = decode_notification(inline_cmd.body)
    assert note.changes == (
        TopicChange("T", 3, 0, b'{"route":"T"}'),
        TopicChange("U", 4, 0),
        TopicChange("V", 2, 2),
    )
    assert note.sequence == 7


def test_an_inline_route_for_every_change_or_none():
    frames = NotifyFrames("e")
    frames.start_tick(5)
    with pytest.raises(ValueError):
        frames.frame((("T", 3, 0), ("U", 4, 0)), (), 1, routes=(b"x",))
