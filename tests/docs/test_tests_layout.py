"""The test tree's own rules: helpers live in tests/support/, no test module imports another
(a helper two tests share belongs in support/, where a reader looks for it), and tests and
benchmarks say what they check or measure, not which tracker entry asked for it."""

from __future__ import annotations

import ast
import re

from support.paths import REPO_ROOT, TESTS_DIR

TRACKER_REFERENCE = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/\[])#\d{2,}\b", re.IGNORECASE)


def _python_files() -> list:
    return [p for p in TESTS_DIR.rglob("*.py") if "__pycache__" not in p.parts]


def test_every_module_outside_support_is_a_test_module_or_a_conftest() -> None:
    strays = [
        str(p.relative_to(TESTS_DIR))
        for p in _python_files()
        if p.parent.name != "support"
        and not p.name.startswith("test_")
        and p.name not in ("conftest.py", "__init__.py")
    ]
    assert strays == [], f"helpers outside tests/support/: {strays}"


def test_no_test_module_imports_another_test_module() -> None:
    offenders = []
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            offenders += [
                f"{path.relative_to(TESTS_DIR)} imports {name}"
                for name in names
                if name.split(".")[-1].startswith("test_")
            ]
    assert offenders == []


def test_tests_and_benchmarks_name_no_tracker_references() -> None:
    paths = [*_python_files(), *(REPO_ROOT / "bench").rglob("*.py")]
    hits = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for path in paths
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if TRACKER_REFERENCE.search(line)
    ]
    assert hits == [], "say what is checked or measured, not which issue asked:\n" + "\n".join(hits)
