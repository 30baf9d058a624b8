"""The producer, written once for every event loop: its public face (send, send_oneway,
start, stop, stats) over its parts.

Where each send goes is ``RoutingCore``'s, how a send is carried out ``SendCore``'s, the broker
connections ``BrokerConnections``'; this class builds the message, owns the lifecycle and closes
the connections of brokers no held route names. A send tries up to ``1 + retries`` times, each
attempt on another broker where the route has one, within ``send_timeout_ms``; every attempt's
latency and outcome go to the fault strategy. Busy answers are retried elsewhere after a
backoff; a broker's GoAway (7004, or a 1500 answer) keeps new sends off it for its grace
period while the sends already on it finish. A cancelled send leaves nothing behind: its
request's table entry and timeout, its watchdog, its waits and, when it was the only caller,
the connect it started (``outstanding()`` shows these tables).
"""

from __future__ import annotations

import logging
import os
import random
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from client_push.producer.broker_conns import BrokerConnections
from client_push.producer.config import ProducerConfig
from client_push.producer.routing_core import RoutingCore
from client_push.producer.send_core import SendCore, SendError, wall_ms
from client_push.routes.client_core import RouteClientCore
from client_push.runtime.interface import Runtime
from client_push.wire.remoting import Deadline
from client_push.wire.timer import Timer
from protocol.message import EncodedMessage, MessageIdGenerator, encode_message

log = logging.getLogger("client_push.producer.producer")

TIDY_INTERVAL_S = 30.0
"""How often connections to brokers that left every held route are closed."""


class ProducerCore:
    def __init__(
        self,
        client: RouteClientCore,
        group: str,
        config: ProducerConfig | None,
        runtime: Runtime,
        rng: random.Random | None = None,
        routing: RoutingCore | None = None,
        *,
        must_start: bool = False,
    ) -> None:
        """``must_start``: sends before ``start`` are an error (asyncio) rather than allowed
        (Twisted)."""
        self.config = config = config or ProducerConfig()
        self._must_start = must_start
        self.group = group
        self._runtime = runtime
        rng = rng or random.Random()
        self.routing = routing or RoutingCore(
            client, config.fault, runtime=runtime, rng=rng, auto_create=config.auto_create()
        )
        self.connections = BrokerConnections(
            runtime,
            self._broker_go_away,
            bounds=config.bounds(),
            honour_go_away=config.honour_go_away,
            close_timeout_ms=config.close_timeout_ms,
        )
        self.sends = SendCore(config, group, runtime, self.routing, self.connections)
        self.counters = self.sends.counters
        self.first_attempts_by_broker = self.sends.first_attempts_by_broker
        self.statuses = self.sends.statuses
        self._ids = MessageIdGenerator.for_host(
            host_ipv4(), os.getpid(), rng.getrandbits(31), wall_ms()
        )
        self._tidy = Timer(runtime, self._tidy_round)
        self._sends = 0
        """Sends (and oneway sends) under way."""
        self._started = False
        self._stopped = False

    def start(self) -> None:
        """The routing (broker events, the detector) and the timer that closes connections to
        brokers no held route names."""
        if self._started:
            return
        self._started = True
        self.routing.start()
        self._tidy.arm(TIDY_INTERVAL_S)

    async def _close(self) -> None:
        """Stop the detector, fail the sends in flight (``ConnectionLostError`` inside, a
        ``SendError`` out) and close the broker connections, within ``close_timeout_ms``."""
        self._stopped = True
        deadline = Deadline(self._runtime, self.config.close_timeout_ms)
        self._tidy.cancel()
        self.routing.stop()
        await self.connections.stop(deadline)

    # -- sending -------------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        body: bytes,
        *,
        keys: Iterable[str] = (),
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        """The ``SendResult`` once a broker stored the message, as the loop's awaitable (a
        Deferred on Twisted). Fails with ``MessageError`` (refused before sending),
        ``BrokerRefusedError``, ``SendError`` (no broker took it), or what the route lookup
        raises (``TopicNotExistError``, ``NoMasterError``, ...)."""
        send = self.sends.send
        return self._runtime.public(
            self._send(send, topic, body, keys, tags, properties, timeout_ms)
        )

    def send_oneway(
        self,
        topic: str,
        body: bytes,
        *,
        keys: Iterable[str] = (),
        tags: str | None = None,
        properties: Mapping[str, str] | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        """Done once the message is written to a broker's connection; no answer, no retry (as
        upstream's ``sendOneway``)."""
        send = self.sends.send_oneway
        return self._runtime.public(
            self._send(send, topic, body, keys, tags, properties, timeout_ms)
        )

    async def _send(
        self,
        send: Callable[[EncodedMessage, int], Awaitable[Any]],
        topic: str,
        body: bytes,
        keys: Iterable[str],
        tags: str | None,
        properties: Mapping[str, str] | None,
        timeout_ms: int | None,
    ) -> Any:
        message = self._message(topic, body, keys, tags, properties)
        timeout = self.config.send_timeout_ms if timeout_ms is None else timeout_ms
        self._sends += 1
        try:
            return await send(message, timeout)
        finally:
            self._sends -= 1

    def stats(self) -> dict[str, Any]:
        return self.sends.stats()

    def outstanding(self) -> dict[str, int]:
        """What the producer has in flight or armed, table by table (for tests and
        debugging): a cancelled send leaves none of it behind."""
        out = {"sends": self._sends}
        out.update(self.connections.outstanding())
        out.update(self.routing.outstanding())
        return out

    def _message(
        self,
        topic: str,
        body: bytes,
        keys: Iterable[str],
        tags: str | None,
        properties: Mapping[str, str] | None,
    ) -> EncodedMessage:
        """The message as sent (``MessageError`` when it cannot be)."""
        if self._stopped:
            raise SendError("producer stopped")
        if self._must_start and not self._started:
            raise SendError("producer not started: use `async with Producer(...)`")
        cfg = self.config
        return encode_message(
            topic,
            body,
            keys=keys,
            tags=tags,
            properties=properties,
            uniq_key=self._ids.next_id(wall_ms()),
            compress_over=cfg.compress_over_bytes,
            compress_level=cfg.compress_level,
            max_body_size=cfg.max_message_size,
        )

    # -- connections ---------------------------------------------------------------------------

    def _tidy_round(self) -> None:
        """Close the connections of brokers no held route names any more."""
        try:
            held = {addr for addr, _topic in self.routing.held_broker_addrs().values()}
            self.connections.retain(held)
            self.sends.tidy(held)
        except Exception:  # the timer must survive anything one round meets
            self.counters["tidy_errors"] += 1
            log.exception("closing unused broker connections failed")
        if not self._stopped:
            self._tidy.arm(TIDY_INTERVAL_S)

    def _broker_go_away(self, addr: str, grace_ms: int) -> None:
        self.sends.go_away(addr, grace_ms)


def host_ipv4() -> str | None:
    """This host's IPv4 address for message ids; None when only loopback is found."""
    try:
        addr = socket.gethostbyname(socket.gethostname())
    except OSError:
        return None
    return None if addr.startswith("127.") else addr
