"""A tiny hand-made log set for the ``brain eval feed`` tests, with the right answers worked out by hand.

Two projects, five Claude Code sessions (times UTC):

    S1 alpha 01-01 10:00-10:30  reads/edits src/converter.py, `uv run pytest` fails with ValueError
    S3 beta  01-01 12:00-12:10  `mix phx.server` fails with UndefinedFunctionError
    S2 alpha 01-02 09:00-09:20  converter.py again, parse_header, `npm run build`, ECONNREFUSED
    S5 beta  01-03 07:50-09:00  still running when S4 starts (the leak rule)
    S4 beta  01-03 08:00-08:30  `mix phx.server` again, UndefinedFunctionError again, router.ex
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ALPHA = "/work/alpha"
BETA = "/work/beta"
S1 = "11111111-1111-4111-8111-111111111111"
S2 = "22222222-2222-4222-8222-222222222222"
S3 = "33333333-3333-4333-8333-333333333333"
S4 = "44444444-4444-4444-8444-444444444444"
S5 = "55555555-5555-4555-8555-555555555555"

S1_PROMPT = "Fix the parser in `converter.py` so that the header tests pass again, see parse_header"


class SessionLog:
    """Records of one session, in order, each a second after the previous one."""

    def __init__(self, session_id: str, cwd: str, start: str) -> None:
        self.session_id, self.cwd = session_id, cwd
        self.day, clock = start.split("T")
        hours, minutes = clock.rstrip("Z").split(":")[:2]
        self.seconds = int(hours) * 3600 + int(minutes) * 60
        self.records: list[dict[str, Any]] = []
        self.calls = 0

    def _stamp(self) -> str:
        s = self.seconds
        self.seconds += 1
        return f"{self.day}T{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}.000Z"

    def _record(self, kind: str, message: dict[str, Any], **extra: Any) -> None:
        self.records.append({
            "type": kind, "uuid": f"{self.session_id[:8]}-{len(self.records)}", "sessionId": self.session_id,
            "cwd": self.cwd, "timestamp": self._stamp(), "version": "2.1.38", "message": message, **extra,
        })

    def prompt(self, text: str) -> SessionLog:
        self._record("user", {"role": "user", "content": text})
        self._record("assistant", {"role": "assistant", "content": [{"type": "text", "text": "On it."}]})
        return self

    def tool(self, name: str, tool_input: dict[str, Any], result: str = "ok", *, error: bool = False) -> SessionLog:
        self.calls += 1
        call_id = f"toolu_{self.session_id[:4]}{self.calls:03d}"
        self._record("assistant", {"role": "assistant", "content": [
            {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}]})
        self._record("user", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call_id, "content": result, "is_error": error}]})
        return self

    def at(self, clock: str) -> SessionLog:
        """Move the clock to ``HH:MM`` (the session's last records)."""
        hours, minutes = clock.split(":")
        self.seconds = int(hours) * 3600 + int(minutes) * 60
        return self

    def write(self, projects: Path) -> Path:
        folder = projects / self.cwd.replace("/", "-")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.session_id}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in self.records), encoding="utf-8")
        return path


def write_logs(projects: Path) -> dict[str, Path]:
    """The five sessions under ``projects`` (a Claude Code projects folder); their paths by id."""
    s1 = (SessionLog(S1, ALPHA, "2026-01-01T10:00").prompt(S1_PROMPT)
          .tool("Read", {"file_path": f"{ALPHA}/src/converter.py"})
          .tool("Bash", {"command": "uv run pytest tests/test_converter.py -q"},
                "Exit code 1\nTraceback (most recent call last):\nValueError: bad header", error=True)
          .tool("Edit", {"file_path": f"{ALPHA}/src/converter.py", "old_string": "a", "new_string": "b"})
          .tool("Bash", {"command": "git status && ls -la"})
          .at("10:30").prompt("thanks, that works"))
    s3 = (SessionLog(S3, BETA, "2026-01-01T12:00").prompt("start the server with mix phx.server")
          .tool("Bash", {"command": "mix phx.server"},
                "** (UndefinedFunctionError) function Beta.Endpoint.start/0 is undefined", error=True)
          .at("12:10").prompt("ok leave it"))
    s2 = (SessionLog(S2, ALPHA, "2026-01-02T09:00")
          .prompt("The converter still fails on parse_header, and the api says ECONNREFUSED")
          .tool("Read", {"file_path": f"{ALPHA}/src/converter.py"})
          .tool("Read", {"file_path": f"{ALPHA}/README.md"})
          .tool("Bash", {"command": "npm run build"}, "Error: connect ECONNREFUSED 127.0.0.1:5432", error=True)
          .at("09:20").prompt("good enough"))
    s5 = (SessionLog(S5, BETA, "2026-01-03T07:50").prompt("run the long `deploy_beta` job")
          .tool("Bash", {"command": "make deploy"})
          .at("09:00").prompt("and again with mix phx.server")
          .tool("Bash", {"command": "mix phx.server"}))
    s4 = (SessionLog(S4, BETA, "2026-01-03T08:00").prompt("mix phx.server crashes again, look at lib/beta/router.ex")
          .tool("Bash", {"command": "mix phx.server"},
                "** (UndefinedFunctionError) function Beta.Router.call/2 is undefined", error=True)
          .tool("Read", {"file_path": f"{BETA}/lib/beta/router.ex"})
          .at("08:30").prompt("fine"))
    return {log.session_id: log.write(projects) for log in (s1, s2, s3, s4, s5)}
