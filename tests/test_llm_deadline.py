"""The LLM call's total deadline and hostile gateway bodies (issue 12 items 7 and 8), over real sockets.

httpx bounds each read, not a request: a gateway that trickles one byte every 0.2 s never trips a
5 s read timeout. These tests serve such a gateway on a loopback socket and check that the call is
cut at ``llm_deadline_seconds`` with a clear error, and that ``brain tick`` then exits 4 with the
keeper's work kept (journal complete, feed fresh, nothing rolled back by the next tick).
pytest-timeout is the guard against a hang; nothing here asserts on measured durations.
"""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from brain.cli import app
from brain.io.llm import LLMError, client_from_settings
from brain.settings import Settings
from tests.support.llm_stub import LLMStub, Scripted, llm_stub_fixture, openai_answer  # noqa: F401
from tests.support.vaults import NOW
from tests.test_apply import build

DEADLINE = 1.5


def _response(text: str) -> bytes:
    body = json.dumps({
        "model": "trickle", "choices": [{"message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }).encode()
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: " + \
        str(len(body)).encode() + b"\r\n\r\n" + body


class TrickleServer:
    """Answers each POST with a valid response, one byte every ``interval`` seconds.

    ``headers_at_once``: the status line and headers go out at once and only the body trickles
    (else the whole response trickles, headers included).
    """

    def __init__(self, *, interval: float = 0.2, headers_at_once: bool = False, tls: ssl.SSLContext | None = None):
        self.interval = interval
        self.headers_at_once = headers_at_once
        self.tls = tls
        self.requests = 0
        self._closing = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self._thread = threading.Thread(target=self._serve, daemon=True, name="trickle")
        self._thread.start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self._listener.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        if self.tls is not None:
            try:
                conn = self.tls.wrap_socket(conn, server_side=True)
            except OSError:
                conn.close()
                return
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(rest) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                rest += chunk
            self.requests += 1
            payload = _response('{"edges": [], "intent": "slow"}')
            start = payload.index(b"\r\n\r\n") + 4 if self.headers_at_once else 0
            try:
                if start:
                    conn.sendall(payload[:start])
                for index in range(start, len(payload)):
                    if self._closing.wait(self.interval):
                        return
                    conn.sendall(payload[index:index + 1])
            except OSError:  # the client gave up and closed the connection
                return

    def close(self) -> None:
        self._closing.set()
        self._listener.close()
        self._thread.join(timeout=5)


@pytest.fixture
def trickle() -> Iterator[TrickleServer]:
    server = TrickleServer()
    yield server
    server.close()


def client(url: str, **overrides: Any) -> Any:
    values: dict[str, Any] = {"llm_url": url, "llm_model": "m", "llm_timeout_seconds": 5.0,
                              "llm_deadline_seconds": DEADLINE, "llm_max_retries": 3}
    values.update(overrides)
    return client_from_settings(Settings(**values), sleep=lambda _s: None)


@pytest.mark.timeout(DEADLINE + 5)
@pytest.mark.parametrize("headers_at_once", [False, True], ids=["whole-response-trickles", "body-trickles"])
def test_a_trickling_gateway_is_cut_at_the_deadline(headers_at_once: bool) -> None:
    server = TrickleServer(headers_at_once=headers_at_once)
    try:
        with pytest.raises(LLMError) as caught:
            client(server.url).complete("s", "p")
    finally:
        server.close()
    message = str(caught.value)
    assert f"cut at its {DEADLINE:g}s deadline" in message and "llm_deadline_seconds" in message
    # Each read got a byte within 0.2 s, so no read timed out: only the deadline ended the call,
    # and no retry was started past it.
    assert server.requests == caught.value.attempts == 1


@pytest.mark.timeout(DEADLINE + 10)
def test_a_trickling_https_gateway_is_cut_at_the_deadline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over TLS the socket that carries the bytes is the TLS one: the watchdog must reach it too."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # httpx trusts it (trust_env)
    server = TrickleServer(headers_at_once=True, tls=context)
    try:
        with pytest.raises(LLMError) as caught:
            client(server.url).complete("s", "p")
    finally:
        server.close()
    assert f"cut at its {DEADLINE:g}s deadline" in str(caught.value) and server.requests == 1


def test_a_trickling_gateway_finishes_when_the_deadline_allows(trickle: TrickleServer) -> None:
    trickle.interval = 0.0005  # the same server, fast enough: the deadline is not a cap on success
    completion = client(trickle.url, llm_deadline_seconds=30).complete("s", "p")
    assert json.loads(completion.text) == {"edges": [], "intent": "slow"}


@pytest.mark.timeout(10)
def test_a_retry_that_would_pass_the_deadline_is_not_made(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(Scripted(status=503, body={"error": "busy"}, headers={"retry-after": "30"}))
    with pytest.raises(LLMError) as caught:
        client(llm_stub.url, llm_deadline_seconds=10).complete("s", "p")
    assert "would pass the call's 10s deadline" in str(caught.value) and "HTTP 503" in str(caught.value)
    assert len(llm_stub.requests) == 1


def test_the_default_deadline_covers_every_attempt_and_the_backoff() -> None:
    llm = client("http://127.0.0.1:9", llm_deadline_seconds=0, llm_timeout_seconds=10, llm_max_retries=2)
    assert llm.config.deadline == 3 * 10 + 60


@pytest.mark.parametrize("value", ["-1", "nan", "inf"])
def test_a_bad_deadline_is_a_configuration_error(vault: Path, value: str) -> None:
    result = CliRunner().invoke(app, ["tick", "--vault", str(vault), "--now", NOW],
                                env={"BRAIN_LLM_URL": "http://127.0.0.1:9", "BRAIN_LLM_DEADLINE_SECONDS": value})
    assert result.exit_code == 2 and "BRAIN_LLM_DEADLINE_SECONDS" in result.stderr


def test_a_gateway_body_nested_too_deeply_is_an_llm_error(llm_stub: LLMStub) -> None:
    llm_stub.enqueue(Scripted(body='{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}"))
    with pytest.raises(LLMError, match="nested too deeply"):
        client(llm_stub.url).complete("s", "p")


# --- through brain tick ---------------------------------------------------------------------------

def _tick(vault: Path, url: str, now: str = NOW, **env: str) -> tuple[int, dict[str, Any]]:
    values = {"BRAIN_LLM_URL": url, "BRAIN_LLM_MODEL": "m", "BRAIN_LLM_TIMEOUT_SECONDS": "5",
              "BRAIN_LLM_MAX_RETRIES": "2", **env}
    result = CliRunner().invoke(app, ["tick", "--vault", str(vault), "--json", "--now", now], env=values)
    assert result.stdout.startswith("{"), result.stderr
    return result.exit_code, json.loads(result.stdout)


def _journal_state(vault: Path, tick_id: str) -> str:
    manifest = json.loads((vault / ".brain" / "journal" / tick_id / "manifest.json").read_text())
    state: str = manifest["state"]
    return state


def assert_keeper_work_kept(vault: Path, report: dict[str, Any]) -> None:
    """Exit 4 after the keeper wrote: its journal is complete, the feed is fresh, the next tick rolls nothing back."""
    assert report["exit_code"] == 4 and report["phases"]["verify"]["ok"], report
    assert report["changes"]["written"], "the keeper wrote before the AI phase"
    assert _journal_state(vault, report["tick_id"]) == "complete"
    hot = (vault / "brain-feed" / "hot-arcs.md").read_text()
    assert "2026-11-21" in hot.split("\n---\n")[0]
    code, after = _tick(vault, "http://127.0.0.1:9", BRAIN_LLM_URL="", BRAIN_LLM_MAX_RETRIES="0")
    assert not any("rolled back" in p["message"] for p in after["problems"]), after["problems"]
    assert code == 0, after


@pytest.mark.timeout(60)
@pytest.mark.parametrize("answer", [
    "[" * 100_000,
    "[" * 100_000 + "]" * 100_000,
    '{"edges": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "Here it is:\n```json\n" + '{"edges": ' + "[" * 5_000 + "]" * 5_000 + "}\n```",
], ids=["open-brackets", "balanced", "inside-an-answer-object", "fenced"])
def test_a_deeply_nested_answer_fails_the_ai_phase_and_keeps_the_keepers_work(
        vault: Path, llm_stub: LLMStub, answer: str) -> None:
    build(vault)
    llm_stub.enqueue(openai_answer(answer))
    code, report = _tick(vault, llm_stub.url)
    assert code == 4
    messages = [p["message"] for p in report["problems"]]
    assert any("AI phase failed" in m and "nested too deeply" in m for m in messages), messages
    assert_keeper_work_kept(vault, report)


@pytest.mark.timeout(60)
def test_a_gateway_body_nested_too_deeply_fails_the_tick_with_exit_4(vault: Path, llm_stub: LLMStub) -> None:
    build(vault)
    llm_stub.enqueue(Scripted(body="[" * 100_000))
    code, report = _tick(vault, llm_stub.url, BRAIN_LLM_MAX_RETRIES="0")
    assert code == 4
    assert any("nested too deeply" in p["message"] for p in report["problems"]), report["problems"]
    assert_keeper_work_kept(vault, report)


@pytest.mark.timeout(DEADLINE + 30)
def test_a_trickling_gateway_fails_the_tick_with_exit_4_at_the_deadline(vault: Path, trickle: TrickleServer) -> None:
    build(vault)
    code, report = _tick(vault, trickle.url, BRAIN_LLM_DEADLINE_SECONDS=str(DEADLINE))
    assert code == 4
    llm = report["phases"]["llm"]
    assert "deadline" in llm["error"] and llm["attempts"] == 1, llm
    assert_keeper_work_kept(vault, report)


@pytest.mark.timeout(60)
def test_an_answer_larger_than_the_cap_is_not_read_into_memory_and_fails_the_tick_with_exit_4(
        vault: Path, llm_stub: LLMStub) -> None:
    from brain.io import llm

    huge = '{"choices": [{"message": {"content": "' + "x" * (llm.MAX_ANSWER_BYTES + 10) + '"}}]}'
    llm_stub.enqueue(Scripted(body=huge))
    with pytest.raises(LLMError, match=f"answered more than {llm.MAX_ANSWER_BYTES} bytes"):
        client(llm_stub.url).complete("s", "p")
    build(vault)
    llm_stub.enqueue(Scripted(body=huge))
    code, report = _tick(vault, llm_stub.url, BRAIN_LLM_MAX_RETRIES="0")
    assert code == 4
    assert any(f"more than {llm.MAX_ANSWER_BYTES} bytes" in p["message"] for p in report["problems"]), report
    assert_keeper_work_kept(vault, report)
