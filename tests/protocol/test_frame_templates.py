"""Frame templates: an encoded answer given another opaque is the frame encoding would give, and
requests are answered from templates by their shape only when nothing but the opaque differs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.frame import FrameTemplate, RemotingCommand, TemplateAnswers, encode_command

OPAQUES = st.integers(min_value=-(2**31), max_value=2**31 - 1)


def request(opaque: int, topic: str = "T", **kw) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, opaque=opaque, **kw
    )


def response(opaque: int, body: bytes = b'{"queueDatas":[]}') -> RemotingCommand:
    return request(opaque).make_response(ResponseCode.SUCCESS, None, {"v": "3"}, body)


@given(OPAQUES, OPAQUES, st.binary(max_size=300))
def test_a_template_given_an_opaque_is_the_frame_encoded_with_it(stored, asked, body):
    template = FrameTemplate.of(encode_command(response(stored, body)))
    assert template is not None
    assert template.frame(b"%d" % asked) == encode_command(response(asked, body))
    assert template.nbytes == len(encode_command(response(stored, body))) - 8 - len(b"%d" % stored)


def test_no_template_of_a_binary_header_or_a_header_naming_opaque_twice():
    binary = request(1, serialize_type=SerializeType.ROCKETMQ).make_response(ResponseCode.SUCCESS)
    assert FrameTemplate.of(encode_command(binary)) is None
    twice = response(1)
    twice.ext_fields["opaque"] = "1"
    assert FrameTemplate.of(encode_command(twice)) is None


def stored_answers(opaque: int = 5) -> TemplateAnswers:
    answers = TemplateAnswers()
    frame = encode_command(request(opaque))[4:]
    shape = TemplateAnswers.shape(frame, opaque)
    template = FrameTemplate.of(encode_command(response(opaque)))
    assert shape is not None and template is not None
    answers.put(shape, template)
    return answers


@given(OPAQUES)
def test_a_request_differing_only_in_its_opaque_gets_the_answer_with_its_own(opaque):
    answers = stored_answers()
    assert answers.answer(encode_command(request(opaque))[4:]) == encode_command(response(opaque))
    assert answers.hits == 1


@pytest.mark.parametrize(
    "frame",
    [
        encode_command(request(5, topic="U"))[4:],
        encode_command(request(5, body=b"x"))[4:],
        encode_command(request(5, serialize_type=SerializeType.ROCKETMQ))[4:],
        encode_command(request(5))[4:].replace(b'"opaque":5', b'"opaque":05'),
        encode_command(request(5))[4:].replace(b'"opaque":5', b'"opaque":-'),
        encode_command(request(5))[4:].replace(b'"opaque":5', b'"opaque":+5'),
        encode_command(request(5))[4:].replace(b'"opaque":5', b'"opaque":-05'),
        encode_command(request(5))[4:].replace(b'"opaque":5', b'"opaque":5.0'),
        encode_command(request(5))[4:].replace(b'"opaque":5', b'"opaque":1234567890123'),
        encode_command(request(5))[4:-1],
        b"",
    ],
    ids=[
        "other topic",
        "a body",
        "binary",
        "leading zero",
        "no digits",
        "plus sign",
        "negative leading zero",
        "a fraction",
        "longer than an opaque",
        "cut short",
        "empty",
    ],
)
def test_anything_but_the_stored_shape_is_not_answered(frame):
    answers = stored_answers()
    assert answers.answer(frame) is None
    assert answers.hits == 0


def test_a_shape_is_refused_when_the_header_holds_another_opaque_or_names_it_twice():
    frame = encode_command(request(5))[4:]
    assert TemplateAnswers.shape(frame, 6) is None
    twice = request(5)
    twice.ext_fields["opaque"] = "5"
    assert TemplateAnswers.shape(encode_command(twice)[4:], 5) is None
    assert TemplateAnswers.shape(encode_command(request(5, body=b"x"))[4:], 5) is None


def test_a_popped_shape_is_no_longer_answered_and_gives_its_template_back():
    answers = stored_answers()
    shape = TemplateAnswers.shape(encode_command(request(5))[4:], 5)
    assert shape is not None
    popped = answers.pop(shape)
    assert popped == FrameTemplate.of(encode_command(response(5)))
    assert len(answers) == 0 and answers.pop(shape) is None
    assert answers.answer(encode_command(request(7))[4:]) is None


@pytest.mark.parametrize("opaque", [0, 7, -3, -(2**31), 2**31 - 1])
def test_an_opaque_ending_the_header_is_answered_like_one_followed_by_a_field(opaque):
    """The opaque's digits end at a comma or at the header's closing brace."""
    answers = TemplateAnswers()
    last = encode_command(request(5))[4:].replace(b',"opaque":5', b"")[:-1] + b',"opaque":5}'
    last = len(last[4:]).to_bytes(4, "big") + last[4:]
    shape = TemplateAnswers.shape(last, 5)
    template = FrameTemplate.of(encode_command(response(5)))
    assert shape is not None and template is not None
    answers.put(shape, template)
    asked = last.replace(b'"opaque":5}', b'"opaque":%d}' % opaque)
    asked = len(asked[4:]).to_bytes(4, "big") + asked[4:]
    assert answers.answer(asked) == encode_command(response(opaque))
