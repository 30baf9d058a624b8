"""List the test modules that run on a real event loop with a fake clock on top.

Such a test opens real sockets (loopback, on the reactor or on an asyncio loop in a thread) while
its timers run on a fake clock, so what it sees depends on how the scheduler interleaves the
two; the deterministic world (``tests/support/memory_world.py``) is where behaviour tests run
instead. A module counts when it reads as both, statically:

- real sockets: a loopback fixture among its tests' parameters, not counting the names
  hypothesis's ``@given`` fills nor the fixtures the module defines itself (``cluster``,
  ``clients``, ``make_server``, ``any_loop``, ``loop_thread``, or one its folder's
  ``conftest.py`` builds from the loopback drivers), or a loopback helper in its text
  (``loopback_wait``, ``route_cluster``, ``aio_world``, ``wire_client``'s ``connect``,
  ``listenTCP`` on the reactor, a ``FakeNamesrv`` or ``FakeBroker`` not given the world's
  network, ``LoopThread``, ``running_server``);
- a fake clock: ``task.Clock``, ``FakeClock``, ``PendingClock``, or a helper or fixture that
  runs on one (those fixtures, ``running_server``, ``AioWorld``).

Usage: ``python tools/loopback_tests.py [TESTS_DIR]`` (default ``tests``): the count, then the
modules.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

LOOPBACK_FIXTURES = ("cluster", "clients", "make_server", "any_loop", "loop_thread")
LOOPBACK_TEXT = (
    r"support\.loopback_wait",
    r"support\.route_cluster",
    r"support\.aio_world",
    r"support\.wire_client import[^\n]*\bconnect\b",
    r"reactor\.listenTCP",
    r"FakeNamesrv\((?![^)]*network)",
    r"FakeBroker\((?![^)]*network)",
    r"LoopThread",
    r"running_server\(",
    r"reactor=reactor",
)
LOOPBACK_DRIVERS = r"\bWorld\(|producer_driver\(|driver_factory\(|LoopThread\("
FAKE_CLOCK = (
    r"task\.Clock|FakeClock|PendingClock|\bClock\(\)|running_server\(|AioWorld|"
    r"\b(cluster|clients|make_server|any_loop|loop_thread)\b"
)
"""A fake clock, or a helper or fixture that runs on one."""


def conftest_fixtures(folder: Path) -> set[str]:
    """Fixtures the folder's ``conftest.py`` builds from the loopback drivers."""
    conftest = folder / "conftest.py"
    if not conftest.exists():
        return set()
    text = conftest.read_text(encoding="utf-8")
    found = set()
    for match in re.finditer(r"def (\w+)\([^)]*\)[^:]*:\n((?:[ \t]+.*\n|\n)+)", text):
        if re.search(LOOPBACK_DRIVERS, match.group(2)):
            found.add(match.group(1))
    return found


def fixture_parameters(text: str) -> str:
    """The parameters of the module's tests that fixtures fill: a name hypothesis's ``@given``
    supplies is a generated value, not a fixture."""
    names = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test_"
        ):
            given = {
                keyword.arg
                for decorator in node.decorator_list
                if isinstance(decorator, ast.Call)
                and getattr(decorator.func, "id", getattr(decorator.func, "attr", "")) == "given"
                for keyword in decorator.keywords
            }
            names += [arg.arg for arg in node.args.args if arg.arg not in given]
    return " ".join(names)


def own_fixtures(text: str) -> set[str]:
    """The fixtures the module defines itself: a parameter of that name is the module's own,
    whatever a loopback fixture of the same name elsewhere does."""
    names = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if getattr(target, "attr", getattr(target, "id", "")) == "fixture":
                    names.add(node.name)
    return names


def on_a_real_loop_with_a_fake_clock(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    params = fixture_parameters(text)
    fixtures = (set(LOOPBACK_FIXTURES) | conftest_fixtures(path.parent)) - own_fixtures(text)
    uses_fixture = any(re.search(rf"\b{name}\b", params) for name in fixtures)
    real = uses_fixture or any(re.search(pattern, text) for pattern in LOOPBACK_TEXT)
    fake = uses_fixture or bool(re.search(FAKE_CLOCK, text))
    return real and fake


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else "tests")
    modules = [
        str(path.relative_to(root))
        for path in sorted(root.rglob("test_*.py"))
        if on_a_real_loop_with_a_fake_clock(path)
    ]
    print(len(modules))
    print("\n".join(modules))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
