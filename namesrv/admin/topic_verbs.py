"""``update-topic`` and ``delete-topic``: the verbs that address the brokers of a cluster too.

As upstream's ``mqadmin updateTopic`` and ``deleteTopic``: the masters come from the name
server's cluster info, each is asked in turn, and each broker's outcome is printed (a refusal
with the broker's response code and remark). The command exits 1 when any broker refused or
could not be reached; then neither the order conf is written nor the name server's route
deleted, so a rerun finishes the job. What is written to the name servers (the order conf, the
route's deletion) goes to each of ``-n``, one line per server. A topic name upstream's
``TopicValidator`` refuses is refused here before anything is sent.

The commands are listed in ``VERBS``; the command group adds them (``cli``), so this module
needs nothing of the group.
"""

from __future__ import annotations

import click

from namesrv.admin import render
from namesrv.admin.broker_topics import (
    ORDER_NAMESPACE,
    BrokerOutcome,
    Masters,
    TopicSpec,
    ask_brokers,
    broker_name_at,
    cluster_masters,
    merged_order_conf,
    order_conf,
)
from namesrv.admin.session import (
    EXIT_REFUSED,
    Session,
    decoded,
    fail,
    json_option,
    one_of,
    pass_session,
    say,
    topic_absent,
    valid_topic,
)
from protocol import bodies, headers
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.peer_text import printable
from protocol.route_model import ClusterInfo


def _cluster_info(s: Session) -> ClusterInfo:
    resp = s.call(RequestCode.GET_BROKER_CLUSTER_INFO)
    return decoded("cluster info", lambda: bodies.decode_cluster_info(resp.body))


def _cluster_info_if_any(s: Session) -> ClusterInfo:
    resp = s.ask(RequestCode.GET_BROKER_CLUSTER_INFO)
    if resp.code != ResponseCode.SUCCESS:
        return ClusterInfo()
    try:
        return bodies.decode_cluster_info(resp.body)
    except (ProtocolError, ValueError):
        return ClusterInfo()


def _masters(s: Session, info: ClusterInfo, cluster: str) -> Masters:
    try:
        masters = cluster_masters(info, cluster)
    except ValueError as exc:
        fail(str(exc), EXIT_REFUSED)
    for name in masters.masterless:
        say(
            f"namesrv-admin: broker {printable(name, None)} of cluster "
            f"{printable(cluster, None)} has no master now",
            err=True,
        )
    if not masters.addrs:
        fail(f"cluster {cluster} has no master broker to ask", EXIT_REFUSED)
    return masters


def _report(s: Session, outcomes: list[BrokerOutcome], doc: dict[str, object]) -> bool:
    """Put every broker's outcome in ``doc`` and, as text, the successes on stdout and the
    failures on stderr (once: both often go to one terminal);
    True when all succeeded. The caller prints ``doc`` in JSON mode."""
    doc["brokers"] = [
        {"brokerName": o.broker_name, "addr": o.addr, "code": o.code, "remark": o.remark}
        for o in outcomes
    ]
    if not s.as_json:
        for outcome in outcomes:
            if outcome.ok:
                say(outcome.describe())
    failed = [o for o in outcomes if not o.ok]
    for outcome in failed:
        say(f"namesrv-admin: {outcome.describe()}", err=True)
    return not failed


@click.command("update-topic")
@click.option("--topic", "-t", required=True, help="The topic to create or update.")
@click.option("--cluster", "-c", help="On every master broker of this cluster.")
@click.option("--broker", "-b", "broker_addr", metavar="HOST:PORT", help="On this broker only.")
@click.option("--read-queues", "-r", default=8, show_default=True, help="Read queue count.")
@click.option("--write-queues", "-w", default=8, show_default=True, help="Write queue count.")
@click.option(
    "--perm", "-p", default=6, show_default=True, help="Permission: 2 write, 4 read, 6 both."
)
@click.option(
    "--order",
    "-o",
    type=click.BOOL,
    default="false",
    help="An order topic: also writes its ORDER_TOPIC_CONFIG entry on the name servers.",
)
@click.option("--unit", "-u", type=click.BOOL, default="false", help="A unit topic.")
@click.option(
    "--has-unit-sub",
    "-s",
    type=click.BOOL,
    default="false",
    help="Has unit subs.",
)
@click.option("--attributes", "-a", help="Topic attributes, as upstream: +a=b,+c=d,-e.")
@json_option
@pass_session
def update_topic(
    s: Session,
    topic: str,
    cluster: str | None,
    broker_addr: str | None,
    read_queues: int,
    write_queues: int,
    perm: int,
    order: bool,
    unit: bool,
    has_unit_sub: bool,
    attributes: str | None,
) -> None:
    """Create TOPIC, or change its config, on brokers (UPDATE_AND_CREATE_TOPIC)."""
    if (cluster is None) == (broker_addr is None):
        raise click.UsageError("give exactly one of --cluster/-c and --broker/-b")
    try:
        spec = TopicSpec(
            valid_topic(topic.strip(), "--topic/-t"),
            read_queues,
            write_queues,
            perm,
            order=order,
            unit=unit,
            has_unit_sub=has_unit_sub,
            attributes=attributes,
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    # With -b the name server only names the broker (and gives its order conf entry).
    info = _cluster_info(s) if cluster is not None or order else _cluster_info_if_any(s)
    if cluster is not None:
        brokers = _masters(s, info, cluster).addrs
    else:
        assert broker_addr is not None
        brokers = {broker_name_at(info, broker_addr.strip()) or "": broker_addr.strip()}
    outcomes = ask_brokers(
        s.target, brokers, RequestCode.UPDATE_AND_CREATE_TOPIC, spec.header().to_wire()
    )
    doc: dict[str, object] = {"topic": spec.topic, **spec.header().to_wire()}
    ok = _report(s, outcomes, doc)
    if not ok:
        if s.as_json:
            say(render.as_json(doc))
        raise SystemExit(EXIT_REFUSED)
    if not s.as_json:
        where = f"cluster {cluster}" if cluster else broker_addr
        say(f"topic {spec.topic} created or updated on {where}")
    if not order:
        if s.as_json:
            say(render.as_json(doc))
        return
    value = _order_conf(s, spec, cluster, brokers)
    doc["orderConf"] = value
    s.write(
        RequestCode.PUT_KV_CONFIG,
        {"namespace": ORDER_NAMESPACE, "key": spec.topic, "value": value},
        done=lambda _: f"{ORDER_NAMESPACE} {spec.topic}={value}",
        doc=doc,
    )


def _order_conf(s: Session, spec: TopicSpec, cluster: str | None, brokers: dict[str, str]) -> str:
    """The order conf to put on the name servers: the whole cluster's, or the one broker's
    entry merged into the topic's present conf (as the first name server that answers has
    it)."""
    if cluster is not None:
        value = order_conf(brokers, spec.write_queue_nums)
    else:
        ((name, addr),) = brokers.items()
        if not name:
            fail(f"the name server knows no master at {addr}: no order conf written", EXIT_REFUSED)
        key = {"namespace": ORDER_NAMESPACE, "key": spec.topic}
        old = s.ask(RequestCode.GET_KV_CONFIG, key)
        present = old.ext_fields.get("value", "") if old.code == ResponseCode.SUCCESS else ""
        value = merged_order_conf(present, name, spec.write_queue_nums)
    return value


@click.command("delete-topic")
@click.argument("topic_arg", metavar="[TOPIC]", required=False)
@click.option("--topic", "-t", help="The topic to delete (or give it as the argument).")
@click.option(
    "--cluster",
    "-c",
    help="Delete it on this cluster's master brokers first, then its queues of this cluster "
    "on the name server. Without it only the name server's route is deleted.",
)
@json_option
@pass_session
def delete_topic(s: Session, topic_arg: str | None, topic: str | None, cluster: str | None) -> None:
    """Delete TOPIC on the brokers (DELETE_TOPIC_IN_BROKER) and the name server
    (DELETE_TOPIC_IN_NAMESRV)."""
    name = valid_topic(one_of("topic", topic_arg, topic, "--topic/-t"), "--topic/-t")
    # Upstream deletes a topic it does not know and answers success: say so instead. A server
    # still warming up cannot know (the topic's brokers may not have registered yet): go on.
    topic_absent(s, name, s.ask(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": name}))
    doc: dict[str, object] = {"topic": name}
    if cluster is not None:
        brokers = _masters(s, _cluster_info(s), cluster).addrs
        ext = headers.DeleteTopicRequestHeader(topic=name).to_wire()
        outcomes = ask_brokers(s.target, brokers, RequestCode.DELETE_TOPIC_IN_BROKER, ext)
        if not _report(s, outcomes, doc):
            if s.as_json:
                say(render.as_json(doc))
            fail(
                f"topic {name} was not deleted on every broker of cluster {cluster}; the name "
                "server's route is kept (a broker would register the topic again)",
                EXIT_REFUSED,
            )
        if not s.as_json:
            say(f"deleted topic {name} on cluster {cluster}'s brokers")
    header = headers.DeleteTopicFromNamesrvRequestHeader(topic=name, cluster_name=cluster)
    doc["deleted"] = True
    s.write(
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        header.to_wire(),
        done=lambda _: f"deleted topic {name} from the name server",
        doc=doc,
    )


VERBS = (update_topic, delete_topic)
"""The commands of this module, which ``namesrv-admin``'s group adds to its own."""
