"""``namesrv-admin --namesrv HOST:PORT[;HOST:PORT] VERB ...``: a request to the name servers,
their answers shown.

The standard verbs speak plain RocketMQ remoting and work against any name server, ours or
Apache's. A read takes the first name server of ``-n`` that answers; a write goes to each of
them and prints one line per server (``session``). ``push-status`` and ``subscriptions`` use
this server's operations extension; a server without it answers REQUEST_CODE_NOT_SUPPORTED and
the command says so and exits 2. Refusals print the server's response code and remark and exit 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import click

from namesrv.admin import cluster_views, render, topic_verbs
from namesrv.admin.broker_topics import MASTER_ID
from namesrv.admin.session import (
    EXIT_REFUSED,
    ServerResult,
    Session,
    decoded,
    fail,
    json_option,
    one_of,
    pass_session,
    say,
    topic_absent,
    topic_not_heard_yet,
    valid_topic,
)
from namesrv.admin.wire import AdminClient, AdminConnectionError, Credentials, Target
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.route_model import ClusterInfo
from protocol.signing import SignatureForm, check_server_identity
from protocol.version import VERSION, version_line


def _set_namesrv(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.find_object(Session).namesrv = value  # type: ignore[union-attr]


MQADMIN_VERBS = {
    "topicRoute": "topic-route",
    "topicList": "topic-list",
    "clusterList": "cluster-list",
    "wipeWritePerm": "wipe-write-perm",
    "addWritePerm": "add-write-perm",
    "updateTopic": "update-topic",
    "deleteTopic": "delete-topic",
    "getNamesrvConfig": "namesrv-config",
    "updateNamesrvConfig": "update-namesrv-config",
}
"""Upstream ``mqadmin`` verbs and the command each names here (same options, plus
``mqadmin``'s short ones). The KV verbs have commands of their own: ``kv`` takes positional
arguments, ``mqadmin`` takes ``-s``/``-k``/``-v``."""
KV_VERBS = ("updateKvConfig", "getKvConfig", "deleteKvConfig")


class AdminGroup(click.Group):
    """Resolves ``mqadmin``'s verbs to our commands, lists both names in ``--help``, and gives
    every command ``-n/--namesrv`` after the verb too."""

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        if not isinstance(cmd, click.Group) and not any(
            "--namesrv" in getattr(p, "opts", ()) for p in cmd.params
        ):
            cmd.params.append(
                click.Option(
                    ["-n", "--namesrv"],
                    metavar="HOST:PORT",
                    expose_value=False,
                    callback=_set_namesrv,
                    help="Name servers (as before the verb).",
                )
            )
        super().add_command(cmd, name)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return super().get_command(ctx, MQADMIN_VERBS.get(cmd_name, cmd_name))

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        aliases: dict[str, list[str]] = {}
        for verb, name in MQADMIN_VERBS.items():
            aliases.setdefault(name, []).append(verb)
        if self.name == "main":
            aliases["kv"] = list(KV_VERBS)
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is None or cmd.hidden:
                continue
            shown = ", ".join([name, *aliases.get(name, [])])
            rows.append((shown, cmd.get_short_help_str(limit=80)))
        if rows:
            with formatter.section("Commands (and their mqadmin names)"):
                formatter.write_dl(rows)


@click.group(
    cls=AdminGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(
    VERSION, "--version", message=version_line("namesrv-admin"), help="Print the package version."
)
@click.option(
    "--namesrv",
    "-n",
    envvar="NAMESRV_ADDR",
    metavar="HOST:PORT[;HOST:PORT]",
    help="Name servers (also $NAMESRV_ADDR): a read takes the first that answers, a write goes "
    "to each.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option(
    "--access-key",
    envvar="ROCKETMQ_ACCESS_KEY",
    show_envvar=True,
    help="Sign requests with this key.",
)
@click.option(
    "--secret-key",
    envvar="ROCKETMQ_SECRET_KEY",
    show_envvar=True,
    help="Secret of --access-key.",
)
@click.option(
    "--signature",
    type=click.Choice(["strong", "upstream"]),
    default="strong",
    show_default=True,
    envvar="ROCKETMQ_SIGNATURE",
    show_envvar=True,
    help="Signed form: strong (bound to the request code, time and a nonce) or upstream's "
    "AclClientRPCHook form.",
)
@click.option(
    "--server-identity",
    envvar="ROCKETMQ_SERVER_IDENTITY",
    show_envvar=True,
    help="The name server's acl.server_identity, which strong signatures name (needed with "
    "--signature strong).",
)
@click.option("--tls", is_flag=True, help="Connect with TLS.")
@click.option(
    "--tls-ca",
    type=click.Path(exists=True, dir_okay=False),
    help="Verify the server against this CA file; without it, encrypt without verifying.",
)
@click.option("--timeout", default=5.0, help="Seconds to wait for each answer.")
@click.pass_context
def main(
    ctx: click.Context,
    namesrv: str | None,
    as_json: bool,
    access_key: str | None,
    secret_key: str | None,
    signature: str,
    server_identity: str | None,
    tls: bool,
    tls_ca: str | None,
    timeout: float,
) -> None:
    """Administer a RocketMQ name server.

    Upstream mqadmin's verbs name the same commands, with its short options
    (namesrv-admin -n 127.0.0.1:9876 topicRoute -t TopicTest).
    """
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
        namesrv,
        as_json,
        Target(
            "",
            0,
            tls=tls or bool(tls_ca),
            tls_ca_file=tls_ca or "",
            timeout_s=timeout,
            credentials=creds,
        ),
    )


@main.command("topic-route")
@click.argument("topic_arg", metavar="[TOPIC]", required=False)
@click.option("--topic", "-t", help="The topic (or give it as the argument).")
@json_option
@pass_session
def topic_route(s: Session, topic_arg: str | None, topic: str | None) -> None:
    """The route of TOPIC (GET_ROUTEINFO_BY_TOPIC)."""
    name = valid_topic(one_of("topic", topic_arg, topic, "--topic/-t"), "--topic/-t")
    resp = s.ask(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": name})
    topic_absent(s, name, resp)
    topic_not_heard_yet(s, name, resp)
    resp = s.checked(RequestCode.GET_ROUTEINFO_BY_TOPIC, resp)
    route = decoded("route", lambda: bodies.decode_route(resp.body))
    s.emit(
        render.route_doc(name, route, resp.ext_fields.get("routeVersion")),
        lambda: render.route_table(route),
    )


@main.command("topic-list")
@click.option(
    "--cluster-model",
    "-c",
    is_flag=True,
    help="Each topic's cluster and consumer groups (asks a broker of each topic), as "
    "mqadmin topicList -c.",
)
@json_option
@pass_session
def topic_list(s: Session, cluster_model: bool) -> None:
    """Every topic the name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER)."""
    resp = s.call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    topics = sorted(decoded("topic list", lambda: bodies.decode_topic_list(resp.body)))
    if not cluster_model:
        s.emit(topics, lambda: render.table(("TOPIC",), [(t,) for t in topics]))
        return
    info = _cluster_info(s)
    rows: list[tuple[str, str, str]] = []
    try:
        with AdminClient(s.target) as namesrv, cluster_views.Brokers(s.target) as brokers:
            for topic in filter(cluster_views.listed, topics):
                cluster, groups = _topic_groups(namesrv, brokers, info, topic)
                rows.extend((cluster, topic, group) for group in groups or [""])
    except AdminConnectionError as exc:
        fail(str(exc), EXIT_REFUSED)
    s.emit(
        [{"cluster": c, "topic": t, "consumerGroup": g} for c, t, g in rows],
        lambda: render.table(cluster_views.CLUSTER_MODEL_HEADERS, rows),
    )


def _topic_groups(
    namesrv: AdminClient, brokers: cluster_views.Brokers, info: ClusterInfo, topic: str
) -> tuple[str, list[str]]:
    """The cluster of ``topic``'s first broker, and the groups its master says consume it
    (none when the route or the broker cannot tell, as upstream shows them)."""
    resp = namesrv.call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    if resp.code != ResponseCode.SUCCESS:
        return "", []
    try:
        route = bodies.decode_route(resp.body)
    except (ProtocolError, ValueError):
        return "", []
    datas = route.broker_datas
    cluster = cluster_views.cluster_of(info, datas[0].broker_name) if datas else ""
    for data in datas:
        addr = data.broker_addrs.get(MASTER_ID) or next(iter(data.broker_addrs.values()), None)
        if addr is None:
            continue
        try:
            body = brokers.ask(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            return cluster, sorted(bodies.decode_group_list(body))
        except (ValueError, ProtocolError):
            return cluster, []
    return cluster, []


def _cluster_info(s: Session) -> ClusterInfo:
    resp = s.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    info: ClusterInfo = decoded("cluster info", lambda: bodies.decode_cluster_info(resp.body))
    return info


@main.command("cluster-list")
@click.option(
    "--more-stats",
    "-m",
    is_flag=True,
    help="Messages put and got yesterday and today per broker (asks each broker), as "
    "mqadmin clusterList -m.",
)
@json_option
@pass_session
def cluster_list(s: Session, more_stats: bool) -> None:
    """Clusters, their brokers and addresses (GET_BROKER_CLUSTER_INFO)."""
    info = _cluster_info(s)
    if not more_stats:
        s.emit(render.cluster_doc(info), lambda: render.cluster_table(info))
        return
    with cluster_views.Brokers(s.target) as brokers:
        stats = cluster_views.more_stats(info, brokers)
    for one in stats:
        if one.error:
            say(
                f"namesrv-admin: broker {one.broker_name} at {one.addr}: no runtime stats: "
                f"{one.error}",
                err=True,
            )
    s.emit(
        [one.doc() for one in stats],
        lambda: render.table(cluster_views.MORE_STATS_HEADERS, [one.row() for one in stats]),
    )


def _perm_verb(code: RequestCode, count_field: str, verb: str) -> Callable[..., None]:
    @click.argument("broker_arg", metavar="[BROKER]", required=False)
    @click.option("--broker-name", "-b", help="The broker name (or give it as the argument).")
    @json_option
    @pass_session
    def command(s: Session, broker_arg: str | None, broker_name: str | None) -> None:
        broker = one_of("broker name", broker_arg, broker_name, "--broker-name/-b")
        results = s.send_each(code, {"brokerName": broker})
        counts = [_count(r, count_field) for r in results if r.ok]
        if counts and not any(counts):
            # Upstream answers success for a broker it does not know: say which it is.
            info = s.call(RequestCode.GET_BROKER_CLUSTER_INFO)
            known = decoded("cluster info", lambda: bodies.decode_cluster_info(info.body))
            if broker not in known.broker_addr_table:
                names = ", ".join(sorted(known.broker_addr_table)) or "none"
                fail(
                    f"the name server at {s.where} knows no broker {broker} (brokers: {names})",
                    EXIT_REFUSED,
                )
        s.report(
            results,
            lambda r: f"{verb} write perm of broker {broker}: {_count(r, count_field)} topics",
            {"brokerName": broker, count_field: sum(counts)},
        )

    return command


def _count(result: ServerResult, field: str) -> int:
    response = result.response
    return int(response.ext_fields.get(field, "0") or 0) if response is not None else 0


main.command("wipe-write-perm", help="Take write permission from BROKER's topics.")(
    _perm_verb(RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount", "wiped")
)
main.command("add-write-perm", help="Give write permission back to BROKER's topics.")(
    _perm_verb(RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount", "added")
)


@main.group(cls=AdminGroup)
def kv() -> None:
    """KV config: get, put, delete, list."""


def _kv_get(s: Session, namespace: str, key: str) -> None:
    resp = s.call(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key})
    value = resp.ext_fields.get("value", "")
    s.emit({"namespace": namespace, "key": key, "value": value}, lambda: value)


def _kv_put(s: Session, namespace: str, key: str, value: str) -> None:
    entry = {"namespace": namespace, "key": key, "value": value}
    s.write(RequestCode.PUT_KV_CONFIG, entry, done=lambda _: f"put {namespace}/{key}", doc=entry)


def _kv_delete(s: Session, namespace: str, key: str) -> None:
    entry = {"namespace": namespace, "key": key}
    s.write(
        RequestCode.DELETE_KV_CONFIG,
        entry,
        done=lambda _: f"deleted {namespace}/{key}",
        doc={**entry, "deleted": True},
    )


@kv.command("get")
@click.argument("namespace")
@click.argument("key")
@json_option
@pass_session
def kv_get(s: Session, namespace: str, key: str) -> None:
    _kv_get(s, namespace, key)


@kv.command("put")
@click.argument("namespace")
@click.argument("key")
@click.argument("value")
@json_option
@pass_session
def kv_put(s: Session, namespace: str, key: str, value: str) -> None:
    _kv_put(s, namespace, key, value)


@kv.command("delete")
@click.argument("namespace")
@click.argument("key")
@json_option
@pass_session
def kv_delete(s: Session, namespace: str, key: str) -> None:
    _kv_delete(s, namespace, key)


@kv.command("list")
@click.argument("namespace")
@json_option
@pass_session
def kv_list(s: Session, namespace: str) -> None:
    """Every key of NAMESPACE (GET_KVLIST_BY_NAMESPACE)."""
    resp = s.call(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": namespace})
    table = decoded("KV table", lambda: bodies.decode_kv_table(resp.body))
    s.emit(table, lambda: render.table(("KEY", "VALUE"), sorted(table.items())))


namespace_option = click.option("--namespace", "-s", required=True, help="The KV namespace.")
key_option = click.option("--key", "-k", required=True, help="The key.")


@main.command("updateKvConfig", hidden=True)
@namespace_option
@key_option
@click.option("--value", "-v", required=True, help="The value.")
@json_option
@pass_session
def update_kv_config(s: Session, namespace: str, key: str, value: str) -> None:
    """mqadmin's updateKvConfig: kv put."""
    _kv_put(s, namespace, key, value)


@main.command("getKvConfig", hidden=True)
@namespace_option
@key_option
@json_option
@pass_session
def get_kv_config(s: Session, namespace: str, key: str) -> None:
    """kv get, with mqadmin's options."""
    _kv_get(s, namespace, key)


@main.command("deleteKvConfig", hidden=True)
@namespace_option
@key_option
@json_option
@pass_session
def delete_kv_config(s: Session, namespace: str, key: str) -> None:
    """mqadmin's deleteKvConfig: kv delete."""
    _kv_delete(s, namespace, key)


@main.command("namesrv-config")
@json_option
@pass_session
def namesrv_config(s: Session) -> None:
    """The name server's settings as it reports them (GET_NAMESRV_CONFIG)."""
    resp = s.call(RequestCode.GET_NAMESRV_CONFIG)
    text = resp.body.decode("utf-8", errors="replace")
    pairs = [line.split("=", 1) for line in text.splitlines() if "=" in line]
    s.emit(dict(sorted((k, v) for k, v in pairs)), lambda: text.rstrip("\n"))


@main.command("update-namesrv-config")
@click.argument("pairs", metavar="[KEY=VALUE]...", nargs=-1)
@click.option("--key", "-k", help="One key to change (mqadmin's form, with -v).")
@click.option("--value", "-v", help="Its new value.")
@json_option
@pass_session
def update_namesrv_config(
    s: Session, pairs: tuple[str, ...], key: str | None, value: str | None
) -> None:
    """Change run-time settings (UPDATE_NAMESRV_CONFIG): upstream keys or dotted ones, e.g.
    orderMessageEnable=true. The server refuses keys it cannot change while running."""
    if (key is None) != (value is None):
        raise click.UsageError("--key/-k and --value/-v go together")
    changes: dict[str, str] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"expected KEY=VALUE, got {pair!r}")
        changes[name.strip()] = text.strip()
    if key is not None and value is not None:
        changes[key.strip()] = value.strip()
    if not changes:
        raise click.UsageError("give KEY=VALUE pairs, or -k KEY -v VALUE")
    body = "".join(f"{k}={v}\n" for k, v in changes.items()).encode()
    s.write(
        RequestCode.UPDATE_NAMESRV_CONFIG,
        body=body,
        done=lambda _: "updated " + ", ".join(f"{k}={v}" for k, v in changes.items()),
        doc={"updated": changes},
    )


@main.command("push-status")
@json_option
@pass_session
def push_status(s: Session) -> None:
    """Route-push state: tick, degraded mode, notification debt, counters (extension)."""
    resp = s.call(RequestCode.GET_PUSH_STATUS, extension=True)
    status = decoded("push status", lambda: json.loads(resp.body))
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
    doc = decoded("subscription list", lambda: json.loads(resp.body))
    s.emit(doc, lambda: render.subscriptions_table(doc))


def run() -> None:
    """The console-script entry point."""
    main(prog_name="namesrv-admin")


for _verb in topic_verbs.VERBS:  # the verbs that address the brokers of a cluster too
    main.add_command(_verb)
