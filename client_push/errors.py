"""The client's exception family: what a caller of ``RouteClient`` may see."""

from __future__ import annotations

from protocol.codes import ResponseCode


class RouteClientError(Exception):
    """Base of every error the route client raises."""


class TopicNotExistError(RouteClientError):
    """The name server has no route for the topic (TOPIC_NOT_EXIST), possibly remembered.

    ``retry_at_ms`` is the moment on the client's (injected) clock from which the name server
    is asked again; given ``now_ms``, the moment of the error on that clock, ``retry_in_ms`` is
    how long until then, and the message says that duration rather than the moment.
    """

    def __init__(
        self,
        topic: str,
        retry_at_ms: int | None = None,
        *,
        now_ms: int | None = None,
        cached: bool = False,
    ) -> None:
        self.topic = topic
        self.retry_at_ms = retry_at_ms
        self.retry_in_ms = (
            None if retry_at_ms is None or now_ms is None else max(0, retry_at_ms - now_ms)
        )
        self.cached = cached
        if retry_at_ms is None:
            retry = ""
        else:
            when = (
                f"in {self.retry_in_ms} ms"
                if self.retry_in_ms is not None
                else f"from {retry_at_ms} ms on the client's clock"
            )
            retry = (
                f"; the name server is asked again {when} "
                "unless a CREATED notification arrives first"
            )
        source = "remembered absence" if cached else "name server answered TOPIC_NOT_EXIST"
        super().__init__(f"topic {topic!r} does not exist ({source}){retry}")


class NameServerError(RouteClientError):
    """The name server answered a request with an error code."""

    def __init__(self, code: int, remark: str | None, what: str) -> None:
        self.code = code
        self.remark = remark
        try:
            name = ResponseCode(code).name
        except ValueError:
            name = str(code)
        super().__init__(f"{what}: name server answered {name} ({code}): {remark or ''}")


class RequestTimeoutError(RouteClientError):
    """No response arrived within the request timeout."""


class ConnectionLostError(RouteClientError):
    """The connection closed (or was never made) before the response arrived."""


class ClientStoppedError(RouteClientError):
    """The client was stopped; nothing more is sent."""


class RequestsInFlightError(RouteClientError):
    """A connection already has as many requests (or bytes) in flight as its bound allows;
    the peer is slow or not reading."""
