"""`make demo` (issue 12 item 17): the real `brain extract | brain cluster` pipe with the CLI's
defaults, a short summary instead of JSON, the feed one project's session is given, and a word
that the clock is pinned."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brain.demo import DEMO_NOW

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"


@pytest.mark.slow
def test_demo_prints_a_summary_and_one_projects_feed(tmp_path: Path) -> None:
    vault = tmp_path / "demo-vault"
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}
    done = subprocess.run([sys.executable, "-m", "brain.demo", "--vault", str(vault), "--fixtures", str(FIXTURES)],
                          capture_output=True, text=True, env=env, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert not out.lstrip().startswith("{") and len(out.splitlines()) < 80  # a summary, not 166 lines of JSON
    assert "15 sessions" in out  # every real session with a human turn, Claude Code and Codex (min-turns 1)
    assert f"The clock is pinned at {DEMO_NOW}" in out
    feed = out.split("brain hook session-start --format text):", 1)[1]
    assert "# claude-code-log: where we left off" in feed
    # its lessons, and the newest work on it: a session in /src/experiments/claude_p that explored a
    # checkout of claude-code-log elsewhere (/workspace/claude-code-log), with its files there
    assert "Lessons (2025-06-15): `act` failed" in feed
    assert "· claude_p · Use the Explore task" in feed and "`claude_code_log/cache.py`" in feed
    assert (vault / ".brain" / "journal").is_dir()  # clustered through the journaled writer, as a user would
