"""docs/architecture.md is how a newcomer finds the code: its "where to change what" table names
files that exist, and each package's room table names every module of the package, one row each
with what it holds, and nothing that is not there. A module added, moved or renamed without its
row fails here, naming the rows to add or drop. Its ``imports`` blocks draw the packages and the
name server's rooms with their arrows, and the arrows are exactly the imports the code makes
between the rooms drawn."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import grimp
from support.paths import REPO_ROOT

ARCHITECTURE = REPO_ROOT / "docs" / "architecture.md"
CHANGES = (
    "a new request code",
    "a new bound on client input",
    "a change to the notification format",
    "a new producer fault rule",
    "a new pipeline figure",
)
PACKAGES = ("protocol", "namesrv", "client_push", "namesrv_sandbox", "namesrv_pipeline")
MODULE_CELL = re.compile(r"`([\w/]+\.py)`")


def _section(heading: str) -> str:
    """The text under the ``## `` heading that starts with ``heading``, to the next one."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(rf"^## {re.escape(heading)}.*$", text, flags=re.MULTILINE)
    assert match, f"docs/architecture.md has no section '## {heading}'"
    end = text.find("\n## ", match.end())
    return text[match.end() : end if end >= 0 else len(text)]


def _rows(section: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
    ]


def _only_a_docstring(path: Path) -> bool:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return all(
        (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        or (isinstance(node, ast.ImportFrom) and node.module == "__future__")
        for node in body
    )


def _modules(package: str) -> tuple[set[str], set[str]]:
    """The package's modules (paths relative to it) that its table must name, and those it may
    name: an ``__init__.py`` that is only a docstring holds nothing a reader looks for."""
    root = REPO_ROOT / package
    required, optional = set(), set()
    for path in root.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        name = path.relative_to(root).as_posix()
        if path.name == "__init__.py" and _only_a_docstring(path):
            optional.add(name)
        else:
            required.add(name)
    return required, optional


def _named(package: str) -> dict[str, str]:
    """Module -> what the room table says it holds, from the rows of the package's section."""
    rows = _rows(_section(f"{package}/"))
    assert rows and rows[0][0] == "module", f"{package}/: no room table"
    named: dict[str, str] = {}
    for cells in rows[1:]:
        modules = MODULE_CELL.findall(cells[0])
        assert len(modules) == 1, f"{package}/: a row names one module, not {cells[0]!r}"
        assert len(cells) > 1 and cells[1], f"{package}/: {modules[0]} says nothing it holds"
        assert modules[0] not in named, f"{package}/: {modules[0]} has two rows"
        named[modules[0]] = cells[1]
    return named


def test_where_to_change_what_names_existing_files_for_each_change() -> None:
    rows = {cells[0]: cells[1] for cells in _rows(_section("Where to change what"))}
    for change in CHANGES:
        paths = re.findall(r"`([\w/]+\.(?:py|proto))`", rows[change])
        assert paths, f"no file named for {change!r}"
        for path in paths:
            assert (REPO_ROOT / path).is_file(), f"{change!r} names {path}, which does not exist"


def test_the_room_tables_name_every_module_and_only_modules_that_exist() -> None:
    problems = []
    for package in PACKAGES:
        required, optional = _modules(package)
        named = set(_named(package))
        for module in sorted(required - named):
            problems.append(f"{package}/{module}: no row; add one: | `{module}` | what it holds |")
        for module in sorted(named - required - optional):
            problems.append(f"{package}/{module}: a row, but no such module; drop or move it")
    assert not problems, "docs/architecture.md's room tables:\n" + "\n".join(problems)


IMPORTS_BLOCK = re.compile(
    r"^```imports(?: (?P<container>[\w.]+))?\n(?P<body>.*?)^```", re.S | re.M
)
ROOM = re.compile(r"^[A-Za-z_]\w*(?:\.py|/)$")


def _room_module(container: str | None, room: str) -> str:
    name = room.removesuffix(".py").removesuffix("/")
    return f"{container}.{name}" if container else name


def _drawn_imports() -> list[tuple[str | None, set[str], set[tuple[str, str]]]]:
    """Each ``imports`` block of docs/architecture.md: its container package (None: the
    top-level packages), the rooms it draws and its arrows, as module names. A line is
    ``ROOM -> ROOM, ROOM`` (or a ``ROOM`` alone, which imports none of the others); a room is
    a module (``name.py``) or a package (``name/``)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    blocks = []
    for match in IMPORTS_BLOCK.finditer(text):
        container = match["container"]
        rooms: set[str] = set()
        arrows: set[tuple[str, str]] = set()
        for line in match["body"].splitlines():
            if not line.strip():
                continue
            source, _, targets = line.partition("->")
            drawn = [source.strip(), *(t.strip() for t in targets.split(",") if t.strip())]
            for room in drawn:
                assert ROOM.match(room), f"imports block {container}: {room!r} is not a room"
            importer, *imported = (_room_module(container, room) for room in drawn)
            rooms.update((importer, *imported))
            arrows.update((importer, target) for target in imported)
        blocks.append((container, rooms, arrows))
    return blocks


def test_the_drawn_imports_are_the_imports_the_code_makes() -> None:
    blocks = _drawn_imports()
    assert {container for container, _, _ in blocks} >= {None, "namesrv"}, blocks
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    problems = []
    for _, rooms, arrows in blocks:
        for room in sorted(rooms):
            if room not in graph.modules:
                problems.append(f"{room}: drawn, but there is no such module or package")
        known = sorted(room for room in rooms if room in graph.modules)
        for importer, imported in itertools.permutations(known, 2):
            made = graph.direct_import_exists(
                importer=importer, imported=imported, as_packages=True
            )
            drawn = (importer, imported) in arrows
            if drawn and not made:
                problems.append(f"{importer} -> {imported}: drawn, but no module imports it")
            elif made and not drawn:
                problems.append(f"{importer} -> {imported}: imported, but no arrow draws it")
    assert not problems, "docs/architecture.md's imports blocks:\n" + "\n".join(problems)
