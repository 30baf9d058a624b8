"""``namesrv`` / ``python -m namesrv``: run a name server until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import gc
import logging
import logging.handlers
import sys
from importlib import resources
from typing import Any

from namesrv.config import MIB, ConfigError, NamesrvConfig, check_paths, parse_listen
from namesrv.config_file import load, looks_like_properties_file
from namesrv.config_text import config_properties, config_toml
from namesrv.ops.audit_trail import AUDIT_LOGGER
from protocol.command_line import DefaultsHelpFormatter, add_version
from protocol.peer_text import printable

EXIT_CONFIG = 2
"""A config that cannot be used: bad file, key, value or path."""
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
MAX_LINE_CHARS = 4_096
"""A whole log line's message is cut here by :class:`EscapingFilter`."""


class EscapingFilter(logging.Filter):
    """Every handler's filter: each line's message with its control characters escaped and cut
    to ``MAX_LINE_CHARS``, so no string (a peer's name in any line, also outside the peer-line
    pacer of ``protocol.paced_log``) breaks a line or drives a terminal. Tracebacks keep their
    lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = printable(message, MAX_LINE_CHARS)
        if shown != message:
            record.msg, record.args = shown, None
        return True


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="namesrv",
        description="RocketMQ name server that pushes topic-route changes to subscribed clients.",
        formatter_class=DefaultsHelpFormatter,
    )
    parser.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="address to listen on (server.listen) [default: 0.0.0.0:9876]",
    )
    parser.add_argument(
        "-c",
        "--config",
        metavar="FILE",
        help="TOML config file (see docs/config.md), or an upstream namesrv.properties "
        "(-c as upstream's mqnamesrv spells it)",
    )
    parser.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics [default: off]",
    )
    parser.add_argument(
        "-p",
        "--print-config",
        action="store_true",
        help="print the effective config and exit: of -c FILE (with --listen and --metrics "
        "applied) as TOML, or as upstream's keys for a .properties file; without -c, the "
        "commented defaults",
    )
    parser.add_argument(
        "--check-config",
        metavar="FILE",
        help="check FILE (TOML or .properties) as the server would at start-up, without "
        "starting; exit 0 when it is usable, 2 with the reason when not",
    )
    parser.add_argument(
        "--tuning",
        metavar="FILE",
        help="TOML overriding built-in limits (docs/config.md) besides settings, for "
        "benchmarks and tests; no config file may set them [default: none]",
    )
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="least severe log lines written (stderr)",
    )
    parser.add_argument(
        "--audit-log",
        metavar="FILE",
        help=f"also append the audit trail (logger {AUDIT_LOGGER}, INFO whatever --log-level "
        "says) to FILE, reopened when log rotation moves it [default: stderr only]",
    )
    add_version(parser, "namesrv")
    return parser


def write_audit_log(path: str) -> logging.Handler:
    """Append the audit trail's lines to ``path`` (besides stderr), at INFO whatever the log
    level; the file is reopened when log rotation moves it away. ConfigError when it cannot
    be opened."""
    try:
        handler = logging.handlers.WatchedFileHandler(path, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--audit-log {path}: cannot open it: {exc.strerror}") from None
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(EscapingFilter())
    audit = logging.getLogger(AUDIT_LOGGER)
    audit.addHandler(handler)
    audit.setLevel(logging.INFO)
    return handler


def default_config_text() -> str:
    """The commented default TOML shipped with the package (what ``--print-config`` prints)."""
    return resources.files("namesrv").joinpath("default_config.toml").read_text("utf-8")


def resolve_config(args: argparse.Namespace) -> NamesrvConfig:
    config = load(args.config, args.tuning)
    if args.listen:
        parse_listen(args.listen)
        config = dataclasses.replace(
            config, server=dataclasses.replace(config.server, listen=args.listen)
        )
    if args.metrics:
        parse_listen(args.metrics)
        config = dataclasses.replace(
            config, metrics=dataclasses.replace(config.metrics, listen=args.metrics)
        )
    return config


M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
"""glibc's ``mallopt`` parameter numbers."""


def tune_allocator(mmap_threshold: int = 32 * MIB, trim_threshold: int = 32 * MIB) -> bool:
    """Fix glibc's mmap and trim thresholds, so large buffers come from memory the process
    keeps.

    A register of 100,000 topics is a 15 MiB frame, and its body is a buffer of that size.
    Mapped fresh for each register and unmapped after, every page of it faults again, all in
    one reactor turn, and on a virtual machine whose host takes freed memory back (balloon
    free-page reporting) each fault is slow. Up to ``mmap_threshold``
    (32 MiB, glibc's most) buffers come from the heap instead, and up to ``trim_threshold``
    of free heap top is kept: the next register reuses the same pages without a fault. What
    the process keeps is what it used at most at once, which the byte bounds of the config
    (``server.max_buffered_input_bytes`` and the caches) bound. glibc would otherwise raise
    its thresholds on its own as large blocks are freed, to no fixed bound. Returns False
    where this is not glibc.
    """
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)
        )
    except (OSError, AttributeError):
        return False


def print_config(args: argparse.Namespace) -> int:
    """``-p``: the effective config on stdout (see ``build_parser``)."""
    if args.config is None and not args.listen and not args.metrics:
        sys.stdout.write(default_config_text())
        return 0
    try:
        config = resolve_config(args)
    except ConfigError as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    source = args.config or "the defaults"
    title = f"effective config of {source} (namesrv -p); secrets masked"
    if args.config is not None and looks_like_properties_file(args.config):
        sys.stdout.write(config_properties(config, title))
    else:
        sys.stdout.write(config_toml(config, header=title))
    return 0


def check_config(path: str) -> int:
    """``--check-config``: the file read, validated and its paths checked, nothing started
    and nothing created."""
    try:
        config = load(path)
        check_paths(config, create=False)
    except ConfigError as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    kind = "namesrv.properties" if looks_like_properties_file(path) else "TOML"
    print(f"namesrv: {path} is a usable config ({kind})")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.check_config is not None:
        return check_config(args.check_config)
    if args.print_config:
        return print_config(args)
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT, stream=sys.stderr)
    for handler in logging.getLogger().handlers:
        handler.setLevel(args.log_level)  # the audit logger may pass INFO on: not to stderr
        handler.addFilter(EscapingFilter())
    try:
        config = resolve_config(args)
        check_paths(config)
        if args.audit_log is not None:
            write_audit_log(args.audit_log)
    except ConfigError as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return EXIT_CONFIG

    from namesrv.net import lean_reactor

    lean_reactor.install()
    from twisted.internet import reactor
    from twisted.internet.error import CannotListenError

    from namesrv.net.tls import TlsConfigError
    from namesrv.requests.replay_record import ReplayRecordError
    from namesrv.routes.kv_config import KVConfigError
    from namesrv.server import NameServer

    try:
        server = NameServer(config, reactor)
    except (KVConfigError, ReplayRecordError) as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        server.listen()
    except CannotListenError as exc:
        where = f"{exc.interface or '0.0.0.0'}:{exc.port}"
        which = (
            "the metrics listener (--metrics, metrics.listen)"
            if server.main_port_bound
            else "the name-server listener (--listen, server.listen)"
        )
        print(f"namesrv: {which} cannot listen on {where}: {exc.socketError}", file=sys.stderr)
        return 1
    except TlsConfigError as exc:
        print(f"namesrv: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    # reactor.run() turns SIGTERM/SIGINT into a shutdown; the GoAway grace runs before it ends.
    # Connections, routes and subscriptions are long-lived: collecting young objects less
    # often keeps a fan-out to thousands of connections from paying for repeated heap scans.
    gc.set_threshold(50_000, 20, 100)
    tune_allocator()
    running: Any = reactor
    running.addSystemEventTrigger("before", "shutdown", server.stop)
    running.run()
    logging.getLogger("namesrv").info("name server stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
