"""The agent hooks (SPEC §12): hand a session the part of the brain-feed written for it.

``session-start`` reads the hook input (``cwd``, ``session_id``, ``source``), finds the
session's project in ``projects/index.json`` and answers with that project's feed file (plus
any active alarm, and the handoff line of another project worked on just before); a session
outside every known project gets the global feed. When the feed
is older than its TTL, one line says so. ``prompt-submit`` re-sends the same context every
``refresh_interval`` turns when it changed.

Both run at every agent session start and must answer in well under 100 ms: a couple of
small file reads, nothing heavy imported (no yaml, redis, httpx, typer, not even hashlib; its
values are NamedTuples, cheaper to define than dataclasses); the feed files' frontmatter is
read with a small line parser. A hook never gets in the agent's way: a missing
or empty feed prints nothing (exit 0). The command layers are :mod:`brain.launcher` (the fast
path) and :mod:`brain.commands.hook` (typer: help and errors).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from brain.core.project import (
    GENERIC_COMPONENTS,
    WORKED_NAME_MIN,
    can_name_a_repository,
    in_home,
    is_home_folder,
    is_system_folder,
    project_name,
    sole_owners,
)
from brain.core.project import repository_path as strip_worktree
from brain.core.vocab import HOT_ARCS, LAST_DIFF, RECENT_WORK, TIGHT_FILES
from brain.io.atomic import atomic_write, read_regular

if TYPE_CHECKING:
    from brain.settings import Settings

SESSION_START = "SessionStart"
PROMPT_SUBMIT = "UserPromptSubmit"
#: Session state files untouched for this long are removed (at session start).
SESSION_STATE_KEEP_DAYS = 30
#: Where ``session-end`` keeps what each ended session leaves for the next one (in the state
#: folder), how long an entry is kept, how many a session start shows, and an entry's size cap.
ENDED_SUBDIR, ENDED_KEEP_DAYS, ENDED_SHOWN, ENDED_MAX_BYTES = "ended", 2, 2, 64_000
ENDED_SECTION = "ended-sessions"
#: Default ``hook_state_dir``: $XDG_STATE_HOME/brain/hook-sessions.
STATE_SUBDIR = "brain/hook-sessions"
CUT_NOTE = "\n… (cut to fit the feed budget)"
STDIN_MAX_BYTES = 1_000_000
FEED_FILE_MAX_CHARS = 1_000_000
INDEX_MAX_BYTES = 4_000_000
#: How long session-start waits for the hook's stdin JSON.
SESSION_START_STDIN_WAIT = 0.2
#: Every failure exits 1, Claude Code's non-blocking error (2 would block the prompt).
EXIT_HOOK_FAILED = 1
FORMATS = ("json", "text")
PROJECT_INDEX = "projects/index.json"
ALARMS_FILE = "amygdala-active.md"


# --- the feed ----------------------------------------------------------------------------


class FeedSection(NamedTuple):
    name: str
    priority: int
    body: str


def split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """``key: value`` lines of a leading ``---`` block, and the body after it.

    Enough for the feed files the brain writes (flat scalar keys); text without a complete
    block is all body.
    """
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    if lines[0].rstrip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() in ("---", "..."):
            return meta, "".join(lines[index + 1 :])
        key, colon, value = line.partition(":")
        if colon and key.strip() and not line[:1].isspace():
            meta[key.strip()] = value.strip().strip("'\"")
    return {}, text


def _priority(meta: Mapping[str, str]) -> int:
    try:
        return int(meta.get("priority", "0"))
    except ValueError:
        return 0


def read_section(path: Path) -> FeedSection | None:
    """One feed file without its frontmatter; None when unreadable or its body is empty."""
    try:  # a stray huge file cannot slow a session down, nor a named pipe stop it
        text = read_regular(path, FEED_FILE_MAX_CHARS * 4).decode("utf-8", "replace")[:FEED_FILE_MAX_CHARS]
    except OSError:
        return None
    meta, body = split_frontmatter(text)
    body = body.strip()
    return FeedSection(path.name, _priority(meta), body) if body else None


def read_feed(folder: Path) -> list[FeedSection]:
    """The global feed: the folder's ``*.md`` files (not ``health.jsonl``, not ``projects/``),
    highest ``priority`` first, then by name."""
    try:
        paths = [p for p in folder.iterdir() if p.suffix == ".md" and not p.name.startswith(".")]
    except OSError:
        return []
    sections = [section for section in map(read_section, paths) if section is not None]
    sections.sort(key=lambda s: (-s.priority, s.name))
    return sections


#: A project file's "used here" files line (it keeps its first :data:`TIGHT_FILES` before the hook
#: cuts whole lines: what the tick lists when the file is near its budget).
FILES_LINE = "- Files: "
_LISTED = re.compile(r"`[^`]*`")


def shorter_files(body: str, room: int) -> str:
    """``body`` with its files line's tail (the files after the first :data:`TIGHT_FILES`, the
    least ranked) cut until ``body`` fits ``room``, or down to those first files: the tick lists
    up to 120 files when its file fits the budget, and a session that just ended, shown above,
    must not push out the commands line below them first. ``body`` as it is without such a line."""
    lines = body.split("\n")
    for at, line in enumerate(lines):
        if not line.startswith(FILES_LINE):
            continue
        files = _LISTED.findall(line)
        if len(files) <= TIGHT_FILES or FILES_LINE + ", ".join(files) != line:
            return body  # not a list the tick wrote
        over = len(body) - room
        keep = len(files)
        while keep > TIGHT_FILES and over > 0:
            keep -= 1
            over -= len(files[keep]) + 2
        lines[at] = FILES_LINE + ", ".join(files[:keep])
        return "\n".join(lines)
    return body


def assemble(sections: Iterable[FeedSection], budget_chars: int) -> str:
    """The sections joined within ``budget_chars``: lower-priority files go first, whole;
    the first file that does not fit loses its files line's tail (:func:`shorter_files`), then
    is cut at a line boundary to fill what is left."""
    parts: list[str] = []
    used = 0
    for section in sections:
        gap = 2 if parts else 0
        if used + gap + len(section.body) > budget_chars:
            section = section._replace(body=shorter_files(section.body, budget_chars - used - gap))
        if used + gap + len(section.body) <= budget_chars:
            parts.append(section.body)
            used += gap + len(section.body)
            continue
        room = budget_chars - used - gap - len(CUT_NOTE)
        if room > 0:
            head = section.body[:room]
            newline = head.rfind("\n")
            head = head[:newline] if newline > 0 else head
            if head.strip():
                parts.append(head.rstrip() + CUT_NOTE)
        break
    return "\n\n".join(parts)


def feed_folder(settings: Settings) -> Path | None:
    """``BRAIN_SOURCE_PATH``, else ``--brain-feed``, else ``<BRAIN_VAULT>/brain-feed``.

    The command layers pass an explicit ``--brain-feed`` as ``source_path`` too, so a flag
    beats the environment.
    """
    if settings.source_path is not None:
        return settings.source_path
    if settings.brain_feed is not None:
        return settings.brain_feed
    if settings.vault is not None:
        return settings.vault / "brain-feed"
    return None


# --- the project index -------------------------------------------------------------------


class ProjectIndex(NamedTuple):
    """``projects/index.json`` as the tick wrote it (see :mod:`brain.core.project_feed`)."""

    files: Mapping[str, str]  # project -> file, relative to the feed folder
    roots: Mapping[str, str]  # recorded cwd -> project
    generated: str | None
    ttl: int | None
    touched: Mapping[str, str] = MappingProxyType({})  # folder worked on from beside it -> project
    last_active: Mapping[str, str] = MappingProxyType({})  # project -> its latest arc's last activity
    holders: frozenset[str] = frozenset()  # recorded cwds that are folders of projects (``~/work``)
    #: project -> its latest work not by a headless run (``claude -p``, an SDK client); a project
    #: whose entry says none is missing (an index of an older version: its ``last_active``).
    worked: Mapping[str, str] = MappingProxyType({})


def load_index(folder: Path) -> ProjectIndex | None:
    try:
        data = json.loads(read_regular(folder / PROJECT_INDEX, INDEX_MAX_BYTES))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    projects = data.get("projects")
    entries = [(str(name), entry) for name, entry in (projects.items() if isinstance(projects, dict) else ())
               if isinstance(entry, dict)]

    def field(key: str, default: str | None = None) -> dict[str, str]:
        """Project -> its entry's ``key`` (else its ``default`` key's), where that is a string."""
        return {name: value for name, entry in entries
                if isinstance(value := entry.get(key, entry.get(default) if default else None), str)}

    files = field("file")
    clean_roots, clean_touched = ({
        str(root): project
        for root, project in (found.items() if isinstance(found, dict) else ())
        if isinstance(project, str) and project in files
    } for found in (data.get("roots"), data.get("touched")))
    generated, ttl = data.get("generated"), data.get("ttl")
    last_active = field("last_active")
    worked = field("worked", "last_active")  # an index of an older version has no ``worked``
    holders = data.get("holders")
    return ProjectIndex(
        files,
        clean_roots,
        generated if isinstance(generated, str) else None,
        ttl if isinstance(ttl, int) and not isinstance(ttl, bool) and ttl > 0 else None,
        clean_touched,
        last_active,
        frozenset(str(root) for root in holders if isinstance(root, str)) if isinstance(holders, list) else frozenset(),
        worked,
    )


def normal_path(path: str) -> str:
    return path.replace("\\", "/").rstrip("/") or "/"


def find_project(index: ProjectIndex, cwd: str | None) -> str | None:
    found = match_session(index, cwd)
    return found[0] if found is not None else None


ROOT, NAME, TOUCHED, WORKTREE, TOUCHED_NAME = "root", "name", "touched", "worktree", "touched-name"


_NUMBERED = re.compile(r"^\d{1,3}[ ._-]+")


def unnumbered_name(name: str) -> str:
    """A folder name without the number an operator sorts folders by (``02_clockhelp``,
    ``3 - notes``, ``01.repos``): lower case in, lower case out."""
    return _NUMBERED.sub("", name, count=1)


#: Folders of a home where a session can be about anything, like one in the home itself.
HOME_AREAS = frozenset({"desktop", "documents", "downloads"})


def about_anything(path: str) -> bool:
    """``path`` (``/`` separators) is a home folder or its desktop, documents or downloads
    folder: a session started there can be about any project."""
    if is_home_folder(path):
        return True
    parent, _, name = path.rpartition("/")
    return name.lower() in HOME_AREAS and is_home_folder(parent)


def _worked_names(touched: Mapping[str, str]) -> dict[str, str]:
    """The names of the outermost folders projects' sessions worked in (lower case; not their
    sub-folders, ``M-Claude`` and not ``M-Claude/scripts``) -> the project, where the name can
    name a repository (:func:`brain.core.project.can_name_a_repository`), not a home folder's
    user name, and only one project worked in folders of that name."""
    named: list[tuple[str, str]] = []
    for folder, project in touched.items():
        name = folder.rsplit("/", 1)[-1].lower()
        if not can_name_a_repository(name) or is_home_folder(folder):
            continue
        if project in (touched.get(folder.rsplit("/", 1)[0]), touched.get(folder.rsplit("/", 2)[0])):
            continue  # a sub-folder (work folders lie at most two levels below a session's folder)
        named.append((name, project))
    return sole_owners(named)


def claims_folders_below(index: ProjectIndex, root: str) -> bool:
    """A recorded cwd whose sessions are one project's work in the folders below it: not a home
    folder, its desktop, documents or downloads (:func:`about_anything`), nor a folder of
    projects (the index's ``holders``)."""
    return not about_anything(root) and root not in index.holders


#: How many folders up from the cwd a worktree's ``.git`` file is looked for.
WORKTREE_DEPTH = 12


def _deepest(folders: Mapping[str, str], path: str,
             claims: Callable[[str], bool] = lambda folder: True) -> tuple[int, str] | None:
    """(depth, project) of ``path`` itself or of the deepest folder of ``folders`` it lies under
    among those that ``claims`` the folders below them (the depth: the folder's length,
    ``path``'s own for an exact match)."""
    exact = folders.get(path)
    if exact is not None:
        return len(path), exact
    best: tuple[int, str] | None = None
    for root, project in folders.items():
        if root != "/" and path.startswith(root + "/") and (best is None or len(root) > best[0]) and claims(root):
            best = (len(root), project)
    return best


def match_project(index: ProjectIndex, cwd: str | None) -> tuple[str, str] | None:
    """The project a session in ``cwd`` belongs to: the recorded cwd itself, else the deepest
    recorded root it lies under (a sub-folder, a worktree inside the repository) unless a folder
    between them is one a project's sessions worked in from their own root, else a folder a
    project's sessions worked in from beside it or above it (``touched``), else a path component
    named like a project (the same repository checked out elsewhere), else a path component
    that starts with a project's name and a separator (``<repo>-<branch>``). Before the names, a
    folder at the same place in another home as a recorded cwd (:func:`~brain.core.project.in_home`:
    the operator's other machine) gets that cwd's project. A home folder
    (:func:`~brain.core.project.is_home_folder`), its desktop, documents and downloads
    (:func:`about_anything`) and a folder of projects (the index's ``holders``:
    :func:`~brain.core.project_feed.folders_of_projects`) claim only the folders their sessions
    worked in (a repository cloned into ~/Downloads is found by its name), and a home's user
    name names no project. A root or a Windows
    system folder (:func:`~brain.core.project.is_system_folder`) is no project's: a session
    started there gets the recent work across projects.

    A session whose own project name (:func:`~brain.core.project.project_name`: a worktree's is
    its repository's) is the name of a folder only one project's sessions worked in
    (:func:`_worked_names`) gets that project, after the project names: the same repository
    elsewhere, worked on before only from a folder above it.

    Returns the project and how it matched: :data:`ROOT`, :data:`NAME`, :data:`TOUCHED` or
    :data:`TOUCHED_NAME`.
    """
    if not cwd or not index.files:
        return None
    path = normal_path(cwd)
    if is_system_folder(path):
        return None
    # A home folder's sessions are about anything, and so are its desktop's, documents' and
    # downloads' (:func:`about_anything`: ``~/Downloads/claude-backups`` is a checkout of the
    # claude-backups repository, not work of a session that fixed a script in ~/Downloads); a
    # folder holding other projects' roots is a folder of projects: each claims the folders
    # below it where its sessions worked (``touched``), then by name, not every folder below it.
    def claims_below(root: str) -> bool:
        return claims_folders_below(index, root)

    recorded = _deepest(index.roots, path, claims=claims_below)
    touched = _deepest(index.touched, path)
    if recorded is not None:
        if touched is not None and touched[0] > recorded[0] and touched[1] != recorded[1]:
            # ``repo/packages/app``, where the repo's sessions worked, under ``repo/packages``
            # where one session once started: the deeper evidence says whose work it is.
            return touched[1], TOUCHED
        return recorded[1], ROOT
    if touched is not None:
        return touched[1], TOUCHED  # where a project's sessions worked before: evidence, not a name
    # The same place in another home (``C:/Users/eduar/.claude`` and ``C:/Users/emarquez/.claude``,
    # ``/home/ana/src/app`` and ``/Users/ana/src/app``), or below it: the operator's other
    # machine. Matched by the whole path below the home, so a hidden or common name (``.claude``,
    # ``src``) counts too; the deepest such cwd, when it is one project's.
    place = in_home(path)
    if place is not None:
        elsewhere: dict[str, set[str]] = {}
        for root, project in index.roots.items():
            other = in_home(root)
            # below it, unless it claims nothing below it (a folder of projects, a home's
            # desktop, documents or downloads: it names none of the folders in it)
            if other is not None and (place == other or (place.startswith(other + "/") and claims_below(root))):
                elsewhere.setdefault(other, set()).add(project)
        if elsewhere:
            same = elsewhere[max(elsewhere, key=len)]
            if len(same) == 1:
                return next(iter(same)), NAME
    by_name = {name.lower(): name for name in index.files}
    parts = path.split("/")
    home = next((i + 1 for i in range(len(parts)) if is_home_folder("/".join(parts[:i + 1]))), 0)
    # A folder of projects above the cwd names none of the folders in it (``~/work``, where one
    # session started, is not ``~/work/libnn_baseline``'s project).
    components = [parts[i].lower() for i in reversed(range(home, len(parts)))
                  if parts[i].lower() not in GENERIC_COMPONENTS
                  and not (i < len(parts) - 1 and "/".join(parts[:i + 1]) in index.holders)]
    for component in components:
        found = by_name.get(component)
        if found is not None:
            return found, NAME
    # The same folder numbered another way (``02_Clockhelp`` and ``Clockhelp``, ``3 - Notes``):
    # folders sorted by a number in front, a number that changes when they are sorted again.
    unnumbered = sole_owners((unnumbered_name(key), name) for key, name in by_name.items())
    for component in components:
        bare = unnumbered_name(component)
        found = unnumbered.get(bare) if len(bare) >= WORKED_NAME_MIN else None
        if found is not None:
            return found, NAME
    # The same repository elsewhere (another machine, a worktree app's folder) where the only
    # sessions on it worked from a folder above it (a home folder): a session whose project is
    # ``M-Claude`` continues the work of the project whose sessions worked in ``/home/u/M-Claude``.
    worked = _worked_names(index.touched).get(project_name(path).lower())
    if worked is not None:
        return worked, TOUCHED_NAME
    # A worktree or a second checkout named after its repository: ``spotter-dov``,
    # ``spotter-worktrees/…`` belong to ``spotter`` (the longest such project name wins).
    for component in components:
        prefixed = [name for name in by_name if len(name) >= 3 and component.startswith(name)
                    and component[len(name)] in "-_."]
        if prefixed:
            return by_name[max(prefixed, key=len)], NAME
    return None


def worktree_repository(cwd: str) -> str | None:
    """The main checkout of the git worktree ``cwd`` lies in (``/`` separators): a linked
    worktree's ``.git`` is a file, ``gitdir: <repo>/.git/worktrees/<name>`` (``git worktree add
    ../fix-login``, where a fleet runs its agents side by side). None outside a worktree, in a
    main checkout or a submodule, or when nothing can be read. At most a few small reads."""
    folder = cwd
    for _ in range(WORKTREE_DEPTH):
        try:
            with open(os.path.join(folder, ".git"), "rb") as handle:
                head = handle.read(4096).decode("utf-8", "replace").strip()
        except IsADirectoryError:
            return None  # a main checkout
        except OSError:
            parent = os.path.dirname(folder.rstrip("/\\")) or folder
            if parent == folder:
                return None
            folder = parent
            continue
        if not head.startswith("gitdir:"):
            return None
        target = normal_path(os.path.normpath(os.path.join(folder, head[len("gitdir:"):].strip())))
        parts = target.rstrip("/").split("/")
        if len(parts) >= 4 and parts[-2] == "worktrees" and parts[-3] == ".git":
            return "/".join(parts[:-3]) or "/"
        return None  # a submodule's gitdir
    return None


def match_session(index: ProjectIndex, cwd: str | None) -> tuple[str, str] | None:
    """:func:`match_project`, except that a folder in a git worktree whose main checkout is a
    project's (:func:`worktree_repository`) gets that project, unless the folder itself is a
    recorded cwd: a worktree made for one task beside the repository is the repository's work,
    not the work of a folder above it (the home folder) nor a new project."""
    found = match_project(index, cwd)
    if not cwd or (found is not None and index.roots.get(normal_path(cwd)) == found[0]):
        return found
    repository = worktree_repository(cwd)
    main = match_project(index, repository) if repository is not None else None
    if main is not None and (found is None or main[0] != found[0]):
        return main[0], WORKTREE
    return found


# --- what a session gets -----------------------------------------------------------------


def _age(seconds: float) -> str:
    if seconds < 2 * 3600:
        return f"{max(1, round(seconds / 60))} min"
    if seconds < 2 * 86_400:
        return f"{round(seconds / 3600)} h"
    return f"{round(seconds / 86_400)} days"


def stale_note(index: ProjectIndex | None, now: datetime) -> str:
    """One line when the feed is older than its TTL; "" when fresh or its age is unknown."""
    if index is None or index.generated is None or index.ttl is None:
        return ""
    from brain.core.timeutil import parse_instant

    generated = parse_instant(index.generated)
    if generated is None:
        return ""
    age = (now - generated).total_seconds()
    if age <= index.ttl:
        return ""
    return (f"_Note: this feed was built {_age(age)} ago ({index.generated}), past its {_age(index.ttl)} "
            f"lifetime; recent work may be missing (is `brain tick` running?)._")


class HookInput(NamedTuple):
    """What Claude Code writes on the hook's stdin (every field optional)."""

    session_id: str | None = None
    cwd: str | None = None
    source: str | None = None  # startup | resume | clear | compact
    prompt: str | None = None  # UserPromptSubmit: what the operator typed
    transcript_path: str | None = None  # the session's own log (every Claude Code hook sends it)

    @classmethod
    def of(cls, payload: Mapping[str, Any]) -> HookInput:
        def text(key: str) -> str | None:
            value = payload.get(key)
            return value if isinstance(value, str) and value.strip() else None

        return cls(text("session_id"), text("cwd"), text("source"), text("prompt"), text("transcript_path"))


def read_hook_input(wait_seconds: float | None) -> HookInput:
    """The JSON Claude Code writes on the hook's stdin; empty when there is none (a terminal,
    nothing within ``wait_seconds``, or not a JSON object)."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        return HookInput()
    if wait_seconds is not None:
        import select

        try:
            ready, _, _ = select.select([stream], [], [], wait_seconds)
        except (OSError, ValueError):  # no file descriptor (an in-memory stream): just read it
            ready = [stream]
        if not ready:
            return HookInput()
    try:
        data = json.loads(stream.read(STDIN_MAX_BYTES) or "{}")
    except (OSError, ValueError):
        return HookInput()
    return HookInput.of(data) if isinstance(data, dict) else HookInput()


class Context(NamedTuple):
    text: str  # "" when there is nothing to send
    project: str | None  # the project whose feed was sent; None: the global feed


def context_for(settings: Settings, cwd: str | None, now: datetime, *, state: Path | None = None,
                session_id: str | None = None) -> Context:
    """The context a session in ``cwd`` gets, within ``feed_token_budget``. A ``cwd`` no path
    can hold (a NUL byte: the MCP ``feed`` tool passes what the agent sent) is no cwd.

    ``state``: the hook's state folder, where ``session-end`` left what the sessions that just
    ended here hold and the feed does not yet (:func:`ended_section`, shown first);
    ``session_id``: this session's, never shown its own."""
    folder = feed_folder(settings)
    if folder is None:
        return Context("", None)
    if cwd is not None and "\x00" in cwd:
        cwd = None
    full = max(0, settings.feed_token_budget) * 4  # the budget in characters
    index = load_index(folder)
    found = match_session(index, cwd) if index is not None else None
    project = found[0] if found is not None else None
    sections: list[FeedSection] = []
    notes = []
    if index is not None and project is not None:
        own = read_section(folder / index.files[project])
        if own is None:
            project = None
        else:
            alarms = read_section(folder / ALARMS_FILE)
            inside = sub_projects(index, project)
            sections = [s for s in (alarms, own, just_before(folder, index, project, now, shown=inside),
                                    *(read_section(folder / index.files[name]) for name in inside))
                        if s is not None]
            here = normal_path(cwd) if cwd else ""
            if (here and (about_anything(here) or here in index.holders)) or young(own, full, index, project, now):
                # A home folder's sessions, and a folder of projects' (``~/work``), range over
                # every project; a project the vault knows little of yet is most likely what
                # the operator was just doing elsewhere: the recent work across projects
                # follows, in what the budget leaves.
                across = read_section(folder / RECENT_WORK)
                if across is not None:
                    sections.append(across)
            if cwd and found is not None and found[1] == NAME and folder_name(cwd).lower() != project.lower():
                notes.append(checkout_note(folder_name(cwd), project))
            elif cwd and found is not None and found[1] == TOUCHED:
                notes.append(touched_note(folder_name(cwd), project))
            elif cwd and found is not None and found[1] == WORKTREE:
                notes.append(worktree_note(folder_name(cwd), project))
            elif cwd and found is not None and found[1] == TOUCHED_NAME:
                notes.append(worked_name_note(project_name(cwd), project))
    ended = ended_section(state, index, project, cwd, session_id, now) if state is not None and cwd else None
    if project is None:
        sections = read_feed(folder)
        if index is not None:
            sections = compact_global(sections)
        if index is not None and cwd and ended is not None:
            notes.append(unfiled_project_note(cwd, others=bool(sections)))
        elif index is not None and cwd and sections:
            notes.append(system_folder_note(cwd) if is_system_folder(normal_path(cwd)) else new_project_note(cwd))
    if ended is not None:
        sections.insert(1 if sections and sections[0].name == ALARMS_FILE else 0, ended)
    if sections:
        notes.append(stale_note(index, now))
    note = "\n".join(n for n in notes if n)
    budget = max(0, full - len(note) - 2) if note else full
    text = assemble(sections, budget)
    if not text:
        return Context("", None)
    return Context(f"{note}\n\n{text}" if note else text, project)


def worked_elsewhere(index: ProjectIndex, project: str, now: datetime, seconds: float) -> list[tuple[datetime, str]]:
    """The other projects an operator worked in (a headless run such as claude-mem's observer
    moves on from nothing: :attr:`ProjectIndex.worked`) at most ``seconds`` before ``now``, each
    with when, newest first."""
    from brain.core.timeutil import parse_instant

    found = []
    for name, text in index.worked.items():
        when = parse_instant(text)
        if name != project and when is not None and 0 <= (now - when).total_seconds() <= seconds:
            found.append((when, name))
    return sorted(found, reverse=True)


#: At most this many projects whose folder lies inside this project's follow its feed (:func:`sub_projects`).
SUB_PROJECTS = 2


def sub_projects(index: ProjectIndex, project: str) -> list[str]:
    """The projects whose recorded folder lies inside one of ``project``'s (``app/client``, a
    package of a monorepo opened as its own folder, inside ``app``) and that an operator worked
    on later than anything here, the latest first, at most :data:`SUB_PROJECTS`: a session at
    the repository's root then most likely carries on what its sub-folder's sessions did (the
    same code, the agents and commands the operator set up there), and their files follow its
    own in what the budget leaves. A root whose own sessions are the latest work has its own
    feed to go on. A home folder, its desktop, documents and downloads, a folder of projects and
    a system folder have any project below them: they have none."""
    from brain.core.timeutil import parse_instant

    mine = [root for root, name in index.roots.items()
            if name == project and claims_folders_below(index, root) and not is_system_folder(root)]
    own = parse_instant(index.last_active.get(project) or "")
    below: list[tuple[datetime, str]] = []
    for name in {name for root, name in index.roots.items()
                 if name != project and name in index.files and any(root.startswith(r + "/") for r in mine)}:
        when = parse_instant(index.worked.get(name) or "")
        if when is not None and (own is None or when > own):
            below.append((when, name))
    return [name for _when, name in sorted(below, reverse=True)[:SUB_PROJECTS]]


#: A project's feed shorter than this share of the token budget is that of a project the vault
#: knows little of yet (one or two short arcs): :func:`young`.
YOUNG_FEED_SHARE = 1 / 3
#: How recent another project's work must be for a young project's session to be shown it.
YOUNG_ELSEWHERE_SECONDS = 24 * 3600


def young(own: FeedSection, budget_chars: int, index: ProjectIndex, project: str, now: datetime) -> bool:
    """The project's own feed fills less than :data:`YOUNG_FEED_SHARE` of the budget (``budget_chars``), and an
    operator worked in another project within :data:`YOUNG_ELSEWHERE_SECONDS`: the next session
    has little to start from here, and what was just done elsewhere (the tools and commands of
    the same machine, a script written there and run here) is the best guess at what it needs."""
    if len(own.body) >= budget_chars * YOUNG_FEED_SHARE:
        return False
    return bool(worked_elsewhere(index, project, now, YOUNG_ELSEWHERE_SECONDS))


#: A session that ended in another project this long before this one started, later than any
#: here, is most likely the work this one continues: its handoff line follows this project's feed.
JUST_BEFORE_SECONDS = 3 * 3600
JUST_BEFORE_SECTION = "just-before"
_HANDOFF_LINE, _HANDOFF_TITLE = "- Last session (", ": where we left off"


def just_before(folder: Path, index: ProjectIndex, project: str, now: datetime,
                shown: Collection[str] = ()) -> FeedSection | None:
    """The handoff line of the project worked on last (by an operator: a headless run such as
    claude-mem's observer moves on from nothing), when that is another project, less than
    :data:`JUST_BEFORE_SECONDS` before ``now`` and later than the latest work of ``project``:
    an operator who moves from one repository to the next often carries the same thread
    (a script written there, run here). A project whose file is missing or has no handoff
    line is passed over for the one before it. None: no such project, or it is one of ``shown``
    (its whole file follows: :func:`sub_projects`)."""
    from brain.core.timeutil import parse_instant

    own = parse_instant(index.last_active.get(project) or "")
    for when, name in worked_elsewhere(index, project, now, JUST_BEFORE_SECONDS):
        if name not in index.files or (own is not None and when <= own):
            continue
        if name in shown:
            return None
        other = read_section(folder / index.files[name])
        lines = other.body.splitlines() if other is not None else []
        line = next((line for line in lines if line.startswith(_HANDOFF_LINE)), None)
        if line is not None:
            title = lines[0].removeprefix("# ").removesuffix(_HANDOFF_TITLE)  # the name as its file prints it
            return FeedSection(JUST_BEFORE_SECTION, 0,
                               f"# Just before, in {title} ({_age((now - when).total_seconds())} ago)\n\n{line}")
    return None


#: The line of a session's last reply (``core.handoff``), after its title line.
_LAST_REPLY = "- Its last reply: "


def left_nothing(lines: list[str]) -> bool:
    """A session that ended without any work: no file, command, identifier, error or todo after
    its title line, at most a reply (``hi`` and ``How can I help you?``, a start the operator gave
    up on at once). Its lines name nothing the next session needs, and the feed below says where
    the work stands."""
    return all(line.startswith(_LAST_REPLY) for line in lines[1:])


def ended_section(state: Path, index: ProjectIndex | None, project: str | None, cwd: str, session_id: str | None,
                  now: datetime) -> FeedSection | None:
    """What the sessions that ended here before ``now`` left (``session-end``), newest first, while
    the feed does not hold them: their project is not in the index, or its latest arc's activity
    is older than their end. "Here" is the same folder or the same project. None: nothing to show."""
    try:
        paths = [p for p in (state / ENDED_SUBDIR).iterdir() if p.suffix == ".json"]
    except OSError:
        return None
    if not paths:
        return None
    from brain.core.timeutil import parse_instant

    here = normal_path(cwd).lower()
    shown: list[tuple[datetime, list[str]]] = []
    for path in paths:
        try:
            data = json.loads(read_regular(path, ENDED_MAX_BYTES))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("session_id") == session_id:
            continue
        ended = parse_instant(data.get("end")) if isinstance(data.get("end"), str) else None
        lines = [line for line in data.get("lines") or () if isinstance(line, str)] \
            if isinstance(data.get("lines"), list) else []
        their_cwd, their_project = data.get("cwd"), data.get("project")
        if (ended is None or not 0 <= (now - ended).total_seconds() <= ENDED_KEEP_DAYS * 86_400 or not lines
                or not isinstance(their_cwd, str) or left_nothing(lines)):
            continue
        filed_under = find_project(index, their_cwd) if index is not None else None
        if normal_path(their_cwd).lower() != here and (project is None or filed_under != project):
            continue
        if index is not None and any(
                known is not None and known >= ended
                for known in (parse_instant(index.last_active.get(name) or "") for name in (their_project, filed_under)
                              if isinstance(name, str))):
            continue  # a tick has folded it into the feed
        shown.append((ended, lines))
    if not shown:
        return None
    shown.sort(key=lambda item: item[0], reverse=True)
    # Two sessions that left the very same lines (a session and its resume) say them once, the newest.
    newest: dict[tuple[str, ...], tuple[datetime, list[str]]] = {}
    for ended, lines in shown:
        newest.setdefault(tuple(lines), (ended, lines))
    shown = list(newest.values())
    blocks = [f"# A session here ended {_age((now - ended).total_seconds())} ago (not in the feed below yet)\n\n"
              + "\n".join(lines) for ended, lines in shown[:ENDED_SHOWN]]
    return FeedSection(ENDED_SECTION, 100, "\n\n".join(blocks))


#: Global files a session in a new project does without: the tick's own bookkeeping
#: (``2 graduated``), and the hot table when ``recent-work.md`` lists the same arcs with their files.


def compact_global(sections: list[FeedSection]) -> list[FeedSection]:
    """The global feed for a session outside every known project (the tick wrote a project
    index): signals, injects, intent and the recent work across projects; not the tick's diff,
    and not the hot table when the recent work says the same with files and commands."""
    names = {s.name for s in sections}
    drop = {LAST_DIFF, HOT_ARCS} if RECENT_WORK in names else {LAST_DIFF}
    return [s for s in sections if s.name not in drop]


def repository_path(cwd: str) -> str:
    """``cwd`` without a worktree tail (``<repo>/.claude/worktrees/<name>`` is ``<repo>``)."""
    return strip_worktree(normal_path(cwd))


def folder_name(cwd: str) -> str:
    path = repository_path(cwd)
    return path.rsplit("/", 1)[-1] or path


def new_project_note(cwd: str) -> str:
    """The title of the feed a session the index knows nothing about gets: it names the folder,
    so the agent knows the feed below is the fleet's, not this project's."""
    return (f"# `{folder_name(cwd)[:80]}` is new: no earlier sessions in `{repository_path(cwd)[:200]}`; "
            f"the other projects' recent work follows")


def unfiled_project_note(cwd: str, *, others: bool) -> str:
    """The title for a folder the index does not know yet but whose last session just ended
    (``others``: the other projects' recent work follows it)."""
    return (f"# `{folder_name(cwd)[:80]}`: its sessions are not in the feed yet; the one that just ended follows"
            + (", then the other projects' recent work" if others else ""))


def system_folder_note(cwd: str) -> str:
    """The title of the feed a session started in a root or a system folder gets."""
    return f"# `{normal_path(cwd)[:200]}` is no project's folder: the recent work across projects follows"


def checkout_note(folder: str, project: str) -> str:
    """The title over a project's feed sent to a folder matched by name, not by a recorded root."""
    return f"# This folder (`{folder[:80]}`) looks like a checkout of `{project[:80]}`; its feed follows"


def worktree_note(folder: str, project: str) -> str:
    """The title over the feed of the project whose repository this worktree belongs to."""
    return f"# This folder (`{folder[:80]}`) is a git worktree of `{project[:80]}`; its feed follows"


def touched_note(folder: str, project: str) -> str:
    """The title over the feed of the project whose sessions worked on this folder's files from
    another folder (beside it, or the repository root above it)."""
    return f"# Earlier sessions of `{project[:80]}` worked on files in this folder (`{folder[:80]}`); its feed follows"


def worked_name_note(name: str, project: str) -> str:
    """The title over the feed of the project whose sessions worked in a folder named ``name``,
    like one this session's folder lies in (the same repository, elsewhere)."""
    return f"# Earlier sessions of `{project[:80]}` worked in a folder named `{name[:80]}`, like this one; its feed follows"


def hook_answer(event: str, context: str) -> str:
    """The hook's stdout: ``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``."""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}})


# --- per-session state (turn counter, what the session last saw) --------------------------


def state_folder(settings: Settings, environ: Mapping[str, str]) -> Path:
    """``hook_state_dir``, else ``$XDG_STATE_HOME/brain/hook-sessions`` (the agent user's)."""
    if settings.hook_state_dir is not None:
        return settings.hook_state_dir
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / STATE_SUBDIR


def _session_file(folder: Path, session_id: str) -> Path:
    """``<session_id>.json``; an id that is no safe file name is hashed (hashlib, whose OpenSSL
    load costs ~5 ms, only then: Claude Code's ids are UUIDs)."""
    import re

    if re.fullmatch(r"[A-Za-z0-9_-]{1,128}", session_id):
        return folder / f"{session_id}.json"
    import hashlib

    return folder / f"{hashlib.sha256(session_id.encode('utf-8', 'replace')).hexdigest()[:32]}.json"


def _load_session(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path))
    except (OSError, ValueError):
        return {"turns": 0, "digest": None}
    turns = data.get("turns") if isinstance(data, dict) else None
    digest = data.get("digest") if isinstance(data, dict) else None
    state: dict[str, Any] = {"turns": turns if isinstance(turns, int) and turns >= 0 else 0,
                             "digest": digest if isinstance(digest, str) else None}
    recalled = data.get("recalled") if isinstance(data, dict) else None
    if isinstance(recalled, list):  # what prompt-time recall already showed this session
        state["recalled"] = [key for key in recalled if isinstance(key, str)]
    return state


def _save_session(path: Path, state: Mapping[str, Any]) -> None:
    """Replace the state file atomically, without fsync: it is a hint (a lost update costs one
    extra refresh), and two fsyncs would cost the hook more than everything else it does. Best
    effort: a full disk or a read-only state folder never costs the session its context."""
    with contextlib.suppress(OSError):  # never through a link put at the temporary name (atomic_write)
        atomic_write(path, json.dumps(dict(state), sort_keys=True).encode("utf-8"), durable=False)


def _prune_sessions(folder: Path, now: float, keep_days: int = SESSION_STATE_KEEP_DAYS) -> None:
    horizon = now - keep_days * 86_400
    with contextlib.suppress(OSError):
        for path in folder.glob("*.json"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < horizon:
                    path.unlink()


def digest_of(text: str) -> str:
    """What tells a session's feed changed: length and CRC-32 (zlib is built in; hashlib's
    OpenSSL load would cost the hook more than all its file reads)."""
    import zlib

    data = text.encode("utf-8")
    return f"{len(data)}-{zlib.crc32(data):08x}"


# --- the two hooks -------------------------------------------------------------------------


class HookCall(NamedTuple):
    """One hook invocation, resolved at the command edge."""

    settings: Settings
    hook_input: HookInput
    now: datetime
    cwd: str | None  # ``--cwd``, else the input's ``cwd``, else the process's working directory
    state: Path  # folder of the per-session state files


def session_cwd(flag: str | None, hook_input: HookInput, process_cwd: str | None) -> str | None:
    """An explicit ``--cwd`` beats the hook input, which beats where the hook process runs. A
    value no path can hold (a NUL byte) is passed over."""
    return next((value for value in (flag, hook_input.cwd, process_cwd) if value and "\x00" not in value), None)


def session_start_answer(call: HookCall, output_format: str) -> str:
    """What ``session-start`` prints ("" for nothing); notes what the session was sent."""
    settings, hook_input = call.settings, call.hook_input
    if not settings.enabled:
        return ""
    text = context_for(settings, call.cwd, call.now, state=call.state, session_id=hook_input.session_id).text
    if not text:
        return ""
    if output_format == "text":
        return text + "\n"
    if hook_input.session_id is not None:
        import time

        folder = call.state
        path = _session_file(folder, hook_input.session_id)
        state = _load_session(path)
        state["digest"] = digest_of(text)
        _save_session(path, state)
        _prune_sessions(folder, time.time())
    return hook_answer(SESSION_START, text) + "\n"


def prompt_submit_answer(call: HookCall) -> str:
    """What ``prompt-submit`` prints: the session's context every ``refresh_interval`` turns if it
    changed, and (opt-in ``recall_on_prompt``) the index items most relevant to the prompt."""
    settings, hook_input = call.settings, call.hook_input
    refresh = settings.refresh_interval > 0
    if not settings.enabled or hook_input.session_id is None or not (refresh or settings.recall_on_prompt):
        return ""
    path = _session_file(call.state, hook_input.session_id)
    state = _load_session(path)
    state["turns"] += 1
    parts: list[str] = []
    if refresh and state["turns"] % settings.refresh_interval == 0:
        text = context_for(settings, call.cwd, call.now, state=call.state, session_id=hook_input.session_id).text
        digest = digest_of(text) if text else None
        if digest is not None and digest != state["digest"]:
            state["digest"] = digest
            parts.append(text)
    recalled = _recall(settings, hook_input.prompt, state, call.cwd)
    if recalled:
        parts.append(recalled)
    _save_session(path, state)
    return hook_answer(PROMPT_SUBMIT, "\n\n".join(parts)) + "\n" if parts else ""


def session_end_answer(call: HookCall) -> str:
    """``session-end``: what the session leaves for the next one in its project
    (:mod:`brain.core.handoff`), kept in the state folder until a tick folds the session into
    the feed. Reads the transcript the hook input names (a Claude Code transcript, a Gemini CLI
    chat: the reader whose format owns the path), up to ``now``; prints nothing. A scripted
    one-shot run, or a session nobody typed a prompt in (``/model`` and out), leaves nothing."""
    settings, hook_input = call.settings, call.hook_input
    transcript = hook_input.transcript_path
    if not settings.enabled or hook_input.session_id is None or transcript is None or "\x00" in transcript:
        return ""
    import time

    from brain.core.handoff import ended_session_lines
    from brain.core.timeutil import iso
    from brain.io.sessions import read_transcript, time_key

    # The hook input's own cwd, never the process's: a format whose log records none takes it.
    session = read_transcript(Path(transcript), time_key(iso(call.now)), session_cwd(None, hook_input, None))
    if session is None or session.headless or not session.user_turns:
        return ""
    entry = {"session_id": hook_input.session_id, "project": session.project, "cwd": session.cwd,
             "end": iso(session.end), "lines": ended_session_lines(session)}
    folder = call.state / ENDED_SUBDIR
    _save_session(_session_file(folder, hook_input.session_id), entry)
    _prune_sessions(folder, time.time(), ENDED_KEEP_DAYS)
    return ""


def _recall(settings: Settings, prompt: str | None, state: dict[str, Any], cwd: str | None = None) -> str:
    """Index hits for the prompt (SPEC §15), each shown at most once per session (``state["recalled"]``)."""
    if not settings.recall_on_prompt or not prompt:
        return ""
    folder = feed_folder(settings)
    vault = settings.vault or (folder.parent if folder is not None else None)
    if vault is None:
        return ""
    from brain.search.recall import recall_for_prompt

    seen = set(state.get("recalled", ()))
    text = recall_for_prompt(vault, prompt, seen, settings, cwd)
    if text:
        state["recalled"] = sorted(seen)
    return text


class HookUsageError(ValueError):
    """A bad flag or setting: one line on stderr, exit 1 (never 2, which blocks the prompt)."""


def hook_call(command: str, flags: Mapping[str, str | None], environ: Mapping[str, str]) -> HookCall:
    """Settings (defaults, then ``BRAIN_*``, then flags: an explicit flag beats the environment),
    the hook input and the instant, read once at the command edge.

    ``flags``: ``brain_feed``, ``now``, ``cwd``. Raises :class:`HookUsageError`.
    """
    import os

    from brain.core.timeutil import TimeParseError, require_instant, wall_clock
    from brain.settings import Settings, SettingsError

    feed = flags.get("brain_feed")
    try:
        # --brain-feed also stands in for BRAIN_SOURCE_PATH, which would otherwise win over it.
        settings = Settings.from_env(environ, brain_feed=Path(feed) if feed else None,
                                     source_path=Path(feed) if feed else None, now=flags.get("now") or None)
    except SettingsError as exc:
        raise HookUsageError(f"configuration: {exc}") from None
    try:
        now = require_instant(settings.now, what="--now / BRAIN_NOW") if settings.now else wall_clock()
    except TimeParseError as exc:
        raise HookUsageError(str(exc)) from None
    hook_input = read_hook_input(SESSION_START_STDIN_WAIT if command == "session-start" else None)
    try:
        process_cwd: str | None = os.getcwd()
    except OSError:
        process_cwd = None
    cwd = session_cwd(flags.get("cwd"), hook_input, process_cwd)
    return HookCall(settings, hook_input, now, cwd, state_folder(settings, environ))


def answer(command: str, call: HookCall, output_format: str) -> str:
    if command == "session-start":
        return session_start_answer(call, output_format)
    if command == "session-end":
        return session_end_answer(call)
    return prompt_submit_answer(call)
