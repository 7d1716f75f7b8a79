"""Suite-wide fixtures. Area-specific fixtures (redis, llm stub, model) live in tests/support/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run (a failure in CI can be replayed here);
# HYPOTHESIS_PROFILE=explore draws new ones each run, to hunt for more.
settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
FIXTURE_SESSIONS = SHARED / "fixtures" / "sessions"


@pytest.fixture(autouse=True)
def _clean_brain_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's BRAIN_* settings."""
    for key in list(os.environ):
        if key.startswith("BRAIN_"):
            monkeypatch.delenv(key, raising=False)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    from tests.support.vaults import init_vault

    return init_vault(tmp_path / "vault")
