"""Where a piece of work's files lie: absolute paths, a project's own files before the names
every project has and installed dependencies, the folder beside a session's own.

Plain string work, apart from :mod:`brain.core.worklog` (which reads whole sessions) so that
the feed builder ranks files without loading the session readers' machinery.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ABSOLUTE_PATH = re.compile(r"^(?:/|[A-Za-z]:/)")
#: A Windows path on a drive (``C:/Users/…``, ``/`` separators).
DRIVE_PATH = re.compile(r"^[A-Za-z]:/")


#: Files every project has; they rank after the project's own files.
GENERIC_FILES = frozenset({
    "README.md", "README", "CLAUDE.md", "AGENTS.md", "package.json", "package-lock.json", "pyproject.toml",
    "__init__.py", "setup.py", "setup.cfg", "Cargo.toml", "go.mod", "Makefile", ".gitignore", "LICENSE",
    "CHANGELOG.md", "CONTRIBUTING.md", "tsconfig.json", "requirements.txt", "uv.lock", "mix.exs", "mix.lock",
})
#: Folders that hold installed dependencies, not the project's code: a file an agent read there
#: (to see how a library works) ranks after the project's own files.
DEPENDENCY_FOLDERS = frozenset({
    "node_modules", "deps", "_build", "vendor", "site-packages", "dist-packages", ".venv", "venv",
    "bower_components", "Pods",
})


def in_dependencies(path: str) -> bool:
    """``deps/opentelemetry_api/src/otel_span.erl``, ``.venv/lib/…/site-packages/x.py``."""
    return any(part in DEPENDENCY_FOLDERS for part in path.replace("\\", "/").split("/")[:-1])


def own_file_rank(path: str) -> tuple[bool, bool]:
    """Where ``path`` goes among a work's files: the project's own first, then names every
    project has, then files in installed dependencies (a sort key; ties keep their order)."""
    return in_dependencies(path), path.replace("\\", "/").rsplit("/", 1)[-1] in GENERIC_FILES


def own_files_first(files: Iterable[str]) -> list[str]:
    """``files`` in their order, ranked by :func:`own_file_rank`: the order an arc ranks its
    files in, kept when several arcs' lists are merged."""
    return sorted(files, key=own_file_rank)


def sibling_folder(path: str, cwd: str) -> str:
    """The folder beside ``cwd`` that holds ``path`` (both with ``/`` separators): the first
    folder below the deepest one they share (``/w/app`` for ``/w/app/src/a.py`` seen from
    ``/w/docs``); "" for a path inside ``cwd`` or relative, one sharing only the root or the
    drive with it, or a hidden folder (``~/.claude``)."""
    if not ABSOLUTE_PATH.match(path) or not ABSOLUTE_PATH.match(cwd):
        return ""
    parts, base = path.split("/"), cwd.rstrip("/").split("/")
    common = 0
    while common < min(len(parts) - 1, len(base)) and parts[common].lower() == base[common].lower():
        common += 1
    if common < 2 or common == len(base) or common >= len(parts) - 1 or parts[common].startswith("."):
        return ""
    return "/".join(parts[: common + 1])
