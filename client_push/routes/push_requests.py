"""SUBSCRIBE and UNSUBSCRIBE on the wire: each batch a task on the given connection.

Written once over the runtime. The commands and what an answer means are the pure
``push_exchange``'s and the session's; the actions go back through the owner's ``run`` with
the connection that answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from client_push.config import ClientConfig
from client_push.routes.push_actions import Action
from client_push.routes.push_exchange import (
    subscribe_answered,
    subscribe_failed,
    subscribe_requests,
    unsubscribe_answered,
    unsubscribe_failed,
    unsubscribe_requests,
)
from client_push.routes.push_session import PushSession
from client_push.runtime.interface import Runtime, Task
from client_push.runtime.interface import Timer as Handle
from client_push.wire.link import NameServerLink
from client_push.wire.remoting import RemotingConnection
from protocol.frame import RemotingCommand

ActionRunner = Callable[[list[Action], RemotingConnection | None], None]
"""Carries out a session's actions; wire actions go to the given connection."""


class PushRequests:
    def __init__(
        self,
        config: ClientConfig,
        link: NameServerLink,
        session: PushSession,
        run: ActionRunner,
        *,
        runtime: Runtime,
        counters: Counter[str],
        client_id: str,
    ) -> None:
        self._config = config
        self._link = link
        self._session = session
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
        if not self._session.want_subscription(topic):
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
        self._run(self._session.flush(), self._link.current)

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
                self._run(subscribe_failed(self._session, conn.label, batch, cause, why), conn)
            return
        if self._link.is_current(conn) and not self._stopped:
            self._run(subscribe_answered(self._session, conn.label, batch, cause, response), conn)

    async def _unsubscribe(
        self, conn: RemotingConnection, answer: Awaitable[RemotingCommand]
    ) -> None:
        try:
            response = await answer
        except self._runtime.cancelled_error:
            raise
        except Exception as exc:
            unsubscribe_failed(conn.label, f"{type(exc).__name__}: {exc}")
            return
        unsubscribe_answered(conn.label, response)
