"""``namesrv-sandbox``: stand-in brokers on loopback, registered with a name server, driven by
commands, so route push can be seen at work without a RocketMQ broker.

``namesrv-sandbox [--topic T[:QUEUES] ...] [--broker NAME ...]`` registers the brokers (broker-a
and broker-b by default) with the name server at ``--namesrv`` (127.0.0.1:9876), starting one
there, in this process, when none answers. It then takes commands on stdin (when it is in the
foreground) and on its control port; ``namesrv-sandbox COMMAND`` sends one command to a running
sandbox (see ``namesrv_sandbox.fleet.HELP``). The stand-ins are not brokers: see
``namesrv_sandbox.standin``.

Exit codes: 0 stopped by a signal or ``quit``; 1 the name server or control port could not be
used, or a command failed; 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

from namesrv_sandbox.control import (
    DEFAULT_CONTROL,
    ControlFactory,
    ControlUnreachable,
    send_command,
)
from namesrv_sandbox.fleet import HELP, Fleet
from namesrv_sandbox.standin import parse_topics
from protocol.address import AddressError, split_host_port
from protocol.command_line import DefaultsHelpFormatter, add_version

COMMANDS = ("stats", "stop", "fail", "start", "restart", "slow", "busy", "normal", "freeze", "help")
DEFAULT_NAMESRV = "127.0.0.1:9876"


def _hostport(text: str) -> tuple[str, int]:
    try:
        return split_host_port(text)
    except AddressError:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}") from None


def _topics(text: str) -> dict[str, int]:
    try:
        return parse_topics([text])
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="namesrv-sandbox",
        description="Stand-in brokers (not brokers: no storage, no consumers) registered with a "
        "name server on loopback, so route push and the admin tools can be tried without "
        "RocketMQ. Commands come on stdin and from `namesrv-sandbox COMMAND`.",
        epilog="commands (at the prompt, or as namesrv-sandbox COMMAND ...):\n"
        + "\n".join(f"  {usage:38} {what}" for usage, what in HELP.items())
        + "\n  quit (prompt only)                     stop the brokers and exit",
        formatter_class=DefaultsHelpFormatter,
    )
    add_version(p, "namesrv-sandbox")
    p.add_argument(
        "--namesrv",
        type=_hostport,
        default=DEFAULT_NAMESRV,
        metavar="HOST:PORT",
        help="the name server to register with; one is started there when none answers",
    )
    p.add_argument(
        "--broker",
        action="append",
        default=[],
        metavar="NAME",
        help="a stand-in broker; repeat for more [default: broker-a and broker-b]",
    )
    p.add_argument(
        "--topic",
        type=_topics,
        action="append",
        default=[],
        metavar="NAME[:QUEUES]",
        help="a topic every broker holds (4 queues unless given); repeat for more "
        "[default: TopicTest]",
    )
    p.add_argument("--cluster", default="DefaultCluster", help="the brokers' cluster name")
    p.add_argument(
        "--control",
        type=_hostport,
        default=DEFAULT_CONTROL,
        metavar="HOST:PORT",
        help="the control port namesrv-sandbox COMMAND talks to",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log the name server's INFO lines")
    return p


def command_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="namesrv-sandbox COMMAND",
        description="Send one command to a running sandbox and print its JSON answer.",
        formatter_class=DefaultsHelpFormatter,
    )
    p.add_argument("command", nargs="+", help=", ".join(COMMANDS))
    p.add_argument(
        "--control",
        type=_hostport,
        default=DEFAULT_CONTROL,
        metavar="HOST:PORT",
        help="the sandbox's control port",
    )
    p.add_argument(
        "--wait",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="how long to wait for the sandbox to come up",
    )
    return p


def say(text: str) -> None:
    print(f"sandbox: {text}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if _command_word(argv) in COMMANDS:
        return control_command(command_parser().parse_args(argv))
    return run(run_parser().parse_args(argv))


def _command_word(argv: list[str]) -> str | None:
    """The first word that is neither an option nor an option's value: a command's name when
    ``namesrv-sandbox [--control HOST:PORT] COMMAND ...`` is meant (options on either side)."""
    words = iter(argv)
    for word in words:
        if word in ("--control", "--wait"):
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def control_command(args: argparse.Namespace) -> int:
    host, port = args.control
    try:
        answer = send_command(host, port, " ".join(args.command), args.wait)
    except ControlUnreachable as exc:
        print(f"namesrv-sandbox: {exc} (start one with namesrv-sandbox)", file=sys.stderr)
        return 1
    print(json.dumps(answer))
    return 1 if "error" in answer else 0


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from twisted.internet import defer, task
    from twisted.internet import reactor as default_reactor
    from twisted.internet.error import CannotListenError

    reactor: Any = default_reactor
    host, port = args.namesrv
    namesrv = f"{host}:{port}"
    server = None
    if _answers(host, port):
        say(f"using the name server at {namesrv}")
    else:
        try:
            server = _start_namesrv(reactor, namesrv)
        except CannotListenError as exc:
            print(
                f"namesrv-sandbox: no name server answers at {namesrv}, and one cannot be "
                f"started there: {exc.socketError}",
                file=sys.stderr,
            )
            return 1
        say(f"started a name server at {namesrv} (route push on)")
    topics: dict[str, int] = {}
    for table in args.topic or [{"TopicTest": 4}]:
        topics.update(table)
    fleet = Fleet(reactor, [namesrv], args.cluster, topics, say=say)

    starting: list[defer.Deferred[None]] = []
    """Commands that came before every broker registered wait for it: a ``stats`` right
    after starting the sandbox in the background reports them registered."""
    started = [False]

    async def handle(line: str) -> dict[str, Any]:
        if line.strip().lower() == "quit":
            reactor.callLater(0, reactor.stop)
            return {"quit": True}
        if not started[0]:
            waiter: defer.Deferred[None] = defer.Deferred()
            starting.append(waiter)
            await waiter
        return await fleet.command(line)

    control_host, control_port = args.control
    try:
        reactor.listenTCP(control_port, ControlFactory(handle), interface=control_host)
    except CannotListenError as exc:
        print(
            f"namesrv-sandbox: cannot listen on the control port {control_host}:{control_port}: "
            f"{exc.socketError} (is another sandbox running? --control picks another port)",
            file=sys.stderr,
        )
        return 1

    async def start_all() -> None:
        try:
            for name in args.broker or ["broker-a", "broker-b"]:
                await fleet.start(name)
        finally:
            started[0] = True
            while starting:
                starting.pop(0).callback(None)
        say(
            "ready: type a command (help lists them) or run namesrv-sandbox COMMAND "
            "from another shell; Ctrl-C stops"
        )
        if _prompt_usable():
            _read_stdin(reactor, handle)

    last = [0]

    def report() -> None:
        total = fleet.received_total()
        if total != last[0]:
            last[0] = total
            each = ", ".join(
                f"{slot.name} {sum(slot.received_by_topic().values())}"
                for slot in fleet.slots.values()
            )
            say(f"messages received: {each} (total {total})")

    reporter = task.LoopingCall(report)
    reactor.callWhenRunning(lambda: defer.ensureDeferred(start_all()))
    reactor.callWhenRunning(reporter.start, 1.0, False)

    def shutdown() -> defer.Deferred[None]:
        stopped = fleet.stop_all(0)
        if server is not None:
            stopped.addBoth(lambda _: server.stop(grace_ms=0))
        return stopped

    reactor.addSystemEventTrigger("before", "shutdown", shutdown)
    reactor.run()
    return 0


def _start_namesrv(reactor: Any, listen: str) -> Any:
    """A name server with the embedded defaults, listening at ``listen``, in this process. Its
    KV config stays in memory: a sandbox is thrown away, and the default file
    (``~/namesrv/kvConfig.json``) is a real name server's on this host."""
    import dataclasses

    from namesrv.config import IN_MEMORY, NamesrvConfig
    from namesrv.server import NameServer

    config = NamesrvConfig()
    config = dataclasses.replace(
        config,
        server=dataclasses.replace(config.server, listen=listen),
        registry=dataclasses.replace(config.registry, kv_config_path=IN_MEMORY),
    )
    server = NameServer(config, reactor)
    server.listen()
    return server


def _prompt_usable() -> bool:
    """Stdin can be read: a pipe or file, or a terminal this process has in the foreground
    (a background job that reads its terminal is stopped by the shell)."""
    try:
        if not os.isatty(0):
            return True
        return os.tcgetpgrp(0) == os.getpgrp()
    except OSError:
        return False


def _read_stdin(reactor: Any, handle: Any) -> None:
    """Commands from stdin, one a line, read by a daemon thread (it never holds up the exit);
    each answer printed as a JSON line. End of input leaves the sandbox running."""
    from twisted.internet import defer

    def answer(line: str) -> None:
        d = defer.ensureDeferred(handle(line))
        d.addCallback(lambda doc: doc and print(json.dumps(doc), flush=True))

    def read() -> None:
        for line in sys.stdin:
            if line.strip():
                reactor.callFromThread(answer, line)

    threading.Thread(target=read, name="sandbox-stdin", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
