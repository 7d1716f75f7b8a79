"""Recall at the moment of need (SPEC §15): the index hits most relevant to an operator's prompt.

``brain hook prompt-submit`` calls :func:`recall_for_prompt` when the setting
``recall_on_prompt`` is on. The prompt's rarest words (stopwords and words found in more
than a fifth of the index left out) are matched with OR; at most ``recall_max_hits`` hits
scoring at least ``recall_min_score`` are shown, within ``recall_token_budget``, and never an
item the session was already shown (the caller keeps ``seen`` in its per-session state).
Reads one SQLite file; a missing index means no recall, never an error.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from brain.search import index
from brain.search.query import recall_lines
from brain.settings import Settings

HEADER = "Brain recall: notes from earlier sessions that match this prompt (more: `brain search`, or the brain MCP tools)"
PROMPT_MAX_CHARS = 4000
#: Candidates looked at per hit shown (the seen and below-threshold ones are skipped).
CANDIDATES_PER_HIT = 4


def recall_for_prompt(vault: Path, prompt: str, seen: set[str], settings: Settings) -> str:
    """Markdown to add to the prompt's context ("" for nothing); adds what it shows to ``seen``."""
    if not settings.recall_on_prompt or settings.recall_max_hits <= 0 or not prompt.strip():
        return ""
    try:
        hits = index.search(vault, prompt[:PROMPT_MAX_CHARS], limit=settings.recall_max_hits * CANDIDATES_PER_HIT,
                            any_term=True, drop_stopwords=True)
    except (index.SearchIndexError, sqlite3.Error):
        return ""
    budget = max(0, settings.recall_token_budget) * 4 - len(HEADER) - 1
    lines, keys = recall_lines(hits, seen, max_hits=settings.recall_max_hits, budget_chars=budget,
                               min_score=settings.recall_min_score)
    if not lines:
        return ""
    seen.update(keys)
    return HEADER + "\n" + "\n".join(lines)
