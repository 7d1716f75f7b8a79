"""A loopback LLM server for the tests: scripted answers over real sockets, both wire formats.

It serves ``POST .../chat/completions`` (OpenAI-compatible) and ``POST .../messages``
(Anthropic Messages API) on ``127.0.0.1`` with a free port, answering from a queue of
:class:`Scripted` responses (status, body, delay, headers) and recording every request
(path, headers, JSON body) for assertions. An empty queue answers 500, so a test that makes
more calls than it scripted fails loudly.

Import the fixture explicitly in a test module::

    from tests.support.llm_stub import LLMStub, llm_stub_fixture  # noqa: F401

and ask for ``llm_stub`` in a test's parameters.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Scripted:
    """One scripted response. ``body``: a dict/list is sent as JSON, a str or bytes as is."""

    status: int = 200
    body: Any = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any  # decoded JSON, or the raw text when it was not JSON


def openai_answer(text: str, *, prompt_tokens: int = 120, completion_tokens: int = 30, model: str = "stub-model") -> Scripted:
    return Scripted(
        body={
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
    )


def anthropic_answer(
    text: str,
    *,
    input_tokens: int = 120,
    output_tokens: int = 30,
    cache_read_input_tokens: int = 0,
    model: str = "stub-claude",
) -> Scripted:
    return Scripted(
        body={
            "id": "msg_stub",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cache_read_input_tokens": cache_read_input_tokens,
            },
        }
    )


def error(status: int, message: str = "scripted error", *, headers: Mapping[str, str] | None = None) -> Scripted:
    return Scripted(status=status, body={"error": {"message": message}}, headers=headers or {})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    stub: LLMStub


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet test output
        return

    def do_GET(self) -> None:
        self._send(Scripted(status=404, body={"error": "not found"}))

    def do_POST(self) -> None:
        stub = self.server.stub
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw.decode("utf-8")) if raw else None
        except (UnicodeDecodeError, ValueError):
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?", 1)[0]
        stub._record(Recorded("POST", path, {k.lower(): v for k, v in self.headers.items()}, body))
        if not (path.endswith("/chat/completions") or path.endswith("/messages")):
            self._send(Scripted(status=404, body={"error": f"no route {path}"}))
            return
        scripted = stub._next()
        if scripted.delay > 0 and stub._closing.wait(scripted.delay):
            return  # the stub is closing: drop the request
        self._send(scripted)

    def _send(self, scripted: Scripted) -> None:
        if isinstance(scripted.body, bytes):
            payload, kind = scripted.body, "application/octet-stream"
        elif isinstance(scripted.body, str):
            payload, kind = scripted.body.encode("utf-8"), "text/plain; charset=utf-8"
        else:
            payload, kind = json.dumps(scripted.body).encode("utf-8"), "application/json"
        try:
            self.send_response(scripted.status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            for name, value in scripted.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (timeout) and closed the socket
            pass


class LLMStub:
    """The stub server; use as a context manager or through the :func:`llm_stub` fixture."""

    def __init__(self) -> None:
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.requests: list[Recorded] = []
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.stub = self
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="llm-stub", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def url(self) -> str:
        """Base URL without ``/v1`` (the client adds it)."""
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *responses: Scripted) -> LLMStub:
        with self._lock:
            self._queue.extend(responses)
        return self

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _next(self) -> Scripted:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return error(500, "llm stub: no scripted response left")

    def _record(self, request: Recorded) -> None:
        with self._lock:
            self.requests.append(request)

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LLMStub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(name="llm_stub")
def llm_stub_fixture() -> Iterator[LLMStub]:
    with LLMStub() as stub:
        yield stub
