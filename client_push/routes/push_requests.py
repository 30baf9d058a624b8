"""SUBSCRIBE and UNSUBSCRIBE on the wire: batches out, answers into the push session.

Twisted glue. What an answer means is the session's decision; the actions it returns go back
through the owner's ``run`` with the connection that answered.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from twisted.python.failure import Failure

from client_push.config import ClientConfig
from client_push.routes.events import log
from client_push.routes.fetches import log_unexpected
from client_push.routes.push_actions import Action
from client_push.routes.push_session import PushSession
from client_push.wire.connection import NameServerLink
from client_push.wire.remoting import RemotingProtocol, describe
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.push_codec import decode_subscribe_ack, encode_subscribe, encode_unsubscribe

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
        for batch in _batches(topics, self._config.subscribe_batch_size):
            cmd = RemotingCommand.request(
                RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
                body=encode_subscribe(batch, self._client_id, self._config.inline_routes),
            )
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
        for batch in _batches(topics, self._config.subscribe_batch_size):
            cmd = RemotingCommand.request(
                RequestCode.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED, body=encode_unsubscribe(batch)
            )
            self._counters["unsubscribe_sent"] += 1
            d = self._link.send_on(proto, cmd)
            d.addCallbacks(
                self._unsubscribe_answered,
                self._unsubscribe_failed,
                callbackArgs=(proto,),
                errbackArgs=(proto,),
            )

    def _flush(self) -> None:
        self._flush_call = None
        self._run(self._session.flush(), self._link.current)

    def _subscribe_answered(
        self, response: RemotingCommand, proto: RemotingProtocol, batch: Sequence[str], cause: str
    ) -> None:
        if not self._link.is_current(proto) or self._stopped:
            return
        session = self._session
        if response.code != ResponseCode.SUCCESS:
            actions = session.subscribe_refused(
                proto.label, batch, cause, response.code, response.remark
            )
        else:
            try:
                ack = decode_subscribe_ack(response.body)
            except ProtocolError as exc:
                actions = session.subscribe_unreadable(proto.label, exc.remark)
            else:
                actions = session.subscribe_acked(batch, cause, ack)
        self._run(actions, proto)

    def _subscribe_failed(
        self, failure: Failure, proto: RemotingProtocol, batch: Sequence[str], cause: str
    ) -> None:
        self._counters["subscribe_failed"] += 1
        if not self._link.is_current(proto) or self._stopped:
            return
        log.warning(
            "SUBSCRIBE of %d topics at %s failed: %s", len(batch), proto.label, describe(failure)
        )
        self._run(self._session.subscribe_failed(batch, cause), proto)

    def _unsubscribe_answered(self, response: RemotingCommand, proto: RemotingProtocol) -> None:
        if response.code != ResponseCode.SUCCESS:
            log.info(
                "UNSUBSCRIBE at %s answered code %d: %s",
                proto.label,
                response.code,
                response.remark,
            )

    def _unsubscribe_failed(self, failure: Failure, proto: RemotingProtocol) -> None:
        # The subscription dies with the connection anyway; nothing to repair.
        log.info("UNSUBSCRIBE at %s failed: %s", proto.label, describe(failure))


def _batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
