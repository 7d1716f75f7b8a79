"""``brain eval feed`` end to end through the CLI: over the real fixture sessions (structure and
invariants, not the feed's own score) and twice over the same logs (byte-identical output)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURE_SESSIONS
from tests.eval_logs import write_logs

FEEDS = ("brain", "brain+recall", "empty", "recent-titles", "digest@brain-tokens", "recent-digest", "project-digest",
         "oracle")


def _eval(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "brain", "eval", "feed", *args], capture_output=True, text=True,
                          check=False, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["ideal", "production"])
def test_eval_feed_over_the_fixture_sessions(profile: str) -> None:
    done = _eval("--projects-dir", str(FIXTURE_SESSIONS / "claude-code"),
                 "--codex-dir", str(FIXTURE_SESSIONS / "codex" / "sessions"), "--profile", profile, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["profile"]["name"] == profile
    assert data["targets"], "the fixtures have targets"
    assert set(data["aggregate"]) == set(FEEDS)
    for target in data["targets"]:
        feeds = target["feeds"]
        assert set(feeds) == set(FEEDS)
        assert feeds["empty"]["r_kn"] in (None, 0.0)
        assert feeds["brain"]["lucky"] == []  # the vault held only sessions that had ended
        if target["knowable"]:
            assert feeds["oracle"]["r_kn"] == 1.0
            assert all(feeds["oracle"]["r_kn"] >= feeds[name]["r_kn"] for name in FEEDS)
        assert feeds["brain"]["tokens"] <= 2000
    assert data["aggregate"]["empty"]["r_kn_project"] == 0.0
    assert data["aggregate"]["brain"]["lucky_hits"] == 0
    assert data["verdict"]["line"]


@pytest.mark.slow
def test_eval_feed_output_is_byte_identical_across_runs(tmp_path: Path) -> None:
    write_logs(tmp_path / "projects")
    first = _eval("--projects-dir", str(tmp_path / "projects"), "--mode", "fresh")
    second = _eval("--projects-dir", str(tmp_path / "projects"), "--mode", "fresh")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert "Verdict: " in first.stdout


def test_eval_feed_refuses_bad_requests(tmp_path: Path) -> None:
    assert "no session logs" in _eval().stderr
    done = _eval("--projects-dir", str(tmp_path), "--profile", "best")
    assert done.returncode == 2 and "bad --profile" in done.stderr
    done = _eval("--projects-dir", str(tmp_path / "missing"))
    assert done.returncode == 2 and "log folder not found" in done.stderr


def test_excluded_targets_must_come_from_the_given_logs(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    done = _eval("--projects-dir", str(tmp_path / "logs"), "--exclude-targets-from", str(tmp_path))
    assert done.returncode == 2 and "--exclude-targets-from must lie inside" in done.stderr
