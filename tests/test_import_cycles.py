"""No import cycles between the modules of the product packages.

A cycle makes two modules one unit: neither can be read, tested or moved without the other,
and which one loads first decides what the other sees. The layer contracts in
``pyproject.toml`` order rooms, not the modules inside a room, so this check covers what they
leave open: a cycle between any two modules, whichever packages they sit in, type-checking
imports included.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import grimp

PACKAGES = ("protocol", "namesrv", "client_push", "namesrv_pipeline", "namesrv_sandbox")


def _cycles(graph: grimp.ImportGraph, modules: Iterable[str]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(modules):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        while work:
            node, successors = work[-1]
            step = next(successors, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One import chain around ``component``, with the lines that make it."""
    first, *rest = component
    chain = graph.find_shortest_chain(importer=first, imported=rest[0]) or ()
    back = graph.find_shortest_chain(importer=rest[0], imported=first) or ()
    hops = list(chain) + list(back)[1:]
    lines = []
    for importer, imported in itertools.pairwise(hops):
        details = graph.get_import_details(importer=importer, imported=imported)
        where = ", ".join(f"l.{d['line_number']}" for d in details)
        lines.append(f"    {importer} -> {imported} ({where})")
    return f"{', '.join(component)}:\n" + "\n".join(lines)


def test_no_import_cycle_between_product_modules() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    cycles = _cycles(graph, graph.modules)
    assert not cycles, "import cycles:\n" + "\n".join(_describe(graph, c) for c in cycles)


def test_the_check_finds_a_cycle_through_three_modules(tmp_path, monkeypatch) -> None:
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic import b\n")
    (package / "b.py").write_text("import cyclic.c\n")
    (package / "c.py").write_text("from cyclic.a import __name__ as _\n")
    (package / "d.py").write_text("from cyclic import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyclic", cache_dir=None)
    cycles = _cycles(graph, graph.modules)
    assert cycles == [["cyclic.a", "cyclic.b", "cyclic.c"]]
    assert "cyclic.c -> cyclic.a (l.1)" in _describe(graph, cycles[0])
