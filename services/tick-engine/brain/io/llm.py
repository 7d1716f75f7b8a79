"""The one LLM call of the tick (SPEC §8), over plain httpx: no vendor SDK.

Two wire formats behind one :class:`LLMClient` protocol:

* ``openai`` — chat completions, ``POST <base>/v1/chat/completions`` with
  ``Authorization: Bearer <key>``; a JSON schema goes in ``response_format``. Works against
  LiteLLM, vLLM, Ollama, llama.cpp's server and OpenAI itself.
* ``anthropic`` — the Messages API, ``POST <base>/v1/messages`` with ``x-api-key`` and
  ``anthropic-version: 2023-06-01``; a JSON schema goes in ``output_config.format``
  (Anthropic's structured outputs).

The base URL may be given with or without ``/v1`` (or even as the full endpoint); it is
normalised once. A server that refuses the structured-output field (HTTP 400, or 422 from
FastAPI-style gateways) is asked once more without it: older gateways and models do not know
it, and the prompt states the schema too.

Retries: 408, 429, 5xx, connection errors and timeouts are retried ``max_retries`` times with
exponential backoff (1 s, 2 s, 4 s ... capped at 30 s); a ``Retry-After`` header is honoured up
to 60 s. Any other 4xx fails at once. The sleep function is injectable so tests never sleep.

Deadline: httpx's timeout bounds each network operation (connect, one read, one write), so a
gateway that sends a byte every few seconds would hold the tick, and its vault lock, for as
long as it likes. :meth:`complete` therefore has a wall-clock deadline for the whole call,
every attempt, retry and backoff wait included (``llm_deadline_seconds``; 0 means every
attempt's timeout plus :data:`DEADLINE_BACKOFF_SECONDS` of waiting:
``(llm_max_retries + 1) × llm_timeout_seconds + 60``, 540 s with the defaults). Each attempt's timeouts are cut to the
time left; a watchdog shuts the connection's socket down when the deadline passes (a blocked
read returns at once, whatever the server trickles); a retry whose wait would cross the
deadline is not made. Past the deadline the call fails with an :class:`LLMError` that says so.

A 200 whose body is not a JSON object, or is JSON nested too deeply to decode, is an
:class:`LLMError` too (the tick's AI phase fails with exit 4; nothing crashes).

The API key is sent, never logged, never part of an error message (error bodies quoted in an
:class:`LLMError` are redacted and stripped of the key).
"""

from __future__ import annotations

import email.utils
import logging
import math
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from brain.core.redaction import redact
from brain.settings import Settings, SettingsError

log = logging.getLogger(__name__)

ANTHROPIC_VERSION = "2023-06-01"
PROVIDERS = ("openai", "anthropic")
#: First backoff delay; doubled on every retry, capped at BACKOFF_CAP_SECONDS.
BACKOFF_BASE_SECONDS = 1.0
BACKOFF_CAP_SECONDS = 30.0
#: A server's Retry-After is honoured up to this many seconds.
RETRY_AFTER_CAP_SECONDS = 60.0
#: The most of an answer's body read (the prompt is bounded; its answer is a few kilobytes).
MAX_ANSWER_BYTES = 8_000_000
#: Longest error body quoted in an LLMError.
_ERROR_BODY_CHARS = 300
#: Name of the schema in OpenAI's response_format (letters, digits, ``_``, ``-``).
SCHEMA_NAME = "brain_answer"
#: Statuses worth another try: request timeout, rate limit (5xx are retried too).
RETRY_STATUSES = frozenset({408, 429})
#: Statuses with which a server refuses a request field it does not know (the schema fallback).
SCHEMA_REFUSED_STATUSES = frozenset({400, 422})
#: Without an explicit ``llm_deadline_seconds``, the whole call may take one timeout per attempt
#: plus this much backoff waiting.
DEADLINE_BACKOFF_SECONDS = 60.0


class LLMError(Exception):
    """The LLM call failed (the tick reports it and exits 4)."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 0):
        super().__init__(message)
        self.status = status
        self.attempts = attempts


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    model: str
    cost_usd: float
    attempts: int  # HTTP requests made, retries and the schema fallback included
    latency_ms: int  # wall time of complete(), retries included

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "attempts": self.attempts,
            "latency_ms": self.latency_ms,
        }


class LLMClient(Protocol):
    def complete(self, system: str, prompt: str, *, json_schema: dict[str, Any] | None = None) -> Completion: ...


@dataclass(frozen=True)
class LLMConfig:
    url: str
    api_key: str | None
    model: str
    provider: str = "openai"
    timeout_seconds: float = 120.0
    #: Wall-clock limit of one complete() call, retries and waits included; 0: see :attr:`deadline`.
    deadline_seconds: float = 0.0
    max_retries: int = 3
    max_output_tokens: int = 4096
    price_input_per_mtok: float = 0.0
    price_output_per_mtok: float = 0.0

    def __repr__(self) -> str:  # the key never reaches a log line or a traceback
        return f"LLMConfig(url={_display_url(self.url)!r}, provider={self.provider!r}, model={self.model!r})"

    @property
    def deadline(self) -> float:
        """Seconds one complete() call may take in all."""
        if self.deadline_seconds > 0:
            return self.deadline_seconds
        return (max(0, self.max_retries) + 1) * self.timeout_seconds + DEADLINE_BACKOFF_SECONDS


def client_from_settings(
    settings: Settings,
    *,
    sleep: Callable[[float], None] = time.sleep,
    transport: httpx.BaseTransport | None = None,
) -> LLMClient | None:
    """The configured client, or None when no ``llm_url`` is set (the AI phases are skipped).

    Raises :class:`SettingsError` (exit 2) for an unknown provider or a URL that is not http(s).
    """
    if not settings.llm_url or not settings.llm_url.strip():
        return None
    for name in ("llm_timeout_seconds", "llm_deadline_seconds"):
        value = getattr(settings, name)
        if not math.isfinite(value) or value < 0 or (name == "llm_timeout_seconds" and value == 0):
            raise SettingsError(f"BRAIN_{name.upper()}: must be a positive number of seconds"
                                + (" (0: the default)" if name == "llm_deadline_seconds" else ""))
    config = LLMConfig(
        url=settings.llm_url.strip(),
        api_key=settings.llm_api_key or None,
        model=settings.llm_model,
        provider=settings.llm_provider.strip().lower(),
        timeout_seconds=settings.llm_timeout_seconds,
        deadline_seconds=settings.llm_deadline_seconds,
        max_retries=settings.llm_max_retries,
        max_output_tokens=settings.llm_max_output_tokens,
        price_input_per_mtok=settings.llm_price_input_per_mtok,
        price_output_per_mtok=settings.llm_price_output_per_mtok,
    )
    return make_client(config, sleep=sleep, transport=transport)


def make_client(
    config: LLMConfig,
    *,
    sleep: Callable[[float], None] = time.sleep,
    transport: httpx.BaseTransport | None = None,
) -> LLMClient:
    if config.provider == "openai":
        return OpenAIChatClient(config, sleep=sleep, transport=transport)
    if config.provider == "anthropic":
        return AnthropicMessagesClient(config, sleep=sleep, transport=transport)
    raise SettingsError(f"BRAIN_LLM_PROVIDER: unknown provider {config.provider!r} (use one of {', '.join(PROVIDERS)})")


def endpoint_url(base: str, path: str) -> str:
    """``<base>/v1/<path>``, whether ``base`` ends in ``/v1``, ``/v1/<path>`` or neither."""
    url = base.strip().rstrip("/")
    if url.endswith("/v1/" + path):
        return url
    if not url.endswith("/v1"):
        url += "/v1"
    return f"{url}/{path}"


def _display_url(url: str) -> str:
    """The URL without user info (a password in a URL is a secret too)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "<invalid url>"
    return str(parsed.copy_with(username=None, password=None)) if parsed.userinfo else url


def backoff_delay(retry: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number ``retry`` (0-based)."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), RETRY_AFTER_CAP_SECONDS)
    return float(min(BACKOFF_BASE_SECONDS * (2**retry), BACKOFF_CAP_SECONDS))


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP date; None if unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


class _Retryable(Exception):
    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class _Watchdog:
    """Shuts down the sockets of one complete() call when its deadline passes.

    httpx bounds each read, not a request: a server trickling bytes keeps every read short.
    Shutting a socket down from this timer thread makes the read blocked on it return at once
    (end of stream), so the request fails whatever the server does; the caller then sees
    :meth:`expired`. Sockets are learnt from httpcore's ``trace`` extension as they connect.
    """

    def __init__(self, deadline: float):
        self._deadline = deadline
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._fired = False
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        # The TCP socket, then (https) the TLS socket that takes its file descriptor over.
        if not event.endswith((".connect_tcp.complete", ".start_tls.complete")):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._sockets.append(sock)
            fired = self._fired
        if fired:
            _shutdown(sock)

    def expired(self) -> bool:
        return self._fired or time.monotonic() >= self._deadline

    def _fire(self) -> None:
        with self._lock:
            self._fired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shutdown(sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed by the pool
        pass


class _HTTPClient:
    """Retries, timeouts, usage and cost; subclasses know one wire format."""

    path = ""
    schema_field = ""

    def __init__(
        self,
        config: LLMConfig,
        *,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ):
        try:
            url = httpx.URL(config.url)
        except (httpx.InvalidURL, TypeError, ValueError):
            raise SettingsError("BRAIN_LLM_URL: not a valid URL") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise SettingsError("BRAIN_LLM_URL: expected an http:// or https:// URL")
        if config.api_key is not None and not (config.api_key.isascii() and config.api_key.isprintable()):
            # Checked here, not at send time, where a bad header value would be a crash.
            raise SettingsError("BRAIN_LLM_API_KEY: must be printable ASCII")
        self.config = config
        self.endpoint = endpoint_url(config.url, self.path)
        self._sleep = sleep
        self._transport = transport

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"

    # -- wire format (subclasses) --
    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def body(self, system: str, prompt: str, json_schema: dict[str, Any] | None) -> dict[str, Any]:
        raise NotImplementedError

    def read(self, data: Mapping[str, Any]) -> tuple[str, int, int, str | None]:
        """``(text, input_tokens, output_tokens, model)`` from a 200 response."""
        raise NotImplementedError

    # -- the call --
    def complete(self, system: str, prompt: str, *, json_schema: dict[str, Any] | None = None) -> Completion:
        started = time.monotonic()
        deadline = started + self.config.deadline
        schema = json_schema
        attempts = 0
        retries = 0
        max_retries = max(0, self.config.max_retries)
        with httpx.Client(transport=self._transport, follow_redirects=False) as http, _Watchdog(deadline) as watchdog:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._deadline_error(attempts)
                attempts += 1
                try:
                    try:
                        response = self._post(
                            http, attempts, json=self.body(system, prompt, schema), headers=self.headers(),
                            timeout=httpx.Timeout(min(self.config.timeout_seconds, left)),
                            extensions={"trace": watchdog.trace},
                        )
                    except httpx.TransportError as exc:
                        if watchdog.expired():
                            raise self._deadline_error(attempts) from None
                        raise self._post_error(exc) from None
                    if response.status_code in SCHEMA_REFUSED_STATUSES and schema is not None:
                        log.info(
                            "LLM server refused the request (HTTP %d); asking once more without %s",
                            response.status_code, self.schema_field,
                        )
                        schema = None
                        continue
                    data = self._check(response, attempts)
                except _Retryable as exc:
                    if retries >= max_retries:
                        raise LLMError(
                            f"LLM request failed after {attempts} attempt(s): {exc}",
                            status=exc.status,
                            attempts=attempts,
                        ) from None
                    delay = backoff_delay(retries, exc.retry_after)
                    if time.monotonic() + delay >= deadline:
                        raise LLMError(
                            f"LLM request failed after {attempts} attempt(s): {exc}; a retry in {delay:.0f}s would "
                            f"pass the call's {self.config.deadline:g}s deadline",
                            status=exc.status,
                            attempts=attempts,
                        ) from None
                    retries += 1
                    log.warning("LLM request failed (%s); retry %d/%d in %.1fs", exc, retries, max_retries, delay)
                    self._sleep(delay)
                    continue
                break
        text, input_tokens, output_tokens, model = self._read(data, attempts)
        cost = (
            input_tokens * self.config.price_input_per_mtok + output_tokens * self.config.price_output_per_mtok
        ) / 1_000_000
        latency_ms = int((time.monotonic() - started) * 1000)
        log.info(
            "LLM answered: %d input + %d output tokens, ~$%.4f, %d attempt(s), %d ms",
            input_tokens, output_tokens, cost, attempts, latency_ms,
        )
        return Completion(
            text=text,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            model=model or self.config.model,
            cost_usd=round(cost, 6),
            attempts=attempts,
            latency_ms=latency_ms,
        )

    def _post(self, http: httpx.Client, attempts: int, **request: Any) -> httpx.Response:
        """The response, its body read up to :data:`MAX_ANSWER_BYTES` (an answer to a bounded
        prompt is a few kilobytes: a server sending more is not read into memory)."""
        with http.stream("POST", self.endpoint, **request) as streamed:
            chunks: list[bytes] = []
            size = 0
            for chunk in streamed.iter_bytes():
                size += len(chunk)
                if size > MAX_ANSWER_BYTES:
                    raise LLMError(
                        f"LLM server at {_display_url(self.endpoint)} answered more than {MAX_ANSWER_BYTES} bytes "
                        f"(HTTP {streamed.status_code}): not read further",
                        status=streamed.status_code, attempts=attempts,
                    )
                chunks.append(chunk)
            # Decoded already: the headers that describe the wire encoding do not come along.
            headers = [(k, v) for k, v in streamed.headers.items()
                       if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
            return httpx.Response(streamed.status_code, headers=headers, content=b"".join(chunks),
                                  request=streamed.request)

    def _deadline_error(self, attempts: int) -> LLMError:
        return LLMError(
            f"LLM call cut at its {self.config.deadline:g}s deadline (llm_deadline_seconds) after {attempts} "
            f"attempt(s) at {_display_url(self.endpoint)}: the server did not finish its answer in time",
            attempts=attempts,
        )

    def _post_error(self, exc: httpx.HTTPError) -> _Retryable:
        kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "connection error"
        return _Retryable(f"{kind} ({type(exc).__name__}) at {_display_url(self.endpoint)}")

    def _check(self, response: httpx.Response, attempts: int) -> Mapping[str, Any]:
        status = response.status_code
        if status in RETRY_STATUSES or status >= 500:
            raise _Retryable(
                f"HTTP {status}{self._error_detail(response)}",
                status=status,
                retry_after=parse_retry_after(response.headers.get("retry-after")),
            )
        if not 200 <= status < 300:
            raise LLMError(
                f"LLM server answered HTTP {status} at {_display_url(self.endpoint)}{self._error_detail(response)}",
                status=status,
                attempts=attempts,
            )
        try:
            data = response.json()
        except (ValueError, UnicodeDecodeError):
            raise LLMError(
                f"LLM server answered {status} with a body that is not JSON", status=status, attempts=attempts
            ) from None
        except RecursionError:
            raise LLMError(
                f"LLM server answered {status} with JSON nested too deeply to read", status=status, attempts=attempts
            ) from None
        if not isinstance(data, dict):
            raise LLMError(f"LLM server answered {status} with JSON that is not an object", status=status, attempts=attempts)
        return data

    def _error_detail(self, response: httpx.Response) -> str:
        """A short, single-line, redacted excerpt of an error body (servers put the reason there)."""
        try:
            text = response.text
        except (UnicodeDecodeError, httpx.ResponseNotRead):
            return ""
        if self.config.api_key:  # some servers echo the key they refused
            text = text.replace(self.config.api_key, "[REDACTED]")
        text = " ".join(redact(text[: _ERROR_BODY_CHARS * 4]).split())
        if not text:
            return ""
        if len(text) > _ERROR_BODY_CHARS:
            text = text[: _ERROR_BODY_CHARS - 1] + "…"
        return f": {text}"

    def _read(self, data: Mapping[str, Any], attempts: int) -> tuple[str, int, int, str | None]:
        try:
            return self.read(data)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LLMError(f"unexpected LLM response shape ({type(exc).__name__})", status=200, attempts=attempts) from None


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))


class OpenAIChatClient(_HTTPClient):
    path = "chat/completions"
    schema_field = "response_format"

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self.config.api_key:
            headers["authorization"] = f"Bearer {self.config.api_key}"
        return headers

    def body(self, system: str, prompt: str, json_schema: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            "max_tokens": self.config.max_output_tokens,
            "stream": False,
        }
        if json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": json_schema},
            }
        return body

    def read(self, data: Mapping[str, Any]) -> tuple[str, int, int, str | None]:
        message = data["choices"][0]["message"]
        content = message.get("content")
        if isinstance(content, list):  # some gateways answer with content parts
            content = "".join(
                part.get("text", "") for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
            )
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise TypeError("content")
        usage = data.get("usage") or {}
        model = data.get("model")
        return (
            content,
            _count(usage.get("prompt_tokens")),
            _count(usage.get("completion_tokens")),
            model if isinstance(model, str) else None,
        )


class AnthropicMessagesClient(_HTTPClient):
    path = "messages"
    schema_field = "output_config"

    def headers(self) -> dict[str, str]:
        headers = {
            "content-type": "application/json",
            "accept": "application/json",
            "anthropic-version": ANTHROPIC_VERSION,
        }
        if self.config.api_key:
            headers["x-api-key"] = self.config.api_key
        return headers

    def body(self, system: str, prompt: str, json_schema: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "max_tokens": self.config.max_output_tokens,
            "system": system,
            "messages": [{"role": "user", "content": prompt}],
        }
        if json_schema is not None:
            body["output_config"] = {"format": {"type": "json_schema", "schema": json_schema}}
        return body

    def read(self, data: Mapping[str, Any]) -> tuple[str, int, int, str | None]:
        blocks = data["content"]
        if not isinstance(blocks, list):
            raise TypeError("content")
        text = "".join(
            block["text"]
            for block in blocks
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        )
        usage = data.get("usage") or {}
        # Cached prompt tokens are reported apart from input_tokens; all of them are prompt.
        input_tokens = (
            _count(usage.get("input_tokens"))
            + _count(usage.get("cache_creation_input_tokens"))
            + _count(usage.get("cache_read_input_tokens"))
        )
        model = data.get("model")
        return text, input_tokens, _count(usage.get("output_tokens")), model if isinstance(model, str) else None


__all__ = [
    "ANTHROPIC_VERSION",
    "AnthropicMessagesClient",
    "Completion",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "OpenAIChatClient",
    "client_from_settings",
    "endpoint_url",
    "make_client",
]
