"""The Python examples of README.md import what they name from where they name it."""

from __future__ import annotations

import ast
import importlib
import re

from support.paths import REPO_ROOT


def _readme_blocks() -> list[str]:
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_the_readme_has_python_examples() -> None:
    assert len(_readme_blocks()) >= 2


def test_every_readme_example_parses_and_its_imports_resolve() -> None:
    for block in _readme_blocks():
        tree = ast.parse(block)  # a snippet that does not parse fails here
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module} has no {alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    importlib.import_module(alias.name)
