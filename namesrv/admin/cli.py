"""``namesrv-admin --namesrv HOST:PORT VERB ...``: one request to a name server, its answer shown.

The standard verbs speak plain RocketMQ remoting and work against any name server, ours or
Apache's. ``push-status`` and ``subscriptions`` use this server's operations extension; a
server without it answers REQUEST_CODE_NOT_SUPPORTED and the command says so and exits 2.
Refusals print the server's response code and remark and exit 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from namesrv.admin import render
from namesrv.admin.wire import (
    AdminClient,
    AdminConnectionError,
    Credentials,
    Target,
    split_hostport,
)
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.signing import SignatureForm, check_server_identity

EXIT_REFUSED = 1
EXIT_UNSUPPORTED = 2


@dataclass(slots=True)
class Session:
    target: Target
    as_json: bool

    @property
    def where(self) -> str:
        return f"{self.target.host}:{self.target.port}"

    def ask(self, code: RequestCode, ext: dict[str, str] | None = None) -> RemotingCommand:
        """The name server's answer, whatever its code; exits when it cannot be reached."""
        try:
            with AdminClient(self.target) as client:
                return client.call(code, ext)
        except AdminConnectionError as exc:
            fail(str(exc), EXIT_REFUSED)

    def call(
        self, code: RequestCode, ext: dict[str, str] | None = None, *, extension: bool = False
    ) -> RemotingCommand:
        response = self.ask(code, ext)
        if extension and response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            fail(
                f"the name server at {self.where} does not support {code.name} ({int(code)}): "
                "it is not a route-push name server, or push is disabled there "
                f"(remark: {response.remark or '-'})",
                EXIT_UNSUPPORTED,
            )
        if response.code != ResponseCode.SUCCESS:
            fail(
                f"{code.name} refused by {self.where}: {_code_name(response.code)} "
                f"({response.code}): {response.remark or '-'}",
                EXIT_REFUSED,
            )
        return response

    def emit(self, doc: Any, text: Callable[[], str]) -> None:
        click.echo(render.as_json(doc) if self.as_json else text())


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return "UNKNOWN"


def fail(message: str, code: int) -> NoReturn:
    click.echo(f"namesrv-admin: {message}", err=True)
    sys.exit(code)


def _decoded(what: str, decode: Callable[[], Any]) -> Any:
    try:
        return decode()
    except (ProtocolError, ValueError) as exc:
        fail(f"cannot decode the {what} the server sent: {exc}", EXIT_REFUSED)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.find_object(Session).as_json = True  # type: ignore[union-attr]


json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    expose_value=False,
    callback=_set_json,
    help="Print JSON instead of a table (also accepted before the verb).",
)
"""``--json`` after the verb too, as ``topic-route T --json``; the group's option sets the same."""


pass_session = click.make_pass_decorator(Session)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--namesrv",
    "-n",
    required=True,
    envvar="NAMESRV_ADDR",
    metavar="HOST:PORT",
    help="Name server to ask (also $NAMESRV_ADDR; the first of a ;-list is used).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--access-key", envvar="ROCKETMQ_ACCESS_KEY", help="Sign requests with this key.")
@click.option("--secret-key", envvar="ROCKETMQ_SECRET_KEY", help="Secret of --access-key.")
@click.option(
    "--signature",
    type=click.Choice(["strong", "upstream"]),
    default="strong",
    show_default=True,
    envvar="ROCKETMQ_SIGNATURE",
    help="Signed form: strong (bound to the request code, time and a nonce) or upstream's "
    "AclClientRPCHook form.",
)
@click.option(
    "--server-identity",
    envvar="ROCKETMQ_SERVER_IDENTITY",
    help="The name server's acl.server_identity, which strong signatures name (needed with "
    "--signature strong).",
)
@click.option("--tls", is_flag=True, help="Connect with TLS.")
@click.option(
    "--tls-ca",
    type=click.Path(exists=True, dir_okay=False),
    help="Verify the server against this CA file (default: encrypt without verifying).",
)
@click.option("--timeout", default=5.0, show_default=True, help="Seconds to wait for an answer.")
@click.pass_context
def main(
    ctx: click.Context,
    namesrv: str,
    as_json: bool,
    access_key: str | None,
    secret_key: str | None,
    signature: str,
    server_identity: str | None,
    tls: bool,
    tls_ca: str | None,
    timeout: float,
) -> None:
    """Administer a RocketMQ name server."""
    try:
        host, port = split_hostport(namesrv.split(";")[0].strip())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--namesrv") from exc
    if bool(access_key) != bool(secret_key):
        raise click.UsageError("--access-key and --secret-key go together")
    creds = None
    if access_key and secret_key:
        creds = Credentials(
            access_key,
            secret_key,
            form=SignatureForm(signature),
            server_identity=server_identity or "",
        )
        if creds.form is SignatureForm.STRONG:
            if not server_identity:
                raise click.UsageError(
                    "--server-identity (the name server's acl.server_identity) is needed to "
                    "sign in the strong form"
                )
            try:
                check_server_identity(server_identity)
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--server-identity") from exc
    ctx.obj = Session(
        Target(
            host,
            port,
            tls=tls or bool(tls_ca),
            tls_ca_file=tls_ca or "",
            timeout_s=timeout,
            credentials=creds,
        ),
        as_json,
    )


@main.command("topic-route")
@click.argument("topic")
@json_option
@pass_session
def topic_route(s: Session, topic: str) -> None:
    """The route of TOPIC (GET_ROUTEINFO_BY_TOPIC)."""
    resp = s.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    route = _decoded("route", lambda: bodies.decode_route(resp.body))
    s.emit(
        render.route_doc(topic, route, resp.ext_fields.get("routeVersion")),
        lambda: render.route_table(route),
    )


@main.command("topic-list")
@json_option
@pass_session
def topic_list(s: Session) -> None:
    """Every topic the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""
    resp = s.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    topics = sorted(_decoded("topic list", lambda: bodies.decode_topic_list(resp.body)))
    s.emit(topics, lambda: render.table(("TOPIC",), [(t,) for t in topics]))


@main.command("cluster-list")
@json_option
@pass_session
def cluster_list(s: Session) -> None:
    """Clusters, their brokers and addresses (GET_BROKER_CLUSTER_INFO)."""
    resp = s.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    info = _decoded("cluster info", lambda: bodies.decode_cluster_info(resp.body))
    s.emit(render.cluster_doc(info), lambda: render.cluster_table(info))


def _perm_verb(code: RequestCode, count_field: str, verb: str) -> Callable[..., None]:
    @click.argument("broker")
    @pass_session
    def command(s: Session, broker: str) -> None:
        resp = s.call(code, {"brokerName": broker})
        count = int(resp.ext_fields.get(count_field, "0") or 0)
        s.emit(
            {"brokerName": broker, count_field: count},
            lambda: f"{verb} write perm of broker {broker}: {count} topics",
        )

    return command


main.command("wipe-write-perm", help="Take write permission from BROKER's topics.")(
    _perm_verb(RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount", "wiped")
)
main.command("add-write-perm", help="Give write permission back to BROKER's topics.")(
    _perm_verb(RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount", "added")
)


@main.group()
def kv() -> None:
    """KV config: get, put, delete, list."""


@kv.command("get")
@click.argument("namespace")
@click.argument("key")
@json_option
@pass_session
def kv_get(s: Session, namespace: str, key: str) -> None:
    resp = s.call(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})
    value = resp.ext_fields.get("value", "")
    s.emit({"namespace": namespace, "key": key, "value": value}, lambda: value)


@kv.command("put")
@click.argument("namespace")
@click.argument("key")
@click.argument("value")
@json_option
@pass_session
def kv_put(s: Session, namespace: str, key: str, value: str) -> None:
    s.call(RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})
    s.emit(
        {"namespace": namespace, "key": key, "value": value},
        lambda: f"put {namespace}/{key}",
    )


@kv.command("delete")
@click.argument("namespace")
@click.argument("key")
@json_option
@pass_session
def kv_delete(s: Session, namespace: str, key: str) -> None:
    s.call(RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})
    s.emit(
        {"namespace": namespace, "key": key, "deleted": True}, lambda: f"deleted {namespace}/{key}"
    )


@kv.command("list")
@click.argument("namespace")
@json_option
@pass_session
def kv_list(s: Session, namespace: str) -> None:
    """Every key of NAMESPACE (GET_KVLIST_BY_NAMESPACE)."""
    resp = s.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace})
    table = _decoded("KV table", lambda: bodies.decode_kv_table(resp.body))
    s.emit(table, lambda: render.table(("KEY", "VALUE"), sorted(table.items())))


@main.command("namesrv-config")
@json_option
@pass_session
def namesrv_config(s: Session) -> None:
    """The name server's settings as it reports them (GET_NAMESRV_CONFIG)."""
    resp = s.call(RequestCode.GET_NAMESRV_CONFIG)
    text = resp.body.decode("utf-8", errors="replace")
    pairs = [line.split("=", 1) for line in text.splitlines() if "=" in line]
    s.emit(dict(sorted((k, v) for k, v in pairs)), lambda: text.rstrip("\n"))


@main.command("push-status")
@json_option
@pass_session
def push_status(s: Session) -> None:
    """Route-push state: tick, degraded mode, notification debt, counters (extension)."""
    resp = s.call(RequestCode.GET_PUSH_STATUS, extension=True)
    status = _decoded("push status", lambda: json.loads(resp.body))
    s.emit(status, lambda: render.push_status_table(status))


@main.command("subscriptions")
@click.option("--topic", "-t", help="Only connections subscribed to this topic.")
@click.option("--limit", default=1000, show_default=True, help="Connections listed at most.")
@json_option
@pass_session
def subscriptions(s: Session, topic: str | None, limit: int) -> None:
    """Connections subscribed to route changes, most topics first (extension)."""
    ext = {"limit": str(limit)}
    if topic:
        ext["topic"] = topic
    resp = s.call(RequestCode.GET_SUBSCRIPTIONS, ext, extension=True)
    doc = _decoded("subscription list", lambda: json.loads(resp.body))
    s.emit(doc, lambda: render.subscriptions_table(doc))


def run() -> None:
    """The console-script entry point."""
    main(prog_name="namesrv-admin")


# The verbs that also address brokers register themselves on ``main``.
from namesrv.admin import topic_verbs  # noqa: E402, F401
