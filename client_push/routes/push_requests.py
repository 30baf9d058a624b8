"""SUBSCRIBE and UNSUBSCRIBE on the wire: each batch a task on the given connection.

Written once over the runtime. The requests are built and their answers read here (bytes
stay in ``protocol.push_codec``); what an answer means is the pure ``Subscriptions``'s, whose
actions go back through the owner's ``run`` with the connection that answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any

from client_push.config import ClientConfig
from client_push.routes.events import log
from client_push.routes.push_actions import Action
from client_push.routes.subscriptions import Subscriptions
from client_push.runtime.interface import Runtime, Task
from client_push.runtime.interface import Timer as Handle
from client_push.wire.link import NameServerLink
from client_push.wire.remoting import RemotingConnection
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.paced_log import PacedLog
from protocol.push_codec import decode_subscribe_ack, encode_subscribe, encode_unsubscribe

ActionRunner = Callable[[list[Action], RemotingConnection | None], None]
"""Carries out a session's actions; wire actions go to the given connection."""


class PushRequests:
    def __init__(
        self,
        config: ClientConfig,
        link: NameServerLink,
        subscriptions: Subscriptions,
        run: ActionRunner,
        *,
        runtime: Runtime,
        counters: Counter[str],
        client_id: str,
        paced: PacedLog,
    ) -> None:
        self._config = config
        self._link = link
        self._subscriptions = subscriptions
        self._paced = paced
        self._run = run
        self._runtime = runtime
        self._counters = counters
        self._client_id = client_id
        self._flush_call: Handle | None = None
        self.tasks: set[Task] = set()
        """SUBSCRIBE and UNSUBSCRIBE requests in flight."""
        self._stopped = False

    def want(self, topic: str) -> None:
        """Subscribe a newly held topic; topics held in one loop turn share one request."""
        if self._link.current is None or self._stopped:
            return  # on (re)connect every held topic is subscribed anyway
        if not self._subscriptions.want(topic):
            return
        if self._flush_call is None:
            # "After this turn" on the loop, not a timer of the clock.
            self._flush_call = self._runtime.call_soon(self._flush)

    def stop(self) -> None:
        self._stopped = True
        if self._flush_call is not None:
            self._flush_call.cancel()
            self._flush_call = None
        tasks = list(self.tasks)
        self.tasks.clear()
        for task in tasks:
            task.cancel()

    def subscribe(self, conn: RemotingConnection, topics: Sequence[str], cause: str) -> None:
        batch_size = self._config.subscribe_batch_size
        for batch, cmd in subscribe_requests(
            topics, batch_size, self._client_id, self._config.inline_routes
        ):
            self._counters["subscribe_sent"] += 1
            self._spawn(self._subscribe(conn, cmd, batch, cause))

    def unsubscribe(self, conn: RemotingConnection, topics: Sequence[str]) -> None:
        for cmd in unsubscribe_requests(topics, self._config.subscribe_batch_size):
            self._counters["unsubscribe_sent"] += 1
            # Written now: the connection being left closes as soon as nothing is in flight.
            self._spawn(self._unsubscribe(conn, self._link.send_now(conn, cmd)))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        box: list[Task] = []

        async def tracked() -> None:
            try:
                await coro
            finally:
                if box:
                    self.tasks.discard(box[0])

        task = self._runtime.spawn(tracked())
        if not task.done():
            box.append(task)
            self.tasks.add(task)

    def _flush(self) -> None:
        self._flush_call = None
        self._run(self._subscriptions.flush(), self._link.current)

    async def _subscribe(
        self, conn: RemotingConnection, cmd: RemotingCommand, batch: Sequence[str], cause: str
    ) -> None:
        try:
            response = await self._link.send_on(conn, cmd)
        except self._runtime.cancelled_error:
            raise
        except Exception as exc:
            self._counters["subscribe_failed"] += 1
            if self._link.is_current(conn) and not self._stopped:
                why = f"{type(exc).__name__}: {exc}"
                what = "SUBSCRIBE of %d topics at %s failed: %s"
                self._paced.warning("subscribe", what, len(batch), conn.label, why)
                self._run(self._subscriptions.failed(batch, cause), conn)
            return
        if self._link.is_current(conn) and not self._stopped:
            answer = subscribe_answered(self._subscriptions, conn.label, batch, cause, response)
            self._run(answer, conn)

    async def _unsubscribe(
        self, conn: RemotingConnection, answer: Awaitable[RemotingCommand]
    ) -> None:
        try:
            response = await answer
        except self._runtime.cancelled_error:
            raise
        except Exception as exc:
            # The subscription dies with the connection anyway; nothing to repair.
            log.info("UNSUBSCRIBE at %s failed: %s: %s", conn.label, type(exc).__name__, exc)
            return
        if response.code != ResponseCode.SUCCESS:
            what = "UNSUBSCRIBE at %s answered code %d: %s"
            log.info(what, conn.label, response.code, response.remark)


def subscribe_requests(
    topics: Sequence[str], batch_size: int, client_id: str, inline_routes: bool = False
) -> list[tuple[Sequence[str], RemotingCommand]]:
    """One SUBSCRIBE per ``batch_size`` topics, each with the batch it names; ``inline_routes``
    asks the server to send new routes inside notifications."""
    return [
        (
            batch,
            RemotingCommand.request(
                RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
                body=encode_subscribe(batch, client_id, inline_routes),
            ),
        )
        for batch in _batches(topics, batch_size)
    ]


def unsubscribe_requests(topics: Sequence[str], batch_size: int) -> list[RemotingCommand]:
    return [
        RemotingCommand.request(
            RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_unsubscribe(batch)
        )
        for batch in _batches(topics, batch_size)
    ]


def subscribe_answered(
    subscriptions: Subscriptions,
    server: str,
    batch: Sequence[str],
    cause: str,
    response: RemotingCommand,
) -> list[Action]:
    """What a SUBSCRIBE answer from the current connection means, its ack read here."""
    if response.code != ResponseCode.SUCCESS:
        return subscriptions.refused(server, batch, cause, response.code, response.remark)
    try:
        ack = decode_subscribe_ack(response.body)
    except ProtocolError as exc:
        return subscriptions.unreadable(server, exc.remark)
    return subscriptions.acked(batch, cause, ack)


def _batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
