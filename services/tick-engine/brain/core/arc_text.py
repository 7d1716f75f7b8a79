"""Arc text: the markdown of a new arc and the edits that fold grown or new sessions into an
existing one (SPEC §4, §5; the frontmatter keys are the C1/C2 contract in CLUSTERS.md). Pure.

**Naming.** A new arc's ``cluster_id`` is ``<date of the first start>-<slug of the title, <= 40
chars>-<first 12 hex of sha1 of the sorted session ids joined by "\\n">`` and never changes
afterwards. Its title says what the work was: the title the agent recorded for a session
(Claude Code's ``custom-title`` or ``ai-title``, OpenCode's title, Gemini CLI's summary), else
the first human prompt line (of the first sessions, in order) that is not a greeting, a
placeholder (``[REDACTED…]``, ``[image]``), a slash command, a one-word prompt, two plain words
("show tools"; ``Implement spotter-gqc`` names the work; two characters of Chinese, Japanese or
Korean weigh a word) or "continue", cut at its first sentence; "Hey Claude, can you …" and
"please" prefixes are dropped. Without one it is ``<project> (<branch>): <main files>``. Every text was
redacted before it reaches a title, a slug or a file name.

**Initial figures** (the keeper and the AI layer own them afterwards):

- ``region``: ``amygdala`` when errors are at least 5 and a quarter of the tool calls;
  ``pineal`` when at least 2 prompts, and half of them, express joy; ``right-hemisphere``
  for conversation without tools (no tool calls, or no file edited and fewer tool calls
  than prompts); ``left-hemisphere`` otherwise.
- ``status``: ``active`` when the last session ended within 72 h of ``now``; older arcs are
  ``complete`` when their last prompt expressed joy, ``stalled`` otherwise.
- ``heat``: the keeper's formula (:func:`brain.core.heat.compute`) on these figures.

**Work keys** (frontmatter): ``cwd``, ``branch`` and ``last_prompt`` of the latest session;
``files`` (edited first by edit count, then read; <= 40: a piece of work that edits many
files still keeps the configuration it read), ``commands`` (<= 30) and
``identifiers`` (<= 15) ranked over the bundle's sessions of the arc, then the arc's earlier
items in their order; ``open_errors`` (<= 5) are the latest session's unresolved failures;
``errors_met`` (<= 10) the error names (``AssertionError``, ``ECONNREFUSED``, ``TS2345``) of
every failure the sessions met (its signature and the rest of its output), resolved or not,
most frequent first, then the earlier ones;
``headless: true`` when every session was a scripted run (``claude -p``, SDK, ``codex exec``).

**Body.** Each session owns one Timeline line naming its own title, so merged and resumed
sessions stay visible. The line ends in a ``<!-- brain:session … -->`` record of the
figures the arc counted and a hash ``h`` of the visible part as written. When the session
grows, the record is rewritten and the visible part only if it still hashes to ``h`` (the
operator did not edit it); anything after the record on the line, and every other line, is
kept byte for byte. Lessons and decisions are appended to ``## Lessons`` once per source;
the latest session's open todos replace the todos earlier sessions left in ``## Work``.
The same bundle twice changes nothing.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from brain.core import frontmatter
from brain.core.grouping import ArcUpdate, NewArc
from brain.core.heat import HeatInputs, compute
from brain.core.lessons import safe_text
from brain.core.sections import append_to_section
from brain.core.session import Lesson, Session, is_joyful
from brain.core.text import error_names
from brain.core.timeutil import iso, parse_instant
from brain.core.worklog import identifiers
from brain.core.workpaths import DRIVE_PATH, own_file_rank, sibling_folder
from brain.settings import Settings

TITLE_CHARS = 70
SLUG_CHARS = 40
#: An arc whose last session ended within this many hours of ``now`` starts ``active``.
ACTIVE_HOURS = 72
#: Frontmatter work keys: how many items each list keeps.
FILES_KEPT, COMMANDS_KEPT, ERRORS_KEPT, IDENTIFIERS_KEPT, ERRORS_MET_KEPT = 60, 30, 5, 15, 10
#: In an arc's ranking, each session's files, commands, identifiers and errors weigh this much
#: less than those of the session after it: an arc that ran for days on one branch lists what
#: its last sessions worked on first, not what its first day used most.
RECENCY_DECAY = 0.5
#: Of the files an arc keeps, at most this many are files outside its folder (the operator's
#: ``~/.claude``, a notes vault on another drive): ranked after the project's own, they are kept
#: even when the project's own fill the list (:func:`brain.core.project_feed.worked_away`).
AWAY_KEPT = 12
ERROR_CHARS, LAST_PROMPT_CHARS = 120, 200
WORK_KEYS = ("cwd", "branch", "files", "commands", "open_errors", "errors_met", "identifiers", "last_prompt",
             "last_state")
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
_GREETING = re.compile(
    r"^(?:(?:hi|hello|hey|heya|yo|howdy|greetings|good (?:morning|afternoon|evening))\b[\s,!.:-]*"
    r"(?:there\b[\s,!.:-]*)?(?:claude|codex|gemini|buddy|team)?\b[\s,!.:-]*)+",
    re.IGNORECASE,
)
_ASK = re.compile(
    r"^(?:(?:so|ok|okay|now|alright|right)\b[\s,]+)?(?:(?:can|could|would|will) you(?: please)?|please|pls"
    r"|i (?:want|need|would like|'d like) you to|i'd like you to|let'?s"
    r"|(?:can you |could you )?help me(?: to| with)?|i(?:'d| would) like (?:your )?help (?:with|to)"
    r"|i need (?:your )?help (?:with|to))\b[\s,]*",
    re.IGNORECASE,
)
_TRIVIAL = frozenset({
    "continue", "go on", "go ahead", "proceed", "yes", "no", "ok", "okay", "thanks", "thank you", "done", "next",
    "retry", "again", "sure", "yep", "do it", "keep going", "carry on", "resume", "try again", "continue please",
    "please continue", "go", "hi", "hello", "hey", "test",
})
#: Pasted attachments before the words: "[Image #1] add margin-bottom …".
_ATTACHMENT = re.compile(r"^(?:\[(?:Image|Pasted text|File)[^\]]{0,40}\]\s*)+")
#: A shell line continuation pasted into a prompt ("…:(\ \ This"), not a path's escaped space.
_LINE_CONTINUATION = re.compile(r"(?<!\w)\\(?=\s|$)")
_SENTENCE = re.compile(r"(?<=[.?!])\s+(?=[A-Z`\"'(])")
#: Chinese, Japanese and Korean script: written without spaces, so each character or two is a word.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_CJK_SENTENCE = re.compile(r"(?<=[。！？])")
_PLACEHOLDER = re.compile(r"^\[(?:REDACTED|image|Image|Pasted|Request interrupted)|^<[a-z_-]+>|^\[[A-Z_]+\]")


def title_from_prompt(prompt: str, fallback: str) -> str:
    """The first line of ``prompt`` cut to about 70 characters (``fallback`` when empty)."""
    for raw in prompt.splitlines():
        line = " ".join(_LEAD_MARKUP.sub("", raw.strip()).split())
        if line:
            break
    else:
        return fallback
    return _cut_title(line)


def _cut_title(line: str) -> str:
    if len(line) <= TITLE_CHARS:
        return line
    cut = line[:TITLE_CHARS]
    space = cut.rfind(" ", TITLE_CHARS // 2)
    return (cut[:space] if space > 0 else cut).rstrip(" ,.;:-") + "…"


def meaningful_title(prompt: str) -> str:
    """A title from a prompt, or "" when the prompt does not say what the work was."""
    for raw in prompt.splitlines():
        line = _ATTACHMENT.sub("", _LINE_CONTINUATION.sub(" ", raw.strip()))
        line = " ".join(_LEAD_MARKUP.sub("", line).split())
        if not line:
            continue
        if line.startswith("/") or _PLACEHOLDER.match(line):
            return ""
        original = line
        line = _GREETING.sub("", line)
        line = _ASK.sub("", line).strip(" ,")
        stripped = line != original
        words = line.rstrip("?!. ").split()
        count = _word_count(line)
        if count < 2 or " ".join(words).lower().strip(" .!?,") in _TRIVIAL:
            return ""
        if count < 3 and not identifiers(" ".join(words)):
            return ""  # "show tools", "fix it" say too little; "Implement spotter-gqc" names the work
        for splitter in (_SENTENCE, _CJK_SENTENCE):
            sentence = splitter.split(line, maxsplit=1)[0]
            if _word_count(sentence) >= 3:
                line = sentence
        line = line.rstrip(" ?.!:。！？")
        # A prefix was dropped: the rest starts the title; otherwise the operator's casing stays.
        return _cut_title(line[:1].upper() + line[1:] if stripped else line)
    return ""


def _word_count(text: str) -> int:
    """Words in ``text``, two characters of Chinese, Japanese or Korean counting as one."""
    cjk = len(_CJK.findall(text))
    if not cjk:
        return len(text.split())
    return sum(1 for word in _CJK.sub(" ", text).split() if any(ch.isalnum() for ch in word)) + cjk // 2


def fallback_title(session: Session) -> str:
    """``<project> (<branch>): <main files>`` for a session without a telling prompt."""
    head = session.project if session.project != "unknown" else f"{session.agent} session"
    if session.git_branch and session.git_branch not in ("main", "master"):
        head += f" ({session.git_branch})"
    files = [path.rsplit("/", 1)[-1] for path, _n in (*session.files_edited, *session.files_read)]
    names = list(dict.fromkeys(files))[:3] or [c for c, _n in session.commands[:2]]
    return _cut_title(f"{head}: {', '.join(names)}" if names else f"{head} session")


def recorded_title(session: Session) -> str:
    """The title the agent recorded for the session (the operator's ``/rename``, else the one it
    generated), or "" when there is none or it says nothing ("continue", a placeholder)."""
    line = " ".join(session.title.split())
    if not line or line.lower().strip(" .!?,") in _TRIVIAL or _PLACEHOLDER.match(line):
        return ""
    return _cut_title(line)


def telling_title(session: Session) -> str:
    """The session's recorded title, else the first of its prompts that says what the work was;
    "" when neither does."""
    prompts = (*session.prompts, session.first_prompt)
    return recorded_title(session) or next(filter(None, map(meaningful_title, prompts)), "")


def session_title(session: Session) -> str:
    return telling_title(session) or fallback_title(session)


def neutral(text: str) -> str:
    """Log text made inert in an arc body: it can never open a marker or a comment."""
    return text.replace("<!--", "&lt;!--").replace("-->", "--&gt;")


def _one_line(text: str, limit: int) -> str:
    line = neutral(" ".join(text.split()))
    if len(line) <= limit:
        return line
    cut = line[:limit]
    space = cut.rfind(" ", limit - 40)
    return (cut[:space] if space > 0 else cut).rstrip(" ,.;:") + "…"


# ----------------------------------------------------------------------------- lines


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


def _visible_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:8]


def timeline_visible(session: Session) -> str:
    """The visible part of a session's Timeline line (before its record comment)."""
    parts = [_when(session.start, session.end), session.agent]
    if session.git_branch and "`" not in session.git_branch:
        parts.append(f"`{_one_line(session.git_branch, 60)}`")
    parts.append(f"“{_one_line(session_title(session), TITLE_CHARS + 2)}”")
    if session.continues:
        parts.append(f"resumed from `{session.continues[:8]}`")
    if session.headless:
        parts.append("scripted")
    parts.append(_plural(session.user_turns, "turn"))
    tools = _plural(session.tool_calls, "tool call")
    if session.top_tools:
        tools += " (" + ", ".join(f"{name} {count}" for name, count in session.top_tools[:4]) + ")"
    parts.append(tools)
    if session.errors:
        unresolved = len(session.open_failures)
        parts.append(_plural(session.errors, "error") + (f", {unresolved} open" if unresolved else ""))
    if session.compactions:
        parts.append(_plural(session.compactions, "compaction"))
    if session.subagents:
        parts.append(_plural(session.subagents, "subagent"))
    return f"- {' · '.join(parts)}"


def _lesson_line(lesson: Lesson) -> int:
    return _int(lesson.source.rsplit(":", 1)[-1])


def session_record(session: Session, visible: str) -> str:
    """The invisible record: figures counted, the visible part's hash, the last log line mined."""
    figures = " ".join(f"{k}={v}" for k, v in session_figures(session).items())
    mined = max((_lesson_line(lesson) for lesson in session.lessons), default=0)
    return (f"<!-- brain:session id={session.session_id} end={iso(session.end)} {figures} "
            f"h={_visible_hash(visible)}{f' l={mined}' if mined else ''} -->")


def timeline_line(session: Session) -> str:
    """One Timeline line; the trailing comment records the figures this arc counted."""
    visible = timeline_visible(session)
    return f"{visible} {session_record(session, visible)}"


def source_line(session: Session) -> str:
    branch = f" · branch `{neutral(session.git_branch)}`" if session.git_branch and "`" not in session.git_branch else ""
    return f"- `{session.session_id}` · {session.agent} · {neutral(session.project)}{branch}"


def lesson_block(lesson: Lesson) -> str:
    text = safe_text(lesson.text)
    if lesson.kind == "decision":
        date = f"date={lesson.date} " if lesson.date else ""
        return f"<!-- @decision {date}source={lesson.source} -->{text}<!-- @/decision -->"
    return f"<!-- @lesson source={lesson.source} -->{text}<!-- @/lesson -->"


def todo_block(session: Session, status: str, text: str) -> str:
    priority = 2 if status == "in_progress" else 3
    return f"<!-- @todo priority={priority} source={session.short_id} -->{safe_text(text, 200)}<!-- @/todo -->"


def _quote(prompt: str) -> str:
    lines = [line.rstrip() for line in neutral(prompt).splitlines()] or [""]
    return "\n".join(f"> {line}" if line else ">" for line in lines)


# ----------------------------------------------------------------------------- work keys


def _latest(sessions: Sequence[Session]) -> Session:
    return max(sessions, key=lambda s: (s.end, s.session_id))


def _foreign(path: str, cwd: str) -> bool:
    """A file outside the work: an absolute path (``/…``, ``~/…``, ``C:/…``) that is not in a
    folder beside the repository (``~/.claude/…``, ``/usr/lib/…``, another drive)."""
    return (path.startswith(("/", "~")) or DRIVE_PATH.match(path) is not None) and not sibling_folder(path, cwd)


def _by_place(paths: Iterable[str], cwd: str) -> tuple[list[str], list[str]]:
    """``paths`` in their order, split into the work's own and those outside it (:func:`_foreign`)."""
    own: list[str] = []
    away: list[str] = []
    for path in paths:
        (away if _foreign(path, cwd) else own).append(path)
    return own, away


def _merge(ranked: Iterable[str], earlier: Iterable[str], limit: int) -> list[str]:
    """The bundle's ranking first, then the arc's earlier items in their order (a fixed point)."""
    out: list[str] = []
    for item in (*ranked, *earlier):
        if item and item not in out:
            out.append(item)
        if len(out) >= limit:
            break
    return out


def _rank(counts: Mapping[str, float]) -> list[str]:
    return [key for key, _n in sorted(counts.items(), key=lambda item: (-item[1], item[0]))]


def work_keys(sessions: Sequence[Session], earlier: Mapping[str, Any] | None = None,
              *, latest_is_newest: bool = True) -> dict[str, Any]:
    """The contract's frontmatter work keys for ``sessions`` folded over ``earlier`` values."""
    earlier = earlier or {}
    edited: defaultdict[str, float] = defaultdict(float)
    read: defaultdict[str, float] = defaultdict(float)
    commands: defaultdict[str, float] = defaultdict(float)
    idents: defaultdict[str, float] = defaultdict(float)
    met: defaultdict[str, float] = defaultdict(float)
    # Newest first: each session weighs RECENCY_DECAY times the one after it (exact in binary
    # floating point, so the ranking is the same on every machine).
    for age, session in enumerate(sorted(sessions, key=lambda s: (s.end, s.session_id), reverse=True)):
        weight = RECENCY_DECAY ** age
        for failure in session.failures:
            for name in dict.fromkeys((*error_names(failure.text), *failure.names)):
                met[name] += weight
        for path, count in session.files_edited:
            edited[path] += count * weight
        for path, count in session.files_read:
            read[path] += count * weight
        for command, count in session.commands:
            commands[command] += count * weight
        for position, token in enumerate(session.identifiers):
            idents[token] += max(1, len(session.identifiers) - position) * weight
    ranked = _rank(edited) + [p for p in _rank(read) if p not in edited]
    # Repo files first; installed dependencies, generic names (README.md, package.json …) and
    # paths outside the repo last, the first AWAY_KEPT of those kept whatever the repo's fill.
    cwd = next((s.cwd.replace("\\", "/") for s in reversed(sessions) if s.cwd), "")
    own_now, away_now = _by_place((_one_line(f, 300) for f in sorted(ranked, key=own_file_rank)), cwd)
    own_before, away_before = _by_place(_strings(earlier.get("files")), cwd)
    away = _merge(away_now, away_before, FILES_KEPT)
    own = _merge(own_now, own_before, FILES_KEPT - min(len(away), AWAY_KEPT))
    keys: dict[str, Any] = {
        "files": _merge(own, away, FILES_KEPT),
        "commands": _merge((_one_line(c, 120) for c in _rank(commands)), _strings(earlier.get("commands")),
                           COMMANDS_KEPT),
        "identifiers": _merge((_one_line(i, 120) for i in _rank(idents)), _strings(earlier.get("identifiers")),
                              IDENTIFIERS_KEPT),
        "errors_met": _merge(_rank(met), _strings(earlier.get("errors_met")), ERRORS_MET_KEPT),
    }
    if latest_is_newest:
        last = _latest(sessions)
        keys["cwd"] = _one_line(last.cwd, 1000)
        keys["branch"] = _one_line(last.git_branch, 200)
        keys["open_errors"] = [_error_line(f.text, f.command) for f in last.open_failures[:ERRORS_KEPT]]
        keys["last_prompt"] = _one_line(last.last_prompt, LAST_PROMPT_CHARS)
        keys["last_state"] = _one_line(last.last_state, LAST_PROMPT_CHARS)
    return keys


def _error_line(text: str, command: str) -> str:
    text = text.replace("\\n", " ").replace("\\t", " ")  # escaped output of hooks
    line = text if not command or command in text else f"{text} ({command})"
    return _one_line(line, ERROR_CHARS)


def _strings(value: Any) -> list[str]:
    return [str(v) for v in value if isinstance(v, str | int | float) and not isinstance(v, bool)] \
        if isinstance(value, list) else []


# ----------------------------------------------------------------------------- new arcs


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


def arc_title(sessions: Sequence[Session]) -> str:
    title = next(filter(None, map(telling_title, sessions)), "")
    return neutral(title or fallback_title(sessions[0]))


def render_new_arc(group: NewArc, now: datetime, settings: Settings) -> RenderedArc:
    sessions = sorted(group.sessions, key=lambda s: (s.start, s.session_id))
    first, last = sessions[0], _latest(sessions)
    prompt_session = next((s for s in sessions if s.first_prompt.strip()), None)
    project = first.project
    title = arc_title(sessions)
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
    work = work_keys(sessions)
    meta: dict[str, Any] = {
        "cluster_id": cid,
        "title": title,
        "region": initial_region(activity, sessions),
        "status": status,
        "heat": heat,
        "created": iso(first.start),
        "last_active": iso(last.end),
        "project": project,
        "cwd": work["cwd"],
        "branch": work["branch"],
        "agents": agents,
        "source_sessions": ids,
        "activity": activity,
        "synthesized": False,
        "files": work["files"],
        "commands": work["commands"],
        "open_errors": work["open_errors"],
        "errors_met": work["errors_met"],
        "identifiers": work["identifiers"],
        "last_prompt": work["last_prompt"],
        "last_state": work["last_state"],
    }
    if all(s.headless for s in sessions):
        meta["headless"] = True
    ignition = _quote(prompt_session.first_prompt) if prompt_session else "> (no human prompt recorded)"
    lessons = _dedupe_lessons(lesson for s in sessions for lesson in s.lessons)
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
            "## Work",
            "",
            *_todo_lines(last),
            *([""] if last.pending_todos else []),
            "## Lessons",
            "",
            *(lesson_block(lesson) for lesson in lessons),
            *([""] if lessons else []),
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


def _todo_lines(session: Session) -> list[str]:
    return [todo_block(session, todo.status, todo.text) for todo in session.pending_todos]


def _dedupe_lessons(lessons: Iterable[Lesson]) -> list[Lesson]:
    """Each lesson once: the same text mined from two sessions is written the first time."""
    seen: set[tuple[str, str]] = set()
    out: list[Lesson] = []
    for lesson in lessons:
        key = (lesson.kind, safe_text(lesson.text).lower())
        if key not in seen:
            seen.add(key)
            out.append(lesson)
    return out


# ----------------------------------------------------------------------------- updating

_SESSION_COMMENT = re.compile(r"<!-- brain:session ((?:[a-z_]+=\S+ ?)+)-->")
_FIGURE_KEYS = ("turns", "tools", "errors", "joy", "compactions")
_MACHINE_TODO = re.compile(r"^<!-- @todo priority=\d+ source=([A-Za-z0-9._-]{1,40}) -->.*<!-- @/todo -->$")
_LESSON_SOURCE = re.compile(r"<!-- @(lesson|decision)\b[^>]*?\bsource=([A-Za-z0-9._-]+:\d+)")


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


def regrown_line(line: str, session: Session, attrs: Mapping[str, str]) -> str:
    """``line`` with the session's new record; its visible part only if the operator left it as written."""
    match = _SESSION_COMMENT.search(line)
    if match is None:
        return line
    visible_now = line[: match.start()].rstrip(" ")
    spacing = line[len(visible_now) : match.start()]
    tail = line[match.end() :]
    if attrs.get("h") == _visible_hash(visible_now):
        visible = timeline_visible(session)
        return f"{visible} {session_record(session, visible)}{tail}"
    # Edited by hand (or an older layout without a hash): keep every visible byte.
    record = session_record(session, visible_now)
    if "h" not in attrs:
        record = record.replace(f" h={_visible_hash(visible_now)} -->", " -->")
    return f"{visible_now}{spacing}{record}{tail}"


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
    ordered = sorted(update.sessions, key=lambda s: (s.start, s.session_id))

    sources = list(info.source_sessions)
    listed = set(sources)
    deltas = dict.fromkeys(_FIGURE_KEYS, 0)
    timeline_new: list[str] = []
    source_new: list[str] = []
    # Sessions new to the body or grown since, with the last log line already mined for lessons:
    # only their later lessons and todos are written, so what the operator deleted stays deleted.
    fresh: dict[str, int] = {}
    for session in ordered:
        figures = session_figures(session)
        known = recorded.get(session.session_id)
        if known is not None:
            index, attrs = known
            old = {k: _int(attrs.get(k)) for k in _FIGURE_KEYS}
            if old != figures or attrs.get("end") != iso(session.end):
                for key in _FIGURE_KEYS:
                    deltas[key] += figures[key] - old[key]
                lines[index] = regrown_line(lines[index], session, attrs)
                fresh[session.session_id] = _int(attrs.get("l"))
        else:
            fresh[session.session_id] = 0
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

    last = _latest(ordered)
    last_known = parse_instant(info.last_active)
    newest = last_known is None or last.end >= last_known
    lines = _refresh_todos(lines, last, set(sources)) if newest and last.session_id in fresh else lines
    lines = _append_to_section(lines, "Timeline", timeline_new)
    present = {(kind, source) for kind, source in _LESSON_SOURCE.findall("\n".join(lines))}
    candidates = [lesson for session in ordered if session.session_id in fresh
                  for lesson in session.lessons if _lesson_line(lesson) > fresh[session.session_id]]
    lessons = [lesson for lesson in _dedupe_lessons(candidates) if (lesson.kind, lesson.source) not in present]
    lines = _append_to_section(lines, "Lessons", [lesson_block(lesson) for lesson in lessons])
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
    for key, value in work_keys(ordered, meta, latest_is_newest=newest).items():
        if meta.get(key) != value:
            updates[key] = value
    if meta.get("headless") is True and not all(s.headless for s in update.sessions):
        updates["headless"] = False
    new_fm = frontmatter.set_keys(document.frontmatter, updates) if updates else document.frontmatter
    if new_fm == document.frontmatter and new_body == document.body:
        return text
    return f"---{newline}{new_fm}---{newline}{new_body}"




def _refresh_todos(lines: list[str], last: Session, arc_sessions: set[str]) -> list[str]:
    """Drop the todo blocks earlier runs wrote for this arc's sessions; add the latest session's."""
    shorts = {sid[:8] for sid in arc_sessions}
    wanted = _todo_lines(last)
    kept = [line for line in lines if not ((m := _MACHINE_TODO.match(line)) and m.group(1) in shorts)]
    current = [line for line in lines if (m := _MACHINE_TODO.match(line)) and m.group(1) in shorts]
    if current == wanted:
        return lines
    return _append_to_section(kept, "Work", wanted)


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return 0
