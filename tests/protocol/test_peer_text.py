"""fastjson's dialect: bare integer keys out and in, bounded and strict otherwise."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol import peer_text
from protocol.codes import ResponseCode
from protocol.errors import BodyError

ADDRS = {0: "10.0.0.1:10911", 1: "10.0.0.9:10911"}


def test_dumps_writes_int_keys_bare_as_fastjson_does_for_long_keys():
    out = peer_text.dumps({"brokerAddrs": ADDRS}, unquoted_int_keys=True)
    assert out == b'{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.9:10911"}}'


def test_dumps_quotes_int_keys_for_standard_json():
    out = peer_text.dumps({"brokerAddrs": ADDRS}, unquoted_int_keys=False)
    assert out == b'{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.9:10911"}}'
    assert json.loads(out) == {"brokerAddrs": {"0": "10.0.0.1:10911", "1": "10.0.0.9:10911"}}


def test_dumps_is_compact_utf8_and_keeps_insertion_order_unless_sorted():
    doc = {"b": [1, 2.5, None, True, False], "a": "é"}
    assert (
        peer_text.dumps(doc, unquoted_int_keys=True)
        == '{"b":[1,2.5,null,true,false],"a":"é"}'.encode()
    )
    assert peer_text.dumps(doc, unquoted_int_keys=True, sort_keys=True).startswith(b'{"a":')


def test_dumps_sorts_int_keys_numerically_like_map_sort_field():
    out = peer_text.dumps({10: "x", 2: "y", -1: "z"}, unquoted_int_keys=True, sort_keys=True)
    assert out == b'{-1:"z",2:"y",10:"x"}'


def test_dumps_ascii_only_escapes_non_ascii():
    assert (
        peer_text.dumps({"k": "é"}, unquoted_int_keys=False, ascii_only=True) == b'{"k":"\\u00e9"}'
    )


def test_dumps_writes_an_int_enum_as_its_number():
    assert peer_text.dumps([ResponseCode.TOPIC_NOT_EXIST], unquoted_int_keys=True) == b"[17]"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {1.5: "x"}, {None: 1}, object()])
def test_dumps_refuses_what_json_cannot_carry(bad):
    with pytest.raises((TypeError, ValueError)):
        peer_text.dumps(bad, unquoted_int_keys=True)


def test_loads_accepts_standard_json():
    assert peer_text.loads(b'{"a": [1, "x"], "b": {"0": "y"}}') == {"a": [1, "x"], "b": {"0": "y"}}


def test_loads_accepts_bare_integer_keys_as_strings():
    body = b'{"brokerAddrs":{0:"a:1", 1 : "b:2",-3:"c:3"}}'
    assert peer_text.loads(body) == {"brokerAddrs": {"0": "a:1", "1": "b:2", "-3": "c:3"}}


def test_loads_accepts_str_input():
    assert peer_text.loads('{0:"x"}') == {"0": "x"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a":"{0:\\"x\\",1:2}",2:"b"}', {"a": '{0:"x",1:2}', "2": "b"}),
        ('{"k,1:":"v,2:",3:"{4:5}"}', {"k,1:": "v,2:", "3": "{4:5}"}),
        ('{"q":"\\\\",7:"\\"8:\\""}', {"q": "\\", "7": '"8:"'}),
        (
            '{"10.0.0.1:10911":[1,2],"x":{5:"1:2,3:4"}}',
            {"10.0.0.1:10911": [1, 2], "x": {"5": "1:2,3:4"}},
        ),
    ],
)
def test_loads_leaves_digits_and_colons_inside_strings_alone(text, expected):
    assert peer_text.loads(text) == expected


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"{",
        b'{"a":}',
        b"{a:1}",
        b"[1,2:3]",
        b'{"a":1,}',
        b"{'a':1}",
        b'{"a":NaN}',
        b"Infinity",
    ],
)
def test_loads_refuses_invalid_json_with_a_body_error(bad):
    with pytest.raises(BodyError) as info:
        peer_text.loads(bad)
    assert info.value.code == ResponseCode.INVALID_PARAMETER
    assert "invalid JSON" in info.value.remark


def test_loads_refuses_non_utf8_naming_the_byte():
    with pytest.raises(BodyError, match=r"not valid UTF-8.*byte 6"):
        peer_text.loads(b'{"a":"\xff"}')


def test_loads_accepts_nesting_up_to_the_bound():
    depth = peer_text.MAX_DEPTH
    assert peer_text.loads("[" * depth + "]" * depth) is not None


@pytest.mark.parametrize("depth", [peer_text.MAX_DEPTH + 1, 100_000])
def test_loads_refuses_nesting_past_the_bound_without_recursing(depth):
    with pytest.raises(BodyError, match="nests deeper"):
        peer_text.loads(b"[" * depth + b"]" * depth)
    with pytest.raises(BodyError, match="nests deeper"):
        peer_text.loads(b"{0:" * depth + b"1" + b"}" * depth)


def test_brackets_inside_strings_do_not_count_as_nesting():
    text = '{"s":"' + "[{" * 1000 + '"}'
    assert peer_text.loads(text) == {"s": "[{" * 1000}


# -- property: what dumps writes, loads reads back --------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_docs = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text() | st.integers(), inner, max_size=4)
    ),
    max_leaves=30,
)


def _keys_as_strings(value):
    if isinstance(value, dict):
        return {str(k): _keys_as_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys_as_strings(v) for v in value]
    return value


@given(doc=_docs, bare=st.booleans(), ascii_only=st.booleans())
def test_loads_reads_back_what_dumps_writes(doc, bare, ascii_only):
    data = peer_text.dumps(doc, unquoted_int_keys=bare, ascii_only=ascii_only)
    assert peer_text.loads(data) == _keys_as_strings(doc)


@given(doc=_docs)
def test_quoted_form_is_standard_json(doc):
    data = peer_text.dumps(doc, unquoted_int_keys=False)
    assert json.loads(data) == _keys_as_strings(doc)


@pytest.mark.parametrize(
    "literal",
    ["[" * 100, "]" * 100 + "{" * 100, '\\"' + "[" * 100, "\\\\" + "{" * 100, '[\\\\\\"' * 50],
)
def test_brackets_inside_strings_do_not_count_towards_the_depth(literal):
    body = '{"a":"' + literal + '","b":' + "[" * 10 + "1" + "]" * 10 + "}"
    assert peer_text.loads(body.encode())["a"] == json.loads(body)["a"]


def test_depth_past_the_bound_is_found_behind_escaped_quotes():
    body = '{"a":"\\"' + "}" * 10 + '",' + '"b":' + "[" * 65 + "]" * 65 + "}"
    with pytest.raises(BodyError, match="nests deeper"):
        peer_text.loads(body.encode())
