"""One ``namesrv-admin`` run's session: the target, how answers are shown, and how a verb
exits (the shared options and helpers every verb module uses).

Exit codes: 1 when the server refused or could not be reached, 2 when it lacks the extension a
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

    @property
    def target(self) -> Target:
        if not self.namesrv:
            raise click.UsageError(
                "give the name server: -n/--namesrv HOST:PORT (before or after the verb) or "
                "$NAMESRV_ADDR"
            )
        try:
            host, port = split_hostport(self.namesrv.split(";")[0].strip())
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--namesrv") from exc
        return dataclasses.replace(self.template, host=host, port=port)

    @property
    def where(self) -> str:
        return f"{self.target.host}:{self.target.port}"

    def ask(
        self, code: RequestCode, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """The name server's answer, whatever its code; exits when it cannot be reached."""
        try:
            with AdminClient(self.target) as client:
                return client.call(code, ext, body)
        except AdminConnectionError as exc:
            fail(str(exc), EXIT_REFUSED)

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


def topic_absent(s: Session, topic: str, resp: RemotingCommand) -> None:
    """Exit saying the topic does not exist when ``resp`` (a route lookup) says so."""
    if resp.code == ResponseCode.TOPIC_NOT_EXIST:
        fail(
            f"topic {topic} does not exist on the name server at {s.where}: "
            f"TOPIC_NOT_EXIST ({int(ResponseCode.TOPIC_NOT_EXIST)}): "
            f"{printable(resp.remark or '-', None)}",
            EXIT_REFUSED,
        )
