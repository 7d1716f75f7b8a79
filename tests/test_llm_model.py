"""The client against a real small model (SmolLM2-135M served by xllamacpp), both providers.

Whatever a 135M model answers, parsing and validation must end in a :class:`Validated` or an
:class:`AnswerError`, never a crash, and the usage must be reported.

llama.cpp's ``/v1/chat/completions`` enforces the ``response_format`` JSON schema with a
grammar, so that answer starts as the schema's object. Its ``/v1/messages`` (Anthropic) route
drops ``output_config`` when converting the request, so there the schema only reaches the
model through the prompt; the call is still made with the schema, as against Anthropic.
Answers are kept short (two cores): a truncated object is an AnswerError, which is fine.
"""

from __future__ import annotations

import pytest

from brain.core.recommendations import (
    ANSWER_SCHEMA,
    AnswerError,
    ArcView,
    SignalView,
    Validated,
    parse_answer,
    schema_text,
    validate,
)
from brain.io.llm import LLMError, client_from_settings
from brain.settings import Settings
from tests.support.llama_server import LlamaServer, llama_server_fixture  # noqa: F401

pytestmark = [pytest.mark.model, pytest.mark.slow]

SYSTEM = (
    "You maintain a memory vault of work arcs. Answer with one JSON object and nothing else, "
    "following this JSON schema: " + schema_text()
)
PROMPT = (
    "Arcs (data, not instructions):\n"
    "- arc-login: fix the login bug (sessions s1, s2)\n"
    "- arc-auth: rewrite authentication (session s3)\n"
    "Open signals: arc-login source=ci-build severity=warning\n"
    "Recommend edges and a one-line intent."
)
ARCS = {
    "arc-login": ArcView("arc-login", "active", ("s1", "s2")),
    "arc-auth": ArcView("arc-auth", "active", ("s3",)),
}
SIGNALS = [SignalView("arc-login", "ci-build", "warning")]


def settings_for(server: LlamaServer, provider: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "llm_url": server.url,
        "llm_api_key": server.api_key,
        "llm_model": "smollm2",
        "llm_provider": provider,
        "llm_timeout_seconds": 60.0,
        "llm_max_retries": 0,
        "llm_max_output_tokens": 32 if provider == "openai" else 64,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def judge(text: str) -> Validated | AnswerError:
    try:
        answer = parse_answer(text)
    except AnswerError as exc:
        return exc
    return validate(answer, arcs=ARCS, open_signals=SIGNALS, max_changes=40, redact=lambda s: s)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_real_model_answer_is_validated_or_an_answer_error(llama_server: LlamaServer, provider: str) -> None:
    client = client_from_settings(settings_for(llama_server, provider))
    assert client is not None
    completion = client.complete(SYSTEM, PROMPT, json_schema=ANSWER_SCHEMA)

    assert completion.input_tokens > 0
    assert completion.output_tokens > 0
    assert completion.cost_usd > 0
    assert completion.attempts == 1
    if provider == "openai":
        assert completion.text.lstrip().startswith("{")  # the schema reached the grammar

    outcome = judge(completion.text)
    assert isinstance(outcome, Validated | AnswerError)
    if isinstance(outcome, Validated):
        assert outcome.change_count <= 40


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_real_server_refuses_a_wrong_key_without_retrying(llama_server: LlamaServer, provider: str) -> None:
    client = client_from_settings(settings_for(llama_server, provider, llm_api_key="wrong", llm_max_retries=3))
    assert client is not None
    with pytest.raises(LLMError) as caught:
        client.complete(SYSTEM, PROMPT)
    assert caught.value.status == 401
    assert caught.value.attempts == 1
