"""Every request code this name server serves, declared once.

A :class:`Command` names the code, the request header its handler is given, the handler, the
access class access control checks it under, and what else the server does with it. The
:data:`COMMANDS` table serves dispatch (``RequestProcessor``), access control (a request is
checked under its command's class) and the docs (:func:`access_table`). A code that is not
declared here is answered REQUEST_CODE_NOT_SUPPORTED; with access control on, a request whose
command has no access class is refused, never treated as a read.

To serve a new code: write its handler in the domain's module of ``handlers/`` and add one
line here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from namesrv.requests.acl import AccessClass
from namesrv.requests.handlers.admin import AdminHandlers as Admin
from namesrv.requests.handlers.brokers import BrokerHandlers as Brokers
from namesrv.requests.handlers.kv import KvHandlers as Kv
from namesrv.requests.handlers.lookups import LookupHandlers as Lookups
from namesrv.requests.handlers.push import PushHandlers as Push
from namesrv.requests.handlers.server_config import ServerConfigHandlers as Config
from namesrv.requests.register.entry import Registers
from protocol import headers as h
from protocol.codes import RequestCode


@dataclass(frozen=True, slots=True)
class Command:
    code: RequestCode
    header: type[h.Header] | None
    """The request header the handler is given, decoded from extFields once the access check
    passed; None: the handler reads no header fields (it is given None)."""
    handler: Callable[..., Any]
    """A method of one of the classes in ``handlers/``, called ``(conn, request, header)``."""
    access: AccessClass
    """What a signature must allow when access control is on (see ``acl``)."""
    marks_extension: bool = False
    """The connection speaks the push extension: it is told so before the request is handled,
    even when the request is then refused (it may be sent GoAway)."""
    sets_notify_encoding: bool = False
    """With ``marks_extension``: the request's serialize type becomes the one the connection's
    notifications are encoded in."""
    cacheable_route_answer: bool = False
    """A successful answer is kept in the route-response cache (which decides, per request
    shape, whether it is safe to)."""
    needs_operations: bool = False
    """Served only when the server gives an operations source (``Services.operations``)."""
    header_repeats: bool = False
    """Senders repeat the very same header (a broker's register, each heartbeat): what was
    read of it is remembered (``protocol.headers.remembering``)."""

    @property
    def name(self) -> str:
        return self.code.name


c = RequestCode
BROKER, ADMIN, READ = AccessClass.BROKER, AccessClass.ADMIN, AccessClass.READ

COMMANDS: tuple[Command, ...] = (
    # KV config
    Command(c.PUT_KV_CONFIG, h.PutKVConfigRequestHeader, Kv.put_kv_config, ADMIN),
    Command(c.GET_KV_CONFIG, h.GetKVConfigRequestHeader, Kv.get_kv_config, READ),
    Command(c.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader, Kv.delete_kv_config, ADMIN),
    Command(
        c.GET_KVLIST_BY_NAMESPACE,
        h.GetKVListByNamespaceRequestHeader,
        Kv.get_kv_list_by_namespace,
        READ,
    ),
    # Brokers
    Command(
        c.REGISTER_BROKER,
        h.RegisterBrokerRequestHeader,
        Registers.register_broker,
        BROKER,
        header_repeats=True,
    ),
    Command(
        c.UNREGISTER_BROKER, h.UnregisterBrokerRequestHeader, Brokers.unregister_broker, BROKER
    ),
    Command(
        c.BROKER_HEARTBEAT,
        h.BrokerHeartbeatRequestHeader,
        Brokers.broker_heartbeat,
        BROKER,
        header_repeats=True,
    ),
    Command(
        c.QUERY_DATA_VERSION, h.QueryDataVersionRequestHeader, Brokers.query_data_version, BROKER
    ),
    Command(
        c.GET_BROKER_MEMBER_GROUP,
        h.GetBrokerMemberGroupRequestHeader,
        Brokers.get_broker_member_group,
        READ,
    ),
    # Route and topic lookups
    Command(
        c.GET_ROUTEINFO_BY_TOPIC,
        h.GetRouteInfoRequestHeader,
        Lookups.get_route_info_by_topic,
        READ,
        cacheable_route_answer=True,
    ),
    Command(c.GET_BROKER_CLUSTER_INFO, None, Lookups.get_broker_cluster_info, READ),
    Command(c.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, None, Lookups.get_all_topic_list, READ),
    Command(
        c.GET_TOPICS_BY_CLUSTER,
        h.GetTopicsByClusterRequestHeader,
        Lookups.get_topics_by_cluster,
        READ,
    ),
    Command(c.GET_SYSTEM_TOPIC_LIST_FROM_NS, None, Lookups.get_system_topic_list, READ),
    Command(c.GET_UNIT_TOPIC_LIST, None, Lookups.get_unit_topic_list, READ),
    Command(c.GET_HAS_UNIT_SUB_TOPIC_LIST, None, Lookups.get_has_unit_sub_topic_list, READ),
    Command(
        c.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
        None,
        Lookups.get_has_unit_sub_ununit_topic_list,
        READ,
    ),
    # Admin writes
    Command(
        c.WIPE_WRITE_PERM_OF_BROKER,
        h.WipeWritePermOfBrokerRequestHeader,
        Admin.wipe_write_perm_of_broker,
        ADMIN,
    ),
    Command(
        c.ADD_WRITE_PERM_OF_BROKER,
        h.AddWritePermOfBrokerRequestHeader,
        Admin.add_write_perm_of_broker,
        ADMIN,
    ),
    Command(
        c.DELETE_TOPIC_IN_NAMESRV,
        h.DeleteTopicFromNamesrvRequestHeader,
        Admin.delete_topic_in_namesrv,
        ADMIN,
    ),
    Command(
        c.REGISTER_TOPIC_IN_NAMESRV,
        h.RegisterTopicRequestHeader,
        Admin.register_topic_in_namesrv,
        ADMIN,
    ),
    # The name server's config
    Command(c.GET_NAMESRV_CONFIG, None, Config.get_namesrv_config, READ),
    Command(c.UPDATE_NAMESRV_CONFIG, None, Config.update_namesrv_config, ADMIN),
    # Route-push extension
    Command(
        c.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
        None,
        Push.subscribe,
        READ,
        marks_extension=True,
        sets_notify_encoding=True,
    ),
    Command(c.UNSUBSCRIBE_TOPIC_ROUTE_CHANGED, None, Push.unsubscribe, READ, marks_extension=True),
    # Operations extension: read-only, but the subscription list names client addresses.
    Command(c.GET_PUSH_STATUS, None, Push.get_push_status, ADMIN, needs_operations=True),
    Command(c.GET_SUBSCRIPTIONS, None, Push.get_subscriptions, ADMIN, needs_operations=True),
)

BY_CODE: dict[int, Command] = {command.code: command for command in COMMANDS}


def access_class(code: int) -> AccessClass | None:
    """The access class of a served code; None for a code this server does not serve."""
    command = BY_CODE.get(code)
    return command.access if command is not None else None


_NEEDS = {
    BROKER: 'a signature by an account whose `brokers` lists the broker name (or `"*"`)',
    ADMIN: "a signature by an account with `admin = true`",
    READ: "nothing, unless `authenticate_reads` (then an account with `read` or `admin`)",
}


def access_table(commands: Iterable[Command] = COMMANDS) -> str:
    """The access classes as the Markdown table docs/config.md shows (a test keeps it equal)."""
    rows = ["| class | requests | needs |", "| --- | --- | --- |"]
    listed = list(commands)
    for klass in AccessClass:
        names = ", ".join(command.name for command in listed if command.access is klass)
        rows.append(f"| {klass.value} | {names} | {_NEEDS[klass]} |")
    return "\n".join(rows) + "\n"
