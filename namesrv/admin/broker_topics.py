"""Topic administration on brokers, as upstream's ``mqadmin updateTopic`` / ``deleteTopic``.

A topic is created where its queues live: UPDATE_AND_CREATE_TOPIC goes to each master broker
(the brokers then register the topic with every name server), and DELETE_TOPIC_IN_BROKER to
each master before the name server forgets the route. The masters of a cluster are read from
the name server's GET_BROKER_CLUSTER_INFO answer. Every broker is asked, and each answer is
kept, so one refusing broker is reported by address with its remark and does not hide the
others' results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from namesrv.admin.wire import AdminClient, AdminConnectionError, Target, split_hostport
from protocol import headers
from protocol.codes import RequestCode, ResponseCode
from protocol.peer_text import printable
from protocol.route_model import ClusterInfo
from protocol.signing import SignatureForm

MASTER_ID = 0
DEFAULT_TOPIC = "TBW102"
"""Upstream's ``TopicValidator.AUTO_CREATE_TOPIC_KEY_TOPIC``: the ``defaultTopic`` field."""
ORDER_NAMESPACE = "ORDER_TOPIC_CONFIG"
"""The KV namespace of an order topic's ``brokerName:queues;...`` conf (upstream's)."""
UNIT_FLAG = 0x1
UNIT_SUB_FLAG = 0x2
"""``TopicSysFlag`` bits: the topic is a unit topic; it has unit subscriptions."""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic's config as ``updateTopic`` sends it (upstream's defaults: 8/8 queues, RW)."""

    topic: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = 6
    order: bool = False
    unit: bool = False
    has_unit_sub: bool = False
    attributes: str | None = None

    def __post_init__(self) -> None:
        # PermName.isValid: any combination of INHERIT(1), WRITE(2) and READ(4).
        if not 0 <= self.perm < 8:
            raise ValueError(f"perm must be 0..7 (2: write, 4: read, 6: both), got {self.perm}")
        for name in ("read_queue_nums", "write_queue_nums"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    def header(self) -> headers.CreateTopicRequestHeader:
        return headers.CreateTopicRequestHeader(
            topic=self.topic,
            default_topic=DEFAULT_TOPIC,
            read_queue_nums=self.read_queue_nums,
            write_queue_nums=self.write_queue_nums,
            perm=self.perm,
            topic_filter_type="SINGLE_TAG",
            topic_sys_flag=(UNIT_FLAG if self.unit else 0)
            | (UNIT_SUB_FLAG if self.has_unit_sub else 0),
            order=self.order,
            attributes=self.attributes,
        )


@dataclass(frozen=True, slots=True)
class Masters:
    """A cluster's master addresses by broker name, and its broker names with no master now."""

    addrs: dict[str, str]
    masterless: list[str]


def cluster_masters(info: ClusterInfo, cluster: str) -> Masters:
    """The masters of ``cluster``; ValueError naming the known clusters when it is unknown."""
    names = info.cluster_addr_table.get(cluster)
    if names is None:
        known = ", ".join(sorted(info.cluster_addr_table)) or "none"
        raise ValueError(f"the name server knows no cluster {cluster!r} (clusters: {known})")
    addrs: dict[str, str] = {}
    masterless: list[str] = []
    for name in sorted(names):
        data = info.broker_addr_table.get(name)
        addr = data.broker_addrs.get(MASTER_ID) if data is not None else None
        if addr:
            addrs[name] = addr
        else:
            masterless.append(name)
    return Masters(addrs, masterless)


def broker_name_at(info: ClusterInfo, addr: str) -> str | None:
    """The broker name whose master is at ``addr``, as the name server knows it."""
    for name, data in info.broker_addr_table.items():
        if data.broker_addrs.get(MASTER_ID) == addr:
            return name
    return None


def order_conf(broker_names: Iterable[str], write_queue_nums: int) -> str:
    """The ORDER_TOPIC_CONFIG value: ``brokerName:writeQueues`` joined by ``;``."""
    return ";".join(f"{name}:{write_queue_nums}" for name in sorted(broker_names))


def merged_order_conf(old: str, broker_name: str, write_queue_nums: int) -> str:
    """``old`` with ``broker_name``'s entry set, the others kept (upstream's one-broker case)."""
    entries = {item.split(":", 1)[0]: item for item in old.split(";") if item.strip()}
    entries[broker_name] = f"{broker_name}:{write_queue_nums}"
    return ";".join(entries[name] for name in sorted(entries))


@dataclass(frozen=True, slots=True)
class BrokerOutcome:
    """One broker's answer: ``code`` is a response code, or None when it was not reached."""

    addr: str
    broker_name: str
    code: int | None
    remark: str

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS

    def describe(self) -> str:
        """One line; the broker's name, address and remark come from servers: escaped."""
        name, addr = printable(self.broker_name, None), printable(self.addr, None)
        who = f"broker {name} at {addr}" if self.broker_name else addr
        remark = printable(self.remark or "-", None)
        if self.ok:
            return f"{who}: ok"
        if self.code is None:
            return f"{who}: not reached: {remark}"
        try:
            code_name = ResponseCode(self.code).name
        except ValueError:
            code_name = "UNKNOWN"
        return f"{who}: refused, {code_name} ({self.code}): {remark}"


def ask_brokers(
    target: Target, brokers: dict[str, str], code: RequestCode, ext: dict[str, str]
) -> list[BrokerOutcome]:
    """Send one request to each broker of ``brokers`` (name -> address), one connection each,
    with ``target``'s TLS, timeout and credentials; every outcome, in name order. Brokers are
    Apache's: their requests are signed in the upstream form whatever the name server's is."""
    outcomes = []
    creds = target.credentials
    if creds is not None:
        creds = dataclasses.replace(creds, form=SignatureForm.UPSTREAM)
    for name, addr in sorted(brokers.items()):
        try:
            host, port = split_hostport(addr)
            broker = dataclasses.replace(target, host=host, port=port, credentials=creds)
            with AdminClient(broker) as client:
                response = client.call(code, ext)
        except (ValueError, AdminConnectionError) as exc:
            outcomes.append(BrokerOutcome(addr, name, None, str(exc)))
            continue
        outcomes.append(BrokerOutcome(addr, name, response.code, response.remark or ""))
    return outcomes
