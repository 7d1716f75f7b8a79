"""The LLM client over real HTTP against the loopback stub (SPEC §8): both wire formats,
URL normalisation, the key header, the schema, retries with backoff, timeouts, usage and cost."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

from brain.core.recommendations import ANSWER_SCHEMA
from brain.io.llm import (
    BACKOFF_CAP_SECONDS,
    RETRY_AFTER_CAP_SECONDS,
    AnthropicMessagesClient,
    LLMClient,
    LLMError,
    OpenAIChatClient,
    backoff_delay,
    client_from_settings,
    endpoint_url,
    parse_retry_after,
)
from brain.settings import Settings, SettingsError
from tests.support.llm_stub import LLMStub, Scripted, anthropic_answer, error, llm_stub_fixture, openai_answer  # noqa: F401

KEY = "sk-test-0123456789abcdef"
ANSWER = '{"edges": [], "intent": "ship the tick"}'


class Sleeps:
    """The injected sleep: records the backoff instead of waiting."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def make(stub: LLMStub, sleeps: Sleeps | None = None, *, url: str | None = None, **overrides: Any) -> LLMClient:
    values: dict[str, Any] = {
        "llm_url": url if url is not None else stub.url,
        "llm_api_key": KEY,
        "llm_model": "test-model",
        "llm_timeout_seconds": 5.0,
        "llm_max_retries": 3,
        "llm_max_output_tokens": 256,
        "llm_price_input_per_mtok": 3.0,
        "llm_price_output_per_mtok": 15.0,
    }
    values.update(overrides)
    client = client_from_settings(Settings(**values), sleep=sleeps or Sleeps())
    assert client is not None
    return client


# --- happy paths ---------------------------------------------------------------------------


def test_openai_answer_usage_and_cost(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(openai_answer(ANSWER, prompt_tokens=1000, completion_tokens=200, model="served-model"))
    completion = make(llm_stub).complete("system text", "prompt text", json_schema=ANSWER_SCHEMA)

    assert completion.text == ANSWER
    assert (completion.input_tokens, completion.output_tokens) == (1000, 200)
    assert completion.cost_usd == pytest.approx((1000 * 3.0 + 200 * 15.0) / 1e6)
    assert completion.model == "served-model"
    assert completion.attempts == 1
    assert completion.latency_ms >= 0

    (request,) = llm_stub.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert "x-api-key" not in request.headers
    assert request.body["model"] == "test-model"
    assert request.body["max_tokens"] == 256
    assert request.body["messages"] == [
        {"role": "system", "content": "system text"},
        {"role": "user", "content": "prompt text"},
    ]
    assert request.body["response_format"]["type"] == "json_schema"
    assert request.body["response_format"]["json_schema"]["schema"] == ANSWER_SCHEMA


def test_anthropic_answer_headers_body_and_usage(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(anthropic_answer(ANSWER, input_tokens=10, cache_read_input_tokens=990, output_tokens=100))
    client = make(llm_stub, llm_provider="anthropic")
    assert isinstance(client, AnthropicMessagesClient)
    completion = client.complete("system text", "prompt text", json_schema=ANSWER_SCHEMA)

    assert completion.text == ANSWER
    assert (completion.input_tokens, completion.output_tokens) == (1000, 100)
    assert completion.cost_usd == pytest.approx((1000 * 3.0 + 100 * 15.0) / 1e6)
    assert completion.model == "stub-claude"

    (request,) = llm_stub.requests
    assert request.path == "/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request.headers
    assert request.body["system"] == "system text"
    assert request.body["messages"] == [{"role": "user", "content": "prompt text"}]
    assert request.body["max_tokens"] == 256
    assert request.body["output_config"] == {"format": {"type": "json_schema", "schema": ANSWER_SCHEMA}}


def test_anthropic_text_blocks_are_joined_and_others_ignored(llm_stub: LLMStub) -> None:
    body = anthropic_answer("").body
    body["content"] = [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": '{"intent": '},
        {"type": "text", "text": '"x"}'},
    ]
    llm_stub.enqueue(Scripted(body=body))
    assert make(llm_stub, llm_provider="anthropic").complete("s", "p").text == '{"intent": "x"}'


def test_openai_content_parts_are_joined(llm_stub: LLMStub) -> None:
    body = openai_answer("").body
    body["choices"][0]["message"]["content"] = [{"type": "text", "text": "{}"}, {"type": "image"}]
    llm_stub.enqueue(Scripted(body=body))
    assert make(llm_stub).complete("s", "p").text == "{}"


def test_no_schema_means_no_response_format(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(openai_answer(ANSWER), anthropic_answer(ANSWER))
    make(llm_stub).complete("s", "p")
    make(llm_stub, llm_provider="anthropic").complete("s", "p")
    assert "response_format" not in llm_stub.requests[0].body
    assert "output_config" not in llm_stub.requests[1].body


def test_no_api_key_sends_no_key_header(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(openai_answer(ANSWER), anthropic_answer(ANSWER))
    make(llm_stub, llm_api_key="").complete("s", "p")
    make(llm_stub, llm_api_key="", llm_provider="anthropic").complete("s", "p")
    assert "authorization" not in llm_stub.requests[0].headers
    assert "x-api-key" not in llm_stub.requests[1].headers


def test_missing_usage_counts_zero_tokens(llm_stub: LLMStub) -> None:
    body = openai_answer(ANSWER).body
    del body["usage"]
    llm_stub.enqueue(Scripted(body=body))
    completion = make(llm_stub).complete("s", "p")
    assert (completion.input_tokens, completion.output_tokens, completion.cost_usd) == (0, 0, 0.0)
    assert completion.model == "stub-model"


# --- URLs -------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1/chat/completions"])
def test_openai_url_with_or_without_v1(llm_stub: LLMStub, suffix: str) -> None:
    llm_stub.enqueue(openai_answer(ANSWER))
    make(llm_stub, url=llm_stub.url + suffix).complete("s", "p")
    assert llm_stub.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("suffix", ["", "/v1", "/v1/", "/v1/messages"])
def test_anthropic_url_with_or_without_v1(llm_stub: LLMStub, suffix: str) -> None:
    llm_stub.enqueue(anthropic_answer(ANSWER))
    make(llm_stub, url=llm_stub.url + suffix, llm_provider="anthropic").complete("s", "p")
    assert llm_stub.requests[0].path == "/v1/messages"


def test_gateway_prefix_is_kept(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(openai_answer(ANSWER), openai_answer(ANSWER))
    make(llm_stub, url=llm_stub.url + "/litellm").complete("s", "p")
    make(llm_stub, url=llm_stub.url + "/litellm/v1").complete("s", "p")
    assert [r.path for r in llm_stub.requests] == ["/litellm/v1/chat/completions"] * 2


def test_endpoint_url_normalisation() -> None:
    assert endpoint_url("http://h:1", "chat/completions") == "http://h:1/v1/chat/completions"
    assert endpoint_url(" http://h:1/v1/ ", "messages") == "http://h:1/v1/messages"
    assert endpoint_url("https://api.anthropic.com", "messages") == "https://api.anthropic.com/v1/messages"
    assert endpoint_url("http://h/v1/messages", "messages") == "http://h/v1/messages"


# --- retries ------------------------------------------------------------------------------------


def test_500_then_success_retries_with_backoff(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(error(500), error(502), openai_answer(ANSWER))
    completion = make(llm_stub, sleeps).complete("s", "p")
    assert completion.text == ANSWER
    assert completion.attempts == 3
    assert sleeps.calls == [1.0, 2.0]
    assert len(llm_stub.requests) == 3


def test_408_is_retried(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(error(408), openai_answer(ANSWER))
    assert make(llm_stub, sleeps).complete("s", "p").attempts == 2
    assert sleeps.calls == [1.0]


def test_429_then_success_honours_retry_after(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(error(429, headers={"Retry-After": "7"}), anthropic_answer(ANSWER))
    completion = make(llm_stub, sleeps, llm_provider="anthropic").complete("s", "p")
    assert completion.text == ANSWER
    assert sleeps.calls == [7.0]


def test_429_without_retry_after_uses_backoff(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(error(429), error(429), error(429), openai_answer(ANSWER))
    make(llm_stub, sleeps).complete("s", "p")
    assert sleeps.calls == [1.0, 2.0, 4.0]


def test_retry_after_is_capped(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(error(503, headers={"Retry-After": "86400"}), openai_answer(ANSWER))
    make(llm_stub, sleeps).complete("s", "p")
    assert sleeps.calls == [RETRY_AFTER_CAP_SECONDS]


def test_persistent_5xx_gives_up_after_bounded_retries(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(*[error(500)] * 10)
    with pytest.raises(LLMError) as caught:
        make(llm_stub, sleeps, llm_max_retries=2).complete("s", "p")
    assert caught.value.status == 500
    assert caught.value.attempts == 3
    assert len(llm_stub.requests) == 3
    assert sleeps.calls == [1.0, 2.0]
    assert "HTTP 500" in str(caught.value)


def test_zero_retries_means_one_attempt(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(error(500), openai_answer(ANSWER))
    with pytest.raises(LLMError):
        make(llm_stub, sleeps, llm_max_retries=0).complete("s", "p")
    assert len(llm_stub.requests) == 1
    assert sleeps.calls == []


def test_timeouts_fail_after_bounded_retries(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(*[Scripted(body=openai_answer(ANSWER).body, delay=2.0)] * 3)
    with pytest.raises(LLMError) as caught:
        make(llm_stub, sleeps, llm_timeout_seconds=0.2, llm_max_retries=1).complete("s", "p")
    assert "timed out" in str(caught.value)
    assert caught.value.attempts == 2
    assert len(llm_stub.requests) == 2
    assert sleeps.calls == [1.0]


def test_timeout_then_success(llm_stub: LLMStub) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(Scripted(body=openai_answer("late").body, delay=2.0), openai_answer(ANSWER))
    completion = make(llm_stub, sleeps, llm_timeout_seconds=0.3).complete("s", "p")
    assert completion.text == ANSWER
    assert completion.attempts == 2


def test_connection_refused_is_retried_then_fails() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleeps = Sleeps()
    settings = Settings(llm_url=f"http://127.0.0.1:{port}", llm_max_retries=2, llm_timeout_seconds=1.0)
    client = client_from_settings(settings, sleep=sleeps)
    assert client is not None
    with pytest.raises(LLMError) as caught:
        client.complete("s", "p")
    assert "connection error" in str(caught.value)
    assert caught.value.attempts == 3
    assert sleeps.calls == [1.0, 2.0]


# --- errors that are not retried ------------------------------------------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_fail_at_once(llm_stub: LLMStub, status: int) -> None:
    sleeps = Sleeps()
    llm_stub.enqueue(error(status, "bad request: model not found"), openai_answer(ANSWER))
    with pytest.raises(LLMError) as caught:
        make(llm_stub, sleeps).complete("s", "p")  # no schema: no fallback either
    assert caught.value.status == status
    assert f"HTTP {status}" in str(caught.value)
    assert "model not found" in str(caught.value)
    assert len(llm_stub.requests) == 1
    assert sleeps.calls == []


@pytest.mark.parametrize(("provider", "status"), [("openai", 400), ("anthropic", 400), ("openai", 422)])
def test_schema_refused_is_asked_once_more_without_it(llm_stub: LLMStub, provider: str, status: int) -> None:
    sleeps = Sleeps()
    answer = openai_answer(ANSWER) if provider == "openai" else anthropic_answer(ANSWER)
    llm_stub.enqueue(error(status, "response_format is not supported"), answer)
    completion = make(llm_stub, sleeps, llm_provider=provider).complete("s", "p", json_schema=ANSWER_SCHEMA)
    assert completion.text == ANSWER
    assert completion.attempts == 2
    assert sleeps.calls == []
    first, second = (r.body for r in llm_stub.requests)
    field = "response_format" if provider == "openai" else "output_config"
    assert field in first
    assert field not in second


def test_schema_fallback_happens_only_once(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(error(400), error(400), openai_answer(ANSWER))
    with pytest.raises(LLMError) as caught:
        make(llm_stub).complete("s", "p", json_schema=ANSWER_SCHEMA)
    assert caught.value.status == 400
    assert len(llm_stub.requests) == 2


@pytest.mark.parametrize(
    "scripted",
    [
        Scripted(body="this is not json"),
        Scripted(body=[1, 2, 3]),
        Scripted(body={"choices": []}),
        Scripted(body={"choices": [{"message": {"content": 42}}]}),
    ],
    ids=["not-json", "not-object", "no-choices", "content-not-text"],
)
def test_malformed_200_is_an_error(llm_stub: LLMStub, scripted: Scripted) -> None:
    llm_stub.enqueue(scripted)
    with pytest.raises(LLMError):
        make(llm_stub).complete("s", "p")
    assert len(llm_stub.requests) == 1


def test_anthropic_malformed_content_is_an_error(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(Scripted(body={"content": "not a list"}))
    with pytest.raises(LLMError):
        make(llm_stub, llm_provider="anthropic").complete("s", "p")


# --- the key stays secret ------------------------------------------------------------------------


def test_api_key_never_logged_nor_in_errors(llm_stub: LLMStub, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    llm_stub.enqueue(error(500), openai_answer(ANSWER), error(401, "invalid key"))
    client = make(llm_stub)
    client.complete("s", "p")
    with pytest.raises(LLMError) as caught:
        client.complete("s", "p")
    assert KEY not in caplog.text
    assert KEY not in str(caught.value)
    assert KEY not in repr(client)


def test_error_bodies_are_redacted_and_never_echo_the_key(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(error(401, f"Incorrect API key provided: {KEY}; also ghp_{'a' * 36}"))
    with pytest.raises(LLMError) as caught:
        make(llm_stub).complete("s", "p")
    assert KEY not in str(caught.value)
    assert "ghp_" + "a" * 36 not in str(caught.value)
    assert "Incorrect API key provided" in str(caught.value)


def test_password_in_url_is_not_shown(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = client_from_settings(
        Settings(llm_url=f"http://user:hunter2secret@127.0.0.1:{port}", llm_max_retries=0), sleep=Sleeps()
    )
    assert client is not None
    caplog.set_level(logging.DEBUG)
    with pytest.raises(LLMError) as caught:
        client.complete("s", "p")
    assert "hunter2secret" not in str(caught.value)
    assert "hunter2secret" not in caplog.text
    assert "hunter2secret" not in repr(client)


# --- configuration -----------------------------------------------------------------------------------


def test_no_url_means_no_client() -> None:
    assert client_from_settings(Settings()) is None
    assert client_from_settings(Settings(llm_url="  ")) is None


def test_provider_selects_the_wire_format() -> None:
    assert isinstance(client_from_settings(Settings(llm_url="http://h")), OpenAIChatClient)
    anthropic = client_from_settings(Settings(llm_url="http://h", llm_provider="Anthropic"))
    assert isinstance(anthropic, AnthropicMessagesClient)


@pytest.mark.parametrize(
    "settings",
    [
        Settings(llm_url="http://h", llm_provider="gemini"),
        Settings(llm_url="ftp://h"),
        Settings(llm_url="not a url"),
        Settings(llm_url="http://h", llm_api_key="key\nInjected: header"),
        Settings(llm_url="http://h", llm_api_key="clé"),
    ],
    ids=["provider", "scheme", "garbage", "key-newline", "key-non-ascii"],
)
def test_bad_configuration_is_a_settings_error(settings: Settings) -> None:
    with pytest.raises(SettingsError):
        client_from_settings(settings)


def test_backoff_and_retry_after_parsing() -> None:
    assert [backoff_delay(n, None) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert backoff_delay(10, None) == BACKOFF_CAP_SECONDS
    assert backoff_delay(0, 3.5) == 3.5
    assert backoff_delay(0, -1.0) == 0.0
    assert parse_retry_after("12") == 12.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now=1445412500.0) == pytest.approx(10.0)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412500.0) == 0.0
