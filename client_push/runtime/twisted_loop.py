"""The runtime on Twisted: the reactor's sockets and timers, Deferreds as futures, coroutines
driven by ``Deferred.fromCoroutine``.

The only module of the client that imports Twisted. ``clock`` (default: the reactor) drives
protocol timers, so tests run them under ``task.Clock``; connect and close deadlines run on the
reactor itself.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from twisted.internet import defer, ssl
from twisted.internet.abstract import isIPAddress, isIPv6Address
from twisted.internet.endpoints import (
    HostnameEndpoint,
    TCP4ClientEndpoint,
    TCP6ClientEndpoint,
    connectProtocol,
    wrapClientTLS,
)
from twisted.internet.error import AlreadyCalled, AlreadyCancelled
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure

from client_push.config import ClientConfigError, split_addr
from client_push.errors import ConnectionLostError
from client_push.runtime.interface import Future, Main, Stream, Target, settle

log = logging.getLogger("client_push.runtime")

T = TypeVar("T")


class TwistedFuture(defer.Deferred[T]):
    """A Deferred with the ``Future`` face the shared code uses."""

    def __init__(self) -> None:
        super().__init__(canceller=self._on_cancel)
        self._cancelled = False

    def _on_cancel(self, _d: Any) -> None:
        self._cancelled = True

    def done(self) -> bool:
        return bool(self.called)

    def cancelled(self) -> bool:
        return self._cancelled

    def set_result(self, value: T) -> None:
        self.callback(value)

    def set_exception(self, exc: BaseException) -> None:
        self.errback(Failure(exc))

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        def passthrough(result: Any) -> Any:
            fn(self)
            return result

        self.addBoth(passthrough)


class _Call:
    """A DelayedCall whose ``cancel`` is harmless once it has run."""

    __slots__ = ("_call",)

    def __init__(self, call: Any) -> None:
        self._call = call

    def cancel(self) -> None:
        with contextlib.suppress(AlreadyCalled, AlreadyCancelled):
            self._call.cancel()


class _Task:
    __slots__ = ("_d",)

    def __init__(self, d: defer.Deferred[Any]) -> None:
        self._d = d

    def cancel(self) -> None:
        self._d.cancel()

    def done(self) -> bool:
        return bool(self._d.called)


class TwistedClock:
    """``clock.seconds``/``callLater`` (the reactor or a ``task.Clock``) as a ``Clock``."""

    def __init__(self, clock: Any) -> None:
        self._clock = clock

    def time(self) -> float:
        return float(self._clock.seconds())

    def call_later(self, delay: float, callback: Callable[[], None]) -> _Call:
        return _Call(self._clock.callLater(max(0.0, delay), callback))


class _StreamProtocol(Protocol):
    """A Twisted protocol that hands its events to a ``Stream``, and is the transport's push
    producer so that a full write buffer pauses the stream's writing."""

    def __init__(self, stream: Stream, write_buffer_bytes: int) -> None:
        self._stream = stream
        self._buffer = write_buffer_bytes

    def connectionMade(self) -> None:
        transport: Any = self.transport
        if hasattr(transport, "bufferSize"):
            transport.bufferSize = self._buffer
        transport.registerProducer(self, True)
        self._stream.connection_made(self)

    def dataReceived(self, data: bytes) -> None:
        self._stream.data_received(data)

    def connectionLost(self, reason: Failure | None = None) -> None:
        self._stream.connection_lost(reason.getErrorMessage() if reason else "closed")

    # IPushProducer: the transport's write buffer filled up or drained.
    def pauseProducing(self) -> None:
        self._stream.pause_writing()

    def resumeProducing(self) -> None:
        self._stream.resume_writing()

    def stopProducing(self) -> None:
        pass

    # The Transport the stream writes to.
    def write(self, data: bytes) -> None:
        transport: Any = self.transport
        transport.write(data)

    def pause_reading(self) -> None:
        self.transport.pauseProducing()  # type: ignore[union-attr]

    def resume_reading(self) -> None:
        self.transport.resumeProducing()  # type: ignore[union-attr]

    def close(self) -> None:
        transport: Any = self.transport
        transport.unregisterProducer()
        transport.loseConnection()

    def abort(self) -> None:
        self.transport.abortConnection()  # type: ignore[union-attr]


class TwistedRuntime:
    def __init__(self, reactor: Any = None, clock: Any = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.clock = TwistedClock(clock if clock is not None else reactor)
        self.cancelled_error: type[BaseException] = defer.CancelledError

    def future(self) -> TwistedFuture[Any]:
        return TwistedFuture()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> _Task:
        d = defer.Deferred.fromCoroutine(coro)
        d.addErrback(_log_task_error)
        return _Task(d)

    def call_soon(self, callback: Callable[[], None]) -> _Call:
        return _Call(self.reactor.callLater(0, callback))

    def call_later_real(self, delay: float, callback: Callable[[], None]) -> _Call:
        return _Call(self.reactor.callLater(max(0.0, delay), callback))

    async def connect(self, target: Target, stream: Stream) -> None:
        timeout_s = max(target.timeout_ms, 1) / 1000.0
        ca_file = None if target.tls is None else target.tls.ca_file
        endpoint = endpoint_for(self.reactor, target.addr, timeout_s, ca_file)
        connecting = connectProtocol(endpoint, _StreamProtocol(stream, target.write_buffer_bytes))
        deadline = self.call_later_real(timeout_s, connecting.cancel)
        try:
            await connecting
        except Exception as exc:
            why = "timed out" if isinstance(exc, defer.CancelledError) else describe(exc)
            raise ConnectionLostError(f"cannot connect to {target.addr}: {why}") from None
        finally:
            deadline.cancel()

    def public(self, coro: Coroutine[Any, Any, T]) -> defer.Deferred[T]:
        return defer.Deferred.fromCoroutine(coro)


def run(main: Main[T]) -> T:
    """Run ``main`` on the global reactor until it returns; its result, or its error raised.

    SIGINT and SIGTERM settle the ``stop`` future ``main`` receives (the reactor's own handlers,
    which would stop it under ``main``'s feet, are not installed), so a program closes its
    clients itself before the reactor stops.
    """
    from twisted.internet import reactor as global_reactor

    reactor: Any = global_reactor
    runtime = TwistedRuntime(reactor)
    stop: Future[None] = runtime.future()
    ended: list[Any] = []

    def begin() -> None:
        d = defer.Deferred.fromCoroutine(main(runtime, stop))
        d.addBoth(ended.append)
        d.addBoth(lambda _: reactor.stop())

    def on_signal(_signum: int, _frame: Any) -> None:
        reactor.callFromThread(settle, stop, None)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)
    reactor.callWhenRunning(begin)
    reactor.run(installSignalHandlers=False)
    if not ended:
        raise RuntimeError("the reactor stopped before the program ended")
    if isinstance(ended[0], Failure):
        ended[0].raiseException()
    return ended[0]


def _log_task_error(failure: Failure) -> None:
    if not failure.check(defer.CancelledError):
        log.error("error in a client task: %s", failure.getTraceback())


def endpoint_for(reactor: Any, addr: str, timeout_s: float, tls_ca_file: str | None = None) -> Any:
    """A client endpoint for ``HOST:PORT``: IP literals connect directly, names are resolved.

    ``tls_ca_file`` not None wraps it in TLS: verified against that CA file when it names one,
    encrypted without verification when it is empty (upstream's ``tls.test.mode.enable``).
    """
    host, port = split_addr(addr)
    endpoint: Any
    if isIPAddress(host):
        endpoint = TCP4ClientEndpoint(reactor, host, port, timeout=timeout_s)
    elif isIPv6Address(host):
        endpoint = TCP6ClientEndpoint(reactor, host, port, timeout=timeout_s)
    else:
        endpoint = HostnameEndpoint(reactor, host, port, timeout=timeout_s)
    if tls_ca_file is None:
        return endpoint
    if not tls_ca_file:
        unverified: Any = ssl.CertificateOptions(verify=False)
        return wrapClientTLS(unverified, endpoint)
    try:
        with open(tls_ca_file, "rb") as fh:
            root = ssl.Certificate.loadPEM(fh.read())
    except OSError as exc:
        raise ClientConfigError(f"cannot read tls_ca_file {tls_ca_file}: {exc.strerror}") from exc
    return wrapClientTLS(ssl.optionsForClientTLS(host, trustRoot=root), endpoint)


def describe(value: Any) -> str:
    """A failure or exception as one line, for logs."""
    if isinstance(value, Failure):
        return f"{value.type.__name__}: {value.getErrorMessage()}"  # type: ignore[union-attr]
    return f"{type(value).__name__}: {value}"
