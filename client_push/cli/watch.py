"""``python -m client_push watch`` (and the command line's parser; ``send`` lives in
``send_cli``): print every route state the client learns, as JSON lines.

An operator's window onto push: run it against a name server, change a broker (wipe its write
perm, delete a topic) and see the change arrive, with the time it was learned.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from typing import IO, Any

from client_push.cli import send as send_cli
from client_push.cli.loops import EXIT_TLS_MISMATCH, add_loop_option, faces, run, watch_tls
from client_push.config import ClientConfig, ClientConfigError, parse_namesrv_addrs
from client_push.routes.events import RouteEvent
from client_push.routes.route_cache import MASTER_ID
from client_push.runtime.interface import Future, Runtime
from protocol.command_line import DefaultsHelpFormatter, add_version

EXIT_USAGE = 2


def event_line(event: RouteEvent) -> dict[str, Any]:
    """The JSON object printed for one learned route state."""
    brokers: dict[str, dict[str, Any]] = {}
    if event.route is not None:
        route = event.route.route
        addrs = {b.broker_name: b.broker_addrs for b in route.broker_datas}
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            brokers[qd.broker_name] = {
                "addr": addrs.get(qd.broker_name, {}).get(MASTER_ID),
                "write_queues": qd.write_queue_nums,
                "read_queues": qd.read_queue_nums,
                "perm": qd.perm,
            }
    line: dict[str, Any] = {
        "topic": event.topic,
        "version": event.version,
        "exists": event.exists,
        "brokers": brokers,
        "learned_at_ms": event.learned_at_ms,
        "cause": event.cause,
        "namesrv": event.namesrv,
    }
    if event.stale:  # the last route, kept though the name server named no broker for it
        line["stale"] = True
    return line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m client_push",
        description="Route client of the push-capable RocketMQ name server.",
        formatter_class=DefaultsHelpFormatter,
    )
    add_version(parser, "python -m client_push")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    watch = commands.add_parser(
        "watch",
        help="print one JSON line per route state learned, until interrupted",
        description="Print one JSON line per route state learned (initial route, each change, "
        "absence) until SIGINT or SIGTERM. Exits 3 on a TLS mismatch with the name server.",
        formatter_class=DefaultsHelpFormatter,
    )
    watch.add_argument(
        "--namesrv",
        required=True,
        metavar="HOST:PORT[;HOST:PORT]",
        help="name-server addresses, separated by ';'",
    )
    watch.add_argument(
        "--topic",
        required=True,
        action="append",
        metavar="TOPIC",
        help="a topic to watch; repeat for more",
    )
    watch.add_argument(
        "--poll-ms",
        type=int,
        default=None,
        metavar="N",
        help="route poll interval while push is off [default: 30000]",
    )
    watch.add_argument(
        "--version-check-ms",
        type=int,
        default=None,
        metavar="N",
        help="while push works, how often held versions are checked with the name server "
        "[default: 30000]",
    )
    watch.add_argument("--telemetry", default="", metavar="FILE", help="refetch telemetry file")
    watch.add_argument(
        "--no-inline-routes",
        action="store_true",
        help="do not ask for routes inside notifications: fetch every notified change",
    )
    watch.add_argument("--tls", action="store_true", help="connect to name servers with TLS")
    watch.add_argument(
        "--tls-ca",
        default="",
        metavar="FILE",
        help="with --tls, verify servers against this CA [default: encrypt, do not verify]",
    )
    add_loop_option(watch)
    watch.add_argument("-v", "--verbose", action="store_true", help="log connection events")
    send_cli.add_parser(commands)
    return parser


def config_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ClientConfig:
    try:
        addrs = parse_namesrv_addrs(args.namesrv)
        extra: dict[str, Any] = {}
        if args.poll_ms is not None:
            extra["poll_interval_ms"] = args.poll_ms
        if args.version_check_ms is not None:
            extra["version_check_interval_ms"] = args.version_check_ms
        if args.telemetry:
            extra["telemetry_path"] = args.telemetry
        if args.no_inline_routes:
            extra["inline_routes"] = False
        if args.tls or args.tls_ca:
            extra["tls"] = True
            extra["tls_ca_file"] = args.tls_ca
        return ClientConfig(namesrv_addrs=addrs, **extra)
    except ClientConfigError as exc:
        parser.error(str(exc))
    raise AssertionError("unreachable")


async def run_watch(
    loop: str,
    config: ClientConfig,
    topics: Sequence[str],
    out: IO[str],
    stop: Future[None],
    runtime: Runtime | None = None,
) -> str | None:
    """Watch ``topics`` on ``loop`` until ``stop`` settles, then close the client; with
    ``runtime``, also until a TLS mismatch stops it: its message is returned."""
    on = faces(loop)
    client = on.route_client(config)

    def printer(event: RouteEvent) -> None:
        out.write(json.dumps(event_line(event), separators=(",", ":")) + "\n")
        out.flush()

    client.start()
    mismatch = None
    if runtime is not None:
        mismatch = watch_tls(runtime, client, config.tls, ";".join(config.namesrv_addrs), stop)
    try:
        for topic in dict.fromkeys(topics):
            client.add_listener(topic, printer)
        await stop
    finally:
        await on.close(client)
    return (await mismatch) if mismatch is not None and mismatch.done() else None


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "send":
        return send_cli.main(parser, args, out or sys.stdout)
    config = config_from_args(parser, args)
    topics = [t for t in args.topic if t]
    if not topics:
        parser.error("--topic must name a topic")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    async def go(runtime: Runtime, stop: Future[None]) -> str | None:
        return await run_watch(args.loop, config, topics, out or sys.stdout, stop, runtime)

    # SIGINT and SIGTERM settle ``stop``: the client closes, then the loop ends.
    mismatch = run(args.loop, go)
    if mismatch is not None:
        print(f"python -m client_push watch: {mismatch}", file=sys.stderr)
        return EXIT_TLS_MISMATCH
    return 0
