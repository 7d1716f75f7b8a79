"""The LLM's parsed answer (SPEC §8) checked against the vault into frozen values. Pure.

The model is a guest: it proposes, this module decides. :func:`validate` checks every
recommendation against what exists in the vault and returns a :class:`Validated` with the items
that may be applied and a :class:`Rejection` for each of the others; valid items still apply
when others are rejected.

Rules, beyond "ids name existing arcs" and "values come from the vocabularies":

* **Ids** (arcs, signal sources) must match :data:`SAFE_ID_RE` (no path separators, spaces,
  markup); arcs must exist and not be tombstones (``merged`` / ``split``).
* **Edges**: one per ordered ``(source, target)`` pair, no self-loops. An edge whose pair is
  already stored in the source arc is rejected ("already exists"). The symmetric types
  (``sibling``, ``related``) say nothing a stored edge in either direction does not already
  say, so for them a stored reverse edge counts as existing too. Directed types
  (``parent``, ``child``, ``unblocks``, ``supersedes``) may exist in both directions.
* **Structure first**: merges and splits are validated before everything else, and an arc
  takes part in at most one merge or split per answer. An arc that this answer absorbs or
  splits cannot also receive an edge, a signal change, a summary or a synthesis (the kept arc
  of a merge can).
* **Merges**: ``keep != absorb``, both existing non-tombstones; ``title`` is optional (absent or
  empty: the kept arc keeps its title).
* **Splits**: at least two parts, each with a title and at least one session, together a
  partition of the arc's ``source_sessions`` (every session exactly once, no strangers).
* **Signals**: the arc must hold an open signal whose ``source`` is exactly the given one.
  ``escalate`` needs a severity from the vocabulary more severe than the current one (the most
  severe open signal of that source); ``clear`` ignores any severity given.
* **Summaries**: only for arcs without one (SPEC §4: never overwritten).
* **Syntheses**: only for unsynthesized arcs (``synthesized`` not true and no summary), one per
  arc per answer: ``lessons`` a list of at most :data:`SYNTHESIS_LESSONS` texts (lesson cap
  :data:`LESSON_CHARS`; duplicates dropped), ``resolution`` one text (cap
  :data:`RESOLUTION_CHARS`); at least one of them non-empty. One synthesis is one change.
* **Text** (:func:`clean_text`): whitespace (newlines included) collapses to single spaces;
  characters YAML cannot carry verbatim (controls, lone surrogates, U+FFFE/U+FFFF) are dropped;
  backticks become ``'`` (a stray backtick would open an inline code span that hides the
  markers after it); text containing marker syntax (``<!--``, ``-->``) or wikilink brackets
  (``[[``, ``]]``: the writer adds the visible links itself) is rejected; then it is redacted
  (SPEC §10) and cut on a word boundary to its cap (reason 200, title 120, summary 300,
  intent 500, lesson 200, resolution 300 characters, an ellipsis included). Empty text is
  rejected; ``reason`` is required.
* **At most ``max_changes`` changes** (edges + merges + splits + signals + summaries +
  syntheses) are accepted, counted in this priority order: merges, splits, signals, edges,
  summaries, syntheses, each in answer order. Valid items beyond the cap are rejected "over
  max_ai_changes". ``intent`` and ``health`` are not changes.

Rejections carry a reason of our own words (never model text) and a preview of the item:
single-line, redacted, cut to :data:`PREVIEW_CHARS`, ``<`` ``>`` escaped so no marker syntax
travels with it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from brain.core.answer_parse import AnswerError
from brain.core.answer_schema import (
    INTENT_CHARS,
    LESSON_CHARS,
    PREVIEW_CHARS,
    REASON_CHARS,
    RESOLUTION_CHARS,
    SAFE_ID_RE,
    SUMMARY_CHARS,
    SYMMETRIC_EDGE_TYPES,
    SYNTHESIS_LESSONS,
    TITLE_CHARS,
    TOP_LEVEL_KEYS,
    Kind,
)
from brain.core.markers import contains_marker_syntax
from brain.core.model import Note
from brain.core.text import cut
from brain.core.vocab import EDGE_TYPES, SEVERITIES, SEVERITY_RANK, TOMBSTONE_STATUSES

# --- inputs ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ArcView:
    """What validation needs to know of one arc of the vault."""

    cluster_id: str
    status: str
    source_sessions: tuple[str, ...] = ()
    has_summary: bool = False
    #: Targets of the edge markers stored in this arc (this arc is their source).
    existing_edge_targets: frozenset[str] = frozenset()
    synthesized: bool = False

    @property
    def is_tombstone(self) -> bool:
        return self.status in TOMBSTONE_STATUSES

    @property
    def is_unsynthesized(self) -> bool:
        """The prompt's test: not marked synthesized and no summary yet."""
        return not self.synthesized and not self.has_summary


@dataclass(frozen=True)
class SignalView:
    """One signal marker of an arc (resolved ones are ignored)."""

    arc: str
    source: str
    severity: str


# --- outputs --------------------------------------------------------------------------------

@dataclass(frozen=True)
class NewEdge:
    source: str
    target: str
    type: str
    reason: str


@dataclass(frozen=True)
class Merge:
    keep: str
    absorb: str
    title: str | None  # None: the kept arc keeps its title
    reason: str


@dataclass(frozen=True)
class SplitPart:
    title: str
    sessions: tuple[str, ...]


@dataclass(frozen=True)
class Split:
    arc: str
    parts: tuple[SplitPart, ...]
    reason: str


@dataclass(frozen=True)
class SignalChange:
    arc: str
    source: str
    action: Literal["escalate", "clear"]
    severity: str  # the new severity: the escalated one, or "resolved" for a clear
    previous_severity: str
    reason: str


@dataclass(frozen=True)
class NewSummary:
    arc: str
    summary: str


@dataclass(frozen=True)
class NewSynthesis:
    """Lessons and a resolution for an unsynthesized arc (at least one of them)."""

    arc: str
    lessons: tuple[str, ...]
    resolution: str | None


@dataclass(frozen=True)
class HealthScore:
    score: float  # 0..10
    reason: str


@dataclass(frozen=True)
class Rejection:
    kind: Kind
    item: str  # preview: single-line, redacted, capped, no marker syntax
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "item": self.item, "reason": self.reason}


@dataclass(frozen=True)
class Validated:
    """The recommendations that may be applied, and the ones that may not."""

    merges: tuple[Merge, ...] = ()
    splits: tuple[Split, ...] = ()
    signals: tuple[SignalChange, ...] = ()
    edges: tuple[NewEdge, ...] = ()
    summaries: tuple[NewSummary, ...] = ()
    syntheses: tuple[NewSynthesis, ...] = ()
    intent: str | None = None
    health: HealthScore | None = None
    rejected: tuple[Rejection, ...] = field(default_factory=tuple)

    @property
    def change_count(self) -> int:
        return (len(self.merges) + len(self.splits) + len(self.signals) + len(self.edges) + len(self.summaries)
                + len(self.syntheses))


# --- text -----------------------------------------------------------------------------------

class _Invalid(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


Redactor = Callable[[str], str]

# Characters a YAML 1.1 reader accepts verbatim (PyYAML's "printable" set) minus whitespace
# controls, which were collapsed before; everything else is dropped.
_UNPRINTABLE_RE = re.compile("[^\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _default_redact(text: str) -> str:
    from brain.core.redaction import redact  # lazily: core modules import each other freely

    redacted: str = redact(text)
    return redacted


def clean_text(value: Any, cap: int, *, redact: Redactor = _default_redact, what: str = "text") -> str:
    """``value`` as safe single-line text, or :class:`_Invalid` (see the module docstring)."""
    if not isinstance(value, str):
        raise _Invalid(f"{what} is not a string")
    text = " ".join(value.split())
    text = " ".join(_UNPRINTABLE_RE.sub("", text).replace("`", "'").split())
    _forbid_markup(text, what)
    # Checked again after redaction: "[sk-...]" becomes "[[REDACTED]]", a wikilink.
    text = " ".join(redact(text).split())
    _forbid_markup(text, what)
    text = cut(text, cap)
    if not text:
        raise _Invalid(f"{what} is empty")
    return text


def _forbid_markup(text: str, what: str) -> None:
    if contains_marker_syntax(text):
        raise _Invalid(f"{what} contains marker syntax")
    if "[[" in text or "]]" in text:
        raise _Invalid(f"{what} contains wikilink syntax")


def _preview(value: Any, redact: Redactor) -> str:
    raw = _compact(value, redact, depth=0, budget=[PREVIEW_CHARS * 4])
    raw = " ".join(redact(raw).split())
    raw = raw.replace("<", "\\u003c").replace(">", "\\u003e")
    return cut(raw, PREVIEW_CHARS)


def _compact(value: Any, redact: Redactor, *, depth: int, budget: list[int]) -> str:
    """JSON-like rendering, bounded in depth and size (never recursion trouble, never huge)."""
    if budget[0] <= 0:
        return "…"
    if isinstance(value, dict):
        if depth >= 4:
            return "{…}"
        parts = []
        for key, item in value.items():
            if budget[0] <= 0:
                parts.append("…")
                break
            rendered = f"{_scalar(str(key), redact)}:{_compact(item, redact, depth=depth + 1, budget=budget)}"
            budget[0] -= len(rendered) + 1
            parts.append(rendered)
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list | tuple):
        if depth >= 4:
            return "[…]"
        parts = []
        for item in value:
            if budget[0] <= 0:
                parts.append("…")
                break
            rendered = _compact(item, redact, depth=depth + 1, budget=budget)
            budget[0] -= len(rendered) + 1
            parts.append(rendered)
        return "[" + ",".join(parts) + "]"
    return _scalar(value, redact)


def _scalar(value: Any, redact: Redactor) -> str:
    if isinstance(value, str):
        # Redact the whole string before cutting it: a cut secret may no longer be recognised.
        value = redact(value)[: PREVIEW_CHARS * 2]
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return "(big number)"
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(repr(value)[: PREVIEW_CHARS])


# --- validation -----------------------------------------------------------------------------

@dataclass
class _State:
    arcs: Mapping[str, ArcView]
    open_signals: dict[tuple[str, str], str]  # (arc, source) -> most severe open severity
    max_changes: int
    redact: Redactor
    accepted: int = 0
    structural: dict[str, str] = field(default_factory=dict)  # arc -> "kept" | "absorbed" | "split"
    edge_pairs: set[tuple[str, str]] = field(default_factory=set)
    symmetric_pairs: set[frozenset[str]] = field(default_factory=set)
    signal_keys: set[tuple[str, str]] = field(default_factory=set)
    summary_arcs: set[str] = field(default_factory=set)
    synthesis_arcs: set[str] = field(default_factory=set)
    rejected: list[Rejection] = field(default_factory=list)

    def reject(self, kind: Kind, item: Any, reason: str) -> None:
        self.rejected.append(Rejection(kind, _preview(item, self.redact), reason))

    def text(self, value: Any, cap: int, what: str) -> str:
        return clean_text(value, cap, redact=self.redact, what=what)

    def arc(self, value: Any, what: str) -> ArcView:
        if not isinstance(value, str) or not SAFE_ID_RE.match(value):
            raise _Invalid(f"{what} is not a valid cluster_id")
        view = self.arcs.get(value)
        if view is None:
            raise _Invalid(f"{what} names no existing arc")
        if view.is_tombstone:
            raise _Invalid(f"{what} is a tombstone ({view.status})")
        return view

    def live_arc(self, value: Any, what: str) -> ArcView:
        """An arc that this answer neither absorbs nor splits."""
        view = self.arc(value, what)
        role = self.structural.get(view.cluster_id)
        if role in ("absorbed", "split"):
            raise _Invalid(f"{what} is {role} by this answer")
        return view

    def take(self) -> None:
        if self.accepted >= self.max_changes:
            raise _Invalid("over max_ai_changes")
        self.accepted += 1


def validate(
    answer: Mapping[str, Any],
    *,
    arcs: Mapping[str, ArcView],
    open_signals: Iterable[SignalView],
    max_changes: int,
    redact: Redactor | None = None,
) -> Validated:
    """Check every recommendation of ``answer`` against the vault; never raises on bad content.

    ``arcs`` maps cluster_id to :class:`ArcView` (tombstones included; ambiguous ids left
    out); ``open_signals`` are the arcs' signal markers (resolved ones are ignored).
    """
    severities: dict[tuple[str, str], str] = {}
    for signal in open_signals:
        if signal.severity == "resolved" or signal.severity not in SEVERITY_RANK:
            continue
        key = (signal.arc, signal.source)
        current = severities.get(key)
        if current is None or SEVERITY_RANK[signal.severity] > SEVERITY_RANK[current]:
            severities[key] = signal.severity
    state = _State(arcs, severities, max(0, max_changes), redact or _default_redact)

    if not isinstance(answer, Mapping):
        raise AnswerError("the answer is not a JSON object")
    for name in answer:
        if name not in TOP_LEVEL_KEYS:
            state.reject("answer", {name: answer[name]}, f"unknown field {name!r}")

    merges = [m for raw in _items(state, answer, "merges", "merge") if (m := _merge(state, raw)) is not None]
    splits = [p for raw in _items(state, answer, "splits", "split") if (p := _split(state, raw)) is not None]
    signals = [c for raw in _items(state, answer, "signals", "signal") if (c := _signal(state, raw)) is not None]
    edges = [e for raw in _items(state, answer, "edges", "edge") if (e := _edge(state, raw)) is not None]
    summaries = [
        n for raw in _items(state, answer, "summaries", "summary") if (n := _summary(state, raw)) is not None
    ]
    syntheses = [
        y for raw in _items(state, answer, "syntheses", "synthesis") if (y := _synthesis(state, raw)) is not None
    ]
    return Validated(
        merges=tuple(merges),
        splits=tuple(splits),
        signals=tuple(signals),
        edges=tuple(edges),
        summaries=tuple(summaries),
        syntheses=tuple(syntheses),
        intent=_intent(state, answer),
        health=_health(state, answer),
        rejected=tuple(state.rejected),
    )


def _items(state: _State, answer: Mapping[str, Any], key: str, kind: Kind) -> list[Any]:
    value = answer.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        state.reject(kind, value, f"{key} is not a list")
        return []
    return value


def _fields(item: Any, required: Iterable[str]) -> dict[str, Any]:
    """``item`` as an object holding ``required``; fields nobody reads are ignored."""
    if not isinstance(item, dict):
        raise _Invalid("not an object")
    missing = [name for name in required if name not in item]
    if missing:
        raise _Invalid("missing " + ", ".join(missing))
    return item


def _merge(state: _State, item: Any) -> Merge | None:
    try:
        fields = _fields(item, ("keep", "absorb", "reason"))
        keep = state.arc(fields["keep"], "keep")
        absorb = state.arc(fields["absorb"], "absorb")
        if keep.cluster_id == absorb.cluster_id:
            raise _Invalid("keep and absorb are the same arc")
        for view in (keep, absorb):
            if view.cluster_id in state.structural:
                raise _Invalid("arc already in another merge or split of this answer")
        raw_title = fields.get("title")
        title = None
        if raw_title is not None and not (isinstance(raw_title, str) and not raw_title.strip()):
            title = state.text(raw_title, TITLE_CHARS, "title")
        reason = state.text(fields["reason"], REASON_CHARS, "reason")
        state.take()
    except _Invalid as exc:
        state.reject("merge", item, exc.reason)
        return None
    state.structural[keep.cluster_id] = "kept"
    state.structural[absorb.cluster_id] = "absorbed"
    return Merge(keep.cluster_id, absorb.cluster_id, title, reason)


def _split(state: _State, item: Any) -> Split | None:
    try:
        fields = _fields(item, ("arc", "parts", "reason"))
        view = state.arc(fields["arc"], "arc")
        if view.cluster_id in state.structural:
            raise _Invalid("arc already in another merge or split of this answer")
        raw_parts = fields["parts"]
        if not isinstance(raw_parts, list):
            raise _Invalid("parts is not a list")
        if len(raw_parts) < 2:
            raise _Invalid("a split needs at least two parts")
        known = set(view.source_sessions)
        seen: set[str] = set()
        parts = []
        for raw in raw_parts:
            part = _fields(raw, ("title", "sessions"))
            sessions = part["sessions"]
            if not isinstance(sessions, list) or not sessions:
                raise _Invalid("a part has no sessions")
            for session in sessions:
                if not isinstance(session, str) or session not in known:
                    raise _Invalid("a part names a session that is not the arc's")
                if session in seen:
                    raise _Invalid("a session is in more than one part")
                seen.add(session)
            parts.append(SplitPart(state.text(part["title"], TITLE_CHARS, "part title"), tuple(sessions)))
        if seen != known:
            raise _Invalid("the parts leave sessions of the arc out")
        reason = state.text(fields["reason"], REASON_CHARS, "reason")
        state.take()
    except _Invalid as exc:
        state.reject("split", item, exc.reason)
        return None
    state.structural[view.cluster_id] = "split"
    return Split(view.cluster_id, tuple(parts), reason)


def _signal(state: _State, item: Any) -> SignalChange | None:
    try:
        fields = _fields(item, ("arc", "source", "action", "reason"))
        view = state.live_arc(fields["arc"], "arc")
        source = fields["source"]
        if not isinstance(source, str) or not SAFE_ID_RE.match(source):
            raise _Invalid("source is not a valid signal source")
        action = fields["action"]
        if action not in ("escalate", "clear"):
            raise _Invalid("action is not escalate or clear")
        key = (view.cluster_id, source)
        current = state.open_signals.get(key)
        if current is None:
            raise _Invalid("no open signal with this source in the arc")
        if key in state.signal_keys:
            raise _Invalid("duplicate signal change in this answer")
        if action == "escalate":
            severity = fields.get("severity")
            if not isinstance(severity, str) or severity not in SEVERITIES or severity == "resolved":
                raise _Invalid("escalate needs a severity from the vocabulary")
            if SEVERITY_RANK[severity] <= SEVERITY_RANK[current]:
                raise _Invalid("escalate needs a severity above the current one")
            new_severity = severity
        else:
            new_severity = "resolved"
        reason = state.text(fields["reason"], REASON_CHARS, "reason")
        state.take()
    except _Invalid as exc:
        state.reject("signal", item, exc.reason)
        return None
    state.signal_keys.add(key)
    return SignalChange(view.cluster_id, source, action, new_severity, current, reason)


def _edge(state: _State, item: Any) -> NewEdge | None:
    try:
        fields = _fields(item, ("source", "target", "type", "reason"))
        source = state.live_arc(fields["source"], "source")
        target = state.live_arc(fields["target"], "target")
        if source.cluster_id == target.cluster_id:
            raise _Invalid("self-loop")
        edge_type = fields["type"]
        if not isinstance(edge_type, str) or edge_type not in EDGE_TYPES:
            raise _Invalid("type is not an edge type")
        pair = (source.cluster_id, target.cluster_id)
        symmetric = edge_type in SYMMETRIC_EDGE_TYPES
        if target.cluster_id in source.existing_edge_targets or (
            symmetric and source.cluster_id in target.existing_edge_targets
        ):
            raise _Invalid("already exists")
        if pair in state.edge_pairs or frozenset(pair) in state.symmetric_pairs or (
            symmetric and pair[::-1] in state.edge_pairs
        ):
            raise _Invalid("duplicate edge in this answer")
        reason = state.text(fields["reason"], REASON_CHARS, "reason")
        state.take()
    except _Invalid as exc:
        state.reject("edge", item, exc.reason)
        return None
    state.edge_pairs.add(pair)
    if symmetric:
        state.symmetric_pairs.add(frozenset(pair))
    return NewEdge(source.cluster_id, target.cluster_id, edge_type, reason)


def _summary(state: _State, item: Any) -> NewSummary | None:
    try:
        fields = _fields(item, ("arc", "summary"))
        view = state.live_arc(fields["arc"], "arc")
        if view.has_summary:
            raise _Invalid("the arc already has a summary (never overwritten)")
        if view.cluster_id in state.summary_arcs:
            raise _Invalid("duplicate summary in this answer")
        summary = state.text(fields["summary"], SUMMARY_CHARS, "summary")
        state.take()
    except _Invalid as exc:
        state.reject("summary", item, exc.reason)
        return None
    state.summary_arcs.add(view.cluster_id)
    return NewSummary(view.cluster_id, summary)


def _synthesis(state: _State, item: Any) -> NewSynthesis | None:
    try:
        fields = _fields(item, ("arc",))
        view = state.live_arc(fields["arc"], "arc")
        if not view.is_unsynthesized:
            raise _Invalid("the arc is already synthesized")
        if view.cluster_id in state.synthesis_arcs:
            raise _Invalid("duplicate synthesis in this answer")
        raw_lessons = fields.get("lessons")
        if raw_lessons is None:
            raw_lessons = []
        if not isinstance(raw_lessons, list):
            raise _Invalid("lessons is not a list")
        if len(raw_lessons) > SYNTHESIS_LESSONS:
            raise _Invalid(f"more than {SYNTHESIS_LESSONS} lessons")
        lessons: list[str] = []
        for raw in raw_lessons:
            lesson = state.text(raw, LESSON_CHARS, "lesson")
            if lesson not in lessons:
                lessons.append(lesson)
        raw_resolution = fields.get("resolution")
        resolution = None
        if raw_resolution is not None and not (isinstance(raw_resolution, str) and not raw_resolution.strip()):
            resolution = state.text(raw_resolution, RESOLUTION_CHARS, "resolution")
        if not lessons and resolution is None:
            raise _Invalid("no lessons and no resolution")
        state.take()
    except _Invalid as exc:
        state.reject("synthesis", item, exc.reason)
        return None
    state.synthesis_arcs.add(view.cluster_id)
    return NewSynthesis(view.cluster_id, tuple(lessons), resolution)


def _intent(state: _State, answer: Mapping[str, Any]) -> str | None:
    raw = answer.get("intent")
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    try:
        return state.text(raw, INTENT_CHARS, "intent")
    except _Invalid as exc:
        state.reject("intent", raw, exc.reason)
        return None


def _health(state: _State, answer: Mapping[str, Any]) -> HealthScore | None:
    raw = answer.get("health")
    if raw is None:
        return None
    try:
        fields = _fields(raw, ("score", "reason"))
        score = fields["score"]
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise _Invalid("score is not a number")
        if isinstance(score, float) and not math.isfinite(score):
            raise _Invalid("score is not a number")
        if not 0 <= score <= 10:
            raise _Invalid("score is outside 0-10")
        reason = state.text(fields["reason"], REASON_CHARS, "reason")
    except _Invalid as exc:
        state.reject("health", raw, exc.reason)
        return None
    return HealthScore(float(score), reason)


# --- convenience for the tick ----------------------------------------------------------------

def views_from_notes(notes: Iterable[Note]) -> tuple[dict[str, ArcView], list[SignalView]]:
    """ArcViews and signals from the scanner's notes (:class:`brain.core.model.Note`).

    Only arc notes count; a cluster_id held by two files is ambiguous (a verify problem) and
    left out, so recommendations naming it are rejected.
    """
    views: dict[str, ArcView] = {}
    signals: list[SignalView] = []
    duplicated: set[str] = set()
    for note in notes:
        arc = note.arc
        if arc is None:
            continue
        cid = arc.cluster_id
        if cid in views:
            duplicated.add(cid)
            continue
        targets = frozenset(
            target for m in note.markers if m.type == "edge" and (target := m.attr("target")) is not None
        )
        views[cid] = ArcView(
            cluster_id=cid,
            status=arc.status,
            source_sessions=tuple(arc.source_sessions),
            has_summary=bool(arc.summary and arc.summary.strip()),
            synthesized=bool(arc.synthesized),
            existing_edge_targets=targets,
        )
        for marker in note.markers:
            if marker.type == "signal":
                source, severity = marker.attr("source"), marker.attr("severity")
                if source is not None and severity is not None:
                    signals.append(SignalView(cid, source, severity))
    for cid in duplicated:
        views.pop(cid, None)
    return views, [s for s in signals if s.arc not in duplicated]
