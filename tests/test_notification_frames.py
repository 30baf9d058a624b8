"""NOTIFY frames built from a shared prefix decode exactly as a full serialisation would."""

from __future__ import annotations

import pytest

from namesrv.change_detector import Notification
from namesrv.notification_frames import NotificationFrames
from protocol import routepush_pb2 as pb
from protocol.codes import RequestCode, SerializeType
from protocol.frame import FrameDecoder


@pytest.mark.parametrize("kind", list(SerializeType))
@pytest.mark.parametrize("sequence", [1, 127, 128, 16383, 16384, 2**40])
def test_frame_decodes_to_the_whole_message(kind, sequence):
    frames = NotificationFrames("epoch-1")
    frames.start_tick(1_700_000_000_123)
    changes = (("T", 3, 0), ("U", 1, 1))
    raw = frames.frame(Notification("c", changes, sequence, 1_700_000_000_123, "epoch-1"), kind)
    [cmd] = FrameDecoder().feed(raw)
    assert cmd.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED and cmd.is_oneway
    assert cmd.serialize_type == kind
    expected = pb.TopicRouteChanged(
        sequence=sequence, emitted_at_ms=1_700_000_000_123, epoch="epoch-1"
    )
    for topic, version, change_kind in changes:
        expected.changes.add(topic=topic, version=version, kind=change_kind)  # type: ignore[arg-type]
    assert pb.TopicRouteChanged.FromString(cmd.body) == expected


def test_topics_of_a_tick_are_collected_and_reset():
    frames = NotificationFrames("e")
    frames.start_tick(1)
    frames.frame(Notification("a", (("T", 1, 0),), 1, 1, "e"))
    frames.frame(Notification("b", (("T", 1, 0), ("U", 2, 0)), 1, 1, "e"))
    assert frames.topics == {"T", "U"}
    frames.start_tick(2)
    assert frames.topics == set()
