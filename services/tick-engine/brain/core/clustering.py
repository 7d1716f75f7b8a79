"""Sessions -> arcs (SPEC §4, §5). Pure: values in, values out; time is a parameter.

Grouping is deterministic. Sessions are handled in (start, session id) order:

1. A session already listed in an arc's ``source_sessions`` updates that arc. When only a
   tombstone lists it, the ``merged_into`` chain is followed; a session that only a
   ``split`` tombstone lists is left alone (it was handed to the split parts).
2. Any other session joins an open arc (status ``active``, ``stalled`` or unset) of the
   same project when it starts at most ``cluster_gap_minutes`` after the arc's
   ``last_active`` (or overlaps it) and the arc would still span at most
   ``cluster_max_span_hours``; arcs created earlier in the same run count too. Among
   several candidates the one active last wins.
3. Otherwise it starts a new arc.

A new arc's ``cluster_id`` is ``<date of the first start>-<slug of the title, <= 40
chars>-<first 12 hex of sha1 of the sorted session ids joined by "\\n">`` and never changes
afterwards, whatever sessions join later. Its title is the first line of the first human
prompt, cut to about 70 characters on a word boundary.

Initial figures of a new arc (the keeper and the AI layer own them afterwards):

- ``region``: ``amygdala`` when errors are at least 5 and a quarter of the tool calls;
  ``pineal`` when at least 2 prompts, and half of them, express joy; ``right-hemisphere``
  for conversation without tools (no tool calls, or no file edited and fewer tool calls
  than prompts); ``left-hemisphere`` otherwise.
- ``status``: ``active`` when the last session ended within 72 h of ``now``; older arcs are
  ``complete`` when their last prompt expressed joy, ``stalled`` otherwise.
- ``heat``: the keeper's formula (:func:`brain.core.heat.compute`) on these figures.

Updating an arc touches only what extraction knows: ``source_sessions`` (new ids
appended), ``activity``, ``last_active`` (only later), ``created`` (only earlier),
``agents`` (new agents appended), and ``status`` from ``stalled`` to ``active`` when a new
session joins. In the body, each session owns one Timeline line ending in a
``<!-- brain:session … -->`` comment that records its figures; a session that grew since
rewrites its own line, a new session appends one (and one under ``## Source sessions``).
No other byte of the arc changes, so the same bundle twice changes nothing, and the
activity stays exact across the daily 26 h windows: a session's old figures (from its
comment) are replaced by its new ones, never added twice.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from brain.core import frontmatter
from brain.core.heat import HeatInputs, compute
from brain.core.model import ArcInfo
from brain.core.redaction import redact
from brain.core.sections import append_to_section
from brain.core.timeutil import date_in_text, iso, parse_instant
from brain.settings import Settings

BUNDLE_VERSION = 1
TITLE_CHARS = 70
SLUG_CHARS = 40
#: An arc whose last session ended within this many hours of ``now`` starts ``active``.
ACTIVE_HOURS = 72
JOINABLE_STATUSES = frozenset({"active", "stalled", ""})

SESSION_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_NAME_RE = re.compile(r"[^A-Za-z0-9_.:/@+-]")


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


# ----------------------------------------------------------------------------- sessions


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
        if end < start:
            start, end = end, start
        tools_raw = data.get("top_tools") or {}
        pairs: list[tuple[str, int]] = []
        if isinstance(tools_raw, Mapping):
            pairs = [(str(k), _count(v)) for k, v in tools_raw.items()]
        elif isinstance(tools_raw, list):
            for item in tools_raw:
                if isinstance(item, list | tuple) and len(item) == 2:
                    pairs.append((str(item[0]), _count(item[1])))
        files = data.get("files_touched") or []
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
            top_tools=tuple((_name(k), v) for k, v in pairs if _name(k)),
            files_touched=tuple(_text(f, 500) for f in files if isinstance(f, str)) if isinstance(files, list) else (),
            first_prompt=_text(data.get("first_prompt"), 4000, multiline=True),
            last_prompt=_text(data.get("last_prompt"), 4000, multiline=True),
            errors=_count(data.get("errors")),
            joy=_count(data.get("joy")),
            compactions=_count(data.get("compactions")),
            subagents=_count(data.get("subagents")),
            skipped_lines=_count(data.get("skipped_lines")),
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


# ----------------------------------------------------------------------------- naming


def slug(text: str, limit: int = SLUG_CHARS) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    value = re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")
    value = value[:limit].strip("-")
    return value or "arc"


def cluster_id(first_start: datetime, title: str, session_ids: Iterable[str]) -> str:
    digest = hashlib.sha1("\n".join(sorted(session_ids)).encode("utf-8"), usedforsecurity=False).hexdigest()
    return f"{iso(first_start)[:10]}-{slug(title)}-{digest[:12]}"


_LEAD_MARKUP = re.compile(r"^(?:#{1,6}\s+|>\s*|[-*+]\s+|\d+[.)]\s+)+")


def title_from_prompt(prompt: str, fallback: str) -> str:
    for raw in prompt.splitlines():
        line = " ".join(_LEAD_MARKUP.sub("", raw.strip()).split())
        if line:
            break
    else:
        return fallback
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS]
    space = cut.rfind(" ", TITLE_CHARS // 2)
    return (cut[:space] if space > 0 else cut).rstrip(" ,.;:-") + "…"


def neutral(text: str) -> str:
    """Log text made inert in an arc body: it can never open a marker or a comment."""
    return text.replace("<!--", "&lt;!--").replace("-->", "--&gt;")


# ----------------------------------------------------------------------------- assignment


@dataclass(frozen=True)
class ExistingArc:
    path: str
    info: ArcInfo


@dataclass
class _Group:
    project: str
    start: datetime
    end: datetime
    arc: ExistingArc | None = None
    sessions: list[Session] = field(default_factory=list)
    joined: list[str] = field(default_factory=list)  # session ids new to an existing arc
    order: int = 0

    def fits(self, session: Session, gap: timedelta, span: timedelta) -> bool:
        if session.start > self.end + gap or session.end < self.start - gap:
            return False
        return max(self.end, session.end) - min(self.start, session.start) <= span

    def take(self, session: Session, *, joined: bool) -> None:
        self.sessions.append(session)
        self.start = min(self.start, session.start)
        self.end = max(self.end, session.end)
        if joined:
            self.joined.append(session.session_id)


@dataclass(frozen=True)
class NewArc:
    sessions: tuple[Session, ...]


@dataclass(frozen=True)
class ArcUpdate:
    arc: ExistingArc
    sessions: tuple[Session, ...]  # every bundle session of this arc
    joined: tuple[str, ...]  # ids not yet in its source_sessions


@dataclass
class Assignment:
    new: list[NewArc] = field(default_factory=list)
    updates: list[ArcUpdate] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _arc_range(info: ArcInfo) -> tuple[datetime, datetime] | None:
    created = parse_instant(info.created) or date_in_text(info.cluster_id)
    last = parse_instant(info.last_active) or created
    if created is None or last is None:
        return None
    return min(created, last), max(created, last)


def assign(sessions: list[Session], arcs: list[ExistingArc], settings: Settings) -> Assignment:
    """Decide, for every session, the arc it updates, joins or starts (see the module doc)."""
    out = Assignment()
    gap = timedelta(minutes=settings.cluster_gap_minutes)
    span = timedelta(hours=settings.cluster_max_span_hours)
    ordered_arcs = sorted(arcs, key=lambda a: a.path)
    by_id: dict[str, ExistingArc] = {}
    for arc in ordered_arcs:
        by_id.setdefault(arc.info.cluster_id, arc)
    owner: dict[str, ExistingArc] = {}
    tomb_owner: dict[str, ExistingArc] = {}
    for arc in ordered_arcs:
        target = tomb_owner if arc.info.is_tombstone else owner
        for sid in arc.info.source_sessions:
            target.setdefault(sid, arc)

    groups: dict[str, _Group] = {}  # arc path -> group
    open_by_project: dict[str, list[_Group]] = {}
    counter = 0

    def group_of(arc: ExistingArc) -> _Group | None:
        nonlocal counter
        if arc.path not in groups:
            found = _arc_range(arc.info)
            if found is None:
                return None
            counter += 1
            groups[arc.path] = _Group(arc.info.project or "", found[0], found[1], arc, order=counter)
        return groups[arc.path]

    for arc in ordered_arcs:
        if not arc.info.is_tombstone and arc.info.status in JOINABLE_STATUSES and arc.info.project:
            group = group_of(arc)
            if group is not None:
                open_by_project.setdefault(arc.info.project, []).append(group)

    new_groups: list[_Group] = []
    for session in sessions:
        home = owner.get(session.session_id) or _follow(tomb_owner.get(session.session_id), by_id)
        if home is None and session.session_id in tomb_owner:
            out.problems.append(f"session {session.session_id}: only a split tombstone lists it; left alone")
            continue
        if home is not None:
            group = group_of(home)
            if group is None:
                group = _Group(home.info.project or "", session.start, session.end, home, order=0)
                groups[home.path] = group
            listed = session.session_id in home.info.source_sessions
            group.take(session, joined=not listed)
            continue
        candidates = [g for g in open_by_project.get(session.project, []) if g.fits(session, gap, span)]
        if candidates:
            best = max(candidates, key=lambda g: (g.end, g.arc is not None, -g.order))
            best.take(session, joined=best.arc is not None)
            continue
        counter += 1
        group = _Group(session.project, session.start, session.end, None, order=counter)
        group.take(session, joined=False)
        new_groups.append(group)
        open_by_project.setdefault(session.project, []).append(group)

    for group in sorted(groups.values(), key=lambda g: g.arc.path if g.arc else ""):
        if group.arc is not None and group.sessions:
            out.updates.append(ArcUpdate(group.arc, tuple(group.sessions), tuple(group.joined)))
    out.new = [NewArc(tuple(g.sessions)) for g in new_groups]
    return out


def _follow(arc: ExistingArc | None, by_id: dict[str, ExistingArc]) -> ExistingArc | None:
    """A merged tombstone's live successor (a split tombstone has none)."""
    hops = 0
    while arc is not None and arc.info.is_tombstone and hops < 8:
        target = arc.info.merged_into
        arc = by_id.get(target) if target else None
        hops += 1
    if arc is None or arc.info.is_tombstone:
        return None
    return arc


# ----------------------------------------------------------------------------- rendering


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _when(start: datetime, end: datetime) -> str:
    a, b = iso(start), iso(end)
    if a[:10] == b[:10]:
        return f"{a[:10]} {a[11:16]} → {b[11:16]} UTC"
    return f"{a[:10]} {a[11:16]} → {b[:10]} {b[11:16]} UTC"


def session_figures(session: Session) -> dict[str, int]:
    return {
        "turns": session.user_turns,
        "tools": session.tool_calls,
        "errors": session.errors,
        "joy": session.joy,
        "compactions": session.compactions,
    }


def timeline_line(session: Session) -> str:
    """One Timeline line; the trailing comment records the figures this arc counted."""
    parts = [_when(session.start, session.end), session.agent, _plural(session.user_turns, "turn")]
    tools = _plural(session.tool_calls, "tool call")
    if session.top_tools:
        tools += " (" + ", ".join(f"{name} {count}" for name, count in session.top_tools[:4]) + ")"
    parts.append(tools)
    if session.errors:
        parts.append(_plural(session.errors, "error"))
    if session.compactions:
        parts.append(_plural(session.compactions, "compaction"))
    if session.subagents:
        parts.append(_plural(session.subagents, "subagent"))
    figures = " ".join(f"{k}={v}" for k, v in session_figures(session).items())
    return f"- {' · '.join(parts)} <!-- brain:session id={session.session_id} end={iso(session.end)} {figures} -->"


def source_line(session: Session) -> str:
    branch = f" · branch `{neutral(session.git_branch)}`" if session.git_branch and "`" not in session.git_branch else ""
    return f"- `{session.session_id}` · {session.agent} · {neutral(session.project)}{branch}"


def _quote(prompt: str) -> str:
    lines = [line.rstrip() for line in neutral(prompt).splitlines()] or [""]
    return "\n".join(f"> {line}" if line else ">" for line in lines)


@dataclass(frozen=True)
class RenderedArc:
    cluster_id: str
    title: str
    text: str
    sessions: tuple[str, ...]


def _activity(sessions: Iterable[Session], count: int) -> dict[str, int]:
    items = list(sessions)
    return {
        "sessions": count,
        "user_turns": sum(s.user_turns for s in items),
        "tool_calls": sum(s.tool_calls for s in items),
        "errors": sum(s.errors for s in items),
        "joy": sum(s.joy for s in items),
        "compactions": sum(s.compactions for s in items),
    }


def initial_region(activity: Mapping[str, int], sessions: Iterable[Session]) -> str:
    items = list(sessions)
    tools, errors, turns, joy = activity["tool_calls"], activity["errors"], activity["user_turns"], activity["joy"]
    files = sum(len(s.files_touched) for s in items)
    if errors >= 5 and errors * 4 >= tools:
        return "amygdala"
    if joy >= 2 and joy * 2 >= turns:
        return "pineal"
    if tools == 0 or (files == 0 and tools < turns):
        return "right-hemisphere"
    return "left-hemisphere"


def initial_status(last: Session, now: datetime) -> str:
    if now - last.end <= timedelta(hours=ACTIVE_HOURS):
        return "active"
    return "complete" if last.last_prompt and is_joyful(last.last_prompt) else "stalled"


def render_new_arc(group: NewArc, now: datetime, settings: Settings) -> RenderedArc:
    sessions = sorted(group.sessions, key=lambda s: (s.start, s.session_id))
    first, last = sessions[0], max(sessions, key=lambda s: (s.end, s.session_id))
    prompt_session = next((s for s in sessions if s.first_prompt.strip()), None)
    project = first.project
    fallback = f"{project} session"
    title = neutral(title_from_prompt(prompt_session.first_prompt, fallback) if prompt_session else fallback)
    ids = [s.session_id for s in sessions]
    cid = cluster_id(first.start, title, ids)
    activity = _activity(sessions, len(sessions))
    status = initial_status(last, now)
    heat = compute(
        HeatInputs(
            last_active=last.end,
            sessions=len(sessions),
            tool_calls=activity["tool_calls"],
            status=status,
            joy=activity["joy"],
            open_alarm=False,
            hot_floor=None,
        ),
        now,
        settings,
    )
    agents: list[str] = []
    for s in sessions:
        if s.agent not in agents:
            agents.append(s.agent)
    meta: dict[str, Any] = {
        "cluster_id": cid,
        "title": title,
        "region": initial_region(activity, sessions),
        "status": status,
        "heat": heat,
        "created": iso(first.start),
        "last_active": iso(last.end),
        "project": project,
        "agents": agents,
        "source_sessions": ids,
        "activity": activity,
        "synthesized": False,
    }
    ignition = _quote(prompt_session.first_prompt) if prompt_session else "> (no human prompt recorded)"
    body = "\n".join(
        [
            f"# {title}",
            "",
            "## Ignition",
            "",
            ignition,
            "",
            "## Timeline",
            "",
            *(timeline_line(s) for s in sessions),
            "",
            "## Lessons",
            "",
            "## Resolution",
            "",
            "## Edges",
            "",
            "## Source sessions",
            "",
            *(source_line(s) for s in sessions),
            "",
        ]
    )
    text = f"---\n{frontmatter.dump(meta)}---\n{body}"
    return RenderedArc(cid, title, text, tuple(ids))


# ----------------------------------------------------------------------------- updating

_SESSION_COMMENT = re.compile(r"<!-- brain:session ((?:[a-z_]+=\S+ ?)+)-->")
_FIGURE_KEYS = ("turns", "tools", "errors", "joy", "compactions")


def recorded_sessions(body: str) -> dict[str, tuple[int, dict[str, str]]]:
    """session id -> (line index, recorded attributes) for every Timeline comment in ``body``."""
    found: dict[str, tuple[int, dict[str, str]]] = {}
    if "brain:session" not in body:
        return found
    for index, line in enumerate(body.split("\n")):
        match = _SESSION_COMMENT.search(line)
        if not match:
            continue
        attrs = dict(pair.split("=", 1) for pair in match.group(1).split())
        sid = attrs.get("id")
        if sid and sid not in found:
            found[sid] = (index, attrs)
    return found


def _append_to_section(lines: list[str], heading: str, new_lines: list[str]) -> list[str]:
    """``lines`` with ``new_lines`` added at the end of section ``## heading`` (created if absent)."""
    if not new_lines:
        return lines
    return append_to_section("\n".join(lines), heading, new_lines).split("\n")


def _later(old: str | None, new: datetime) -> str | None:
    """The ISO text to write when ``new`` is later than ``old`` (None: keep ``old``)."""
    parsed = parse_instant(old)
    if parsed is None or new > parsed:
        return iso(new)
    return None


def _earlier(old: str | None, new: datetime) -> str | None:
    parsed = parse_instant(old)
    if parsed is None or new < parsed:
        return iso(new)
    return None


def update_arc_text(text: str, update: ArcUpdate) -> str:
    """``text`` of an existing arc with the bundle's sessions folded in (unchanged if nothing new)."""
    document = frontmatter.split(text)
    if document.frontmatter is None:
        return text
    meta = frontmatter.load(document.frontmatter)
    info = update.arc.info
    newline = document.newline
    body = document.body.replace("\r\n", "\n") if newline == "\r\n" else document.body
    lines = body.split("\n")
    recorded = recorded_sessions(body)

    sources = list(info.source_sessions)
    listed = set(sources)
    deltas = dict.fromkeys(_FIGURE_KEYS, 0)
    timeline_new: list[str] = []
    source_new: list[str] = []
    for session in sorted(update.sessions, key=lambda s: (s.start, s.session_id)):
        figures = session_figures(session)
        known = recorded.get(session.session_id)
        if known is not None:
            index, attrs = known
            old = {k: _int(attrs.get(k)) for k in _FIGURE_KEYS}
            if old != figures or attrs.get("end") != iso(session.end):
                for key in _FIGURE_KEYS:
                    deltas[key] += figures[key] - old[key]
                lines[index] = timeline_line(session)
        else:
            if session.session_id not in listed:
                for key in _FIGURE_KEYS:
                    deltas[key] += figures[key]
            # A listed session without a line (older layouts, split parts): its figures are
            # taken as already counted; the line records them from now on.
            timeline_new.append(timeline_line(session))
        if session.session_id not in listed:
            sources.append(session.session_id)
            listed.add(session.session_id)
            source_new.append(source_line(session))

    lines = _append_to_section(lines, "Timeline", timeline_new)
    lines = _append_to_section(lines, "Source sessions", source_new)
    new_body = "\n".join(lines)
    if newline == "\r\n":
        new_body = new_body.replace("\n", "\r\n")

    updates: dict[str, Any] = {}
    if sources != list(info.source_sessions) or not isinstance(meta.get("source_sessions"), list):
        updates["source_sessions"] = sources
    activity_old = meta.get("activity") if isinstance(meta.get("activity"), dict) else None
    base = {
        "sessions": info.activity.sessions,
        "user_turns": info.activity.user_turns,
        "tool_calls": info.activity.tool_calls,
        "errors": info.activity.errors,
        "joy": info.activity.joy,
        "compactions": info.activity.compactions,
    }
    activity = dict(activity_old) if activity_old is not None else {}
    for key, value in base.items():
        activity.setdefault(key, value)
    activity["sessions"] = len(sources)
    for key, field_name in zip(_FIGURE_KEYS, ("user_turns", "tool_calls", "errors", "joy", "compactions"), strict=True):
        activity[field_name] = max(0, _int(activity.get(field_name)) + deltas[key])
    if activity_old is None or activity != activity_old:
        updates["activity"] = activity
    last_end = max(s.end for s in update.sessions)
    first_start = min(s.start for s in update.sessions)
    later = _later(info.last_active, last_end)
    if later is not None:
        updates["last_active"] = later
    earlier = _earlier(info.created, first_start)
    if earlier is not None and info.created is not None:
        updates["created"] = earlier
    agents = list(info.agents)
    for session in update.sessions:
        if session.agent not in agents:
            agents.append(session.agent)
    if agents != list(info.agents):
        updates["agents"] = agents
    if update.joined and info.status == "stalled":
        updates["status"] = "active"
    new_fm = frontmatter.set_keys(document.frontmatter, updates) if updates else document.frontmatter
    if new_fm == document.frontmatter and new_body == document.body:
        return text
    return f"---{newline}{new_fm}---{newline}{new_body}"


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return 0
