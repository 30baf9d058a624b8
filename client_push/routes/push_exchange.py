"""The push extension's exchanges as commands and actions, for any glue (Twisted or asyncio).

Pure. SUBSCRIBE and UNSUBSCRIBE requests are built here in batches, their answers and the
requests a name server initiates (NOTIFY, GO_AWAY) are read here and handed to the
``PushSession``; the glue sends the commands, answers with the responses and carries out the
actions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from client_push.routes.events import log
from client_push.routes.push_actions import Action
from client_push.routes.push_session import PushSession
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.push_codec import (
    decode_go_away,
    decode_notification,
    decode_subscribe_ack,
    encode_subscribe,
    encode_unsubscribe,
)


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
    session: PushSession,
    server: str,
    batch: Sequence[str],
    cause: str,
    response: RemotingCommand,
) -> list[Action]:
    """What a SUBSCRIBE answer from the current connection means."""
    if response.code != ResponseCode.SUCCESS:
        return session.subscribe_refused(server, batch, cause, response.code, response.remark)
    try:
        ack = decode_subscribe_ack(response.body)
    except ProtocolError as exc:
        return session.subscribe_unreadable(server, exc.remark)
    return session.subscribe_acked(batch, cause, ack)


def subscribe_failed(
    session: PushSession, server: str, batch: Sequence[str], cause: str, why: str
) -> list[Action]:
    """A SUBSCRIBE on the current connection that got no answer (``why``: timeout, loss)."""
    session.paced.warning(
        "subscribe", "SUBSCRIBE of %d topics at %s failed: %s", len(batch), server, why
    )
    return session.subscribe_failed(batch, cause)


def unsubscribe_answered(server: str, response: RemotingCommand) -> None:
    if response.code != ResponseCode.SUCCESS:
        log.info("UNSUBSCRIBE at %s answered code %d: %s", server, response.code, response.remark)


def unsubscribe_failed(server: str, why: str) -> None:
    # The subscription dies with the connection anyway; nothing to repair.
    log.info("UNSUBSCRIBE at %s failed: %s", server, why)


def server_request(
    session: PushSession,
    cmd: RemotingCommand,
    *,
    current: bool,
    server: str,
    counters: Counter[str],
) -> tuple[list[Action], RemotingCommand] | None:
    """A request the name server initiated: the session's actions and the answer to send;
    None for a code the client does not serve. ``current`` is whether it came from the
    current connection (a notification from one being left changes nothing)."""
    if cmd.code == RequestCode.NOTIFY_CLIENT_TOPIC_ROUTE_CHANGED:
        if not current:
            counters["notify_from_old_connection"] += 1
            return [], cmd.make_response(ResponseCode.SUCCESS)
        counters["notify_received"] += 1
        try:
            msg = decode_notification(cmd.body)
        except ProtocolError as exc:
            actions = session.notification_unreadable(server, exc.remark)
        else:
            actions = session.notified(msg)
        return actions, cmd.make_response(ResponseCode.SUCCESS)
    if cmd.code == RequestCode.GO_AWAY:
        try:
            go_away = decode_go_away(cmd.body)
            alternatives: list[str] = list(go_away.alternative_addrs)
            reason = go_away.reason
        except ProtocolError as exc:
            alternatives, reason = [], exc.remark
        log.info("GO_AWAY from %s (%s); alternatives %s", server, reason, alternatives)
        return session.go_away(alternatives), cmd.make_response(ResponseCode.SUCCESS)
    return None


def _batches(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
