"""Arc pairs likely related or duplicated, computed without an LLM (SPEC §8). Pure.

The prompt lists them as candidates for the model to judge, and the ``--no-ai`` tick report
shows them, so an operator sees the same pairs with or without a model. Evidence: shared source
sessions, the same or near-identical titles or ignitions (duplicates); the same project at
overlapping times, or uncommon title words in common (related, only without an edge between
them). Evidence too common to mean anything is ignored, so the work stays near-linear in the
number of arcs. Ordering is total, so the same vault gives the same list.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from brain.core.heat import created_of, last_active_of
from brain.core.model import ArcInfo, Note
from brain.core.redaction import redact
from brain.core.vocab import AMYGDALA

CandidateKind = Literal["related", "duplicate"]

#: Titles at least this similar (Jaccard of their words) are near-identical.
DUPLICATE_SIMILARITY = 0.8
#: A title word held by more arcs than this says nothing about a pair (like "work", "fix").
COMMON_WORD_ARCS = 25
#: A session or title shared by more arcs than this is noise, not evidence.
MAX_GROUP = 20
#: Same project, overlapping dates: each arc is paired with at most this many later ones.
OVERLAP_NEIGHBOURS = 3
_STOPWORDS = frozenset({
    "the", "and", "for", "with", "from", "into", "onto", "that", "this", "then", "than", "when", "what",
    "which", "while", "where", "are", "was", "were", "has", "have", "had", "not", "but", "can", "could",
    "should", "would", "will", "all", "any", "its", "our", "your", "their", "them", "they", "out",
    "off", "via", "per", "use", "using", "make", "made", "new", "old", "add", "fix"
})
_WORD_RE = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Candidate:
    """Two arcs (``a`` < ``b``) that are likely related or duplicated, and why."""

    a: str
    b: str
    kind: CandidateKind
    why: str
    score: float = 0.0

    def as_dict(self) -> dict[str, str]:
        return {"a": self.a, "b": self.b, "kind": self.kind, "why": self.why}


def _words(text: str) -> frozenset[str]:
    return frozenset(
        w for w in _WORD_RE.findall(text.lower()) if len(w) >= 3 and not w.isdigit() and w not in _STOPWORDS
    )


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def live_arcs(notes: Iterable[Note]) -> dict[str, Note]:
    """cluster_id -> note of every arc that may be named in a recommendation.

    Tombstones, alarm files and ids held by two files (a verify problem) are left out.
    """
    seen: dict[str, Note] = {}
    twice: set[str] = set()
    for note in notes:
        arc = note.arc
        if arc is None:
            continue
        if arc.cluster_id in seen:
            twice.add(arc.cluster_id)
        seen[arc.cluster_id] = note
    return {
        cid: note
        for cid, note in seen.items()
        if cid not in twice and note.arc is not None and not note.arc.is_tombstone
        and not note.path.startswith(f"{AMYGDALA}/")
    }


def _edge_pairs(arcs: Mapping[str, Note]) -> set[frozenset[str]]:
    pairs: set[frozenset[str]] = set()
    for cid, note in arcs.items():
        for marker in note.markers:
            target = marker.attr("target") if marker.type == "edge" else None
            if target:
                pairs.add(frozenset((cid, target)))
    return pairs


class _Evidence:
    def __init__(self) -> None:
        self.reasons: dict[tuple[str, str], dict[str, tuple[float, str]]] = defaultdict(dict)

    def add(self, a: str, b: str, key: str, score: float, why: str) -> None:
        if a == b:
            return
        pair = (a, b) if a < b else (b, a)
        current = self.reasons[pair].get(key)
        if current is None or current[0] < score:
            self.reasons[pair][key] = (score, why)


def _groups(index: Mapping[str, list[str]]) -> Iterator[tuple[str, list[str]]]:
    for key in sorted(index):
        if len(index[key]) < 2:  # most sessions and titles belong to one arc
            continue
        members = sorted(set(index[key]))
        if 2 <= len(members) <= MAX_GROUP:
            yield key, members


def candidates(notes: Iterable[Note], *, ignitions: Mapping[str, str] | None = None) -> list[Candidate]:
    """Likely duplicates and likely related pairs without an edge, best first; no LLM.

    Duplicates: arcs sharing source sessions, with the same or near-identical titles
    (:data:`DUPLICATE_SIMILARITY`), or near-identical ignitions (for the arcs whose ignition
    is given). Related (only pairs with no edge either way): arcs of the same project active
    at overlapping times (each with its next :data:`OVERLAP_NEIGHBOURS` by start), or sharing
    two or more uncommon title words. Evidence that is too common (a session or word held by
    many arcs) is ignored, so the work stays near-linear in the number of arcs.
    """
    arcs = live_arcs(notes)
    infos = {cid: arc_of(note) for cid, note in arcs.items()}
    evidence = _Evidence()

    by_session: dict[str, list[str]] = defaultdict(list)
    for cid, info in infos.items():
        for session in set(info.source_sessions):
            by_session[session].append(cid)
    shared: dict[tuple[str, str], int] = defaultdict(int)
    for _, members in _groups(by_session):
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                shared[(a, b)] += 1
    for (a, b), count in shared.items():
        evidence.add(a, b, "sessions", 10.0 + count,
                     f"share {count} source session{'s' if count != 1 else ''}")
    del by_session, shared  # each index goes once used: 10 000 arcs' would all be alive at the peak

    titles = {cid: _words(info.title) for cid, info in infos.items()}
    by_title: dict[str, list[str]] = defaultdict(list)
    by_word: dict[str, list[str]] = defaultdict(list)
    for cid, words in titles.items():
        if words:
            by_title[" ".join(sorted(words))].append(cid)
        for word in words:
            by_word[word].append(cid)
    for _, members in _groups(by_title):
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                evidence.add(a, b, "title", 8.0, "same title")
    common: dict[tuple[str, str], list[str]] = defaultdict(list)
    for word in sorted(by_word):
        if not 2 <= len(by_word[word]) <= COMMON_WORD_ARCS:
            continue
        members = sorted(by_word[word])
        for i, a in enumerate(members):
            for b in members[i + 1:]:
                common[(a, b)].append(word)
    for (a, b), in_common in common.items():
        similarity = _jaccard(titles[a], titles[b])
        if similarity >= DUPLICATE_SIMILARITY:
            evidence.add(a, b, "title", 6.0 + similarity, "near-identical titles")
        elif len(in_common) >= 2:
            evidence.add(a, b, "words", 1.0 + len(in_common), "title words in common: " + ", ".join(in_common[:4]))
    del titles, by_title, by_word, common

    if ignitions:
        texts = {cid: _words(text) for cid, text in sorted(ignitions.items()) if cid in infos}
        ids = sorted(cid for cid, words in texts.items() if len(words) >= 3)
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                similarity = _jaccard(texts[a], texts[b])
                if similarity >= DUPLICATE_SIMILARITY:
                    evidence.add(a, b, "ignition", 6.0 + similarity, "near-identical ignitions")

    by_project: dict[str, list[tuple[datetime, datetime, str]]] = defaultdict(list)
    for cid, note in arcs.items():
        project = (infos[cid].project or "").strip()
        if project:
            start, end = created_of(note), last_active_of(note)
            by_project[project].append((min(start, end), max(start, end), cid))
    for project in sorted(by_project):
        spans = sorted(by_project[project])
        why = f"same project {' '.join(redact(project).split())}, active at overlapping times"
        for index, (_, end, cid) in enumerate(spans):
            for other_start, _, other in spans[index + 1: index + 1 + OVERLAP_NEIGHBOURS]:
                if other_start > end:
                    break
                evidence.add(cid, other, "project", 2.0, why)

    edges = _edge_pairs(arcs)
    out: list[Candidate] = []
    for (a, b), reasons in evidence.reasons.items():
        duplicate = "sessions" in reasons or "title" in reasons or "ignition" in reasons
        if not duplicate and frozenset((a, b)) in edges:
            continue
        if len(reasons) == 1:  # most pairs have one reason (same project, overlapping times)
            (score, why), = reasons.values()
        else:
            ordered = sorted(reasons.values(), key=lambda item: (-item[0], item[1]))
            score = sum(item[0] for item in ordered)
            why = "; ".join(item[1] for item in ordered)
        out.append(Candidate(a, b, "duplicate" if duplicate else "related", why, score))
    out.sort(key=lambda c: (c.kind != "duplicate", -c.score, c.a, c.b))
    return out


#: Candidates listed in a tick report (the total is given too).
REPORT_CANDIDATES = 20


def candidate_summary(found: Sequence[Candidate], limit: int = REPORT_CANDIDATES) -> dict[str, object]:
    """The candidates as a tick report shows them: the first ``limit`` and the total count."""
    return {"candidates": [c.as_dict() for c in found[:limit]], "candidates_total": len(found)}


def candidate_report(notes: Iterable[Note], limit: int = REPORT_CANDIDATES) -> dict[str, object]:
    """:func:`candidate_summary` of the vault's candidates (the ``--no-ai`` tick report)."""
    return candidate_summary(candidates(notes), limit)


def arc_of(note: Note) -> ArcInfo:
    """The arc of a note known to be one (a note :func:`live_arcs` returned)."""
    assert note.arc is not None
    return note.arc
