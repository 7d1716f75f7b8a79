"""Pure side of recall: free text -> a safe FTS5 query, and the choice of what recall adds.

Nothing here touches the disk. Users and agents type anything (quotes, ``-``, ``*``, ``:``,
``NEAR``, unbalanced parentheses); :func:`fts_query` keeps only word tokens and quotes each,
so the FTS5 parser never sees syntax it could reject.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

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


class ProjectWorkLike(Protocol):
    """A project's work items (``index.ProjectWork``; this module stays free of the database)."""

    @property
    def project(self) -> str: ...
    @property
    def arcs(self) -> int: ...
    @property
    def last_active(self) -> str | None: ...
    @property
    def work(self) -> tuple[tuple[str, tuple[str, ...]], ...]: ...


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
    #: An arc's work items: (field, values) pairs, fields ``files``, ``commands``, ``errors``, ``ids``.
    work: tuple[tuple[str, tuple[str, ...]], ...] = ()

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
            "work": {name: list(values) for name, values in self.work},
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
#: A recall line is never cut below this many characters, whatever the budget per hit.
MIN_LINE_CHARS = 160
#: Work fields in the order a line shows them.
WORK_ORDER = ("files", "commands", "errors", "ids")


def _tokens(text: str) -> set[str]:
    return {m.group(0).lower() for m in _WORD.finditer(text.replace("*", " "))}


def _relevant(value: str, words: set[str]) -> bool:
    """Does a work item share a word with the prompt (``render`` matches ``renderer.py``)?"""
    for token in _tokens(value):
        if token in words:
            return True
        if len(token) >= 4 and any(len(w) >= 4 and (token.startswith(w) or w.startswith(token)) for w in words):
            return True
    return False


def prompt_words(prompt: str) -> set[str]:
    """The prompt's words that can name a work item (stopwords and one- and two-letter words left out)."""
    return {w for w, _ in terms(prompt, drop_stopwords=True, limit=200)}


def short_path(value: str) -> str:
    """An absolute path outside the arc's checkout, cut to its last three parts (the part an agent needs)."""
    parts = value.split("/")
    return "…/" + "/".join(parts[-3:]) if value.startswith("/") and len(parts) > 4 else value


def _work_parts(fields: Mapping[str, Sequence[str]], words: set[str], head: str, limit: int) -> str | None:
    """``head: files: `a`, …; commands: …`` with as many items as fit in ``limit``, prompt-named ones first."""
    ranked = [(name, v) for name in WORK_ORDER for v in fields.get(name, ()) if _relevant(v, words)]
    ranked += [(name, v) for name in WORK_ORDER for v in fields.get(name, ()) if (name, v) not in ranked]
    chosen: dict[str, list[str]] = {}

    def render(picked: dict[str, list[str]]) -> str:
        parts = [f"{name}: " + ", ".join(f"`{short_path(v)}`" for v in picked[name])
                 for name in WORK_ORDER if picked.get(name)]
        return head + ": " + "; ".join(parts)

    for name, value in ranked:
        trial = {k: list(v) for k, v in chosen.items()}
        trial.setdefault(name, []).append(value)
        if len(render(trial)) <= limit:
            chosen = trial
    return render(chosen) if chosen else None


def project_line(work: ProjectWorkLike, words: set[str], limit: int) -> str:
    """A named project's line: its arcs, latest activity and most worked-on items."""
    when = (work.last_active or "")[:10]
    head = f"- project {work.project} ({work.arcs} arc{'s' if work.arcs != 1 else ''}{', last ' + when if when else ''})"
    fields = {name: values for name, values in work.work if name in WORK_ORDER}
    return _work_parts(fields, words, head, limit) or head


def work_line(hit: Hit, words: set[str], limit: int) -> str:
    """An arc hit as one line: link, title, project and date, then the arc's concrete work items
    (files, commands, errors, identifiers), those sharing a word with the prompt first, as many as
    fit in ``limit`` characters. Without work items, the matching snippet."""
    when = (hit.last_active or "")[:10]
    where = ", ".join(p for p in (hit.project or "", when) if p)
    head = f"- [[{hit.cluster_id}]] {one_line(hit.title, 90)}" if hit.cluster_id else f"- {hit.path}"
    if where:
        head += f" ({where})"
    fields = {name: values for name, values in hit.work if name in WORK_ORDER}
    return _work_parts(fields, words, head, limit) or one_line(f"{head}: {hit.snippet}", limit)


def recall_lines(
    hits: Sequence[Hit], seen: Iterable[str], *, max_hits: int, budget_chars: int, min_score: float,
    prompt: str = "", line_chars: int | None = None,
) -> tuple[list[str], list[str]]:
    """The lines prompt-time recall adds, and the keys of the hits they show.

    Best first; hits below ``min_score`` or below :data:`RELATIVE_FLOOR` of the best hit's
    score, already ``seen`` this session, or tombstones are skipped; the whole stays within
    ``budget_chars`` (a line that does not fit is dropped, not cut, so every line names a whole
    item). An arc shows its concrete work items, those the ``prompt`` names first
    (:func:`work_line`); a marker block shows its text.
    """
    already = set(seen)
    if hits:  # far weaker than the best hit is noise next to it, whatever its absolute score
        min_score = max(min_score, max(h.score for h in hits) * RELATIVE_FLOOR)
    words = prompt_words(prompt)
    per_line = line_chars or max(MIN_LINE_CHARS, budget_chars // max(1, max_hits))
    lines: list[str] = []
    keys: list[str] = []
    used = 0
    for hit in hits:
        if len(lines) >= max_hits:
            break
        if hit.score < min_score or hit.key in already or hit.successors:
            continue
        if hit.kind == "arc":
            line = work_line(hit, words, per_line)
        else:
            name = f"[[{hit.cluster_id}]]" if hit.cluster_id else hit.path
            line = f"- {hit.kind} {name} ({hit.path}:{hit.line}): {hit.snippet}"
        if used + len(line) + 1 > budget_chars:
            continue
        already.add(hit.key)
        lines.append(line)
        keys.append(hit.key)
        used += len(line) + 1
    return lines, keys
