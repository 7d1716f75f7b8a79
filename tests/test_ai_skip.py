"""An unchanged vault costs nothing: the LLM is not asked the same question twice (SPEC §8, §14).

The loopback stub answers 500 once its script is used up, so a call that should have been
skipped fails the tick (exit 4) and the test."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from brain.cli import app
from brain.core.prompt import build_prompt
from brain.settings import Settings
from tests.support.llm_stub import LLMStub, llm_stub_fixture, openai_answer  # noqa: F401
from tests.test_ai_tick import tick
from tests.test_apply import WHEN, build, find
from tests.test_prompt import golden_notes

QUIET = json.dumps({"edges": [], "intent": "Make logins boring", "health": {"score": 7, "reason": "calm"}})


def test_the_prompt_digest_ignores_the_clock_and_nothing_else() -> None:
    notes = golden_notes()
    first = build_prompt(notes, None, previous_intent="x", settings=Settings(), now=WHEN)
    later = build_prompt(notes, None, previous_intent="x", settings=Settings(), now=WHEN + timedelta(hours=2))
    assert first.user != later.user and first.digest == later.digest
    other_intent = build_prompt(notes, None, previous_intent="y", settings=Settings(), now=WHEN)
    assert other_intent.digest != first.digest


def test_brain_prompt_shows_the_digest_a_tick_compares(vault: Path) -> None:
    build(vault)
    digests = []
    for now in ("2026-11-21T12:00:00Z", "2026-11-21T12:05:00Z"):
        result = CliRunner().invoke(app, ["prompt", "--vault", str(vault), "--json", "--now", now])
        assert result.exit_code == 0, result.stderr
        digests.append(json.loads(result.stdout)["digest"])
    assert digests[0] == digests[1] and len(digests[0]) == 64


def test_an_unchanged_prompt_skips_the_call_and_a_change_asks_again(vault: Path, llm_stub: LLMStub) -> None:
    build(vault)
    llm_stub.enqueue(openai_answer(QUIET), openai_answer(QUIET))
    code, first = tick(vault, llm_stub, "openai")
    assert code == 0 and first["phases"]["llm"]["attempts"] == 1, first
    # The answer's intent is part of the next prompt: that one is new, so the model is asked.
    code, second = tick(vault, llm_stub, "openai")
    assert code == 0 and second["phases"]["llm"]["attempts"] == 1, second
    code, third = tick(vault, llm_stub, "openai")
    assert code == 0, third
    assert third["phases"]["llm"] == {"skipped": f"prompt unchanged since {second['tick_id']}",
                                      "health": third["phases"]["llm"]["health"]}
    assert third["phases"]["apply"] == {"skipped": f"prompt unchanged since {second['tick_id']}"}
    assert len(llm_stub.requests) == 2 and third["phases"]["verify"]["ok"]
    assert "Make logins boring" in (vault / "brain-feed" / "intent.md").read_text()

    # Another model has not been asked this question yet.
    llm_stub.enqueue(openai_answer(QUIET))
    code, other_model = tick(vault, llm_stub, "openai", env={"BRAIN_LLM_MODEL": "other-model"})
    assert code == 0 and other_model["phases"]["llm"]["attempts"] == 1 and len(llm_stub.requests) == 3, other_model

    # An operator edit changes the prompt: the model is asked again.
    path = find(vault, "2026-11-09-auth-rewrite-0123456789ac")
    path.write_text(path.read_text().replace("title: Rewrite auth", "title: Rewrite auth with passkeys"))
    llm_stub.enqueue(openai_answer(QUIET))
    code, fourth = tick(vault, llm_stub, "openai")
    assert code == 0 and fourth["phases"]["llm"]["attempts"] == 1 and len(llm_stub.requests) == 4, fourth


def test_a_failed_ai_tick_does_not_make_the_next_one_skip(vault: Path, llm_stub: LLMStub) -> None:
    build(vault)
    llm_stub.enqueue(openai_answer(QUIET), openai_answer(QUIET))
    assert tick(vault, llm_stub, "openai")[0] == 0
    assert tick(vault, llm_stub, "openai")[0] == 0
    llm_stub.enqueue(openai_answer("I have nothing to say."))
    # A new prompt whose answer is unusable: exit 4, and its digest is not kept, so the next
    # tick (the same prompt) asks again instead of skipping.
    path = find(vault, "2026-11-09-auth-rewrite-0123456789ac")
    path.write_text(path.read_text().replace("title: Rewrite auth", "title: Rewrite auth again"))
    code, failed = tick(vault, llm_stub, "openai", env={"BRAIN_LLM_MAX_RETRIES": "0"})
    assert code == 4, failed
    llm_stub.enqueue(openai_answer(QUIET))
    code, retried = tick(vault, llm_stub, "openai")
    assert code == 0 and retried["phases"]["llm"]["attempts"] == 1, retried
    assert len(llm_stub.requests) == 4


def test_the_skip_can_be_turned_off(vault: Path, llm_stub: LLMStub) -> None:
    build(vault)
    llm_stub.enqueue(*[openai_answer(QUIET)] * 3)
    for _ in range(3):
        code, report = tick(vault, llm_stub, "openai", env={"BRAIN_LLM_SKIP_UNCHANGED": "false"})
        assert code == 0 and report["phases"]["llm"]["attempts"] == 1, report
    assert len(llm_stub.requests) == 3
