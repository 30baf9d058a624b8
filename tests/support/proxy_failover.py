"""One master failover under a 5.x proxy, measured from a gRPC client's sends: for the interop
test of route push on the proxy and its benchmark (``bench/proxy_failover.py``).

The proxy (cluster mode) caches a topic's route and refreshes it 20 s after each load
(``topicRouteServiceCacheRefreshSeconds``); until then it sends to the master it knows. A round
``kill -9``'s the master a chosen phase after the proxy's last route load and reports the
failed sends and the time from the kill to the first send **stored by the new master**.

* *The proxy's route loads* are seen from this name server: its GET_PUSH_STATUS counters,
  polled every 20 ms, count the GET_ROUTEINFO_BY_TOPIC requests it answered. Only the proxy
  asks it for routes (the gRPC client asks the proxy; the harness reads the master from
  GET_BROKER_CLUSTER_INFO, which that counter does not count): the topic's load when the client
  first asks for it, its refreshes every 20 s after, and the proxy's own clients polling their
  topics every 30 s from its start, told apart by that cycle (``RouteLoads.chain``).
* *Stored by the new master* is proven per message: the probe prints each send's message id,
  which the proxy stores as the message's unique key. After the kill the harness asks the
  surviving broker itself (QUERY_MESSAGE by unique key, straight to its address, no name
  server) for the first successful sends started after the kill, and reads the STOREHOST of
  the copy it returns: the address of the broker that wrote the message. A send counts once
  the surviving broker holds it with its own address as STOREHOST, so neither a copy
  replicated from the killed master nor a send answered from before the kill can pass.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import asdict, dataclass, field

from namesrv.admin.wire import AdminClient, AdminConnectionError, Target, split_hostport
from protocol.codes import RequestCode
from support.apache_controller import ControllerGroup
from support.apache_proxy import ProbeSends, Send

QUERY_MESSAGE = 12
"""Upstream's QUERY_MESSAGE request code (to a broker: messages by key from its index)."""
QUERY_NOT_FOUND = 22
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
BORNHOST_V6 = 0x1 << 4
STOREHOST_V6 = 0x1 << 5
LOOKUPS = "handled.GET_ROUTEINFO_BY_TOPIC"
POLL_S = 0.02
REFRESH_WAIT_MS = 21_500
"""Past the proxy's 20 s refresh after a load (its first access after 20 s reloads)."""


def now_ms() -> float:
    return time.time() * 1000.0


class RouteLoads(threading.Thread):
    """When this name server answered route lookups: the times its lookup counter grew, read
    from GET_PUSH_STATUS every 20 ms (bounded: the newest 10,000)."""

    def __init__(self, namesrv: str) -> None:
        super().__init__(daemon=True)
        self.host, self.port = split_hostport(namesrv)
        self.times: list[float] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        last = None
        client = None
        while not self.stopping.is_set():
            try:
                if client is None:
                    client = AdminClient(Target(self.host, self.port, timeout_s=5))
                response = client.call(RequestCode.GET_PUSH_STATUS)
                count = int(json.loads(response.body)["counters"].get(LOOKUPS, 0))
            except (AdminConnectionError, OSError, ValueError, KeyError):
                client = None
                time.sleep(POLL_S)
                continue
            if last is not None and count > last:
                self.times.append(now_ms())
                del self.times[:-10_000]
            last = count
            time.sleep(POLL_S)

    def chain(self, anchor_ms: float) -> list[float]:
        """The refreshes of one cached route: the first load at or after ``anchor_ms`` (the
        client's first query of the topic), then each load 19.5-21.5 s after the previous
        one. The proxy's other lookups (its own clients poll their topics every 30 s from its
        start) fall off that cycle. When a load off the cycle moved it (a reload the cycle did
        not schedule), the chain goes on at the first later load followed by one 20 s after."""
        times = list(self.times)

        def follower(t: float) -> float | None:
            return next((u for u in times if t + 19_500 <= u <= t + 21_500), None)

        first = next((t for t in times if t >= anchor_ms), None)
        out = [] if first is None else [first]
        while out:
            nxt = follower(out[-1])
            if nxt is None:
                nxt = next((t for t in times if t > out[-1] and follower(t) is not None), None)
            if nxt is None:
                break
            out.append(nxt)
        return out


def store_host(broker: str, topic: str, message_id: str) -> str | None:
    """The STOREHOST of the message whose unique key is ``message_id``, as broker ``broker``
    (HOST:PORT) returns it from its own index; None when it holds no such message."""
    host, port = split_hostport(broker)
    ext = {
        "topic": topic,
        "key": message_id,
        "maxNum": "32",
        "beginTimestamp": "0",
        "endTimestamp": str(2**63 - 1),
        UNIQUE_KEY_QUERY: "true",
    }
    with AdminClient(Target(host, port, timeout_s=10)) as client:
        response = client.call(QUERY_MESSAGE, ext)
    if response.code == QUERY_NOT_FOUND or not response.body:
        return None
    if response.code != 0:
        raise AssertionError(f"{broker} answered QUERY_MESSAGE {response.code}: {response.remark}")
    return _first_store_host(response.body)


def _first_store_host(body: bytes) -> str:
    """STOREHOST of the first message in a broker's stored-message bytes: total size, magic,
    body CRC, queue id, flag (5 ints), queue and physical offsets (2 longs), sysflag, born
    timestamp, born host (4 or 16 address bytes and a port), store timestamp, store host."""
    (sysflag,) = struct.unpack_from(">i", body, 36)
    at = 48 + (16 if sysflag & BORNHOST_V6 else 4) + 4 + 8
    size = 16 if sysflag & STOREHOST_V6 else 4
    address = socket.inet_ntop(
        socket.AF_INET6 if size == 16 else socket.AF_INET, body[at : at + size]
    )
    (port,) = struct.unpack_from(">i", body, at + size)
    return f"{address}:{port}"


@dataclass
class Round:
    phase_s: float
    """Seconds from the proxy's last route load to the kill."""
    killed: str
    survivor: str
    failed: int
    first_stored_s: float | None
    """Kill to the answer of the first send the survivor stored as master; None: none within
    the round's timeout."""
    first_stored_id: str
    new_master_in_namesrv_s: float | None
    """Kill to this name server listing the survivor as master."""
    route_loads_s: list[float]
    """The proxy's scheduled loads of the topic's route after the kill (its 20 s refresh
    cycle, ``RouteLoads.chain``), seconds after it."""
    sends_after_kill: int
    lookups_after_kill_s: list[float] = field(default_factory=list)
    """Every route lookup this name server answered after the kill, seconds after it (the
    first 10): a load the cycle did not schedule is the proxy's, or its clients'."""

    def line(self) -> str:
        stored = "never" if self.first_stored_s is None else f"{self.first_stored_s:.2f} s"
        return (
            f"phase {self.phase_s:.1f} s after the proxy's route load: {self.failed} failed sends, "
            f"first stored by the new master {stored} after the kill"
        )

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _first_stored(
    probe: ProbeSends, survivor: str, topic: str, kill_ms: float, checked: set[int]
) -> Send | None:
    """The first send (by its answer) started after the kill that ``survivor`` stored itself;
    sends already found not stored there are in ``checked``."""
    oks = sorted(
        (s for s in probe.snapshot(topic) if s.ok and s.start_ms >= kill_ms), key=lambda s: s.end_ms
    )
    for send in oks[:8]:
        if send.seq in checked:
            continue
        try:
            host = store_host(survivor, topic, send.message_id)
        except AdminConnectionError:
            return None
        if host == survivor:
            return send
        if host is not None:
            checked.add(send.seq)  # held, but written by another broker
        else:
            return None  # not indexed yet: ask again on the next pass
    return None


def failover_round(
    group: ControllerGroup,
    probe: ProbeSends,
    loads: RouteLoads,
    topic: str,
    phase_s: float,
    *,
    timeout_s: float = 60.0,
) -> Round:
    """Kills the master ``phase_s`` after the proxy's last route load and measures until the
    new master stored a send (or ``timeout_s``); the killed broker stays down."""
    round_start = now_ms()
    master = group.master()
    assert master is not None, "no master listed"
    assert probe.started_ms, "the probe has not started"
    for _ in range(4):
        chain = loads.chain(probe.started_ms)
        assert chain, "the proxy never loaded the topic's route"
        target = chain[-1] + phase_s * 1000
        if target >= now_ms() + 300:
            break
        time.sleep(max(0.0, (chain[-1] + REFRESH_WAIT_MS - now_ms()) / 1000))
    else:
        raise AssertionError(f"the proxy's route refreshes stopped: {chain[-3:]}")
    time.sleep(max(0.0, (target - now_ms()) / 1000))
    victim = group.by_addr(master)
    assert victim.proc is not None
    kill_ms = now_ms()
    victim.proc.kill()
    phase = (kill_ms - chain[-1]) / 1000
    survivor = next(b.addr for b in group.brokers if b.addr != master)
    stored: Send | None = None
    listed_at: float | None = None
    checked: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and (stored is None or listed_at is None):
        if listed_at is None and group.master() == survivor:
            listed_at = now_ms()
        if stored is None:
            stored = _first_stored(probe, survivor, topic, kill_ms, checked)
        time.sleep(0.1)
    time.sleep(1.0)
    victim.proc.wait()
    end_ms = now_ms()
    failed = probe.failures(round_start, end_ms, topic)
    return Round(
        phase_s=round(phase, 2),
        killed=master,
        survivor=survivor,
        failed=len(failed),
        first_stored_s=None if stored is None else round((stored.end_ms - kill_ms) / 1000, 3),
        first_stored_id=stored.message_id if stored else "",
        new_master_in_namesrv_s=None
        if listed_at is None
        else round((listed_at - kill_ms) / 1000, 3),
        route_loads_s=[
            round((t - kill_ms) / 1000, 2) for t in loads.chain(probe.started_ms) if t > kill_ms
        ][:10],
        lookups_after_kill_s=[round((t - kill_ms) / 1000, 2) for t in loads.times if t > kill_ms][
            :10
        ],
        sends_after_kill=len([s for s in probe.snapshot(topic) if s.start_ms >= kill_ms]),
    )
