"""The asyncio client runs without Twisted: importing it loads no Twisted module."""

from __future__ import annotations

import subprocess
import sys

from support.paths import REPO_ROOT


def test_importing_the_asyncio_client_loads_no_twisted_module():
    code = (
        "import sys, client_push.aio, client_push.aio.client\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'twisted'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
