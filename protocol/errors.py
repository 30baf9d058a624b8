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
    """A frame cannot be decoded.

    ``kind`` names the failure for counters (``frame_length``, ``header_json``, ...). When the
    frame's boundaries were sound and its header gave an ``opaque`` (and ``flag``), the request
    can still be answered with an error and the stream goes on; otherwise (``opaque`` None) the
    stream is beyond repair and the connection must close.
    """

    def __init__(
        self,
        remark: str,
        code: int = ResponseCode.SYSTEM_ERROR,
        *,
        kind: str = "malformed",
        opaque: int | None = None,
        flag: int = 0,
    ) -> None:
        super().__init__(remark, code)
        self.kind = kind
        self.opaque = opaque
        self.flag = flag

    @property
    def answerable(self) -> bool:
        """True when the stream is intact and the peer awaits an answer to this request."""
        return self.opaque is not None


class HeaderError(ProtocolError):
    """A header field is missing or malformed; the request can be answered with an error."""

    def __init__(self, remark: str, code: int = ResponseCode.INVALID_PARAMETER) -> None:
        super().__init__(remark, code)


class BodyError(ProtocolError):
    """A body cannot be decoded; the request can be answered with an error."""

    def __init__(self, remark: str, code: int = ResponseCode.INVALID_PARAMETER) -> None:
        super().__init__(remark, code)


class LimitError(BodyError):
    """A body is past a size or count limit: refused whole, before the rest of it is read.

    ``limit`` names the bound (a config key, or a format bound of the protocol layer), for the
    counter and the log line that say what was refused and why."""

    def __init__(self, remark: str, limit: str) -> None:
        super().__init__(remark)
        self.limit = limit
