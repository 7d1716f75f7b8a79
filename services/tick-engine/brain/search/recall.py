"""Recall at the moment of need (SPEC §15): the index hits most relevant to an operator's prompt.

``brain hook prompt-submit`` calls :func:`recall_for_prompt` when the setting
``recall_on_prompt`` is on. What it shows is concrete: a project the prompt names gets its
most worked-on files, commands, errors and identifiers; a matching arc shows its own, those
the prompt names first; a matching lesson or decision shows its text. The prompt's rarest
words (stopwords and words found in more than a fifth of the index left out) are matched
with OR; at most ``recall_max_hits`` lines, hits scoring at least ``recall_min_score``, within
``recall_token_budget``, and never an item the session was already shown (the caller keeps
``seen`` in its per-session state). Reads one SQLite file; a missing index means no recall,
never an error. ``brain eval feed`` measures what it adds (docs/eval.md).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from brain.search import index
from brain.search.query import MIN_LINE_CHARS, project_line, prompt_words, recall_lines
from brain.settings import Settings

HEADER = "Brain recall: notes from earlier sessions that match this prompt (more: `brain search`, or the brain MCP tools)"
PROMPT_MAX_CHARS = 4000
#: Candidates looked at per hit shown (the seen and below-threshold ones are skipped).
CANDIDATES_PER_HIT = 4


def recall_for_prompt(vault: Path, prompt: str, seen: set[str], settings: Settings, cwd: str | None = None) -> str:
    """Markdown to add to the prompt's context ("" for nothing); adds what it shows to ``seen``.

    A prompt that names another project of the vault (not the one ``cwd`` is in: the boot feed
    covers that) first gets that project's work items; then the best-matching index items.
    """
    if not settings.recall_on_prompt or settings.recall_max_hits <= 0 or not prompt.strip():
        return ""
    text = prompt[:PROMPT_MAX_CHARS]
    try:
        hits = index.search(vault, text, limit=settings.recall_max_hits * CANDIDATES_PER_HIT,
                            any_term=True, drop_stopwords=True)
    except (index.SearchIndexError, sqlite3.Error):
        return ""
    budget = max(0, settings.recall_token_budget) * 4 - len(HEADER) - 1
    per_line = max(MIN_LINE_CHARS, budget // settings.recall_max_hits)
    lines: list[str] = []
    keys: list[str] = []
    own = folder_project(cwd)
    for project in named_projects(text, index.projects(vault)):
        key = f"project:{project}"
        if project == own or key in seen or len(lines) >= max(1, settings.recall_max_hits - 1):
            continue
        work = index.project_work(vault, project)
        if work is None or not work.work:
            continue
        # A named project is the prompt's clearest pointer: its line may take half the budget.
        line = project_line(work, prompt_words(text), max(per_line, budget // 2))
        if sum(len(x) + 1 for x in lines) + len(line) + 1 > budget:
            continue
        lines.append(line)
        keys.append(key)
    used = sum(len(x) + 1 for x in lines)
    more, more_keys = recall_lines(hits, seen, max_hits=settings.recall_max_hits - len(lines),
                                   budget_chars=budget - used, min_score=settings.recall_min_score, prompt=text,
                                   line_chars=per_line)
    lines += more
    keys += more_keys
    if not lines:
        return ""
    seen.update(keys)
    return HEADER + "\n" + "\n".join(lines)


def folder_project(cwd: str | None) -> str | None:
    """The project a session in ``cwd`` is in, by its last folder (how the tick names projects)."""
    name = (cwd or "").rstrip("/").rsplit("/", 1)[-1]
    return name or None


_BOUNDARY = r"(?<![A-Za-z0-9_.\-])"
_END = r"(?![A-Za-z0-9_\-]|\.[A-Za-z0-9])"


def named_projects(prompt: str, projects: Iterable[str]) -> list[str]:
    """The projects ``prompt`` names: a name with a separator (``claude-code-log``, ``deep_manifest``,
    ``site.me``) typed as one token; a plain word (``gateway``) only as the folder of an absolute
    path (``/src/gateway``) or in backticks, since plain words are mostly English (``project``) or a
    repository's own folders (``test/test_cache.py``)."""
    found = []
    lowered = prompt.lower()
    for project in projects:
        if len(project) < 3 or project.lower() not in lowered:  # no regex built for a name not typed at all
            continue
        escaped = re.escape(project)
        if re.search(r"[^A-Za-z0-9]", project):
            pattern = _BOUNDARY + escaped + _END
        else:
            # An absolute path's folder (``/src/gateway``), not a repository's own ``test/`` folder.
            pattern = r"(?:(?<=[A-Za-z0-9_~\-])/" + escaped + r"(?![A-Za-z0-9_.\-])|`" + escaped + "`)"
        if re.search(pattern, prompt, re.IGNORECASE):
            found.append(project)
    return found
