"""KV config: put, get, delete and list a namespace."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from namesrv.ops.audit_events import KvDeleted, KvPut
from namesrv.requests.context import Connection, Services, audit, ok
from protocol import headers
from protocol.codes import ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand


class KvHandlers:
    def __init__(self, services: Services) -> None:
        self.s = services

    def put_kv_config(
        self, conn: Connection, req: RemotingCommand, h: headers.PutKVConfigRequestHeader
    ) -> RemotingCommand:
        changed = _kv_call(lambda: self.s.kv.put(h.namespace, h.key, h.value))
        audit(self.s, KvPut(h.namespace, h.key, h.value, changed), conn, req)
        return ok(req)

    def get_kv_config(
        self, conn: Connection, req: RemotingCommand, h: headers.GetKVConfigRequestHeader
    ) -> RemotingCommand:
        value = self.s.kv.get(h.namespace, h.key)
        if value is None:
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {h.namespace} Key: {h.key}",
            )
        return ok(req, headers.GetKVConfigResponseHeader(value=value).to_wire())

    def delete_kv_config(
        self, conn: Connection, req: RemotingCommand, h: headers.DeleteKVConfigRequestHeader
    ) -> RemotingCommand:
        existed = _kv_call(lambda: self.s.kv.delete(h.namespace, h.key))
        audit(self.s, KvDeleted(h.namespace, h.key, existed), conn, req)
        return ok(req)

    def get_kv_list_by_namespace(
        self, conn: Connection, req: RemotingCommand, h: headers.GetKVListByNamespaceRequestHeader
    ) -> RemotingCommand:
        body = self.s.kv.listing(h.namespace)
        if body is None:
            return req.make_response(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}"
            )
        return ok(req, body=body)


_T = TypeVar("_T")


def _kv_call(call: Callable[[], _T]) -> _T:
    """What the KV config refuses (ValueError) is the peer's error: INVALID_PARAMETER."""
    try:
        return call()
    except ValueError as exc:
        raise ProtocolError(str(exc), ResponseCode.INVALID_PARAMETER) from exc
