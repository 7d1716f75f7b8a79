"""Per-project brain-feed files: what a session starting in one project needs (SPEC §7, §12).

For every project with arcs the tick writes ``projects/<slug>.md``, and ``projects/index.json``
maps projects to their files and recorded working directories to projects, so the
session-start hook answers with a couple of small file reads. A project file holds, in this
order, and only the sections that have something to say:

1. where we left off: one line with the latest real arc's title, branch, last prompt and files
   in play; open todos; unresolved errors;
2. signals: this project's open signals, and critical / nuclear ones from anywhere;
3. recent work here: the arc before the latest (title, what, main files, and the lessons and
   decision that arc taught), real work before single-turn scripted runs; a row whose title
   only repeats the project and whose files are all listed above is left out (older arcs
   reach the feed through the lessons and the lists below, one line each, not a row apiece);
   another project's session that worked in this project's folder (:func:`visits`) takes its
   place among those arcs by time, with its files there;
4. lessons and decisions from ``@lesson`` / ``@decision`` markers of the recent arcs without
   a row (the latest, mostly), one dated line per arc (a mined decision that is a question or
   a request to the agent is left out);
5. used here recently: files (one line), then commands, identifiers and errors (one line),
   aggregated over the recent arcs and ranked; an identifier the files or commands name, or
   an error name a lesson or the handoff gives, is not repeated, and an empty list says nothing;
6. injected context: this project's ``@inject`` blocks, operator notes', and ``target=all``.

Each file is fitted to ``feed_token_budget`` on its own (it replaces the global feed for
that session) with the shared cut of :mod:`brain.core.feed_file`.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import heapq
import itertools
import json
import marshal
import math
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from brain.core.feed_file import (
    NEVER,
    RANK_HOT,
    FeedFile,
    FeedItem,
    cut,
    fit_budget,
    one_line,
)
from brain.core.heat import created_of, last_active_of
from brain.core.keeper import ArcDecision
from brain.core.model import Activity, ArcInfo, built, field_names
from brain.core.project import SUBFOLDER_NAMES, can_name_a_repository, is_home_folder, sole_owners
from brain.core.redaction import redact, redact_recurring
from brain.core.text import cut_path
from brain.core.text import error_names as text_error_names
from brain.core.timeutil import iso
from brain.core.vocab import RECENT_WORK, TIGHT_FILES, TOMBSTONE_STATUSES
from brain.core.workpaths import ABSOLUTE_PATH, DRIVE_PATH, own_files_first, sibling_folder
from brain.settings import Settings

FOLDER = "projects"
INDEX = f"{FOLDER}/index.json"
INDEX_VERSION = 1
PRIORITY = 50
#: Arcs listed under "recent work", and arcs whose work lists are aggregated.
RECENT_ARCS = 1
AGGREGATE_ARCS = 20
KEEP_TOP_ARCS = 3
#: Files the "used here" line lists: up to :data:`MAX_FILES`, or the longest of :data:`FILES_STEPS`
#: the file fits its budget with (a project of many files, a notes vault, needs more than the
#: latest arcs' few), else :data:`TIGHT_FILES`: a longer list never pushes the commands or the
#: lessons out. The hook, which adds a session that just ended and title lines, cuts the list's
#: tail back to :data:`TIGHT_FILES` before it cuts a line (``hook.shorter_files``).
MAX_FILES = 120
FILES_STEPS = (MAX_FILES, 90, TIGHT_FILES)
#: Commands a project feed lists: what two arcs keep (15 each) and more, so an older arc's still get a
#: place (an operator who ran `csrutil status` once last week runs it again).
MAX_COMMANDS, MAX_IDENTIFIERS, MAX_ERRORS, MAX_ERROR_NAMES = 40, 20, 6, 10
MAX_TODOS, MAX_LESSONS, MAX_DECISIONS, LESSON_ARCS = 8, 3, 1, 3
ARC_FILES, IN_PLAY_FILES = 5, 8
#: Scratch files an agent wrote outside the repository: never worth a line.
SCRATCH_PREFIXES = ("/tmp/", "/var/tmp/", "/private/tmp/", "/private/var/folders/")
UNKNOWN_PROJECTS = frozenset({"", "unknown"})

# Cut order inside a project file (lowest first); handoff and the top arcs are never cut.
RANK_RECENT = 25  # recent-work.md rows, in the global cut order
RANK_MORE = RANK_RECENT - 1  # recent-work.md's more files of the latest project: cut before any row
RANK_LESSON = 45
RANK_ARC, RANK_COMMANDS, RANK_FILES, RANK_HANDOFF = 55, 57, 58, RANK_HOT + 5

HANDOFF, SIGNALS, RECENT, LESSONS, USED, INJECTED = (
    "",
    "Signals",
    "Recent work here",
    "Lessons and decisions",
    "Used here recently",
    "Injected context",
)
#: The global ``recent-work.md`` (sessions outside every known project): its rows.
RECENT_WORK_PROJECTS, RECENT_WORK_AGGREGATE = 5, AGGREGATE_ARCS
#: Files a ``recent-work.md`` row lists: a new project often repeats a recent one's stack and
#: layout (``routes/web.php``, ``docker-compose.yml``), and its session has the whole budget.
RECENT_WORK_FILES = 10
#: Files a ``recent-work.md`` row adds that its project's sessions worked on far from its folder
#: (:func:`worked_away`): ranked last in an arc, they never reach its in-play files.
RECENT_WORK_AWAY = 10
#: Commands ``recent-work.md`` lists: the operator's habits across projects, a guess for a new one.
RECENT_WORK_COMMANDS = 30
#: An error's code span in a feed line.
ERROR_CHARS = 100
#: How deep into a project's arcs (in :func:`project_arcs` order) any project or recent-work
#: line can look: a new window above must be counted here (a quiet tick reads only these).
SHOWN_ARCS = max(RECENT_ARCS + 2, AGGREGATE_ARCS, KEEP_TOP_ARCS, LESSON_ARCS, RECENT_WORK_AGGREGATE)


@dataclass(frozen=True)
class Routed:
    """A signal or inject line and the project feeds it belongs in."""

    item: FeedItem
    project: str | None  # the project of the arc it comes from; None: an operator note
    everywhere: bool  # critical / nuclear signals, target=all injects, operator notes' injects
    target: str = ""
    severity: str = ""


#: A scripted one-shot run (``claude -p "…"``): at most this many human turns AND shorter than this.
ONE_SHOT_MAX_TURNS, ONE_SHOT_MAX_DURATION = 1, timedelta(minutes=1)


def is_one_shot(arc: ArcInfo, created: datetime, last_active: datetime) -> bool:
    """A scripted one-shot run: listed after real work in the hot table and the project feed.

    Narrower than :func:`brain.core.heat.is_noise` (one turn OR under a minute) on purpose:
    a one-prompt session that worked for an hour is real work, and the feed's handoff and
    recent arcs must show it where it belongs in time.
    """
    return 0 < arc.activity.user_turns <= ONE_SHOT_MAX_TURNS and last_active - created < ONE_SHOT_MAX_DURATION


def slug(project: str) -> str:
    text = re.sub(r"[^a-z0-9._-]+", "-", project.lower()).strip("-.")[:60]
    return text or "project"


@dataclass(frozen=True)
class ProjectArc:
    decision: ArcDecision
    arc: ArcInfo
    last_active: datetime
    scripted: bool
    #: Another project's arc that worked in this project's folder (:func:`visits`): its ``files``
    #: are only those, relative to the folder, and it carries no commands, identifiers or errors.
    visit: bool = False


_PROJECT_ARC_FIELDS = field_names(ProjectArc)


def work_order(pa: ProjectArc) -> tuple[bool, float, bool, str]:
    """How a project's arcs are listed: real work before scripted runs, most recent first, its
    own arc before another project's visit of the same instant."""
    return pa.scripted, -pa.last_active.timestamp(), pa.visit, pa.arc.cluster_id


def project_arcs(decisions: Mapping[str, ArcDecision]) -> dict[str, list[ProjectArc]]:
    """Project -> its arcs, real work first, then most recent first (:func:`work_order`)."""
    by_project: dict[str, list[ProjectArc]] = {}
    for decision in decisions.values():
        arc = decision.note.arc
        if arc is None or decision.status in TOMBSTONE_STATUSES:
            continue
        project = (arc.project or "").strip()
        if project.lower() in UNKNOWN_PROJECTS:
            continue
        last = decision.last_active or last_active_of(decision.note)  # decided already: no second parse
        one_shot = is_one_shot(arc, created_of(decision.note), last)
        by_project.setdefault(project, []).append(  # one per arc of the view: no generated __init__
            built(ProjectArc, _PROJECT_ARC_FIELDS, (decision, arc, last, one_shot, False)))
    for arcs in by_project.values():
        arcs.sort(key=work_order)  # the key is made once per arc
    return by_project


def file_names(projects: Iterable[str]) -> dict[str, str]:
    """Project -> ``projects/<slug>.md``; a slug two projects share gets a short hash."""
    names: dict[str, str] = {}
    taken: set[str] = set()
    for project in sorted(projects):
        base = slug(project)
        if base in taken or base == "index":
            base = f"{base}-{hashlib.sha1(project.encode('utf-8')).hexdigest()[:8]}"
        taken.add(base)
        names[project] = f"{FOLDER}/{base}.md"
    return names


def ranked(lists: Iterable[Sequence[str]], limit: int) -> list[str]:
    """Items of several ranked lists (newest arc first), by a score that favours items that
    recur and items high in recent lists; ties keep first-seen order."""
    scores: dict[str, float] = {}
    for arc_index, items in enumerate(lists):
        weight = 1.0 / (1 + arc_index)
        for position, item in enumerate(items):
            scores[item] = scores.get(item, 0.0) + weight / (1 + 0.1 * position)
    order = {item: index for index, item in enumerate(scores)}
    return sorted(scores, key=lambda item: (-scores[item], order[item]))[:limit]


def shared_first(lists: Sequence[Sequence[str]], limit: int) -> list[str]:
    """Items of several projects' ranked lists (most recently active project first): those more
    projects use first (the operator's habits, likely in a new project too), then by
    :func:`ranked`."""
    users: dict[str, int] = {}
    for items in lists:
        for item in set(items):
            users[item] = users.get(item, 0) + 1
    order = {item: index for index, item in enumerate(ranked(lists, len(users)))}
    return sorted(users, key=lambda item: (-users[item], order[item]))[:limit]


def code_list(items: Iterable[str]) -> str:
    return ", ".join(f"`{item.replace('`', '')}`" for item in items)


def feed_text(value: str, limit: int) -> str:
    return cut(redact_recurring(value), limit)


def feed_path(value: str, limit: int) -> str:
    """A file path for a feed line: redacted, on one line, its name kept whole (:func:`cut_path`)."""
    return cut_path(one_line(redact_recurring(value)), limit)


def handoff(project: str, arcs: list[ProjectArc]) -> list[FeedItem]:
    latest = arcs[0]
    arc = latest.arc
    when = latest.last_active.strftime("%Y-%m-%d %H:%M")
    what = feed_text(arc.summary or arc.title, 120)
    where = f" on branch `{feed_text(arc.branch, 60)}`" if arc.branch else ""
    line = f"- Last session ({when}{where}): {what}"
    last = prompt_text(arc.last_prompt or "")
    if last and not same_words(last, what):
        line += f" — stopped at: \"{feed_text(last, 200)}\""
    in_play = files_in_play(arc)
    if in_play:  # the session's files belong on its line: one line says what it did and where
        line += f"; files in play: {code_list(feed_path(f, 100) for f in in_play)}"
    items = [FeedItem(line, NEVER, section=HANDOFF)]
    todos = sorted(
        ((_priority(m.attr("priority")), index, m.text)
         for index, (pa, m) in enumerate((pa, m) for pa in arcs[:KEEP_TOP_ARCS] for m in pa.decision.note.markers)
         if m.type == "todo" and m.text),
    )
    if todos:
        shown = "; ".join(feed_text(text, 100) for _, _, text in todos[:MAX_TODOS])
        items.append(FeedItem(f"- Open todos: {shown}", RANK_HANDOFF, section=HANDOFF))
    if arc.open_errors:
        items.append(FeedItem(unresolved_line(arc.open_errors), RANK_HANDOFF, section=HANDOFF))
    return items


def unresolved_line(open_errors: Sequence[str]) -> str:
    """``- Unresolved errors: `a`; `b``` for the first :data:`MAX_ERRORS` of ``open_errors``."""
    return "- Unresolved errors: " + "; ".join(error_text(e) for e in open_errors[:MAX_ERRORS])


#: What a pasted prompt carries that says nothing: escaped line breaks (``\\n``, a backslash
#: before a newline), rule lines (``_____``, ``=====``) and image placeholders (``[Image #1]``).
_PROMPT_NOISE = re.compile(r"\\n|\\\s|[_=*~#-]{4,}|\[Image #\d+\]")


_WORD_CHAR = re.compile(r"\w")


def prompt_text(prompt: str) -> str:
    """A prompt as one clean line for the handoff (pasted test output keeps its words, not its
    rules); "" for one without a word in it: a session that stopped at ``.`` says nothing."""
    line = " ".join(_PROMPT_NOISE.sub(" ", prompt).split())
    return line if _WORD_CHAR.search(line) else ""


def files_in_play(arc: ArcInfo) -> list[str]:
    return [f for f in arc.files if not f.startswith(SCRATCH_PREFIXES)][:IN_PLAY_FILES]


#: An absolute path inside an error's text, long enough to crowd out what went wrong.
_LONG_PATH = re.compile(r"(?<![\w/\\])(?:[A-Za-z]:)?[/\\][^\s`'\"()\[\]]{40,}")


def error_text(error: str) -> str:
    """An error as one short code span (extractors keep escaped newlines: ``\\n``). Long paths
    give up their middle folders first: ``spawn /…/arm64-darwin/rg EACCES (Grep)`` says what went
    wrong where ``spawn /opt/homebrew/lib/node_modules/@anthropic-ai/claude-code/vendor/ri…`` did not."""
    flat = error.replace("\\n", " ").replace("\\t", " ").replace("`", "")
    if len(flat) > ERROR_CHARS:
        flat = _LONG_PATH.sub(lambda found: cut_path(found.group(), 32), flat)
    return f"`{feed_text(flat, ERROR_CHARS)}`"


def same_words(a: str, b: str) -> bool:
    """``b`` says what ``a`` says (a one-prompt session's title is its last prompt)."""
    words_a, words_b = re.findall(r"\w+", a.lower()), re.findall(r"\w+", b.lower())
    return bool(words_b) and words_a[: len(words_b)] == words_b


def _priority(value: str | None) -> int:
    try:
        return int(value or "9")
    except ValueError:
        return 9


def arc_line(pa: ProjectArc, *, with_project: bool, files: Sequence[str] | None = None) -> str:
    """``- 2026-11-20 · [project ·] title — summary; files: a, b`` for one arc (``files``: the
    arc's own main files unless given)."""
    arc = pa.arc
    what = feed_text(arc.title, 100)
    if arc.summary:
        what += f" — {feed_text(arc.summary, 160)}"
    project = f"{feed_text(arc.project or '', 60)} · " if with_project else ""
    main_files = files_in_play(arc)[:ARC_FILES] if files is None else list(files)
    files = f"; files: {code_list(feed_path(f, 80) for f in main_files)}" if main_files else ""
    scripted = " (one-shot run)" if pa.scripted else ""
    return f"- {pa.last_active.date().isoformat()} · {project}{what}{scripted}{files}"


#: Other projects' arcs that worked in a project's folder and count as its recent work, newest first.
VISITS = 3


def _slashed(path: str) -> str:
    """``path`` with ``/`` separators, as :func:`visits` matches it. Not redacted here: every
    path a feed line shows is redacted as it is rendered (:func:`feed_path`), and a redaction
    per file of every shown arc cost a tick 0.1 s on fifteen projects."""
    return path.replace("\\", "/").rstrip("/")


def _place(path: str) -> str:
    """``path`` as a key that names the same folder however it was typed: a Windows path (its
    drive letter) in lower case (``d:/ClaudeCode workspace`` is ``D:/ClaudeCode workspace``)."""
    return path.lower() if DRIVE_PATH.match(path) else path


def visits(by_project: Mapping[str, list[ProjectArc]]) -> dict[str, list[ProjectArc]]:
    """Project -> the newest :data:`VISITS` arcs of other projects whose sessions edited or read
    files in its folder (a recorded cwd of its own): a repository set up from the one beside it
    (``~/work/mentis`` created by a session in ``~/work/fortune_ai``), a package worked on from
    the monorepo's root. Each keeps only those files, relative to the folder. A folder that
    holds the other session's own cwd (a folder of projects, a monorepo's root seen from its
    packages) and a home folder are nobody's visit. A file under no recorded cwd that lies in a
    folder named like a project (:func:`named_projects`) is that project's: the same repository
    checked out elsewhere (``~/Documents/M-Claude`` edited from the home folder on one machine,
    the project's sessions in ``/home/u/M-Claude`` on another). Read from each project's first
    :data:`SHOWN_ARCS` arcs, as a quiet tick sees them."""
    roots: dict[str, set[str]] = {}  # a recorded cwd -> the projects whose sessions started there
    for project, arcs in by_project.items():
        for pa in arcs[:SHOWN_ARCS]:
            if pa.arc.cwd:
                cwd = _slashed(pa.arc.cwd)
                if ABSOLUTE_PATH.match(cwd + "/") and cwd.count("/") >= 2 and not is_home_folder(cwd):
                    roots.setdefault(_place(cwd), set()).add(project)
    named = named_projects(by_project)
    found: dict[str, dict[str, tuple[ProjectArc, list[str]]]] = {}
    holding: dict[str, str] = {}  # a file's folder -> the deepest recorded cwd holding it, or its top
    # A recorded cwd with no other below it holds every file under it as the session's own: those
    # files are nobody's visit, and are not looked at one by one.
    alone = {root for root in roots if not any(other.startswith(root + "/") for other in roots)}
    for project, arcs in by_project.items():
        for pa in arcs[:SHOWN_ARCS]:
            if not pa.arc.cwd or not pa.arc.files or tool_run(pa.arc):
                continue
            cwd = _slashed(pa.arc.cwd)
            place = _place(cwd)
            own = place + "/" if place in alone else None
            for path in pa.arc.files:
                slashed = _slashed(path)
                absolute = ABSOLUTE_PATH.match(slashed) is not None
                if own is not None and (not absolute or _place(slashed).startswith(own)):
                    continue
                full = slashed if absolute else f"{cwd}/{slashed}"
                folder = start = full.rsplit("/", 1)[0]
                known = holding.get(start)
                if known is not None:
                    folder = known
                else:
                    while folder.count("/") >= 2 and _place(folder) not in roots:  # the deepest recorded cwd holding it
                        folder = folder.rsplit("/", 1)[0]
                    holding[start] = folder
                key = _place(folder)
                if key in roots:
                    owners = roots[key] - {project}
                else:  # in no recorded cwd: a folder named like another project, the deepest
                    folder, owners = _named_folder(full, named, project)
                    key = _place(folder)
                if not owners or place == key or place.startswith(key + "/"):
                    continue  # in no project's folder, or in one that holds the session's own
                for owner in owners:
                    seen = found.setdefault(owner, {}).setdefault(pa.arc.cluster_id, (pa, []))[1]
                    if full[len(folder) + 1:] not in seen:
                        seen.append(full[len(folder) + 1:])
    out: dict[str, list[ProjectArc]] = {}
    for owner, arcs_found in found.items():
        chosen = sorted(arcs_found.values(), key=lambda v: (-v[0].last_active.timestamp(), v[0].arc.cluster_id))
        out[owner] = [
            replace(pa, arc=replace(pa.arc, files=tuple(files), commands=(), open_errors=(), errors_met=(),
                                    identifiers=()), visit=True)
            for pa, files in chosen[:VISITS]
        ]
    return out


def named_projects(by_project: Mapping[str, list[ProjectArc]]) -> dict[str, str]:
    """Project names (lower case) that name a repository wherever it is checked out -> the
    project: a name that can name a repository (:func:`brain.core.project.can_name_a_repository`:
    not ``src``, ``Documents``…), nor a folder many repositories have (``frontend``, ``server``),
    not a project whose sessions started in a home folder (its name is a user's), and one
    project only. Read from each project's first :data:`SHOWN_ARCS` arcs, like
    :func:`visits`."""
    named: list[tuple[str, str]] = []
    for project, arcs in by_project.items():
        name = project.lower()
        if not can_name_a_repository(name) or name in SUBFOLDER_NAMES or name in UNKNOWN_PROJECTS:
            continue
        if any(pa.arc.cwd and is_home_folder(pa.arc.cwd) for pa in arcs[:SHOWN_ARCS]):
            continue
        named.append((name, project))
    return sole_owners(named)


def _named_folder(full: str, named: Mapping[str, str], project: str) -> tuple[str, set[str]]:
    """The deepest folder of ``full`` (a file's absolute path) named like a project other than
    ``project``, not a top-level folder (``/private`` of ``/private/var/folders/…`` is macOS's, not
    a project called private; a drive's ``D:/M-Claude`` can be one) nor a home folder, and that
    project; ("", empty) when there is none, or the file is scratch (``/tmp/…``)."""
    if full.startswith(SCRATCH_PREFIXES):
        return "", set()
    parts = full.split("/")
    lowest = 2 if parts[0] == "" else 1  # ``D:/M-Claude`` is a drive's folder, ``/private`` the system's
    for index in range(len(parts) - 2, lowest - 1, -1):
        owner = named.get(parts[index].lower())
        if owner is not None:
            folder = "/".join(parts[:index + 1])
            if owner == project or is_home_folder(folder):
                break
            return folder, {owner}
    return "", set()


def fallback_title(arc: ArcInfo) -> bool:
    """The arc's title only repeats its project (``spotter: app.js``, ``59b923df4d session``):
    the clusterer found no prompt that says what the work was."""
    title, project = arc.title.strip().lower(), (arc.project or "").strip().lower()
    return bool(project) and (title == project or title.startswith((f"{project}:", f"{project} session")))


def adds_something(pa: ProjectArc, shown_files: set[str], files: Sequence[str] | None = None) -> bool:
    """A row is worth a line unless its title repeats the project and its files are all listed already."""
    own = files_in_play(pa.arc)[:ARC_FILES] if files is None else files
    return not fallback_title(pa.arc) or not set(own) <= shown_files


def recent_work(arcs: list[ProjectArc], learned: Learned | None = None) -> tuple[list[FeedItem], set[str]]:
    """Rows for the arcs before the latest (:data:`RECENT_ARCS`, passing over one that adds
    nothing), and their cluster ids; a row carries its arc's lessons and decision: what was
    done, where, and what it taught, on one line."""
    shown = set(files_in_play(arcs[0].arc)) if arcs else set()
    items: list[FeedItem] = []
    on_rows: set[str] = set()
    for pa in arcs[1 : RECENT_ARCS + 2]:  # one arc further, in case one adds nothing
        if len(items) == RECENT_ARCS:
            break
        if adds_something(pa, shown):
            rank = NEVER if len(items) < KEEP_TOP_ARCS - 1 else RANK_ARC
            line = arc_line(pa, with_project=pa.visit)
            if learned is not None:
                line += learned.on_row(pa.arc.cluster_id)
            items.append(FeedItem(line, rank, section=RECENT))
            on_rows.add(pa.arc.cluster_id)
        shown.update(files_in_play(pa.arc)[:ARC_FILES])
    return items, on_rows


def shown_arcs(by_project: Mapping[str, list[ProjectArc]], by_cwd: CwdLatest) -> set[str]:
    """The cluster_ids the project files, their index and ``recent-work.md`` can read: each
    project's first :data:`SHOWN_ARCS` and its newest arcs (a one-shot run sorts after real
    work: the index's ``last_active``), and for each recorded ``cwd`` its latest arcs
    (``by_cwd``: :func:`latest_by_cwd` of ``by_project``)."""
    shown: set[str] = set()
    for arcs in by_project.values():
        shown.update(pa.arc.cluster_id for pa in arcs[:SHOWN_ARCS])
        newest = max((pa.last_active for pa in arcs), default=None)
        shown.update(pa.arc.cluster_id for pa in arcs if pa.last_active == newest)
    for _, latest in by_cwd.values():
        shown.update(pa.arc.cluster_id for _, pa in latest)
    return shown


#: Each recorded cwd (as written) -> the last activity of its latest arcs, and those arcs with
#: their projects (:func:`latest_by_cwd`).
CwdLatest = dict[str, tuple[datetime, list[tuple[str, "ProjectArc"]]]]


def latest_by_cwd(by_project: Mapping[str, list[ProjectArc]]) -> CwdLatest:
    """Each recorded cwd's latest arcs (all of the same last activity), with their projects: what
    :func:`shown_arcs` and :func:`cwd_latest` read, worked out once a build."""
    latest: CwdLatest = {}
    for project, arcs in by_project.items():
        for pa in arcs:
            cwd = pa.arc.cwd
            if cwd:
                known = latest.get(cwd)
                if known is None or known[0] < pa.last_active:
                    latest[cwd] = (pa.last_active, [(project, pa)])
                elif known[0] == pa.last_active:
                    known[1].append((project, pa))
    return latest


def tool_run(arc: ArcInfo) -> bool:
    """A headless run started in a tool's own hidden folder: an SDK client such as claude-mem's
    observer (``~/.claude-mem/observer-sessions``), reading what an operator's session did. It is
    no visit of the projects it read and no recent work across projects; a ``claude -p`` run
    from an ordinary folder still is."""
    return arc.headless and arc.cwd is not None and "/." in _slashed(arc.cwd)


def latest_real_arcs(by_project: Mapping[str, list[ProjectArc]], limit: int) -> list[ProjectArc]:
    """The newest ``limit`` arcs of every project's real work (no scripted runs, no tool's run),
    newest first. Each project's list is in that order already (:func:`work_order`: real work
    first, then newest, then by id), so they are merged, not all sorted again."""
    def key(pa: ProjectArc) -> tuple[float, str]:
        return -pa.last_active.timestamp(), pa.arc.cluster_id

    real = ((pa for pa in arcs if not pa.scripted and not tool_run(pa.arc)) for arcs in by_project.values())
    return list(itertools.islice(heapq.merge(*real, key=key), max(0, limit)))


def recent_work_file(latest: Sequence[ProjectArc], s: Settings, date: str) -> FeedFile:
    """``recent-work.md``: the latest real work across projects, for a session outside every
    known project (the global feed). First the commands and errors, those several projects
    share first; then one row per project, most recently active first: its latest arc and the
    files its recent arcs worked on most, so one busy project does not fill the list, and the
    files they worked on far from its folder (:func:`worked_away`)."""
    feed = FeedFile(RECENT_WORK, "Recent Work", 6, "info", date, s.feed_ttl_seconds,
                    "# Recent work across projects\n")
    per_project: dict[str, list[ProjectArc]] = {}
    for pa in latest[:RECENT_WORK_AGGREGATE]:
        per_project.setdefault(pa.arc.project or "", []).append(pa)
    listed: set[str] = set()
    rows = list(per_project.values())[:RECENT_WORK_PROJECTS]
    for arcs in rows:
        files = ranked((files_in_play(pa.arc) for pa in arcs), RECENT_WORK_FILES)
        away = [f for f in far_files(arcs) if f not in files and f not in listed][:RECENT_WORK_AWAY]
        if adds_something(arcs[0], listed, [*files, *away]):
            line = arc_line(arcs[0], with_project=True, files=files)
            if away:
                line += f"; outside it: {code_list(feed_path(f, 80) for f in away)}"
            feed.items.append(FeedItem(line, RANK_RECENT))
        listed.update(files)
        listed.update(away)
    more = more_of_latest(rows, listed)
    if more is not None:
        feed.items.append(FeedItem(more, RANK_MORE))
    commands = shared_first([ranked((pa.arc.commands for pa in arcs), RECENT_WORK_COMMANDS)
                             for arcs in per_project.values()], RECENT_WORK_COMMANDS)
    errors = shared_first([error_names(arcs) for arcs in per_project.values()], MAX_ERROR_NAMES)
    # One line, as a project file's (:func:`work_line`): what was run, then what failed.
    parts = [f"{label}: {code_list(found)}" for label, found in (
        ("Commands lately", [feed_text(c, 80) for c in commands]), ("errors lately", errors)) if found]
    if parts:
        line = "; ".join(parts)
        # First: in a home folder's feed, where this file fills what the project's leaves, the cut
        # takes the oldest project's row (its files and those outside it), not the habits.
        feed.items.insert(0, FeedItem(f"- {line[0].upper()}{line[1:]}", RANK_RECENT))
    return feed


def more_of_latest(rows: Sequence[Sequence[ProjectArc]], listed: set[str]) -> str | None:
    """The line after every row: more of the files the latest project's recent arcs worked on, in
    it and far from it, when fewer than :data:`RECENT_WORK_PROJECTS` projects have rows (the files
    the missing rows would have listed, :data:`RECENT_WORK_FILES` and :data:`RECENT_WORK_AWAY`
    each). A session outside every project, with few projects in the vault, most likely carries
    on the latest one (a home's desktop after work on the operator's notes), and the budget has
    the room. Last in the file and cut first (:data:`RANK_MORE`), so it never costs a row."""
    spare = RECENT_WORK_PROJECTS - len(rows)
    if not rows or spare <= 0:
        return None
    arcs = rows[0]
    # Every file an arc lists (its own first, up to its 60), not the few in play of its row.
    own = ([f for f in pa.arc.files if not f.startswith(SCRATCH_PREFIXES) and f not in far]
           for pa in arcs for far in [set(worked_away(pa.arc))])
    files = [f for f in ranked(own, RECENT_WORK_FILES * (spare + 1) + len(listed))
             if f not in listed][:RECENT_WORK_FILES * spare]
    away = [f for f in far_files(arcs) if f not in listed and f not in files][:RECENT_WORK_AWAY * spare]
    if not files and not away:
        return None
    parts = [f"files: {code_list(feed_path(f, 80) for f in files)}"] if files else []
    if away:
        parts.append(f"outside it: {code_list(feed_path(f, 80) for f in away)}")
    project = feed_text(arcs[0].arc.project or "", 60)
    whose = f"{project}'s" if project else "the latest"
    return f"- More of {whose} recent work, " + "; ".join(parts)


def far_files(arcs: Sequence[ProjectArc]) -> list[str]:
    """What ``arcs`` (a project's, newest first) worked on far from its folder (:func:`worked_away`), once each."""
    return list(dict.fromkeys(f for pa in arcs for f in worked_away(pa.arc)))


def worked_away(arc: ArcInfo) -> list[str]:
    """The files ``arc`` worked on far from its folder, in its order: absolute paths neither in
    its cwd nor in a folder beside it (the operator's ``~/.claude``, a notes vault on another
    drive, ``/etc``), not scratch files. The arc's files rank them last, after the project's own,
    so its in-play files never show them; a session in a home folder or a new one may well
    continue that work."""
    cwd = _slashed(arc.cwd or "")
    return [f for f in arc.files if ABSOLUTE_PATH.match(f) and not f.startswith(SCRATCH_PREFIXES)
            and not sibling_folder(f, cwd) and not (cwd and _place(f).startswith(_place(cwd) + "/"))]


def lesson_list(texts: Sequence[str]) -> str:
    return f"lesson{'s' if len(texts) > 1 else ''}: {' · '.join(texts)}"


@dataclass(frozen=True)
class Learned:
    """What the most recent arcs taught, per arc (cluster id): a few lessons that still apply,
    not the archive, and the latest decision (a mined one that is a question or a request to
    the agent is left out)."""

    lessons: Mapping[str, Sequence[str]]
    decisions: Mapping[str, Sequence[str]]  # cluster id -> ``Decision (date): text`` (at most one in all)

    def on_row(self, cluster_id: str) -> str:
        """``; lesson: …; decision (date): …`` for an arc's row under recent work, or ""."""
        parts = []
        if self.lessons.get(cluster_id):
            parts.append(lesson_list(self.lessons[cluster_id]))
        parts += [d[0].lower() + d[1:] for d in self.decisions.get(cluster_id, ())]
        return "".join(f"; {part}" for part in parts)


def arc_lessons(arcs: list[ProjectArc]) -> Learned:
    lessons: dict[str, list[str]] = {}
    decisions: dict[str, list[str]] = {}
    seen: set[str] = set()
    for pa in arcs[:LESSON_ARCS]:
        for marker in pa.decision.note.markers:
            if marker.type not in ("lesson", "decision") or not marker.text:
                continue
            text = feed_text(marker.text, 240)
            if marker.type == "decision":
                if decisions or not decides(marker.text):
                    continue
                date = marker.attr("date")
                decisions[pa.arc.cluster_id] = [f"Decision ({feed_text(date, 10)}): {text}" if date else f"Decision: {text}"]
            elif text not in seen and len(seen) < MAX_LESSONS:
                seen.add(text)
                lessons.setdefault(pa.arc.cluster_id, []).append(text)
    return Learned(lessons, decisions)


def lessons(arcs: list[ProjectArc], learned: Learned, on_rows: set[str]) -> list[FeedItem]:
    """Lessons, then the decision, of the most recent arcs that have no row under recent work
    (a row carries its own): one dated line per arc (``- Lessons (2026-11-21): A · B``), one
    piece of work's outcome and how fresh it is."""
    chosen = []
    for pa in arcs[:LESSON_ARCS]:
        texts = learned.lessons.get(pa.arc.cluster_id, ())
        if texts and pa.arc.cluster_id not in on_rows:
            label = "Lessons" if len(texts) > 1 else "Lesson"
            chosen.append(f"- {label} ({pa.last_active.date().isoformat()}): {' · '.join(texts)}")
    chosen += [f"- {d}" for cluster_id, ds in learned.decisions.items() if cluster_id not in on_rows for d in ds]
    return [FeedItem(line, RANK_LESSON, section=LESSONS) for line in chosen]


def is_question(text: str) -> bool:
    """A mined "decision" that ends in a question mark asked something; it decided nothing."""
    return text.rstrip().rstrip("\"'`)").endswith("?")


_REQUEST = re.compile(r"^\W*(?:please\b|(?:can|could|would) you\b|i'?d like\b|never ?mind\b)", re.IGNORECASE)


def decides(text: str) -> bool:
    """A mined decision that still guides the next session: not a question ("does it only run on
    main?") and not a request to that session's agent ("please add transformer.js too first")."""
    return not is_question(text) and _REQUEST.match(text) is None


def words_of(text: str) -> str:
    """``text`` as a reader matches names in it: lower case, every run of other characters one
    space, padded (``templates/index.html`` reads ``templates index html``)."""
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def said(item: str, shown: str) -> bool:
    """``item`` already stands in ``shown`` (a :func:`words_of` text) as a whole-word phrase:
    ``index.html`` in ``templates/index.html``, ``phx.server`` in ``mix phx.server``."""
    key = words_of(item).strip()
    return bool(key) and f" {key} " in shown


def used_here(arcs: list[ProjectArc], above: Sequence[FeedItem] = (), max_files: int = MAX_FILES) -> list[FeedItem]:
    """Files, then commands, identifiers and errors of the recent arcs, ranked, on two lines
    (a line that names many things rather than many lines that each name a few); an
    identifier the files or commands already name (``index.html`` beside
    ``templates/index.html``, ``phx.server`` beside ``mix phx.server``) is not listed twice."""
    window = arcs[:AGGREGATE_ARCS]
    items = []
    shown = set(files_in_play(arcs[0].arc)) if arcs else set()
    # Ranked over the arcs, then the project's own files before installed dependencies (as in
    # each arc): a library's sources read in the latest arc do not push out an older arc's modules.
    every = ranked((pa.arc.files for pa in window), max_files * len(window))
    files = own_files_first(f for f in every if f not in shown and not f.startswith(SCRATCH_PREFIXES))[:max_files]
    if files:
        items.append(FeedItem(f"- Files: {code_list(feed_path(f, 100) for f in files)}", RANK_FILES, section=USED))
    commands = ranked((pa.arc.commands for pa in window), MAX_COMMANDS)
    listed = words_of("\n".join([*files, *commands]))
    identifiers = [i for i in ranked((pa.arc.identifiers for pa in window), MAX_IDENTIFIERS * 2)
                   if not said(i, listed)][:MAX_IDENTIFIERS]
    # An error name is worth its own mention only where no lesson or unresolved error above
    # already says what failed and how it was fixed.
    told = shown_by(above, RANK_LESSON)
    errors = [e for e in error_names(window) if not said(e, told)]
    line = work_line(commands, identifiers, errors)
    if line:
        items.append(FeedItem(line, RANK_COMMANDS, section=USED))
    return items


def work_line(commands: Sequence[str], identifiers: Sequence[str], errors: Sequence[str]) -> str:
    """``- Commands: …; identifiers: …; errors seen: …``, the empty lists left out; "" when all are."""
    parts = [f"{label}: {code_list(feed_text(i, 80) for i in found)}"
             for label, found in (("commands", commands), ("identifiers", identifiers), ("errors seen", errors))
             if found]
    line = "; ".join(parts)
    return f"- {line[0].upper()}{line[1:]}" if line else ""


def shown_by(items: Sequence[FeedItem], rank: int) -> str:
    """The words of the ``items`` that stay in the file as long as a line of ``rank`` does
    (the budget cuts lower ranks first)."""
    return words_of("\n".join(i.text for i in items if i.rank >= rank))


def error_names(arcs: Sequence[ProjectArc]) -> list[str]:
    """Error class names, errno names and compiler codes met in these arcs' errors and lessons
    (``AssertionError``, ``ECONNREFUSED``, ``TS2345``), most frequent and recent first."""
    per_arc = []
    for pa in arcs:
        if pa.visit:  # another project's work: its errors are its own
            continue
        texts = [*pa.arc.open_errors, *(m.text for m in pa.decision.note.markers if m.type == "lesson")]
        names = [name for text in texts for name in text_error_names(text)]
        per_arc.append([*names, *(n for n in pa.arc.errors_met if n not in names)])
    return ranked(per_arc, MAX_ERROR_NAMES)


def routed_to(project: str, routed: Sequence[Routed]) -> list[Routed]:
    """The signals or injects that belong in ``project``'s file (its own, aimed at it, or everywhere)."""
    return [r for r in routed if r.everywhere or r.project == project or (r.target and r.target == project)]


def routed_for(project: str, routed: Sequence[Routed], section: str) -> list[FeedItem]:
    return [replace(r.item, section=section) for r in routed_to(project, routed)]


def project_file(project: str, name: str, arcs: list[ProjectArc], signals: Sequence[Routed],
                 injects: Sequence[Routed], s: Settings, date: str,
                 visited: Sequence[ProjectArc] = ()) -> FeedFile:
    """``visited``: other projects' arcs that worked in this project's folder (:func:`visits`);
    they take their place by time among the arcs after the latest (the handoff stays this
    project's), for the recent-work row and the files used here."""
    base = name.rsplit("/", 1)[-1].removesuffix(".md")  # YAML-safe, unlike a project name
    feed = FeedFile(name, f"Project {base}", PRIORITY, "info", date, s.feed_ttl_seconds,
                    f"# {cut(redact(project), 80)}: where we left off\n", budgeted=False)
    mine = routed_to(project, signals)
    signal_items = [replace(r.item, section=SIGNALS) for r in mine]
    if mine:
        feed.severity = mine[0].severity or "info"
    inject_items = routed_for(project, injects, INJECTED)
    learned = arc_lessons(arcs)
    worked = arcs
    if visited:
        worked = [arcs[0], *sorted([*arcs[1:], *visited], key=work_order)]
    rows, on_rows = recent_work(worked, learned)
    above = [*handoff(project, arcs), *signal_items, *rows, *lessons(arcs, learned, on_rows)]
    for count in FILES_STEPS:  # the longest list the file fits its budget with, else the shortest
        feed.items = [*above, *used_here(worked, above, count), *inject_items]
        if count == TIGHT_FILES or math.ceil(len(feed.render()) / 4) <= s.feed_token_budget:
            break
    fit_budget([feed], 0, s.feed_token_budget)
    return feed


#: A folder beside a project's recorded cwd, or below it, where its sessions edited or read at
#: least this many files (``X:/acg/Odoo_Docker`` worked on from ``X:/acg/Odoo_Docs``,
#: ``packages/app`` of a monorepo worked on from its root): a session opened there is that
#: project's work, not a new project's nor the one of a session once started in a folder between.
TOUCHED_FILES = 2
#: Folders below a recorded cwd are kept this many levels deep (``packages/app``).
WORK_FOLDER_DEPTH = 2


def work_folders(path: str, cwd: str) -> list[str]:
    """The folders below ``cwd`` (``/`` separators) holding ``path``, at most
    :data:`WORK_FOLDER_DEPTH` levels deep, shallowest first; none for a path outside it or in a
    hidden folder (``.github``)."""
    base = cwd.rstrip("/")
    if path.startswith(base + "/"):
        path = path[len(base) + 1:]
    elif ABSOLUTE_PATH.match(path) or path.startswith(("~", "../")):
        return []
    parts = path.split("/")[:-1][:WORK_FOLDER_DEPTH]
    out = []
    for depth, part in enumerate(parts, 1):
        if not part or part.startswith("."):
            break
        out.append(f"{base}/{'/'.join(parts[:depth])}")
    return out


def below_home_area(folder: str, path: str) -> str:
    """``folder`` (holding ``path``, absolute) as a claim on the folders below it. A home (another
    user's, beside this one's) holds sessions about anything, and a folder right in a home holds
    any number of unrelated projects (a cloud drive, ``~/src``, ``~/Documents``) unless a file
    lies right in it or in a hidden folder of its own (a repository kept there): for those the
    claim is the folder below them on ``path``'s way (``~/OneDrive/Vault`` for
    ``~/OneDrive/Vault/notes/a.md``); a home itself is never claimed."""
    while folder and path.startswith(folder + "/"):
        home = is_home_folder(folder)
        if not home and not is_home_folder(folder.rsplit("/", 1)[0]):
            break
        below = path[len(folder) + 1:].split("/")
        if len(below) < 2 or below[0].startswith("."):
            return "" if home else folder
        folder = f"{folder}/{below[0]}"
    return folder


def touched_folders(by_project: Mapping[str, list[ProjectArc]], roots: Mapping[str, object]) -> dict[str, str]:
    """Folder -> the project whose sessions worked there from their own cwd (see
    :data:`TOUCHED_FILES`): beside it, or below it (:func:`work_folders`), from each project's
    first :data:`SHOWN_ARCS` arcs (those a quiet tick reads); a recorded cwd is never one (its
    own sessions say whose it is). ``roots``: the recorded cwds, redacted, as the folders are.

    The folders are found on the paths as written and each distinct folder is redacted once
    (a redaction per file of every shown arc cost a tick 0.2 s on fifteen projects of 35-file
    arcs); what a file claims depends only on its folder and the cwd, so each folder is looked
    at once."""
    grouped: dict[tuple[str, str, str], tuple[str, set[str]]] = {}  # (project, cwd, a folder) -> a file, its files
    for project, arcs in by_project.items():
        for pa in arcs[:SHOWN_ARCS]:
            if not pa.arc.cwd:
                continue
            cwd = pa.arc.cwd.replace("\\", "/")
            for path in pa.arc.files:
                slashed = path.replace("\\", "/")
                grouped.setdefault((project, cwd, slashed.rpartition("/")[0]), (slashed, set()))[1].add(path)
    seen: dict[tuple[str, str], set[str]] = {}
    claimed: dict[tuple[str, str], list[str]] = {}  # (cwd, a file's folder) -> the folders its files claim
    for (project, cwd, where), (slashed, files) in grouped.items():
        found = claimed.get((cwd, where))
        if found is None:
            found = claimed[(cwd, where)] = _claims(slashed, cwd)
        for folder in found:
            shown = redact_recurring(folder)
            if shown not in roots:
                seen.setdefault((shown, project), set()).update(files)
    best: dict[str, tuple[int, str]] = {}
    for (folder, project), files in seen.items():
        if len(files) >= TOUCHED_FILES and (folder not in best or best[folder] < (len(files), project)):
            best[folder] = (len(files), project)
    return {folder: best[folder][1] for folder in sorted(best)}


def _claims(slashed: str, cwd: str) -> list[str]:
    """The folders a file (``/`` separators) seen from ``cwd`` claims for its project: beside
    ``cwd`` or below it, each as :func:`below_home_area` has it. Every file of one folder claims
    the same (none of these reads a file's own name)."""
    full = slashed if ABSOLUTE_PATH.match(slashed) else f"{cwd.rstrip('/')}/{slashed}"
    out = []
    for found in (sibling_folder(slashed, cwd), *work_folders(slashed, cwd)):
        folder = below_home_area(found, full)
        if folder:
            out.append(folder)
    return out


#: A recorded cwd with the recorded cwds of this many other projects below it can be a folder of projects.
HELD_PROJECTS = 2


def folders_of_projects(roots: Mapping[str, str], branched: set[str]) -> list[str]:
    """Recorded cwds (``roots``: cwd -> project) that are folders of projects, not one: the
    cwds of :data:`HELD_PROJECTS` other projects or more lie below it (``~/work`` where one
    session started, above ``~/work/libnn`` and ``~/work/sim``), and its latest session there
    was on no git branch (``branched``: a repository's folders are its own, whatever its
    packages' sessions). A new folder in one (``~/work/libnn_baseline``) is not its project."""
    ordered = sorted(roots)
    out = []
    for root in ordered:
        if root in branched:
            continue
        below = root.rstrip("/") + "/"
        others: set[str] = set()
        # the cwds below it, one run of the sorted list ("/" + 1 is "0")
        for folder in ordered[bisect.bisect_left(ordered, below):bisect.bisect_left(ordered, below[:-1] + "0")]:
            if roots[folder] != roots[root]:
                others.add(roots[folder])
                if len(others) >= HELD_PROJECTS:
                    out.append(root)
                    break
    return out


def worked(arcs: Sequence[ProjectArc]) -> str | None:
    """The newest activity of ``arcs`` (a project's, in :func:`project_arcs` order) that was not a
    headless run, among the first :data:`SHOWN_ARCS` a quiet tick reads too; None when there is
    none (every one an SDK client's or ``claude -p``'s): no operator moved on from it."""
    times = [pa.last_active for pa in arcs[:SHOWN_ARCS] if not pa.arc.headless]
    return iso(max(times)) if times else None


def index_file(names: Mapping[str, str], by_project: Mapping[str, list[ProjectArc]],
               latest: Mapping[str, tuple[float, str, bool]], now: datetime, s: Settings, date: str) -> FeedFile:
    """``projects/index.json``: project -> file and newest activity, recorded cwd -> project,
    the recorded cwds that are folders of projects, folders a project's sessions worked in from
    beside them -> project, and when it was built. ``latest``: :func:`cwd_latest` of ``by_project``."""
    roots: dict[str, tuple[float, str]] = {}
    on_branch: dict[str, tuple[float, bool]] = {}  # cwd -> its latest arcs' time, whether one was on a branch
    for raw, (at, project, branch) in latest.items():
        cwd = redact_recurring(raw).replace("\\", "/").rstrip("/") or "/"
        if cwd not in roots or roots[cwd] < (at, project):  # two cwds one once redacted: the latest's
            roots[cwd] = (at, project)
        known = on_branch.get(cwd)
        if known is None or known[0] < at:
            on_branch[cwd] = (at, branch)
        elif known[0] == at and branch:
            on_branch[cwd] = (at, True)
    branched = {cwd for cwd, (_, branch) in on_branch.items() if branch}
    data = {
        "version": INDEX_VERSION,
        "generated": iso(now),
        "ttl": s.feed_ttl_seconds,
        "projects": {
            # The newest arc, a one-shot run's too (they sort after real work): what the hook
            # compares a just-ended session's end with, to know the vault holds it.
            project: {"file": names[project], "last_active": iso(max(pa.last_active for pa in by_project[project])),
                      # its newest work by an operator, not a scripted run (:func:`worked`)
                      "worked": worked(by_project[project])}
            for project in sorted(names)
        },
        "roots": {cwd: roots[cwd][1] for cwd in sorted(roots)},
        "holders": folders_of_projects({cwd: found[1] for cwd, found in roots.items()}, branched),
        "touched": touched_folders(by_project, roots),
    }
    return _index_feed(data, s, date)


def _index_feed(data: Mapping[str, Any], s: Settings, date: str) -> FeedFile:
    return FeedFile(INDEX, "Project index", 0, "info", date, s.feed_ttl_seconds, "",
                    raw=json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", budgeted=False)


#: What an arc's file says that no project file reads, and the tick rewrites as time passes.
_UNREAD_ARC_KEYS = frozenset({"heat", "status"})
#: The modules that render a project file: a change to any of them renders every file again.
_RENDERING_MODULES = ("brain.core.project_feed", "brain.core.feed_file", "brain.core.redaction", "brain.core.text",
                      "brain.core.workpaths", "brain.core.project")


@functools.cache
def _rendering_code() -> str:
    digest = hashlib.sha1(usedforsecurity=False)
    for name in _RENDERING_MODULES:
        path = getattr(sys.modules.get(name), "__file__", None)
        try:
            digest.update(Path(path).read_bytes() if path else name.encode())
        except OSError:
            digest.update(f"{name}:{time.time_ns()}".encode())  # unreadable: never the same twice
    return digest.hexdigest()


def _arc_inputs(pa: ProjectArc) -> tuple[Any, ...]:
    """What the project file can read of one arc (:class:`ArcInfo` but its heat and status, its
    markers but their offsets, which a heat rewrite moves), as plain values."""
    values = [tuple(vars(v).values()) if isinstance(v, Activity) else v
              for k, v in vars(pa.arc).items() if k not in _UNREAD_ARC_KEYS]
    markers = [(m.type, m.attrs, m.content) for m in pa.decision.note.markers]
    return (values, markers, pa.last_active.timestamp(), pa.scripted, pa.visit, pa.decision.path)


def inputs_key(project: str, name: str, arcs: Sequence[ProjectArc], visited: Sequence[ProjectArc],
               routed: Sequence[str], s: Settings, date: str) -> str:
    """The digest of everything :func:`project_file` reads for ``project``: the first
    :data:`SHOWN_ARCS` of its arcs and the visits (no section reads further), the signals and
    injects routed to it (``routed``: each one's :func:`routed_inputs`, in order), the settings
    it uses, the date, and the code that renders it."""
    return digest_of((_rendering_code(), project, name, date, s.feed_token_budget, s.feed_ttl_seconds,
                      [_arc_inputs(pa) for pa in arcs[:SHOWN_ARCS]], [_arc_inputs(pa) for pa in visited],
                      # reprs hold no raw newline: one line each, hashed rather than quoted again
                      hashlib.sha1("\n".join(routed).encode("utf-8", "surrogatepass"),
                                   usedforsecurity=False).hexdigest(), len(routed)))


def digest_of(material: Any) -> str:
    """The sha1 of a plain value (strings, numbers, None, tuples, lists, dicts): of its
    :mod:`marshal` version 0 form, which has no references to shared or interned objects, so
    equal values give the same bytes in every process (a third of the time of its ``repr``)."""
    try:
        data = marshal.dumps(material, 0)
    except ValueError:  # not a plain value after all: its repr, slower but as faithful
        data = repr(material).encode("utf-8", "surrogatepass")
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


def routed_inputs(routed: Routed) -> str:
    return repr((routed.item, routed.project, routed.everywhere, routed.target, routed.severity))


def project_files(by_project: Mapping[str, list[ProjectArc]], signals: Sequence[Routed],
                  injects: Sequence[Routed], now: datetime, s: Settings, date: str,
                  before: Mapping[str, tuple[str, str]] | None = None, *, by_cwd: CwdLatest) -> list[FeedFile]:
    """Every project's feed file, then the index (always written, so the hook knows the feed's age).
    ``by_cwd``: :func:`latest_by_cwd` of ``by_project``.

    ``before``: file name -> (its :attr:`FeedFile.inputs`, its text) as an earlier build wrote
    them; a project whose inputs are the same gets that text again, not rendered anew (a tick
    two hours later re-renders only the projects whose arcs, signals or injects changed)."""
    names = file_names(by_project)
    visited = visits(by_project)
    shown = {id(r): routed_inputs(r) for r in (*signals, *injects)}  # a critical signal is in every file
    files = []
    for project in sorted(by_project):
        name, arcs, visits_here = names[project], by_project[project], visited.get(project, ())
        routed = [shown[id(r)] for r in (*routed_to(project, signals), *routed_to(project, injects))]
        key = inputs_key(project, name, arcs, visits_here, routed, s, date)
        known = (before or {}).get(name)
        if known is not None and known[0] == key:
            made = FeedFile(name, "", PRIORITY, "info", date, s.feed_ttl_seconds, "", raw=known[1], budgeted=False)
        else:
            made = project_file(project, name, arcs, signals, injects, s, date, visits_here)
        made.inputs = key
        files.append(made)
    latest = cwd_latest(by_cwd)
    key = index_inputs_key(by_project, files, latest, s)
    known = (before or {}).get(INDEX)
    index = _regenerated(known[1], now, s, date) if known is not None and known[0] == key else None
    index = index or index_file(names, by_project, latest, now, s, date)
    index.stamped_inputs = key
    files.append(index)
    return files


def cwd_latest(by_cwd: CwdLatest) -> dict[str, tuple[float, str, bool]]:
    """Each recorded cwd (as written) -> its latest arcs' last activity (POSIX seconds), the
    project :func:`index_file` names for it (of those arcs, the greatest name: one answer in any
    order), and whether one of them was on a git branch. The latest arcs only (``by_cwd``:
    :func:`latest_by_cwd`): those a quiet tick reads too (:func:`shown_arcs`)."""
    return {cwd: (at.timestamp(), max(project for project, _ in arcs), any(bool(pa.arc.branch) for _, pa in arcs))
            for cwd, (at, arcs) in by_cwd.items()}


def index_inputs_key(by_project: Mapping[str, list[ProjectArc]], made: Sequence[FeedFile],
                     latest: Mapping[str, tuple[float, str, bool]], s: Settings) -> str:
    """The digest of everything :func:`index_file` reads but the time: each project's file name
    and inputs digest (``made``, in project order: they cover its first :data:`SHOWN_ARCS` arcs
    whole) and newest activity, and each recorded cwd's latest arcs (``latest``: :func:`cwd_latest`). The
    arcs a quiet tick does not read change none of these: the index it builds is the one the full
    tick before it built, and is taken as it is."""
    newest = [max(pa.last_active for pa in by_project[project]).timestamp() for project in sorted(by_project)]
    return digest_of((_rendering_code(), INDEX_VERSION, s.feed_ttl_seconds, [(f.name, f.inputs) for f in made],
                      newest, sorted(latest.items())))


def _regenerated(text: str, now: datetime, s: Settings, date: str) -> FeedFile | None:
    """``projects/index.json`` as an earlier build wrote it from the same inputs, with this
    build's time (None when it does not read back as such an index)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("version") != INDEX_VERSION or "generated" not in data:
        return None
    data["generated"] = iso(now)
    return _index_feed(data, s, date)
