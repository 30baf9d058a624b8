"""Where the repository and its tests are, for tests that start processes or read files."""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
TESTS_DIR = REPO_ROOT / "tests"
