"""Phase 0, part 1: session logs -> the JSON session bundle (SPEC §5).

``extract`` lists and stats every transcript, opens only those modified since the window
start, streams them into :class:`~brain.core.session.Session` values, keeps the
sessions that overlap the window and pass the filters, and returns a :class:`Bundle`.
Every string in the bundle has been through :func:`brain.core.redaction.redact`.

A session is in the window when it overlaps ``[since, until]`` (its end is at or after
``since`` and its start at or before ``until``). With an explicit ``--until T`` no record
stamped after T gets through: a session still running at T is cut at T (its records after T
are dropped, its end is at most T); formats whose reader cannot cut leave such a session out.
``--project`` matches a case-insensitive substring of the project name or the cwd;
``--min-turns`` counts human turns.

With a cursor (``--vault V`` keeps it in ``V/.brain/extract-cursor.json``, or ``--cursor
FILE``) only log files changed since the last committed run are opened; see
:mod:`brain.io.sessions.incremental` for how the cursor is committed by ``brain cluster``.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from brain.core.redaction import redact_obj
from brain.core.session import BUNDLE_VERSION, Session
from brain.core.timeutil import TimeParseError, iso, parse_point
from brain.io.sessions import AGENTS, READERS, Progress, ReadStats, time_key
from brain.io.sessions.incremental import CURSOR_NAME, Cursor
from brain.settings import Settings

AGENT_CHOICES = (*AGENTS, "all")


class ExtractError(ValueError):
    """A bad extraction request (bad window, unknown agent): a usage error."""


@dataclass(frozen=True)
class Bundle:
    generated: datetime
    since: datetime
    until: datetime
    agents: tuple[str, ...]
    filters: dict[str, Any]
    sessions: tuple[Session, ...]
    stats: dict[str, int]
    warnings: tuple[str, ...] = ()
    #: ``{"file": <cursor path>, "token": <pending token>}`` for ``brain cluster`` to commit.
    cursor: dict[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "version": BUNDLE_VERSION,
            "generated": iso(self.generated),
            "since": iso(self.since),
            "until": iso(self.until),
            "agents": list(self.agents),
            "filters": self.filters,
            "sessions": [s.to_json() for s in self.sessions],
            "stats": self.stats,
            "warnings": list(self.warnings),
        }
        if self.cursor is not None:
            data["cursor"] = dict(self.cursor)
        redacted: dict[str, Any] = redact_obj(data)  # belt and braces: the readers redact already
        return redacted

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"


@dataclass
class _Filter:
    since: datetime
    until: datetime
    project: str | None
    min_turns: int
    counts: dict[str, int] = field(default_factory=lambda: {
        "sessions_found": 0, "outside_window": 0, "other_projects": 0, "below_min_turns": 0, "running_at_until": 0,
    })

    def keep(self, session: Session) -> bool:
        self.counts["sessions_found"] += 1
        if session.end < self.since or session.start > self.until:
            self.counts["outside_window"] += 1
            return False
        if self.project and self.project not in session.project.lower() and self.project not in session.cwd.lower():
            self.counts["other_projects"] += 1
            return False
        if session.user_turns < self.min_turns:
            self.counts["below_min_turns"] += 1
            return False
        return True


def window(settings: Settings, now: datetime, since: str | None, until: str | None) -> tuple[datetime, datetime]:
    try:
        start = parse_point(since or settings.since, now, what="--since")
        end = parse_point(until, now, what="--until") if until else now
    except TimeParseError as exc:
        raise ExtractError(str(exc)) from None
    if end < start:
        raise ExtractError(f"--until ({iso(end)}) is before --since ({iso(start)})")
    return start, end


def extract(
    settings: Settings,
    now: datetime,
    *,
    agent: str = "all",
    since: str | None = None,
    until: str | None = None,
    project: str | None = None,
    min_turns: int | None = None,
    progress: Progress | None = None,
    cursor: Path | None = None,
) -> Bundle:
    """Read the session logs named by ``settings`` and return the bundle of the window.

    ``cursor``: the cursor file; only logs changed since its last committed run are read.
    """
    if agent not in AGENT_CHOICES:
        raise ExtractError(f"--agent must be one of {', '.join(AGENT_CHOICES)}, not {agent!r}")
    turns = settings.min_turns if min_turns is None else min_turns
    if turns < 0:
        raise ExtractError("--min-turns must be 0 or more")
    start, end = window(settings, now, since, until)
    agents = AGENTS if agent == "all" else (agent,)
    stats = ReadStats()
    warnings: list[str] = []
    since_ts = start.timestamp()
    until_key = time_key(iso(end)) if until else None
    position = Cursor.load(cursor) if cursor is not None else None
    if position is not None and until:
        position.until_ts = end.timestamp()

    plans: list[tuple[Any, Any]] = []  # (reader, its plan), in registry order
    defaults = Settings()
    for name in agents:
        reader = READERS[name]
        folder: Path = getattr(settings, reader.setting).expanduser()
        if folder.is_dir():
            with_cursor = {"cursor": position} if position is not None and _accepts(reader.plan, "cursor") else {}
            plans.append((reader, reader.plan(folder, since_ts, stats, **with_cursor)))
        elif agent != "all" or getattr(settings, reader.setting) != getattr(defaults, reader.setting):
            warnings.append(f"{reader.label} not found: {folder}")  # an agent not in use is no warning

    total = sum(reader.units(found) for reader, found in plans)
    keep = _Filter(start, end, project.lower() if project else None, turns)
    sessions: dict[tuple[str, str], Session] = {}

    def collect(found: Iterator[Session], cuts: bool) -> None:
        for session in found:
            if until_key is not None and not cuts and session.end > end:
                keep.counts["running_at_until"] += 1  # this format cannot cut a session at T
                continue
            if not keep.keep(session):
                continue
            key = (session.agent, session.session_id)
            known = sessions.get(key)
            if known is None or (session.end, session.user_turns) > (known.end, known.user_turns):
                sessions[key] = session

    done = 0
    for reader, found in plans:
        cuts = _accepts(reader.read, "until")
        extra: dict[str, Any] = {"until": until_key} if cuts else {}
        if position is not None and _accepts(reader.read, "cursor"):
            extra["cursor"] = position
        collect(reader.read(found, stats, progress, done, total, **extra), cuts)
        done += reader.units(found)
    warnings.extend(stats.problems)
    token = position.write_pending() if position is not None and cursor is not None else None

    ordered = tuple(sorted(sessions.values(), key=lambda s: (s.start, s.agent, s.session_id)))
    figures = stats.as_dict()
    figures.update(keep.counts)
    figures["sessions"] = len(ordered)
    if position is not None:
        figures["files_unchanged_since_cursor"] = position.unchanged
    filters = {"agent": agent, "project": project, "min_turns": turns}
    mark = {"file": str(cursor), "token": token} if cursor is not None and token else None
    return Bundle(now, start, end, tuple(agents), filters, ordered, figures, tuple(warnings), mark)


def _accepts(function: Any, name: str) -> bool:
    """True when a reader's function takes the keyword ``name`` (cut at --until, cursor)."""
    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def vault_cursor(vault: Path) -> Path:
    """Where ``brain extract --vault V`` keeps its cursor."""
    return vault / ".brain" / CURSOR_NAME

