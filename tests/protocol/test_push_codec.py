from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import push_codec, routepush_pb2
from protocol import routepush_pb2 as pb
from protocol.codes import ResponseCode
from protocol.errors import BodyError
from protocol.push_codec import (
    ChangeKind,
    decode_notification,
    decode_subscribe,
    encode_notification,
    encode_subscribe,
)
from protocol.push_events import (
    BrokerAddress,
    BrokerChange,
    BrokerChangeKind,
    RouteChanged,
    Subscribe,
    TopicChange,
    TopicStep,
)

topic_names = st.text(alphabet="abcXYZ019_%|-", min_size=1, max_size=20)
u64 = st.integers(min_value=0, max_value=2**64 - 1)


def test_change_kind_numbers_match_the_proto_enum() -> None:
    assert {kind.name: kind.value for kind in ChangeKind} == dict(routepush_pb2.ChangeKind.items())
    assert (ChangeKind.UPDATED, ChangeKind.CREATED, ChangeKind.DELETED) == (0, 1, 2)
    assert ChangeKind.UNROUTED == 3


def test_subscribe_ack_carries_the_start_up_window_and_deletions() -> None:
    body = push_codec.encode_subscribe_ack(
        [("a", 3, True), ("gone", 7, False, True), ("ghost", 0, False)],
        "e",
        warming_up=True,
        warm_in_ms=1_500,
        uptime_ms=43_500,
    )
    ack = push_codec.decode_subscribe_ack(body)
    assert [(t.topic, t.exists, t.deleted) for t in ack.topics] == [
        ("a", True, False),
        ("gone", False, True),
        ("ghost", False, False),
    ]
    assert (ack.warming_up, ack.warm_in_ms, ack.uptime_ms) == (True, 1_500, 43_500)


def test_subscribe_ack_of_an_older_server_reads_as_warm() -> None:
    old = routepush_pb2.SubscribeAck(
        topics=[routepush_pb2.TopicVersion(topic="a", version=1, exists=True)], epoch="e"
    ).SerializeToString()
    ack = push_codec.decode_subscribe_ack(old)
    assert (ack.warming_up, ack.warm_in_ms, ack.uptime_ms) == (False, 0, 0)
    assert ack.topics[0].deleted is False


def test_subscribe_round_trip() -> None:
    body = push_codec.encode_subscribe(["TopicA", "TopicB"], "client@1")
    msg = push_codec.decode_subscribe(body)
    assert list(msg.topics) == ["TopicA", "TopicB"]
    assert msg.client_id == "client@1"


def test_subscribe_golden_bytes() -> None:
    assert push_codec.encode_subscribe(["T"], "c") == b"\x0a\x01T\x12\x01c"


def test_unsubscribe_round_trip() -> None:
    body = push_codec.encode_unsubscribe(["a", "b"])
    assert list(push_codec.decode_unsubscribe(body).topics) == ["a", "b"]


def test_subscribe_ack_round_trip() -> None:
    body = push_codec.encode_subscribe_ack([("a", 3, True), ("ghost", 0, False)], "epoch-1")
    msg = push_codec.decode_subscribe_ack(body)
    assert [(t.topic, t.version, t.exists) for t in msg.topics] == [
        ("a", 3, True),
        ("ghost", 0, False),
    ]
    assert msg.epoch == "epoch-1"


def test_go_away_round_trip() -> None:
    body = push_codec.encode_go_away(5000, ["10.0.0.2:9876", "10.0.0.3:9876"], "shutdown")
    msg = push_codec.decode_go_away(body)
    assert msg.grace_period_ms == 5000
    assert list(msg.alternative_addrs) == ["10.0.0.2:9876", "10.0.0.3:9876"]
    assert msg.reason == "shutdown"


@given(
    changes=st.lists(st.tuples(topic_names, u64, st.sampled_from(list(ChangeKind))), max_size=20),
    sequence=u64,
    emitted_at_ms=st.integers(min_value=-(2**63), max_value=2**63 - 1),
    epoch=st.text(max_size=40),
)
def test_notification_round_trip(
    changes: list[tuple[str, int, ChangeKind]], sequence: int, emitted_at_ms: int, epoch: str
) -> None:
    body = push_codec.encode_notification(changes, sequence, emitted_at_ms, epoch)
    msg = push_codec.decode_notification(body)
    assert [(c.topic, c.version, c.kind) for c in msg.changes] == changes
    assert (msg.sequence, msg.emitted_at_ms, msg.epoch) == (sequence, emitted_at_ms, epoch)


def test_notification_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError):
        push_codec.encode_notification([("a", 1, 7)], 1, 0, "e")


def test_empty_body_parses_to_the_empty_message() -> None:
    msg = push_codec.decode_subscribe(b"")
    assert list(msg.topics) == []


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x0a\x05ab",  # length runs past the end
        b"\x0a\x02\xff\xfe",  # string field with bad UTF-8
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",  # overlong varint tag
        b"\x0f",  # field 1 with wire type 7 (invalid)
    ],
)
def test_garbage_becomes_body_error_naming_the_message(garbage: bytes) -> None:
    with pytest.raises(BodyError) as info:
        push_codec.decode_subscribe(garbage)
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    assert "routepush.v1.SubscribeTopicRoute" in info.value.remark


def test_non_bytes_body_becomes_body_error() -> None:
    with pytest.raises(BodyError):
        push_codec.decode_go_away("not bytes")  # type: ignore[arg-type]


@given(st.binary(max_size=64))
def test_any_bytes_either_parse_or_raise_body_error(data: bytes) -> None:
    try:
        push_codec.decode_notification(data)
    except BodyError as exc:
        assert exc.code == ResponseCode.INVALID_PARAMETER


def test_notification_with_broker_entries_round_trips_as_typed_values() -> None:
    departed = BrokerChange(
        kind=BrokerChangeKind.DEPARTED,
        broker_name="broker-a",
        cluster="c1",
        addrs=(BrokerAddress(0, "10.0.0.1:10911"),),
        cause="unregister",
        broker_name_gone=True,
        read_only=False,
        topics=(TopicStep("T", 4, 3),),
        refetch_window_ms=900,
    )
    changes = (TopicChange("U", 2, ChangeKind.CREATED),)
    body = push_codec.encode_notification(changes, 9, 1_700_000_000_000, "e", (departed,))
    assert push_codec.decode_notification(body) == RouteChanged(
        changes, 9, 1_700_000_000_000, "e", (departed,)
    )


@given(
    changes=st.lists(st.tuples(topic_names, u64, st.sampled_from(list(ChangeKind))), max_size=5),
    sequence=u64,
)
def test_a_shared_prefix_and_a_sequence_parse_as_the_whole_message(changes, sequence) -> None:
    body = push_codec.notification_prefix(changes, 5, "e") + push_codec.sequence_suffix(sequence)
    whole = routepush_pb2.TopicRouteChanged(sequence=sequence, emitted_at_ms=5, epoch="e")
    for topic, version, kind in changes:
        whole.changes.add(topic=topic, version=version, kind=kind)
    assert routepush_pb2.TopicRouteChanged.FromString(body) == whole


# -- inline routes: old and new peers, both ways ------------------------------------------------


def _old_schema() -> Any:
    """The extension's messages as a peer built before inline routes knows them."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto()
    pb.DESCRIPTOR.CopyToProto(proto)
    for message in proto.message_type:
        kept = [f for f in message.field if f.name not in ("inline_routes", "route")]
        del message.field[:]
        message.field.extend(kept)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)

    class Old:
        SubscribeTopicRoute = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("routepush.v1.SubscribeTopicRoute")
        )
        TopicRouteChanged = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("routepush.v1.TopicRouteChanged")
        )

    return Old


def test_an_old_server_reads_a_subscribe_asking_for_inline_routes_as_before():
    old = _old_schema()
    msg = old.SubscribeTopicRoute.FromString(encode_subscribe(["T", "U"], "c", True))
    assert (list(msg.topics), msg.client_id) == (["T", "U"], "c")


def test_an_old_clients_subscribe_asks_for_no_inline_routes():
    body = _old_schema().SubscribeTopicRoute(topics=["T"], client_id="c").SerializeToString()
    assert decode_subscribe(body) == Subscribe(("T",), "c", False)
    assert decode_subscribe(encode_subscribe(["T"], "c", True)).inline_routes


def test_an_old_client_reads_a_notification_with_inline_routes_as_a_plain_one():
    body = encode_notification(
        [("T", 3, 0), ("U", 2, 1)], 5, 1000, "e", routes=(b'{"queueDatas":[]}', b"")
    )
    old = _old_schema().TopicRouteChanged.FromString(body)
    assert [(c.topic, c.version, c.kind) for c in old.changes] == [("T", 3, 0), ("U", 2, 1)]
    assert (old.sequence, old.epoch) == (5, "e")
    new = decode_notification(body)
    assert [c.route for c in new.changes] == [b'{"queueDatas":[]}', b""]


def test_a_notification_of_an_old_server_carries_no_inline_route():
    old = _old_schema().TopicRouteChanged(sequence=1, epoch="e")
    old.changes.add(topic="T", version=3, kind=0)
    [change] = decode_notification(old.SerializeToString()).changes
    assert change == TopicChange("T", 3, 0) and change.route == b""
