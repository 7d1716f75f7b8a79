"""`brain tick` against a real small model (SmolLM2-135M under xllamacpp), both endpoints.

A 135M model cannot be expected to give a useful answer (answers are also cut at a few dozen
tokens to keep two cores fast), so the test asserts what must hold whatever it says: the tick
ends with a verified vault, a fresh feed and exit 0 or 4 (never 1), the call was really made
(tokens counted into the health row), and nothing the model wrote carries marker syntax into
the feed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from brain.cli import app
from tests.support.llama_server import LlamaServer, llama_server_fixture  # noqa: F401
from tests.support.vaults import NOW
from tests.test_apply import build

pytestmark = [pytest.mark.model, pytest.mark.slow]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_tick_with_a_real_model_ends_verified(vault: Path, llama_server: LlamaServer, provider: str) -> None:
    build(vault)
    env = {
        "BRAIN_LLM_URL": llama_server.url,
        "BRAIN_LLM_API_KEY": llama_server.api_key,
        "BRAIN_LLM_PROVIDER": provider,
        "BRAIN_LLM_MODEL": "smollm2",
        "BRAIN_LLM_MAX_OUTPUT_TOKENS": "32" if provider == "openai" else "64",
        "BRAIN_LLM_TIMEOUT_SECONDS": "120",
        "BRAIN_LLM_MAX_RETRIES": "0",
        # The server's context is 4096 tokens; the real tokenizer counts more than characters / 4.
        "BRAIN_PROMPT_TOKEN_BUDGET": "1800",
    }
    result = CliRunner().invoke(app, ["tick", "--vault", str(vault), "--json", "--now", NOW], env=env)
    report = json.loads(result.stdout)
    assert result.exit_code in (0, 4), result.stderr
    assert report["exit_code"] == result.exit_code and report["phases"]["verify"]["ok"], report["phases"]
    llm = report["phases"]["llm"]
    assert "error" not in llm, llm  # the call itself succeeded; only the answer may be unusable
    assert llm["input_tokens"] > 0 and llm["output_tokens"] > 0
    if result.exit_code == 4:
        assert "unusable answer" in report["phases"]["apply"]["error"]
    for name in ("hot-arcs.md", "signals.md", "inject.md"):
        text = (vault / "brain-feed" / name).read_text()
        assert "id: " + name.removesuffix(".md") + "-2026-11-21" in text
    for path in (vault / "brain-feed").glob("*.md"):
        assert "<!--" not in path.read_text(), path
    row = json.loads((vault / "brain-feed/health.jsonl").read_text().splitlines()[-1])
    assert row["input_tokens"] == llm["input_tokens"] and row["cost_usd"] > 0
    assert (vault / ".brain/answers" / f"{report['tick_id']}.json").exists()
    # whatever was applied, the next deterministic tick at the same instant changes nothing
    again = CliRunner().invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--json", "--now", NOW])
    assert json.loads(again.stdout)["changes"] == {"written": [], "moved": [], "deleted": []}
