"""Project identity: which project a working directory belongs to (docs/agents.md).

A project is the last component of a session's working directory, except that every git
worktree of a repository is the repository. Pure string work, shared by the session readers,
the inbox, the MCP server and the session-start hook.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

#: Worktrees kept inside the repository: ``<repo>/.claude/worktrees/<name>`` is ``<repo>``.
WORKTREE_MARKERS = ("/.claude/worktrees/", "/.worktrees/", "/.git/worktrees/")
#: A folder that holds a repository's worktrees, named after it: ``spotter-worktrees``,
#: ``spotter.worktrees``, ``spotter_worktrees``.
_WORKTREES_FOLDER = re.compile(r"^(?P<repo>.+?)[-_.]worktrees$", re.IGNORECASE)


#: Path components too generic to name a project when the cwd matches no recorded root.
GENERIC_COMPONENTS = frozenset({
    "", ".", "..", "home", "users", "user", "src", "source", "code", "projects", "project", "repos", "repo",
    "workspace", "workspaces", "work", "dev", "git", "tmp", "worktrees", ".claude", ".worktrees", ".git",
})

#: A worked-in folder's name this short (``ui``, ``api``) names no repository elsewhere.
WORKED_NAME_MIN = 4
#: Folders every home has, whatever the work in them: they name no repository.
COMMON_FOLDERS = frozenset({
    "documents", "desktop", "downloads", "pictures", "music", "videos", "library", "applications", "appdata",
    "scripts", "script", "docs", "doc", "tests", "test", "notes", "config", "data", "temp", "build", "dist",
    "bin", "lib", "packages", "apps", "public", "assets", "backup", "backups", "archive", "sandbox", "playground",
})

#: Folders many repositories have inside them: a project named like one (a session started in a
#: monorepo's ``frontend``) names no checkout elsewhere (:func:`brain.core.project_feed.named_projects`).
SUBFOLDER_NAMES = frozenset({
    "frontend", "backend", "server", "client", "mobile", "admin", "core", "common", "shared", "utils", "util",
    "infra", "deploy", "website", "site", "static", "styles", "components", "services", "modules", "plugins",
    "examples", "example", "demo", "tools", "vendor", "node_modules", "output", "logs", "cache", "migrations",
    "templates", "docker", "settings", "database", "src-tauri", "android", "ios", "cli",
})


def can_name_a_repository(name: str) -> bool:
    """A folder name (lower case) that can name one repository wherever it is checked out: at
    least :data:`WORKED_NAME_MIN` characters, neither generic (:data:`GENERIC_COMPONENTS`) nor a
    folder every home has (:data:`COMMON_FOLDERS`)."""
    return len(name) >= WORKED_NAME_MIN and name not in GENERIC_COMPONENTS and name not in COMMON_FOLDERS


def sole_owners(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """name -> owner for the names of ``pairs`` that one owner only claims, in first-seen order."""
    owners: dict[str, str | None] = {}
    for name, owner in pairs:
        owners[name] = owner if owners.get(name, owner) == owner else None
    return {name: owner for name, owner in owners.items() if owner is not None}


def repository_path(path: str) -> str:
    """``path`` (``/`` separators) without a worktree tail kept inside the repository."""
    for marker in WORKTREE_MARKERS:
        index = path.find(marker)
        if index > 0:
            path = path[:index]
    return path


def project_name(cwd: str) -> str:
    """Project identity from a working directory: its last path component.

    A git worktree belongs to its repository, so every worktree of one repository is one
    project: a worktree under the project (``<repo>/.claude/worktrees/<name>``,
    ``<repo>/.worktrees/<name>``), in a worktrees folder named after it
    (``<repo>-worktrees/<name>``, also with ``.`` or ``_``), or in a ``worktrees`` folder inside
    the repository when the worktree's name starts with the repository's
    (``spotter/worktrees/spotter-gqc``), or in an app's hidden folder of worktrees
    (``~/.claude-worktrees/<repo>/<name>``). Windows separators are understood.
    """
    path = repository_path(cwd.replace("\\", "/").rstrip("/"))
    parts = path.split("/")
    for index, part in enumerate(parts[:-1]):  # a worktrees folder with a worktree inside it
        named = _WORKTREES_FOLDER.match(part)
        if named is not None:
            # An app's own folder of every repository's worktrees (Claude desktop:
            # ``~/.claude-worktrees/<repo>/<name>``) is hidden, and holds the repository's name.
            return parts[index + 1] if named["repo"].startswith(".") else named["repo"]
        if part.lower() == "worktrees" and index > 0 and parts[index - 1] and _named_after(parts[index + 1], parts[index - 1]):
            return parts[index - 1]
    name = parts[-1]
    return name or path or "unknown"


def _named_after(worktree: str, repo: str) -> bool:
    """``spotter-gqc`` is named after ``spotter``: the repository's name and a separator."""
    return len(worktree) > len(repo) and worktree.lower().startswith(repo.lower()) and worktree[len(repo)] in "-_."


#: Where a shell starts when nobody chose a folder: a file-system or drive root, and Windows'
#: own folders (an elevated terminal opens in ``C:\Windows\System32``).
_SYSTEM_FOLDER = re.compile(r"^(?:[A-Za-z]:)?(?:/(?:Windows(?:/System32)?)?)?$", re.IGNORECASE)


def is_system_folder(path: str) -> bool:
    """``path`` is a root or a Windows system folder: work started there is no project's."""
    return _SYSTEM_FOLDER.match(path.replace("\\", "/").rstrip("/")) is not None


#: A home folder: ``/Users/<name>``, ``/home/<name>``, ``/root``, ``C:/Users/<name>``.
_HOME = r"(?:/Users/[^/]+|/home/[^/]+|/root|/[a-zA-Z]/Users/[^/]+|[A-Za-z]:/Users/[^/]+)"
_HOME_FOLDER = re.compile(rf"^{_HOME}$", re.IGNORECASE)
_IN_HOME = re.compile(rf"^{_HOME}/(.+)$", re.IGNORECASE)


def is_home_folder(path: str) -> bool:
    """``path`` is a user's home folder, where sessions about anything start."""
    return _HOME_FOLDER.match(path.replace("\\", "/").rstrip("/")) is not None


def in_home(path: str) -> str | None:
    """Where ``path`` lies in its home folder, lower case (``.claude`` for
    ``C:/Users/eduar/.claude``, ``src/app`` for ``/home/ana/src/app``); None outside a home or
    for the home itself. The same place in two homes is one operator's folder on two machines."""
    found = _IN_HOME.match(path.replace("\\", "/").rstrip("/"))
    return found.group(1).lower() if found is not None else None
