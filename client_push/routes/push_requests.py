"""SUBSCRIBE and UNSUBSCRIBE on the wire, on Twisted: batches out, answers into the session.

Twisted glue. The commands and what an answer means are the pure ``push_exchange``'s and the
session's; the actions go back through the owner's ``run`` with the connection that answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from twisted.python.failure import Failure

from client_push.config import ClientConfig
from client_push.routes.fetches import log_unexpected
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
from client_push.wire.connection import NameServerLink
from client_push.wire.remoting import RemotingProtocol, describe
from protocol.frame import RemotingCommand

ActionRunner = Callable[[list[Action], RemotingProtocol | None], None]
"""Carries out a session's actions; wire actions go to the given connection."""


class PushRequests:
    def __init__(
        self,
        config: ClientConfig,
        link: NameServerLink,
        session: PushSession,
        run: ActionRunner,
        *,
        reactor: Any,
        counters: Counter[str],
        client_id: str,
    ) -> None:
        self._config = config
        self._link = link
        self._session = session
        self._run = run
        self._reactor = reactor
        self._counters = counters
        self._client_id = client_id
        self._flush_call: Any | None = None
        self._stopped = False

    def want(self, topic: str) -> None:
        """Subscribe a newly held topic; topics held in one reactor turn share one request."""
        if self._link.current is None or self._stopped:
            return  # on (re)connect every held topic is subscribed anyway
        if not self._session.want_subscription(topic):
            return
        if self._flush_call is None or not self._flush_call.active():
            # Zero delay on the reactor (not the clock): "after this turn", not a timer.
            self._flush_call = self._reactor.callLater(0, self._flush)

    def stop(self) -> None:
        self._stopped = True
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()

    def subscribe(self, proto: RemotingProtocol, topics: Sequence[str], cause: str) -> None:
        batch_size = self._config.subscribe_batch_size
        for batch, cmd in subscribe_requests(
            topics, batch_size, self._client_id, self._config.inline_routes
        ):
            self._counters["subscribe_sent"] += 1
            d = self._link.send_on(proto, cmd)
            d.addCallbacks(
                self._subscribe_answered,
                self._subscribe_failed,
                callbackArgs=(proto, batch, cause),
                errbackArgs=(proto, batch, cause),
            )
            d.addErrback(log_unexpected, self._counters, "handling a SUBSCRIBE answer")

    def unsubscribe(self, proto: RemotingProtocol, topics: Sequence[str]) -> None:
        for cmd in unsubscribe_requests(topics, self._config.subscribe_batch_size):
            self._counters["unsubscribe_sent"] += 1
            d = self._link.send_on(proto, cmd)
            d.addCallbacks(
                unsubscribe_answered,
                lambda failure, label: unsubscribe_failed(label, describe(failure)),
                callbackArgs=(proto.label,),
                errbackArgs=(proto.label,),
            )

    def _flush(self) -> None:
        self._flush_call = None
        self._run(self._session.flush(), self._link.current)

    def _subscribe_answered(
        self, response: RemotingCommand, proto: RemotingProtocol, batch: Sequence[str], cause: str
    ) -> None:
        if not self._link.is_current(proto) or self._stopped:
            return
        self._run(subscribe_answered(self._session, proto.label, batch, cause, response), proto)

    def _subscribe_failed(
        self, failure: Failure, proto: RemotingProtocol, batch: Sequence[str], cause: str
    ) -> None:
        self._counters["subscribe_failed"] += 1
        if not self._link.is_current(proto) or self._stopped:
            return
        actions = subscribe_failed(self._session, proto.label, batch, cause, describe(failure))
        self._run(actions, proto)
