"""Where the repository and its tests are, for tests that start processes or read files."""

import functools
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS_DIR = REPO_ROOT / "tests"


@functools.cache
def isolated_home() -> Path:
    """A home directory for the name servers tests start as processes, so their default state
    files (``~/namesrv/kvConfig.json``) never land in the real one: one per test session."""
    return Path(tempfile.mkdtemp(prefix="routepush-test-home-"))
