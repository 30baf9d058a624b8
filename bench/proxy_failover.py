"""Route push on a 5.x proxy: a master's failover under ``rocketmq-proxy``, as the official gRPC
Java client sending through the proxy sees it, with and without the route-push agent.

Real Apache RocketMQ 5.3.3 on loopback: a controller and two brokers of one broker name in
controller mode (as ``bench/failover.py`` sets them up), a cluster-mode proxy at upstream's
defaults (its own config file: this name server, free ports), this name server at its
defaults, and ``GrpcProbe`` (``tests/interop/GrpcProbe.java``, ``rocketmq-client-java``)
starting a send every ``--interval-ms`` (50). Jars from ``python tools/rocketmq_jars.py``
(``--cache``: its 5.3.3 set holds the proxy, its 5.2.0 set the gRPC client).

The proxy caches each topic's route and refreshes it 20 s after each load
(``topicRouteServiceCacheRefreshSeconds``). Each round ``kill -9``'s the master ``--phases``
seconds after the proxy's last route load (3, 10, 17: the proxy learns of the new master
17, 10 and 3 s later without push), then restarts the killed broker (it rejoins as slave) and
waits until the controller has it back in the sync state set. Per round it prints the failed
sends and the time from the kill to the first send **stored by the new master**.

How each is established (``tests/support/proxy_failover.py``): the proxy's route loads are the
moments this name server's GET_ROUTEINFO_BY_TOPIC counter grows (GET_PUSH_STATUS, polled every
20 ms; only the proxy asks it for routes during a round). A send is stored by the new master
when the surviving broker, asked directly (QUERY_MESSAGE by the send's message id, the unique
key the proxy stores), returns the message with its own address as STOREHOST, the address of
the broker that wrote it; the first successful sends started after the kill are checked in
the order they were answered.

``--agent`` runs the proxy with ``-javaagent:`` the agent (``bridges/java-agent``, built by
``python tools/rocketmq_jars.py --agent`` or here when missing), ``--no-agent`` without it;
both flags (the default): the modes alternate on the same cluster, each phase without, then
with the agent. Each round starts a proxy and a probe of its own and stops them after it, so
only one proxy asks this name server for routes at a time.

``--steady-seconds N`` kills nothing: it measures the proxy's own cost under the same sending
(``bench/proxy_steady.py``), ``--steady-legs`` legs of N s per mode, alternating, each on a
fresh proxy after ``--steady-warmup-s`` of sending, the proxy JVM's CPU time and RSS sampled
every second.

``--sdk python`` sends with the Python gRPC SDK instead (``rocketmq-python-client`` from PyPI,
``bench/grpc_python_probe.py``), run on ``--sdk-python``: an interpreter of its own virtual
environment (``python -m venv DIR && DIR/bin/pip install rocketmq-python-client``), since the
SDK pins its own gRPC and protobuf.

    python bench/proxy_failover.py --rounds 3 [--agent] [--no-agent] [--sdk python --sdk-python P]
    python bench/proxy_failover.py --steady-seconds 300 --steady-legs 2

Never part of the test suite: it needs Java, minutes, and a quiet machine (say when it was not).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE), str(ROOT / "tests")]

import proxy_steady  # noqa: E402
from apache_procs import stop_processes, tree_commit  # noqa: E402
from local_processes import free_port, start_namesrv  # noqa: E402
from support import apache_proxy, java_agent  # noqa: E402
from support.apache_controller import ControllerGroup  # noqa: E402
from support.apache_proxy import ProbeSends  # noqa: E402
from support.proxy_failover import Round, RouteLoads, failover_round  # noqa: E402

TOPIC = "ProxyFailoverBench"


def mode_name(agent: Path | None) -> str:
    return "agent" if agent else "no-agent"


def start_mode(
    args: argparse.Namespace, run_dir: Path, namesrv: str, agent: Path | None, tag: str
) -> tuple[apache_proxy.Proxy, ProbeSends]:
    """A proxy of its own (with the agent or not) and a gRPC probe sending through it, returned
    once the probe's sends succeed."""
    name = f"{mode_name(agent)}-{tag}"
    jvm = (f"-javaagent:{agent}",) if agent else ()
    proxy = apache_proxy.start_proxy(args.lib, run_dir, namesrv, name=f"proxy-{name}", jvm=jvm)
    probe = start_sdk_probe(args, run_dir / f"probe-{name}", proxy.endpoint)
    if not probe.wait(lambda sends: sum(s.ok for s in sends) >= 20, 120):
        stop_mode(proxy, probe)
        raise SystemExit(f"the gRPC probe never sent; see {probe.stderr}")
    return proxy, probe


def stop_mode(proxy: apache_proxy.Proxy, probe: ProbeSends) -> None:
    probe.stop()
    stop_processes([proxy.proc])


def run_round(
    args: argparse.Namespace,
    run_dir: Path,
    group: ControllerGroup,
    loads: RouteLoads,
    agent: Path | None,
    number: int,
) -> Round:
    """Round ``number`` (its phase from ``--phases``) on a fresh proxy, with the agent or not;
    the killed broker is back in the sync state set when it returns. Only this proxy runs
    during the round, so the name server's route lookups are its own."""
    name = mode_name(agent)
    proxy, probe = start_mode(args, run_dir, group.namesrv, agent, str(number))
    try:
        phase = args.phase_list[(number - 1) % len(args.phase_list)]
        result = failover_round(group, probe, loads, TOPIC, phase, timeout_s=args.round_timeout_s)
        print(f"{name} round {number}: {result.line()}", flush=True)
        print(json.dumps(result.as_dict()), flush=True)
    finally:
        stop_mode(proxy, probe)
    victim = group.by_addr(result.killed)
    group.restart(victim)
    if not group.in_sync(2, timeout=180):
        raise SystemExit(f"{victim.addr} never rejoined the sync state set")
    return result


def steady_legs(
    args: argparse.Namespace, run_dir: Path, namesrv: str, modes: list[Path | None]
) -> list[dict[str, Any]]:
    """``--steady-legs`` legs per mode, the modes alternating, each on a fresh proxy with its
    own probe at the same send rate: ``--steady-warmup-s`` unsampled, then the proxy JVM's
    CPU and RSS sampled every second for ``--steady-seconds``. No broker is killed."""
    legs = []
    for number in range(1, args.steady_legs + 1):
        for agent in modes:
            proxy, probe = start_mode(args, run_dir, namesrv, agent, f"steady-{number}")
            try:
                time.sleep(args.steady_warmup_s)

                def sends(probe: ProbeSends = probe) -> tuple[int, int]:
                    done = probe.snapshot(TOPIC)
                    return sum(s.ok for s in done), sum(not s.ok for s in done)

                leg = proxy_steady.measure_leg(
                    mode_name(agent), proxy.proc.pid, args.steady_seconds, sends
                )
            finally:
                stop_mode(proxy, probe)
            print(leg.line(), flush=True)
            legs.append(proxy_steady.as_dict(leg))
    return legs


def start_sdk_probe(args: argparse.Namespace, home: Path, endpoint: str) -> ProbeSends:
    """The gRPC client of ``--sdk``: Java's ``GrpcProbe``, or the Python SDK's probe run on
    ``--sdk-python`` (an interpreter whose environment has ``rocketmq-python-client``)."""
    if args.sdk == "java":
        classes = apache_proxy.compile_probe(args.client_lib, home.parent / "grpc-classes")
        return apache_proxy.start_probe(
            args.client_lib, classes, home, endpoint, TOPIC, args.interval_ms
        )
    home.mkdir(parents=True, exist_ok=True)
    stderr = home / "probe.err"
    proc = subprocess.Popen(
        [args.sdk_python, HERE / "grpc_python_probe.py", endpoint, TOPIC, str(args.interval_ms)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr.open("w"), text=True,
        env=dict(os.environ, HOME=str(home)),
    )  # fmt: skip
    return ProbeSends(proc, stderr)


def summary(name: str, rounds: list[Round]) -> str:
    stored = [r.first_stored_s for r in rounds if r.first_stored_s is not None]
    failed = [r.failed for r in rounds]
    return (
        f"{name}: {sum(failed)} failed sends in {len(rounds)} rounds "
        f"(per round {', '.join(map(str, failed))}); first stored by the new master after "
        + (
            f"{min(stored):.2f}-{max(stored):.2f} s, median {statistics.median(stored):.2f} s"
            if stored
            else "-"
        )
        + ("" if len(stored) == len(rounds) else f"; never in {len(rounds) - len(stored)}")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", default="~/.cache/rocketmq-routepush")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--phases", default="3,10,17", help="kill phases, seconds after the proxy's route load"
    )
    parser.add_argument("--interval-ms", type=int, default=50)
    parser.add_argument("--round-timeout-s", type=float, default=60.0)
    parser.add_argument("--agent", action="store_true", help="rounds with the agent")
    parser.add_argument("--no-agent", action="store_true", help="rounds without the agent")
    parser.add_argument("--agent-jar", help="default: bridges/java-agent's, built when missing")
    parser.add_argument(
        "--sdk", choices=("java", "python"), default="java", help="the gRPC client that sends"
    )
    parser.add_argument(
        "--sdk-python",
        default="python3",
        help="with --sdk python: an interpreter whose environment has rocketmq-python-client",
    )
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=0,
        help="instead of failovers: legs of N s of steady sending, the proxy's CPU and RSS",
    )
    parser.add_argument("--steady-legs", type=int, default=2, help="legs per mode")
    parser.add_argument("--steady-warmup-s", type=float, default=30.0)
    parser.add_argument("--json", dest="json_out", help="also write the result here")
    args = parser.parse_args()
    cache = Path(args.cache).expanduser()
    args.lib = cache / "5.3.3" / "lib"
    args.client_lib = cache / "5.2.0" / "lib"
    if not apache_proxy.has_proxy(args.lib) or not apache_proxy.has_grpc_client(args.client_lib):
        raise SystemExit(
            f"no rocketmq-proxy in {args.lib} or no rocketmq-client-java in {args.client_lib}: "
            f"python tools/rocketmq_jars.py --cache {args.cache}"
        )
    args.phase_list = [float(p) for p in args.phases.split(",")]
    modes: list[Path | None] = []
    if args.no_agent or not args.agent:
        modes.append(None)
    if args.agent or not args.no_agent:
        modes.append(Path(args.agent_jar) if args.agent_jar else java_agent.agent_jar())
    commit = tree_commit(ROOT)
    run_dir = cache / "5.3.3" / "proxy-failover" / time.strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True)
    port = free_port()
    ns = start_namesrv(port, log=run_dir / "namesrv.log")
    namesrv = f"127.0.0.1:{port}"
    group = ControllerGroup(args.lib, run_dir, namesrv)
    loads = RouteLoads(namesrv)
    result: dict[str, Any] = {"commit": commit, "interval_ms": args.interval_ms, "sdk": args.sdk}
    try:
        group.start()
        group.create_topic(TOPIC)
        if not group.in_sync(2, timeout=180):
            raise SystemExit("the slave never joined the sync state set")
        loads.start()
        if args.steady_seconds:
            result["steady"] = steady_legs(args, run_dir, namesrv, modes)
        else:
            for number in range(1, args.rounds + 1):
                for agent in modes:
                    rounds = result.setdefault(mode_name(agent), [])
                    rounds.append(run_round(args, run_dir, group, loads, agent, number).as_dict())
    finally:
        loads.stopping.set()
        group.stop()
        stop_processes([ns])
    result["run_dir"] = str(run_dir)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(result, indent=2))
    print(f"commit {commit}, gRPC client {args.sdk}, run dir {run_dir}")
    if args.steady_seconds:
        print(proxy_steady.summary(result["steady"]))
    for agent in [] if args.steady_seconds else modes:
        name = mode_name(agent)
        print(summary(name, [Round(**r) for r in result.get(name, [])]))


if __name__ == "__main__":
    main()
