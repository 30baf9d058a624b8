"""Loading the scripts of ``examples/`` (not a package) as modules, for their tests."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from support.paths import REPO_ROOT


def load_example(name: str) -> ModuleType:
    path = REPO_ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
