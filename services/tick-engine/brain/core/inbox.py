"""The inbox (SPEC §15): notes agents (``brain mcp``) or operators drop into ``raw/inbox/``.

One note per file, ``raw/inbox/<anything>.md``::

    ---
    kind: lesson            # lesson | decision | todo | signal
    project: tick-engine    # or cwd: /home/me/src/tick-engine (the project is its last folder)
    severity: warning       # signal only: info | warning | critical | nuclear (default warning)
    source: ci              # signal only: a short slug (default agent)
    ---
    The text: what was learned, decided, left to do, or is going wrong.

The tick drains the inbox: each note becomes a marker block (``@lesson``, ``@decision``,
``@todo``, ``@signal``) in the hottest open arc of its project, or in a new arc under
``clusters/<date>/`` when the project has none; the inbox file is deleted in the same
journaled plan, so ``brain undo`` brings it back. A note that cannot be read is reported and
left where it is. Pure: texts in, a :class:`~brain.core.plan.Plan` and problems out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from brain.core import frontmatter
from brain.core.arc_text import cluster_id as make_cluster_id
from brain.core.arc_text import slug, title_from_prompt
from brain.core.keeper import is_managed
from brain.core.markers import code_closed, render_block
from brain.core.model import Note, Problem
from brain.core.plan import DeleteFile as Delete
from brain.core.plan import Expect, Plan, WriteFile
from brain.core.redaction import redact
from brain.core.sections import append_to_section
from brain.core.text import clean_block, cut, printable, strip_marker_syntax
from brain.core.timeutil import iso
from brain.core.vocab import CLOSED_STATUSES, INBOX, SEVERITIES
from brain.settings import Settings

KINDS = ("lesson", "decision", "todo", "signal")
SECTIONS = {"lesson": "Lessons", "decision": "Decisions", "todo": "Todos", "signal": "Signals"}
SIGNAL_SEVERITIES = tuple(s for s in SEVERITIES if s != "resolved")
PROJECT_MAX_CHARS = 100
SOURCE_MAX_CHARS = 40


class InboxError(ValueError):
    """A note (or a tool call) that cannot become a marker block; the message says why."""


@dataclass(frozen=True)
class InboxItem:
    path: str
    kind: str
    project: str
    text: str
    severity: str | None = None
    source: str | None = None
    session: str | None = None


def clean_project(project: str) -> str:
    """A project name as written into frontmatter; a path or an empty name is refused."""
    value = " ".join(strip_marker_syntax(redact(printable(project))).split())
    if not value or not any(c.isalnum() for c in value):
        raise InboxError("project is empty")
    if "/" in value or "\\" in value or value.startswith(".") or len(value) > PROJECT_MAX_CHARS:
        raise InboxError(f"project must be a name of at most {PROJECT_MAX_CHARS} characters, not a path "
                         "(pass the working directory as cwd instead)")
    return value


def validate(kind: str, severity: str | None, source: str | None) -> tuple[str | None, str | None]:
    """The (severity, source) a note of ``kind`` keeps; InboxError for a bad kind or severity."""
    if kind not in KINDS:
        raise InboxError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind != "signal":
        return None, None
    severity = (severity or "warning").strip().lower()
    if severity not in SIGNAL_SEVERITIES:
        raise InboxError(f"severity must be one of {', '.join(SIGNAL_SEVERITIES)}, not {severity!r}")
    return severity, slug(source or "agent", SOURCE_MAX_CHARS)


def render_note(
    kind: str, text: str, *, project: str, created: datetime, max_chars: int, severity: str | None = None,
    source: str | None = None, session: str | None = None,
) -> str:
    """The text of one inbox note (what ``brain mcp`` writes); InboxError when it cannot be one."""
    severity, source = validate(kind, severity, source)
    body = clean_block(text, max_chars)
    if not body:
        raise InboxError("text is empty")
    meta: dict[str, Any] = {"kind": kind, "project": clean_project(project)}
    if severity is not None:
        meta["severity"] = severity
        meta["source"] = source
    if session:
        meta["session"] = session
    meta["created"] = iso(created)
    return f"---\n{frontmatter.dump(meta)}---\n{body}\n"


def _string(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def parse_note(
    path: str, text: str, max_chars: int, project_of: Callable[[str], str] | None = None
) -> InboxItem:
    """An inbox file as an item; InboxError says why it cannot be drained."""
    try:
        document = frontmatter.split(text)
        meta = frontmatter.load(document.frontmatter) if document.frontmatter is not None else None
    except frontmatter.FrontmatterError as exc:
        raise InboxError(f"bad frontmatter: {exc.message}") from None
    if not isinstance(meta, dict):
        raise InboxError("no frontmatter: start the note with ---, kind: and project: lines, then ---")
    kind = (_string(meta, "kind") or "").lower()
    severity, source = validate(kind, _string(meta, "severity"), _string(meta, "source"))
    project = _string(meta, "project")
    cwd = _string(meta, "cwd")
    if project is None and cwd is not None and project_of is not None:
        project = project_of(cwd)
    if project is None:
        raise InboxError("no project: add a project: (or cwd:) line to the frontmatter")
    body = clean_block(document.body, max_chars)
    if not body:
        raise InboxError("the note has no text")
    session = _string(meta, "session")
    return InboxItem(path, kind, clean_project(project), body, severity, source,
                     slug(session, 64) if session else None)


def inbox_paths(notes: Iterable[Note]) -> list[str]:
    """The inbox notes among the scan's notes, oldest name first (names start with a timestamp)."""
    return sorted(n.path for n in notes if n.path.startswith(INBOX + "/") and n.path.count("/") == 2)


def target_arc(notes: Iterable[Note], project: str) -> Note | None:
    """The hottest open arc of ``project`` (most recently active on a tie), or None."""
    best: tuple[int, str, str] | None = None
    found: Note | None = None
    for note in notes:
        arc = note.arc
        if arc is None or not is_managed(note.path) or arc.is_tombstone or arc.status in CLOSED_STATUSES:
            continue
        if (arc.project or "").strip() != project:
            continue
        key = (arc.heat or 0, arc.last_active or arc.created or "", note.path)
        if best is None or key > best:
            best, found = key, note
    return found


def items_of(
    notes: Iterable[Note], inbox_texts: Mapping[str, str], settings: Settings,
    project_of: Callable[[str], str] | None = None,
) -> tuple[list[InboxItem], list[Problem]]:
    items: list[InboxItem] = []
    problems: list[Problem] = []
    known = {n.path for n in notes}
    for path in sorted(inbox_texts):
        if path not in known:
            continue  # not in the scan (written since): the next tick takes it
        try:
            items.append(parse_note(path, inbox_texts[path], settings.mcp_write_max_chars, project_of))
        except InboxError as exc:
            problems.append(Problem(path, None, f"inbox note not drained: {exc}; left in the inbox"))
    return items, problems


def arcs_to_read(
    notes: Iterable[Note], inbox_texts: Mapping[str, str], settings: Settings,
    project_of: Callable[[str], str] | None = None,
) -> list[Note]:
    """The arcs :func:`plan_inbox` will append to (their texts must be passed to it)."""
    note_list = list(notes)
    items, _ = items_of(note_list, inbox_texts, settings, project_of)
    targets = {p: target_arc(note_list, p) for p in {i.project for i in items}}
    return sorted({t.path: t for t in targets.values() if t is not None}.values(), key=lambda n: n.path)


def block(item: InboxItem, now: datetime) -> str:
    attrs: list[tuple[str, str]] = []
    if item.kind == "signal":
        attrs = [("severity", item.severity or "warning"), ("source", item.source or "agent")]
    elif item.kind == "decision":
        attrs = [("date", iso(now)[:10])]
    return render_block(item.kind, attrs, code_closed(item.text))


def _append(text: str, items: list[InboxItem], now: datetime) -> str:
    document = frontmatter.split(text)
    head, body = text[: document.body_offset], document.body
    for item in items:
        rendered = block(item, now)
        if rendered in body:
            continue  # drained before (an undo put the inbox file back): one block, never two
        body = append_to_section(body, SECTIONS[item.kind], rendered.split("\n"))
    return head + body


def new_arc(project: str, items: list[InboxItem], now: datetime) -> tuple[str, str]:
    """(path, text) of a new arc holding ``items`` for a project without an open arc."""
    title = cut(f"{project}: {title_from_prompt(items[0].text, 'notes from agents')}", 80)
    sessions = sorted({i.session for i in items if i.session})
    cid = make_cluster_id(now, title, sessions or [i.path for i in items])
    meta: dict[str, Any] = {
        "cluster_id": cid,
        "title": title,
        "region": "left-hemisphere",
        "status": "active",
        "heat": 0,
        "created": iso(now),
        "last_active": iso(now),
        "project": project,
        "agents": [],
        "source_sessions": sessions,
        "activity": {"sessions": len(sessions), "user_turns": 0, "tool_calls": 0, "errors": 0, "joy": 0,
                     "compactions": 0},
        "synthesized": False,
    }
    body = "\n".join([
        f"# {title}", "", "## Ignition", "", "> (notes agents left in the inbox)", "",
        "## Timeline", "", f"- {iso(now)[:16].replace('T', ' ')} — {len(items)} note{'s' if len(items) != 1 else ''} from the inbox", "",
        "## Lessons", "", "## Resolution", "", "## Edges", "", "## Source sessions", "",
        *(f"- `{s}`" for s in sessions), "",
    ])
    return f"clusters/{iso(now)[:10]}/{cid}.md", _append(f"---\n{frontmatter.dump(meta)}---\n{body}", items, now)


def plan_inbox(
    notes: Iterable[Note], inbox_texts: Mapping[str, str], now: datetime, settings: Settings, *,
    arc_texts: Mapping[str, str], project_of: Callable[[str], str] | None = None,
) -> tuple[Plan, list[Problem]]:
    """Drain the inbox: append each note to its project's arc (or a new one), delete the note.

    ``inbox_texts``: inbox path -> text, for the inbox notes of the scan (:func:`inbox_paths`).
    ``arc_texts``: path -> text of the arcs :func:`arcs_to_read` named.
    """
    note_list = list(notes)
    by_path = {n.path: n for n in note_list}
    items, problems = items_of(note_list, inbox_texts, settings, project_of)
    plan = Plan()
    by_project: dict[str, list[InboxItem]] = {}
    for item in items:
        by_project.setdefault(item.project, []).append(item)
    drained: list[InboxItem] = []
    for project in sorted(by_project):
        group = by_project[project]
        target = target_arc(note_list, project)
        if target is None:
            path, text = new_arc(project, group, now)
            if path in by_path:
                problems.extend(Problem(i.path, None, f"inbox note not drained: {path} already exists")
                                for i in group)
                continue
            plan.add(WriteFile(path, text.encode("utf-8"), reason=f"inbox: new arc for {project}"))
        else:
            current = arc_texts.get(target.path)
            if current is None:
                problems.extend(Problem(i.path, None, f"inbox note not drained: {target.path} was not read")
                                for i in group)
                continue
            updated = _append(current, group, now)
            if updated != current:
                plan.add(WriteFile(target.path, updated.encode("utf-8"),
                                   expect=Expect(target.size, target.mtime_ns, target.sha1),
                                   reason=f"inbox: {len(group)} notes"))
        drained.extend(group)
    for item in drained:
        note = by_path[item.path]
        plan.add(Delete(item.path, expect=Expect(note.size, note.mtime_ns, note.sha1), reason="inbox: drained"))
    return plan, problems
