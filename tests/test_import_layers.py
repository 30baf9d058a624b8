"""Every layer contract in ``pyproject.toml`` states an order that imports really follow.

import-linter checks that no lower layer imports a higher one; it does not check that the
order means anything. Two rooms with no import between them, put one above the other, claim a
dependency that is not there and forbid one that might be right. So each room of a layer
imports a room of the layer below it, and each room of the lower layer is imported by one
above it; independent rooms in one layer (``a | b``) never import each other.
"""

from __future__ import annotations

import itertools
import tomllib

import grimp
from support.paths import REPO_ROOT

CONTRACTS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "importlinter"
]


def _layer_contracts() -> list[tuple[str, list[tuple[list[str], bool]]]]:
    """Each contract's layers, each as its rooms and whether they are independent (``|``)."""
    found = []
    for contract in CONTRACTS["contracts"]:
        if contract["type"] != "layers":
            continue
        for container in contract.get("containers", [""]):
            prefix = f"{container}." if container else ""
            layers = [
                (
                    [prefix + room.strip() for room in layer.replace(":", "|").split("|")],
                    ":" not in layer,
                )
                for layer in contract["layers"]
            ]
            found.append((f"{contract['name']} ({container or 'top'})", layers))
    return found


def _imports(graph: grimp.ImportGraph, importer: str, imported: str) -> bool:
    return graph.direct_import_exists(importer=importer, imported=imported, as_packages=True)


def test_the_layer_contracts_are_read() -> None:
    names = [name for name, _ in _layer_contracts()]
    assert len(names) >= 5, names


def test_every_layer_imports_the_next_and_siblings_stay_apart() -> None:
    graph = grimp.build_graph(*CONTRACTS["root_packages"], cache_dir=None)
    wrong = []
    for name, layers in _layer_contracts():
        for (upper, _), (lower, _) in itertools.pairwise(layers):
            wrong += [
                f"{name}: {room} imports nothing of {' | '.join(lower)}"
                for room in upper
                if not any(_imports(graph, room, below) for below in lower)
            ]
            wrong += [
                f"{name}: nothing of {' | '.join(upper)} imports {room}"
                for room in lower
                if not any(_imports(graph, above, room) for above in upper)
            ]
        for layer, independent in layers:
            wrong += [
                f"{name}: {a} and {b} share a layer but one imports the other"
                for a in layer
                for b in layer
                if independent and a != b and _imports(graph, a, b)
            ]
    assert not wrong, "\n".join(wrong)
