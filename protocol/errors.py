"""The protocol layer's exception family."""

from __future__ import annotations

from protocol.codes import ResponseCode


class ProtocolError(Exception):
    """Bad bytes or fields from a peer; carries the response code a server answers with."""

    def __init__(self, remark: str, code: int = ResponseCode.SYSTEM_ERROR) -> None:
        super().__init__(remark)
        self.remark = remark
        self.code = int(code)


class FrameError(ProtocolError):
    """The byte stream itself is broken (bad length, oversize): the connection cannot go on."""


class HeaderError(ProtocolError):
    """A header field is missing or malformed; the request can be answered with an error."""

    def __init__(self, remark: str, code: int = ResponseCode.INVALID_PARAMETER) -> None:
        super().__init__(remark, code)


class BodyError(ProtocolError):
    """A body cannot be decoded; the request can be answered with an error."""

    def __init__(self, remark: str, code: int = ResponseCode.INVALID_PARAMETER) -> None:
        super().__init__(remark, code)
