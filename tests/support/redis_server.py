"""A real ``redis-server`` for the tests (SPEC §11): free local port, throw-away folder, no persistence.

Import the fixture explicitly in a test module::

    from tests.support.redis_server import RedisServer, redis_server_fixture  # noqa: F401

and ask for ``redis_server`` (the fixture's name) in the tests.

Without ``redis-server`` on PATH the tests skip, except under ``CI`` (set and not ``false``),
where a missing server is a failure: CI must install it (``apt-get install -y redis-server``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_TIMEOUT_SECONDS = 10.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process; :meth:`restart` brings it back on the same port, empty."""

    def __init__(self, binary: str, folder: Path):
        self.binary = binary
        self.folder = folder
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.folder),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not _answers_ping(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=START_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=START_TIMEOUT_SECONDS)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(name="redis_server")
def redis_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = shutil.which("redis-server")
    if binary is None:
        if _in_ci():
            pytest.fail("redis-server is not installed (CI must run: apt-get install -y redis-server)")
        pytest.skip("redis-server is not installed")
    server = RedisServer(binary, tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop()
