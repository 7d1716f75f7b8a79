"""The session model: one agent session as the bundle carries it (SPEC §5). Pure values.

A :class:`Session` is parsed once at the boundary (:func:`parse_bundle`) from the JSON that
``brain extract`` prints; every text field goes through :func:`brain.core.redaction.redact`
again on the way in, so a hand-made bundle cannot smuggle a secret into an arc either.

Bundles written before the work fields existed (``files_read``, ``commands``, ``failures`` …)
stay readable: every field added later has an empty default.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from brain.core.redaction import redact
from brain.core.text import ERROR_NAME
from brain.core.timeutil import MAX_YEAR, MIN_YEAR, in_usable_years, iso, parse_instant

BUNDLE_VERSION = 1
SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_NAME_RE = re.compile(r"[^A-Za-z0-9_.:/@+-]")
_SOURCE_RE = re.compile(r"^[A-Za-z0-9._-]{1,40}:\d{1,9}$")

#: Work items kept per session in the bundle.
MAX_RANKED = 60
MAX_FAILURES = 20
MAX_FAILURE_NAMES = 8  # error names one failure's output adds to its signature's
MAX_IDENTIFIERS = 30
MAX_PROMPTS = 6
MAX_TODOS = 20
MAX_LESSONS = 20
ITEM_CHARS = 300
SESSION_TITLE_CHARS = 120

#: Satisfaction in a human prompt (``joy``). A prompt counts once however many words match.
_JOY = re.compile(
    r"(?<!not )(?<!n't )(?<!no )\b(?:thanks?(?: you| a lot| so much)?|thx|perfect|great|awesome|excellent"
    r"|amazing|brilliant|fantastic|wonderful|beautiful|nice(?: work| job| one)?|well done|good job|lgtm"
    r"|love it|it works|works now|working now|works great|that worked|nailed it|exactly what i wanted)\b"
    r"|\U0001f389|\U0001f64f|\U0001f44d|\u2764|\U0001f60d|\U0001f973|\U0001f680|\u2705",
    re.IGNORECASE,
)


def is_joyful(text: str) -> bool:
    """True when a human prompt expresses satisfaction (thanks, perfect, great, it works, 🎉 ...)."""
    return _JOY.search(text[:2000]) is not None


class BundleError(ValueError):
    """The bundle is not a session bundle at all (a bad entry is only a problem)."""


@dataclass(frozen=True)
class Failure:
    """An error a tool call hit: its signature (``ModuleNotFoundError: No module named 'x'``)."""

    text: str
    resolved: bool
    line: int = 0
    command: str = ""
    #: Every error name the output mentioned, beyond the signature's line (PowerShell's
    #: ``FullyQualifiedErrorId : NativeCommandError`` under a ``RemoteException``), in order.
    names: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text, "resolved": self.resolved, "line": self.line,
                               "command": self.command}
        if self.names:
            out["names"] = list(self.names)
        return out


@dataclass(frozen=True)
class Todo:
    """One item of the session's last TodoWrite / plan state."""

    status: str  # pending | in_progress | completed
    text: str

    def to_json(self) -> dict[str, str]:
        return {"status": self.status, "text": self.text}


@dataclass(frozen=True)
class Lesson:
    """A deterministic lesson or decision mined from the log, with its provenance."""

    kind: str  # lesson | decision
    text: str
    source: str  # <session id 8>:<line>
    date: str = ""  # YYYY-MM-DD

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "text": self.text, "source": self.source, "date": self.date}


@dataclass(frozen=True)
class Session:
    """One agent session as the bundle carries it (SPEC §5). Text fields are redacted."""

    session_id: str
    agent: str
    project: str
    cwd: str
    git_branch: str
    start: datetime
    end: datetime
    user_turns: int
    assistant_turns: int
    tool_calls: int
    top_tools: tuple[tuple[str, int], ...]
    files_touched: tuple[str, ...]
    first_prompt: str
    last_prompt: str
    errors: int
    joy: int
    compactions: int
    subagents: int
    skipped_lines: int = 0
    #: (repo-relative path, count), most edited / read first.
    files_edited: tuple[tuple[str, int], ...] = ()
    files_read: tuple[tuple[str, int], ...] = ()
    #: (program + subcommand, count), most used first.
    commands: tuple[tuple[str, int], ...] = ()
    failures: tuple[Failure, ...] = ()
    identifiers: tuple[str, ...] = ()
    #: The first human prompts, one line each (titles skip greetings and placeholders).
    prompts: tuple[str, ...] = ()
    #: Where the agent stopped: its last message, one line.
    last_state: str = ""
    todos: tuple[Todo, ...] = ()
    lessons: tuple[Lesson, ...] = ()
    #: A scripted run (``claude -p``, SDK, ``codex exec``), not an interactive session.
    headless: bool = False
    #: The session this one resumes (filled by the resume detection), "" when none.
    continues: str = ""
    #: The title the agent recorded for the session (the operator's own, else its generated one).
    title: str = ""

    @property
    def short_id(self) -> str:
        return self.session_id[:8]

    @property
    def open_failures(self) -> tuple[Failure, ...]:
        return tuple(f for f in self.failures if not f.resolved)

    @property
    def pending_todos(self) -> tuple[Todo, ...]:
        return tuple(t for t in self.todos if t.status != "completed")

    def to_json(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "agent": self.agent,
            "project": self.project,
            "cwd": self.cwd,
            "git_branch": self.git_branch,
            "start": iso(self.start),
            "end": iso(self.end),
            "user_turns": self.user_turns,
            "assistant_turns": self.assistant_turns,
            "tool_calls": self.tool_calls,
            "top_tools": dict(self.top_tools),
            "files_touched": list(self.files_touched),
            "first_prompt": self.first_prompt,
            "last_prompt": self.last_prompt,
            "errors": self.errors,
            "joy": self.joy,
            "compactions": self.compactions,
            "subagents": self.subagents,
            "skipped_lines": self.skipped_lines,
            "files_edited": dict(self.files_edited),
            "files_read": dict(self.files_read),
            "commands": dict(self.commands),
            "failures": [f.to_json() for f in self.failures],
            "identifiers": list(self.identifiers),
            "prompts": list(self.prompts),
            "last_state": self.last_state,
            "todos": [t.to_json() for t in self.todos],
            "lessons": [lesson.to_json() for lesson in self.lessons],
            "headless": self.headless,
            "continues": self.continues,
            "title": self.title,
        }

    @classmethod
    def from_json(cls, data: Any) -> Session:
        """Validate one bundle entry; raises ValueError naming the bad field."""
        if not isinstance(data, Mapping):
            raise ValueError("a session must be a JSON object")
        sid = data.get("session_id")
        if not isinstance(sid, str) or not SESSION_ID_RE.match(sid):
            raise ValueError(f"bad session_id {str(sid)[:60]!r}")
        start, end = parse_instant(data.get("start")), parse_instant(data.get("end"))
        if start is None or end is None:
            raise ValueError(f"session {sid}: start and end must be ISO-8601 times")
        for instant in (start, end):
            if not in_usable_years(instant):
                raise ValueError(f"session {sid}: {iso(instant)} is outside the years {MIN_YEAR}-{MAX_YEAR}")
        if end < start:
            start, end = end, start
        files = data.get("files_touched") or []
        continues = data.get("continues")
        return cls(
            session_id=sid,
            agent=_name(data.get("agent")) or "unknown",
            project=_text(data.get("project"), 200) or "unknown",
            cwd=_text(data.get("cwd"), 1000),
            git_branch=_text(data.get("git_branch"), 200),
            start=start,
            end=end,
            user_turns=_count(data.get("user_turns")),
            assistant_turns=_count(data.get("assistant_turns")),
            tool_calls=_count(data.get("tool_calls")),
            top_tools=tuple((_name(k), v) for k, v in _pairs(data.get("top_tools"), 200) if _name(k)),
            files_touched=tuple(_text(f, 500) for f in files if isinstance(f, str)) if isinstance(files, list) else (),
            first_prompt=_text(data.get("first_prompt"), 4000, multiline=True),
            last_prompt=_text(data.get("last_prompt"), 4000, multiline=True),
            errors=_count(data.get("errors")),
            joy=_count(data.get("joy")),
            compactions=_count(data.get("compactions")),
            subagents=_count(data.get("subagents")),
            skipped_lines=_count(data.get("skipped_lines")),
            files_edited=_ranked(data.get("files_edited"), 500),
            files_read=_ranked(data.get("files_read"), 500),
            commands=_ranked(data.get("commands"), 120),
            failures=tuple(_failures(data.get("failures"))),
            identifiers=_strings(data.get("identifiers"), MAX_IDENTIFIERS, 120),
            prompts=_strings(data.get("prompts"), MAX_PROMPTS, ITEM_CHARS),
            last_state=_text(data.get("last_state"), ITEM_CHARS),
            todos=tuple(_todos(data.get("todos"))),
            lessons=tuple(_lessons(data.get("lessons"))),
            headless=data.get("headless") is True,
            continues=continues if isinstance(continues, str) and SESSION_ID_RE.match(continues) else "",
            title=_text(data.get("title"), SESSION_TITLE_CHARS),
        )


def _count(value: Any) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, float) and value == value:
        return max(0, int(value))
    return 0


def _text(value: Any, limit: int, *, multiline: bool = False) -> str:
    if not isinstance(value, str):
        return ""
    text = redact(value[: limit * 2])
    if not multiline:
        text = " ".join(text.split())
    return text[:limit]


def _name(value: Any) -> str:
    """A tool or agent name safe for a Timeline line."""
    if not isinstance(value, str):
        return ""
    return _NAME_RE.sub("", redact(value[:200]))[:60]


def _pairs(raw: Any, limit: int) -> list[tuple[str, int]]:
    """``{name: count}`` or ``[[name, count], …]`` as pairs (at most ``limit``)."""
    pairs: list[tuple[str, int]] = []
    if isinstance(raw, Mapping):
        pairs = [(str(k), _count(v)) for k, v in list(raw.items())[:limit]]
    elif isinstance(raw, list):
        for item in raw[:limit]:
            if isinstance(item, list | tuple) and len(item) == 2:
                pairs.append((str(item[0]), _count(item[1])))
    return pairs


def _ranked(raw: Any, chars: int) -> tuple[tuple[str, int], ...]:
    seen: dict[str, int] = {}
    for key, count in _pairs(raw, MAX_RANKED):
        text = _text(key, chars)
        if text and text not in seen:
            seen[text] = max(1, count)
    return tuple(sorted(seen.items(), key=lambda item: -item[1]))


def _strings(raw: Any, limit: int, chars: int) -> tuple[str, ...]:
    if not isinstance(raw, list):
        return ()
    out: list[str] = []
    for item in raw:
        text = _text(item, chars)
        if text and text not in out:
            out.append(text)
        if len(out) >= limit:
            break
    return tuple(out)


def _failures(raw: Any) -> list[Failure]:
    out: list[Failure] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, Mapping) and _text(item.get("text"), ITEM_CHARS):
            out.append(Failure(_text(item.get("text"), ITEM_CHARS), item.get("resolved") is True,
                               _count(item.get("line")), _text(item.get("command"), 120),
                               tuple(n for n in _strings(item.get("names"), MAX_FAILURE_NAMES, 80)
                                     if ERROR_NAME.fullmatch(n))))
        if len(out) >= MAX_FAILURES:
            break
    return out


def _todos(raw: Any) -> list[Todo]:
    out: list[Todo] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, Mapping) and _text(item.get("text"), ITEM_CHARS):
            status = item.get("status")
            out.append(Todo(status if status in ("pending", "in_progress", "completed") else "pending",
                            _text(item.get("text"), ITEM_CHARS)))
        if len(out) >= MAX_TODOS:
            break
    return out


def _lessons(raw: Any) -> list[Lesson]:
    out: list[Lesson] = []
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, Mapping):
            continue
        kind, source, date = item.get("kind"), item.get("source"), item.get("date")
        text = _text(item.get("text"), ITEM_CHARS)
        if kind not in ("lesson", "decision") or not text or not isinstance(source, str) or not _SOURCE_RE.match(source):
            continue
        day = date if isinstance(date, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) else ""
        out.append(Lesson(kind, text, source, day))
        if len(out) >= MAX_LESSONS:
            break
    return out


def parse_bundle(data: Any) -> tuple[list[Session], list[str]]:
    """The sessions of a bundle and a problem line per entry that was left out."""
    if not isinstance(data, Mapping) or not isinstance(data.get("sessions"), list):
        raise BundleError("not a session bundle: expected a JSON object with a 'sessions' list")
    version = data.get("version", BUNDLE_VERSION)
    if version != BUNDLE_VERSION:
        raise BundleError(f"bundle version {version!r} is not supported (expected {BUNDLE_VERSION})")
    sessions: dict[str, Session] = {}
    problems: list[str] = []
    for index, entry in enumerate(data["sessions"]):
        try:
            session = Session.from_json(entry)
        except ValueError as exc:
            problems.append(f"sessions[{index}]: {exc}; left out")
            continue
        known = sessions.get(session.session_id)
        # The same session twice (two log copies): keep the fuller one.
        if known is None or (session.end, session.user_turns) > (known.end, known.user_turns):
            sessions[session.session_id] = session
    return sorted(sessions.values(), key=lambda s: (s.start, s.session_id)), problems
