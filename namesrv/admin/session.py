"""One ``namesrv-admin`` run's session: the name servers, how answers are shown, and how a
verb exits (the shared options and helpers every verb module uses).

``-n 'a;b'`` names several name servers, as ``mqadmin``'s does. A read asks them in order and
takes the first answer: a server that cannot be reached is skipped (said on stderr). A write
goes to every one of them, as ``mqadmin`` sends it, and prints one result line per server;
it exits 1 when any of them refused it or could not be reached.

Exit codes: 1 when a server refused or could not be reached, 2 when it lacks the extension a
verb needs.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from namesrv.admin import render
from namesrv.admin.wire import AdminClient, AdminConnectionError, Target, split_hostport
from protocol.codes import RequestCode, ResponseCode
from protocol.errors import ProtocolError
from protocol.frame import RemotingCommand
from protocol.peer_text import printable, printable_lines
from protocol.topic_name import topic_name_problem

EXIT_REFUSED = 1
EXIT_UNSUPPORTED = 2


@dataclass(slots=True)
class Session:
    """What the group's options set; ``namesrv`` may also come after the verb (``-n``), as
    ``mqadmin`` takes it, so the target is built when a verb first needs it."""

    namesrv: str | None
    as_json: bool
    template: Target
    """TLS, timeout and credentials; host and port come from ``namesrv``."""

    answered_by: Target | None = None
    """The name server whose answer the last read took."""

    @property
    def targets(self) -> list[Target]:
        """Every name server of ``-n`` (``;``-separated), in the order given."""
        if not self.namesrv or not self.namesrv.strip(" ;"):
            raise click.UsageError(
                "give the name server: -n/--namesrv HOST:PORT[;HOST:PORT] (before or after the "
                "verb) or $NAMESRV_ADDR"
            )
        out = []
        for text in self.namesrv.split(";"):
            if not text.strip():
                continue
            try:
                host, port = split_hostport(text.strip())
            except ValueError as exc:
                raise click.BadParameter(str(exc), param_hint="--namesrv") from exc
            out.append(dataclasses.replace(self.template, host=host, port=port))
        return out

    @property
    def target(self) -> Target:
        """The name server that answered the last read, else the first of ``-n``: whose TLS,
        timeout and credentials brokers are asked with."""
        return self.answered_by or self.targets[0]

    @property
    def where(self) -> str:
        return hostport(self.target)

    def ask(
        self, code: RequestCode, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """The first answer of the name servers of ``-n``, asked in order, whatever its code;
        exits when none can be reached."""
        failures = []
        for target in self.targets:
            try:
                with AdminClient(target) as client:
                    response = client.call(code, ext, body)
            except AdminConnectionError as exc:
                failures.append(str(exc))
                if len(self.targets) > 1:
                    say(f"namesrv-admin: {hostport(target)}: {exc}; trying the next", err=True)
                continue
            self.answered_by = target
            return response
        if len(failures) == 1:
            fail(failures[0], EXIT_REFUSED)
        fail(f"no name server of {self.namesrv} could be reached", EXIT_REFUSED)

    def send_each(
        self, code: RequestCode, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> list[ServerResult]:
        """A write sent to every name server of ``-n``, one after the other; each outcome."""
        results = []
        for target in self.targets:
            try:
                with AdminClient(target) as client:
                    response = client.call(code, ext, body)
            except AdminConnectionError as exc:
                results.append(ServerResult(hostport(target), None, str(exc)))
                continue
            if response.code == ResponseCode.SUCCESS:
                results.append(ServerResult(hostport(target), response, ""))
            else:
                reason = (
                    f"{code.name} refused: {_code_name(response.code)} ({response.code}): "
                    f"{response.remark or '-'}"
                )
                results.append(ServerResult(hostport(target), response, reason))
        return results

    def write(
        self,
        code: RequestCode,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        done: Callable[[ServerResult], str],
        doc: dict[str, Any] | None = None,
    ) -> list[ServerResult]:
        """:meth:`send_each`, then one line per name server: ``HOST:PORT: done(result)`` on
        stdout for a success, ``namesrv-admin: HOST:PORT: why`` on stderr for a failure (or
        ``doc`` with a ``namesrvs`` list in JSON mode). Exits 1 when any failed."""
        results = self.send_each(code, ext, body)
        self.report(results, done, doc)
        return results

    def report(
        self,
        results: list[ServerResult],
        done: Callable[[ServerResult], str],
        doc: dict[str, Any] | None = None,
    ) -> None:
        """Print ``results`` as :meth:`write` does; exit 1 when any failed."""
        if self.as_json:
            out = dict(doc or {})
            out["namesrvs"] = [
                {"namesrv": r.where, "ok": r.ok, **({} if r.ok else {"error": r.error})}
                for r in results
            ]
            say(render.as_json(out))
        for result in results:
            if not result.ok:
                say(f"namesrv-admin: {result.where}: {result.error}", err=True)
            elif not self.as_json:
                say(f"{result.where}: {done(result)}")
        if not all(r.ok for r in results):
            sys.exit(EXIT_REFUSED)

    def call(
        self,
        code: RequestCode,
        ext: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        extension: bool = False,
    ) -> RemotingCommand:
        return self.checked(code, self.ask(code, ext, body), extension=extension)

    def checked(
        self, code: RequestCode, response: RemotingCommand, *, extension: bool = False
    ) -> RemotingCommand:
        """``response`` when it is a success; otherwise the command exits saying why."""
        if extension and response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            fail(
                f"the name server at {self.where} does not support {code.name} ({int(code)}): "
                "it is not a route-push name server, or push is disabled there "
                f"(remark: {printable(response.remark or '-', None)})",
                EXIT_UNSUPPORTED,
            )
        if response.code != ResponseCode.SUCCESS:
            fail(
                f"{code.name} refused by {self.where}: {_code_name(response.code)} "
                f"({response.code}): {printable(response.remark or '-', None)}",
                EXIT_REFUSED,
            )
        return response

    def emit(self, doc: Any, text: Callable[[], str]) -> None:
        say(render.as_json(doc) if self.as_json else text())


@dataclass(frozen=True, slots=True)
class ServerResult:
    """One name server's outcome of a write: ``error`` empty when it succeeded."""

    where: str
    response: RemotingCommand | None
    """None: the server was not reached."""
    error: str

    @property
    def ok(self) -> bool:
        return not self.error


def hostport(target: Target) -> str:
    return f"{target.host}:{target.port}"


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return "UNKNOWN"


def say(text: str, *, err: bool = False) -> None:
    """Print ``text`` (on stderr with ``err``): every admin line goes out here, its control
    characters escaped, so no string a server sent drives the terminal, also through a pipe."""
    click.echo(printable_lines(text), err=err)


def fail(message: str, code: int) -> NoReturn:
    """Print ``message`` on stderr and exit with ``code``."""
    say(f"namesrv-admin: {message}", err=True)
    sys.exit(code)


def decoded(what: str, decode: Callable[[], Any]) -> Any:
    """What ``decode`` returns; the command exits naming ``what`` when the server's bytes do
    not decode."""
    try:
        return decode()
    except (ProtocolError, ValueError) as exc:
        fail(f"cannot decode the {what} the server sent: {exc}", EXIT_REFUSED)


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.find_object(Session).as_json = True  # type: ignore[union-attr]


json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    expose_value=False,
    callback=_set_json,
    help="Print JSON instead of a table (also accepted before the verb).",
)
"""``--json`` after the verb too, as ``topic-route T --json``; the group's option sets the same."""


pass_session = click.make_pass_decorator(Session)


def one_of(what: str, argument: str | None, option: str | None, flag: str) -> str:
    """The value given once: as the argument or, as ``mqadmin`` spells it, with ``flag``."""
    if (argument is None) == (option is None):
        raise click.UsageError(f"give the {what} once: as the argument or with {flag}")
    return (argument or option or "").strip()


def topic_not_heard_yet(s: Session, topic: str, resp: RemotingCommand) -> None:
    """Exit saying the server has not heard of the topic yet when ``resp`` (a route lookup)
    is the "not ready" answer of a server in its start-up window."""
    if resp.code == ResponseCode.SYSTEM_ERROR and resp.ext_fields.get("warmingUp") == "true":
        fail(
            f"the name server at {s.where} has not heard of topic {topic} yet (its brokers "
            f"register within the start-up window): {resp.remark or '-'}",
            EXIT_REFUSED,
        )


def valid_topic(name: str, flag: str) -> str:
    """``name`` when it is a topic name upstream accepts; a usage error naming ``flag`` (and
    nothing sent) otherwise."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise click.BadParameter(problem, param_hint=flag)
    return name


def topic_absent(s: Session, topic: str, resp: RemotingCommand) -> None:
    """Exit saying the topic does not exist when ``resp`` (a route lookup) says so."""
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        fail(
            f"topic {topic} does not exist on the name server at {s.where}: "
            f"TOPIC_NOT_EXIST ({int(ResponseCode.TOPIC_NOT_EXIST)}): "
            f"{printable(resp.remark or '-', None)}",
            EXIT_REFUSED,
        )
