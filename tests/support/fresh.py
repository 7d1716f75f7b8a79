"""Run a check in a fresh interpreter: what a module imports or compiles at start-up cannot be
seen from a test process that has already imported everything."""

from __future__ import annotations

import subprocess
import sys


def assert_in_fresh_interpreter(code: str) -> None:
    """Run ``code`` with ``python -c`` and fail with its stderr unless it exits 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
