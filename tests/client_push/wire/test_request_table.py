"""Pending requests by opaque and the answer to a server's request (``request_table``): the
pure part both connections (Twisted and asyncio) share."""

from __future__ import annotations

from client_push.wire.request_table import MAX_OPAQUE, RequestTable, answer_server_request
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import RemotingCommand


def test_opaques_count_up_wrap_and_skip_those_still_pending():
    table: RequestTable[str] = RequestTable()
    first = table.allocate()
    table.put(first, "a")
    assert first == 1
    table._next_opaque = MAX_OPAQUE - 1
    last = table.allocate()
    table.put(last, "b")
    assert last == MAX_OPAQUE
    assert table.allocate() == 2  # 1 is still pending
    assert (table.pop(first), table.pop(first), len(table)) == ("a", None, 1)
    assert table.drain() == ["b"] and len(table) == 0


def test_a_server_request_is_answered_by_the_handler_or_refused_clearly():
    request = RemotingCommand.request(RequestCode.GO_AWAY)
    ok = request.make_response(ResponseCode.SUCCESS)
    assert answer_server_request(lambda cmd: ok, request, "ns") is ok
    unknown = answer_server_request(lambda cmd: None, request, "ns")
    assert unknown is not None and unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

    def broken(cmd: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("bug")

    failed = answer_server_request(broken, request, "ns")
    assert failed is not None and failed.code == ResponseCode.SYSTEM_ERROR
    assert "request code" in (failed.remark or "")
    oneway = RemotingCommand.request(RequestCode.GO_AWAY, oneway=True)
    assert answer_server_request(broken, oneway, "ns") is None
