"""``clusterList -m`` and ``topicList -c``: the views of upstream's ``mqadmin`` that ask the
brokers too.

``clusterList -m`` asks each broker address of the name server's cluster info for its runtime
stats (GET_BROKER_RUNTIME_INFO) and shows the messages put and got yesterday and today, as
upstream computes them from the broker's ``msgPutTotal*``/``msgGetTotal*`` counters. A broker
that does not answer them shows ``-`` (upstream shows 0, which reads as an idle broker).

``topicList -c`` shows each topic (retry and dead-letter topics left out, as upstream) with its
cluster (of the first broker of its route) and the consumer groups its first broker's master
names (QUERY_TOPIC_CONSUME_BY_WHO); a topic no group consumes shows one row with no group.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass

from namesrv.admin.wire import AdminClient, AdminConnectionError, Target, split_hostport
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.route_model import ClusterInfo
from protocol.signing import SignatureForm

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
"""Upstream's ``MixAll.RETRY_GROUP_TOPIC_PREFIX`` and ``DLQ_GROUP_TOPIC_PREFIX``."""

MORE_STATS_HEADERS = (
    "#Cluster Name",
    "#Broker Name",
    "#InTotalYest",
    "#OutTotalYest",
    "#InTotalToday",
    "#OutTotalToday",
)
CLUSTER_MODEL_HEADERS = ("#Cluster Name", "#Topic", "#Consumer Group")


class Brokers:
    """One connection per broker address for a run, made on first use, signed in upstream's
    form (brokers are Apache's) with the name server target's TLS, timeout and credentials."""

    def __init__(self, template: Target) -> None:
        creds = template.credentials
        if creds is not None:
            creds = dataclasses.replace(creds, form=SignatureForm.UPSTREAM)
        self._template = dataclasses.replace(template, credentials=creds)
        self._clients: dict[str, AdminClient] = {}
        self._stack = ExitStack()

    def __enter__(self) -> Brokers:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def ask(self, addr: str, code: RequestCode, ext: dict[str, str] | None = None) -> bytes:
        """The body of ``addr``'s successful answer; ValueError saying why there is none."""
        try:
            client = self._clients.get(addr)
            if client is None:
                host, port = split_hostport(addr)
                target = dataclasses.replace(self._template, host=host, port=port)
                client = self._stack.enter_context(AdminClient(target))
                self._clients[addr] = client
            response = client.call(code, ext)
        except AdminConnectionError as exc:
            self._clients.pop(addr, None)
            raise ValueError(str(exc)) from None
        if response.code != ResponseCode.SUCCESS:
            raise ValueError(f"answered {response.code}: {response.remark or '-'}")
        return bytes(response.body)


@dataclass(frozen=True, slots=True)
class BrokerStats:
    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    in_yesterday: int | None = None
    out_yesterday: int | None = None
    in_today: int | None = None
    out_today: int | None = None
    error: str = ""

    def row(self) -> tuple[object, ...]:
        def shown(value: int | None) -> object:
            return "-" if value is None else value

        return (
            self.cluster,
            self.broker_name,
            shown(self.in_yesterday),
            shown(self.out_yesterday),
            shown(self.in_today),
            shown(self.out_today),
        )

    def doc(self) -> dict[str, object]:
        return {
            "cluster": self.cluster,
            "brokerName": self.broker_name,
            "brokerId": self.broker_id,
            "addr": self.addr,
            "inTotalYest": self.in_yesterday,
            "outTotalYest": self.out_yesterday,
            "inTotalToday": self.in_today,
            "outTotalToday": self.out_today,
            **({"error": self.error} if self.error else {}),
        }


def broker_addrs(info: ClusterInfo) -> Iterator[tuple[str, str, int, str]]:
    """(cluster, broker name, broker id, address) of every broker, clusters and names sorted."""
    for cluster, names in sorted(info.cluster_addr_table.items()):
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            for broker_id, addr in sorted(data.broker_addrs.items()):
                yield cluster, name, broker_id, addr


def stats_from(table: dict[str, str]) -> tuple[int, int, int, int]:
    """(in yesterday, out yesterday, in today, out today) of a broker's runtime KV table;
    ValueError when a counter is missing or not a number."""
    try:
        put = [int(table[f"msgPutTotal{when}"]) for when in ("YesterdayMorning", "TodayMorning")]
        get = [int(table[f"msgGetTotal{when}"]) for when in ("YesterdayMorning", "TodayMorning")]
        put_now, get_now = int(table["msgPutTotalTodayNow"]), int(table["msgGetTotalTodayNow"])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"runtime stats lack a message counter: {exc}") from None
    return put[1] - put[0], get[1] - get[0], put_now - put[1], get_now - get[1]


def more_stats(info: ClusterInfo, brokers: Brokers) -> list[BrokerStats]:
    out = []
    for cluster, name, broker_id, addr in broker_addrs(info):
        base = BrokerStats(cluster, name, broker_id, addr)
        try:
            table = bodies.decode_kv_table(brokers.ask(addr, RequestCode.GET_BROKER_RUNTIME_INFO))
            numbers = stats_from(table)
        except (ValueError, ProtocolError) as exc:
            out.append(dataclasses.replace(base, error=str(exc)))
            continue
        out.append(BrokerStats(cluster, name, broker_id, addr, *numbers))
    return out


def listed(topic: str) -> bool:
    """Whether ``topicList -c`` shows ``topic`` (retry and dead-letter topics it leaves out)."""
    return not topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


def cluster_of(info: ClusterInfo, broker_name: str) -> str:
    """The cluster whose brokers include ``broker_name``; empty when none does."""
    for cluster, names in sorted(info.cluster_addr_table.items()):
        if broker_name in names:
            return cluster
    return ""
