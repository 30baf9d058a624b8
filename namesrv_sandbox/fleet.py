"""The stand-in brokers of one sandbox, and the commands that drive them.

Each broker keeps its name, port and topics across a stop and a start, so a restarted broker
comes back where it was, with the topics an admin tool gave it; what it counted before is kept
in the sandbox's totals.

What the sandbox says about registration is what the name servers answered: a register's
outcome is said when it changes (and after each topic change), and ``stats`` shows each name
server's own view of every broker (listed in its cluster info or not, which of the broker's
topics it routes to it), asked at that moment.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from twisted.internet import defer

from client_push.runtime.twisted_loop import TwistedRuntime, describe
from client_push.wire.remoting import ConnectionBounds, RemotingConnection
from namesrv_sandbox.standin import BrokerStandIn
from protocol import bodies
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.route_model import ClusterInfo

VIEW_TIMEOUT_MS = 3_000
"""How long ``stats`` waits for each name server's answer about the brokers."""

RUNNING, STOPPED, FAILED = "running", "stopped", "failed"
MAX_BROKERS = 64
"""Brokers one sandbox holds at most, started or not: ``start`` of one more is refused."""

HELP = {
    "stats [NAME]": "each broker's state, address, topics, last register outcome, each name "
    "server's view of it (registered, topics routed) and the messages it received",
    "stop [NAME] [GRACE_MS]": "graceful stop: GoAway to clients, unregister, close [default: 0]",
    "fail [NAME]": "abrupt stop: connections dropped, no unregister (the name server sees them "
    "close)",
    "start NAME": "start a stopped or failed broker again (same port, same topics), or a new one",
    "restart [NAME]": "stop, then start at once",
    "slow NAME MS | busy NAME | normal NAME": "answers delayed, sends answered SYSTEM_BUSY, or "
    "back to normal",
    "freeze [NAME]": "hung like a stalled broker: no registers, no answers, connections kept "
    "open, so the name server expires it once its heartbeats are overdue (normal NAME thaws it)",
    "help": "this list",
}
"""The commands, as the prompt, the control port and ``namesrv-sandbox COMMAND`` take them."""


class CommandError(Exception):
    """A command that cannot be done; its message says why."""


@dataclass(slots=True)
class Slot:
    """One broker name: its stand-in while it runs, and what it counted in earlier runs."""

    name: str
    port: int
    topics: dict[str, int]
    perms: dict[str, int] = field(default_factory=dict)
    read_queues: dict[str, int] = field(default_factory=dict)
    broker: BrokerStandIn | None = None
    state: str = STOPPED
    earlier: Counter[str] = field(default_factory=Counter)
    report_register: bool = True
    """Say the next register's outcome even when it is the same as the last one's."""
    broker_outcomes: dict[str, str] = field(default_factory=dict)
    """Name-server address -> the last register's outcome, as the stand-in keeps it."""

    def received_by_topic(self) -> Counter[str]:
        now = Counter(self.broker.by_topic) if self.broker is not None else Counter()
        return self.earlier + now


class Fleet:
    """The brokers, by name, registered with ``namesrv_addrs`` in ``cluster``."""

    def __init__(
        self,
        reactor: Any,
        namesrv_addrs: Sequence[str],
        cluster: str,
        topics: dict[str, int],
        *,
        say: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.reactor = reactor
        self.namesrv_addrs = list(namesrv_addrs)
        self.cluster = cluster
        self.topics = dict(topics)
        self.say = say
        self.slots: dict[str, Slot] = {}

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, name: str) -> defer.Deferred[dict[str, Any]]:
        """Start ``name`` (a new broker, or one stopped); fires once its register was answered."""
        slot = self.slots.get(name)
        if slot is None:
            if len(self.slots) >= MAX_BROKERS:
                raise CommandError(f"a sandbox holds at most {MAX_BROKERS} brokers")
            slot = self.slots[name] = Slot(name, 0, dict(self.topics))
        elif slot.state == RUNNING:
            raise CommandError(f"broker {name} is running")
        broker = BrokerStandIn(
            name,
            slot.topics,
            self.namesrv_addrs,
            reactor=self.reactor,
            port=slot.port,
            cluster=self.cluster,
        )
        broker.perms = slot.perms
        broker.read_queues = slot.read_queues
        broker.on_topic_change = lambda verb, topic: self._topic_changed(slot, verb, topic)
        broker.on_register = lambda addr, outcome: self._register_answered(slot, addr, outcome)
        slot.report_register = False  # the start says it
        slot.broker, slot.state = broker, RUNNING
        # The stand-in takes a copy of its topic table: the slot follows the live one.
        slot.topics = broker.topics

        def started(_: Any) -> dict[str, Any]:
            slot.port = broker.port
            topics = ", ".join(f"{t}:{q}" for t, q in sorted(slot.topics.items()))
            refused = {a: o for a, o in broker.registers.items() if o != "ok"}
            if not refused:
                self.say(f"broker {name} at {broker.addr} registered {topics or 'no topics'}")
            for addr, outcome in refused.items():
                self.say(f"broker {name} at {broker.addr} NOT registered with {addr}: {outcome}")
            return self.describe(slot)

        return broker.start().addCallback(started)

    def stop(self, name: str, grace_ms: int = 0) -> defer.Deferred[dict[str, Any]]:
        slot = self._running(name)
        broker = slot.broker
        assert broker is not None
        self._retire(slot, STOPPED)
        self.say(f"broker {name} stopping: GoAway to its clients, unregistered")
        return broker.shutdown(grace_ms).addCallback(lambda _: self.describe(slot))

    def fail(self, name: str) -> defer.Deferred[dict[str, Any]]:
        slot = self._running(name)
        broker = slot.broker
        assert broker is not None
        self._retire(slot, FAILED)
        self.say(f"broker {name} failed: its connections dropped, no unregister")
        return broker.kill().addCallback(lambda _: self.describe(slot))

    async def restart(self, name: str) -> dict[str, Any]:
        await self.stop(name)
        return await self.start(name)

    def stop_all(self, grace_ms: int = 0) -> defer.Deferred[None]:
        running = [n for n, s in self.slots.items() if s.state == RUNNING]
        ds = [self.stop(name, grace_ms) for name in running]
        return defer.DeferredList(ds, consumeErrors=True).addCallback(lambda _: None)

    def _retire(self, slot: Slot, state: str) -> None:
        broker = slot.broker
        if broker is not None:
            slot.earlier += broker.by_topic
            broker.by_topic.clear()
        slot.state = state

    def _running(self, name: str) -> Slot:
        slot = self.slots.get(name)
        if slot is None:
            raise CommandError(f"no broker {name} (brokers: {', '.join(self.slots) or 'none'})")
        if slot.state != RUNNING:
            raise CommandError(f"broker {name} is {slot.state}")
        return slot

    def _topic_changed(self, slot: Slot, verb: str, topic: str) -> None:
        queues = slot.topics.get(topic)
        read = slot.read_queues.get(topic, queues)
        detail = "" if queues is None else f" ({queues} queues)"
        if read != queues:
            detail = f" ({queues} write, {read} read queues)"
        self.say(f"broker {slot.name} {verb} topic {topic}{detail}; registering again")
        slot.report_register = True

    def _register_answered(self, slot: Slot, addr: str, outcome: str) -> None:
        """Say a register's outcome when it changed, or when a topic change awaits it."""
        broker = slot.broker
        before = slot.broker_outcomes.get(addr)
        slot.broker_outcomes[addr] = outcome
        if broker is None or (outcome == before and not slot.report_register):
            return
        slot.report_register = False
        if outcome == "ok":
            self.say(f"broker {slot.name} registered with {addr}")
        else:
            self.say(f"broker {slot.name} NOT registered with {addr}: {outcome}")

    # -- reports --------------------------------------------------------------------------------

    def describe(self, slot: Slot) -> dict[str, Any]:
        by_topic = slot.received_by_topic()
        mode = slot.broker.mode if slot.broker is not None and slot.state == RUNNING else None
        return {
            "broker": slot.name,
            "state": slot.state,
            "addr": f"127.0.0.1:{slot.port}",
            "mode": mode,
            "topics": dict(sorted(slot.topics.items())),
            "last_register": dict(sorted(slot.broker_outcomes.items())),
            "received": sum(by_topic.values()),
            "received_by_topic": dict(sorted(by_topic.items())),
        }

    def stats(self, names: Sequence[str] = ()) -> dict[str, Any]:
        slots = [self._slot(n) for n in names] if names else list(self.slots.values())
        brokers = [self.describe(s) for s in slots]
        return {"brokers": brokers, "received": sum(b["received"] for b in brokers)}

    async def stats_with_view(self, names: Sequence[str] = ()) -> dict[str, Any]:
        """:meth:`stats`, each broker with ``namesrv``: every name server's view of it."""
        doc = self.stats(names)
        views = {addr: await self._namesrv_view(addr) for addr in self.namesrv_addrs}
        for broker in doc["brokers"]:
            broker["namesrv"] = {
                addr: view(broker["broker"], broker["addr"], broker["topics"])
                for addr, view in views.items()
            }
        return doc

    async def _namesrv_view(self, addr: str) -> Callable[[str, str, dict[str, int]], Any]:
        """What the name server at ``addr`` knows, as a function of (broker name, address,
        topics) giving its view of that broker."""
        runtime = TwistedRuntime(self.reactor, self.reactor)
        try:
            conn = await RemotingConnection(runtime, ConnectionBounds(), label=addr).open(
                addr, VIEW_TIMEOUT_MS
            )
        except Exception as exc:
            reason = f"name server not reachable: {describe(exc)}"
            return lambda name, baddr, topics: {"error": reason}
        try:
            info = await self._ask_cluster(conn)
            routed: dict[str, set[str]] = {}
            topics = sorted({t for s in self.slots.values() for t in s.topics})
            for topic in topics:
                routed[topic] = await self._routed_brokers(conn, topic)
        except (ProtocolError, ValueError) as exc:
            reason = f"cannot read the name server's answer: {exc}"
            return lambda name, baddr, topics: {"error": reason}
        finally:
            conn.close()

        def view(name: str, baddr: str, own: dict[str, int]) -> dict[str, Any]:
            data = info.broker_addr_table.get(name)
            listed = data is not None and baddr in data.broker_addrs.values()
            return {
                "registered": listed,
                "topics_routed": sorted(t for t in own if name in routed.get(t, ())),
                "topics_not_routed": sorted(t for t in own if name not in routed.get(t, ())),
            }

        return view

    async def _ask_cluster(self, conn: RemotingConnection) -> ClusterInfo:
        cmd = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO, {})
        response = await conn.request(cmd, VIEW_TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            raise ValueError(f"cluster info refused: {response.remark}")
        return bodies.decode_cluster_info(response.body)

    async def _routed_brokers(self, conn: RemotingConnection, topic: str) -> set[str]:
        cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        response = await conn.request(cmd, VIEW_TIMEOUT_MS)
        if response.code != ResponseCode.SUCCESS:
            return set()
        return {q.broker_name for q in bodies.decode_route(response.body).queue_datas}

    def received_total(self) -> int:
        return sum(sum(s.received_by_topic().values()) for s in self.slots.values())

    def _slot(self, name: str) -> Slot:
        slot = self.slots.get(name)
        if slot is None:
            raise CommandError(f"no broker {name} (brokers: {', '.join(self.slots) or 'none'})")
        return slot

    # -- commands -------------------------------------------------------------------------------

    async def command(self, line: str) -> dict[str, Any]:
        """One command line's answer; a command that cannot be done answers ``{"error": ...}``."""
        words = line.split()
        if not words:
            return {}
        try:
            return await self._dispatch(words[0].lower(), words[1:])
        except CommandError as exc:
            return {"error": str(exc)}

    async def _dispatch(self, verb: str, args: list[str]) -> dict[str, Any]:
        if verb == "help":
            return {"commands": HELP}
        if verb == "stats":
            return await self.stats_with_view(args)
        if verb == "start":
            if len(args) != 1:
                raise CommandError("start takes one broker name")
            return await self.start(args[0])
        if verb in ("stop", "fail", "restart"):
            names = self._names(args[:1])
            grace = _number(args[1]) if verb == "stop" and len(args) > 1 else 0
            done = []
            for name in names:
                if verb == "stop":
                    done.append(await self.stop(name, grace))
                elif verb == "fail":
                    done.append(await self.fail(name))
                else:
                    done.append(await self.restart(name))
            return {"brokers": done}
        if verb in ("slow", "busy", "normal", "freeze"):
            names = self._names(args[:1])
            for name in names:
                broker = self._running(name).broker
                assert broker is not None
                if verb == "slow":
                    broker.slow(_number(args[1]) if len(args) > 1 else 800)
                elif verb == "busy":
                    broker.busy()
                elif verb == "freeze":
                    broker.freeze()
                else:
                    broker.normal()
            return self.stats(names)
        raise CommandError(f"unknown command {verb!r}; try help")

    def _names(self, given: list[str]) -> list[str]:
        """The named broker, or every running one when none is named."""
        if given:
            self._slot(given[0])
            return given
        running = [n for n, s in self.slots.items() if s.state == RUNNING]
        if not running:
            raise CommandError("no broker is running")
        return running


def _number(text: str) -> int:
    if not text.isdigit():
        raise CommandError(f"expected a number of milliseconds, got {text!r}")
    return int(text)
