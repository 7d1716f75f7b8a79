"""Pure side of recall: free text -> a safe FTS5 query, and the choice of what recall adds.

Nothing here touches the disk. Users and agents type anything (quotes, ``-``, ``*``, ``:``,
``NEAR``, unbalanced parentheses); :func:`fts_query` keeps only word tokens and quotes each,
so the FTS5 parser never sees syntax it could reject.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: Searchable kinds: one row per arc, one per marker block of these types.
KINDS = ("arc", "lesson", "decision", "signal", "todo", "inject")
MARKER_KINDS = frozenset(KINDS[1:])

#: Word tokens as FTS5's unicode61 tokenizer sees them (letters and digits; ``_`` splits).
_WORD = re.compile(r"[^\W_]+(\*)?", re.UNICODE)
MAX_QUERY_TERMS = 24
MAX_TERM_CHARS = 64

#: Words too common to say anything about what a prompt needs (recall only).
_STOPWORD_TEXT = """a an and are as at be but by can could did do does for from had has have how i if in into is it its
    me my no not of on or our please so that the their them then there these this to up us was we were what
    when where which who why will with would you your let lets make sure just also now get got use using want
    need should any some all one two see look like help hi hey ok okay thanks thank"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())


@dataclass(frozen=True)
class Hit:
    """One search result. ``successors`` is set on tombstones (merged / split arcs)."""

    cluster_id: str | None
    path: str
    line: int
    snippet: str
    kind: str
    project: str | None
    score: float
    title: str = ""
    heat: int = 0
    last_active: str | None = None
    status: str = ""
    successors: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """One name per indexed item (what recall remembers as already shown)."""
        return f"{self.path}:{self.line}:{self.kind}"

    def as_dict(self) -> dict[str, object]:
        return {
            "cluster_id": self.cluster_id,
            "path": self.path,
            "line": self.line,
            "kind": self.kind,
            "project": self.project,
            "title": self.title,
            "snippet": self.snippet,
            "score": round(self.score, 3),
            "heat": self.heat,
            "last_active": self.last_active,
            "status": self.status,
            "successors": list(self.successors),
        }


def terms(text: str, *, drop_stopwords: bool = False, limit: int = MAX_QUERY_TERMS) -> list[tuple[str, bool]]:
    """(word, prefix) pairs of ``text``, lowercased, first occurrence order, at most ``limit``."""
    seen: set[str] = set()
    out: list[tuple[str, bool]] = []
    for match in _WORD.finditer(text):
        word = match.group(0).rstrip("*").lower()[:MAX_TERM_CHARS]
        if not word or word in seen or (drop_stopwords and (word in STOPWORDS or len(word) < 3)):
            continue
        seen.add(word)
        out.append((word, match.group(1) is not None))
        if len(out) >= limit:
            break
    return out


def fts_query(text: str, *, any_term: bool = False, drop_stopwords: bool = False) -> str | None:
    """A safe FTS5 MATCH expression for free text; None when it holds no word at all.

    Every term is a double-quoted string (FTS5's escape for arbitrary text); a trailing
    ``*`` typed by the user stays a prefix query. ``any_term`` joins with OR (recall over
    a whole prompt), otherwise every term must match.
    """
    return expression(terms(text, drop_stopwords=drop_stopwords), any_term=any_term)


def expression(found: Sequence[tuple[str, bool]], *, any_term: bool = False) -> str | None:
    """The MATCH expression of (word, prefix) terms; single letters are left out when longer words exist."""
    words = [t for t in found if len(t[0]) > 1] or list(found)
    if not words:
        return None
    parts = ['"' + word.replace('"', '""') + '"' + ("*" if prefix else "") for word, prefix in words]
    return (" OR " if any_term else " ").join(parts)


def one_line(text: str, limit: int) -> str:
    """Whitespace folded, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[: max(1, limit - 1)].rstrip() + "…"


#: Recall leaves out hits scoring under this share of the best hit's score.
RELATIVE_FLOOR = 0.5


def recall_lines(
    hits: Sequence[Hit], seen: Iterable[str], *, max_hits: int, budget_chars: int, min_score: float
) -> tuple[list[str], list[str]]:
    """The lines prompt-time recall adds, and the keys of the hits they show.

    Best first; hits below ``min_score`` or below :data:`RELATIVE_FLOOR` of the best hit's
    score, already ``seen`` this session, or tombstones are skipped; the whole stays within ``budget_chars`` (a line that does not fit is dropped,
    not cut, so every line names a whole item).
    """
    already = set(seen)
    if hits:  # far weaker than the best hit is noise next to it, whatever its absolute score
        min_score = max(min_score, max(h.score for h in hits) * RELATIVE_FLOOR)
    lines: list[str] = []
    keys: list[str] = []
    used = 0
    for hit in hits:
        if len(lines) >= max_hits:
            break
        if hit.score < min_score or hit.key in already or hit.successors:
            continue
        name = f"[[{hit.cluster_id}]]" if hit.cluster_id else hit.path
        line = f"- {hit.kind} {name} ({hit.path}:{hit.line}): {hit.snippet}"
        if used + len(line) + 1 > budget_chars:
            continue
        already.add(hit.key)
        lines.append(line)
        keys.append(hit.key)
        used += len(line) + 1
    return lines, keys
