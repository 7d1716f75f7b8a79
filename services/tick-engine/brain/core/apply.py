"""Phase 4 (SPEC §8): validated recommendations become file edits. Pure: texts in, a Plan out.

:func:`plan_answer` takes a :class:`~brain.core.recommendations.Validated` and the current
text of every arc it touches (nothing else is read: the work is O(changes), not O(files)) and
returns an :class:`AnswerPlan`: one ``WriteFile`` per changed arc (expecting the bytes that
were read) and one per new arc, the last-tick-diff lines, counts, and a rejection for every
item that cannot be applied to the text as it is now. Changes are applied in the order
merges, splits, signals, edges, syntheses, summaries; several changes to one arc compose.

What each change does:

* **Edge** — ``<!-- @edge type=T target=ID --> [[ID]] — reason`` on one line, appended to
  the source arc's ``## Edges`` section (created at the end of the body when missing). An arc
  that already holds an edge marker to that target (any type) is left alone: one edge per
  (source, target) ever, so re-applying an answer adds nothing.
* **Merge** — the kept arc gains the absorbed arc's ``source_sessions`` (union, order kept),
  the sums of its ``activity`` figures (``sessions`` = the union's size), the later
  ``last_active``, the earlier ``created``, its ``agents``, the answer's title when one was
  given (and the body's ``# title`` line when it matched the old title), and a section
  ``## Merged from [[absorbed]]`` at the end of its body holding: the date and reason, the
  absorbed arc's *distinct* markers re-rendered as live markers (same type, attributes and
  text as one the kept arc holds: not copied; edges go to ``## Edges`` instead, except those
  to the kept or absorbed arc or to a target the kept arc already links), and the absorbed
  arc's whole body verbatim inside a ``~~~~markdown`` fence — inside a fence its markers are
  documentation, so nothing is counted twice, and nothing is lost. The absorbed file stays
  where it is as a tombstone: ``status: merged``, ``merged_into: <keep>``, ``heat: 0``, its
  other frontmatter unchanged (its ``source_sessions`` let extraction follow it), and a body
  that links ``[[keep]]``. The writer journals its before-image too.
* **Split** — each part becomes a new arc next to the original, named by SPEC §4's formula
  on the date of the original's ``created``, the part's title and its sessions. Its
  frontmatter is the original's (minus ``summary``, ``merged_into``, ``split_into``) with
  the part's title, sessions, ``synthesized: false`` and its own ``activity``: exact sums of
  the per-session figures the Timeline records (``<!-- brain:session … -->``) when every
  session of the arc has them, else the original's figures shared in proportion to the
  sessions (largest remainder, so the parts sum to the original). Its body: ``# title``,
  ``Split from [[original]] …``, then the Timeline and Source-sessions lines that name its
  sessions. The first part also receives the original's markers (signals, lessons, injects,
  edges…), so open signals stay open exactly once. The original becomes a tombstone
  (``status: split``, ``split_into``, ``heat: 0``) whose body links the parts and keeps the
  text it had, fenced. A split whose new id or file name is taken is rejected whole.
* **Signals** — every open signal of the arc whose ``source`` is exactly the given one:
  ``escalate`` rewrites only ``severity`` (other attributes keep their order and values);
  ``clear`` sets ``severity=resolved``, adds ``cleared_at=<now>`` and appends
  `` (CLEARED: reason)`` to the text; the keeper removes the block on the first tick after
  ``cleared_at``. A signal no longer open is not touched (rejected "already applied").
* **Synthesis** — each lesson becomes ``<!-- @lesson source=ai:<tick_id> -->text<!-- @/lesson -->``
  on its own line at the end of ``## Lessons`` (a lesson whose text the arc already holds is
  not repeated), the resolution a plain line at the end of ``## Resolution`` (a missing section
  is created where CLUSTERS.md puts it: before ``## Edges`` / ``## Source sessions``, else at
  the end), and ``synthesized: true`` is set, so the arc
  leaves the prompt's unsynthesized list. An arc already ``synthesized`` is not touched
  (rejected "already applied"), so re-applying an answer changes nothing.
* **Summary** — ``summary:`` is written only when the arc has none (never overwritten), with
  ``synthesized: true``: SPEC §4 counts a summary as synthesis, and the arc then leaves the
  prompt's list of unsynthesized arcs.

Every text written that comes from the model (reasons, titles, summaries) was cleaned by
validation (single line, capped, no marker or wikilink syntax) and is redacted again here;
vault titles moved into a body are made inert (``<!--`` and ``-->`` escaped). Every edit is
re-parsed before it is kept: one that would not parse, or would change the arc's
``cluster_id``, is rejected and the arc keeps its previous text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from brain.core import frontmatter
from brain.core.arc_text import cluster_id as new_cluster_id
from brain.core.arc_text import recorded_sessions
from brain.core.markers import Marker, code_closed, render_block, render_tag, replace_block, with_attrs
from brain.core.model import arc_info, parse_text
from brain.core.plan import Expect, Plan, WriteFile
from brain.core.recommendations import (
    SAFE_ID_RE,
    Kind,
    Merge,
    NewEdge,
    NewSummary,
    NewSynthesis,
    Rejection,
    SignalChange,
    Split,
    Validated,
)
from brain.core.redaction import redact
from brain.core.sections import append_section, append_to_section, headings
from brain.core.timeutil import date_in_text, iso, parse_instant
from brain.core.vocab import SEVERITY_RANK

KINDS = ("merges", "splits", "signals", "edges", "summaries", "syntheses")
ACTIVITY_FIELDS = ("sessions", "user_turns", "tool_calls", "errors", "joy", "compactions")
#: Figures a Timeline ``brain:session`` comment records, and the activity field each feeds.
_RECORDED = {"turns": "user_turns", "tools": "tool_calls", "errors": "errors", "joy": "joy",
             "compactions": "compactions"}
_TILDES_RE = re.compile(r"^\s*(~{3,})")
T = TypeVar("T")


@dataclass(frozen=True)
class CurrentArc:
    """An arc as it is on disk now: what the plan edits, and what the writer expects to find."""

    cluster_id: str
    path: str  # vault-relative
    text: str
    expect: Expect


@dataclass
class AnswerPlan:
    plan: Plan
    diff_lines: list[str] = field(default_factory=list)
    applied: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    rejected: list[Rejection] = field(default_factory=list)
    #: Edges added per file written (a file the writer refuses keeps its edges out of the count).
    edges_by_path: dict[str, int] = field(default_factory=dict)
    created: list[str] = field(default_factory=list)  # paths of new arcs (split parts)


class _Refused(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _inert(text: str) -> str:
    """Vault text put into a body: one line, never a marker or a comment, and no code span
    left open (:func:`~brain.core.markers.code_closed`)."""
    return code_closed(" ".join(text.split()).replace("<!--", "&lt;!--").replace("-->", "--&gt;"))


def _said(text: str) -> str:
    """Model text, cleaned by validation, redacted once more before it is written."""
    return " ".join(redact(text).split())


# --- text helpers ---------------------------------------------------------------------------

@dataclass
class _Arc:
    """One arc's text cut into frontmatter and body (body with ``\\n`` newlines)."""

    document: frontmatter.Document
    meta: dict[str, Any]
    body: str

    @classmethod
    def of(cls, text: str) -> _Arc:
        try:
            document = frontmatter.split(text)
            if document.frontmatter is None:
                raise _Refused("the arc has no frontmatter")
            meta = frontmatter.load(document.frontmatter)
        except frontmatter.FrontmatterError as exc:
            raise _Refused(f"the arc does not parse ({exc.message})") from None
        body = document.body.replace("\r\n", "\n") if document.newline == "\r\n" else document.body
        return cls(document, meta, body)

    def render(self, updates: Mapping[str, Any] | None = None, body: str | None = None) -> str:
        document = self.document
        assert document.frontmatter is not None
        if updates:
            document = dataclasses.replace(document, frontmatter=frontmatter.set_keys(document.frontmatter,
                                                                                      dict(updates)))
        if body is not None:
            document = dataclasses.replace(document, body=body.replace("\n", "\r\n") if document.newline == "\r\n"
                                           else body)
        return document.render()


def body_markers(text: str) -> list[Marker]:
    """The markers of an arc's body (frontmatter excluded), as the scanner sees them."""
    return parse_text(text).markers


def _marker_key(marker: Marker) -> tuple[str, tuple[tuple[str, str], ...], str]:
    return marker.type, tuple(sorted(marker.attrs)), marker.text


def fenced(text: str) -> list[str]:
    """``text`` verbatim inside a tilde fence longer than any fence line it holds."""
    longest = max((len(m.group(1)) for line in text.split("\n") if (m := _TILDES_RE.match(line))), default=3)
    fence = "~" * max(4, longest + 1)
    return [f"{fence}markdown", *text.rstrip("\n").split("\n"), fence]


def rendered(marker: Marker) -> str:
    if marker.is_block:
        return render_block(marker.type, marker.attrs, marker.content or "")
    return render_tag(marker.type, marker.attrs)


def edge_line(attrs: Sequence[tuple[str, str]], target: str, reason: str | None = None) -> str:
    """An edge as the system writes it: the marker, then the visible wikilink on the same line."""
    line = render_tag("edge", attrs)
    if SAFE_ID_RE.match(target):
        line += f" [[{target}]]"
    return line + (f" — {reason}" if reason else "")


def _instant(a: str | None, b: str | None, *, later: bool) -> str | None:
    """``b`` when it is later (or earlier) than ``a`` or ``a`` is unreadable, else ``a``."""
    pa, pb = parse_instant(a), parse_instant(b)
    if pb is None:
        return a
    if pa is None or (pb > pa if later else pb < pa):
        return b
    return a


def share(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder; sums to ``total``)."""
    whole = sum(weights)
    if whole <= 0 or total <= 0:
        return [0 for _ in weights]
    raw = [total * w / whole for w in weights]
    out = [int(r) for r in raw]
    order = sorted(range(len(weights)), key=lambda i: (-(raw[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def _id_pattern(session: str) -> re.Pattern[str]:
    return re.compile(r"(?<![A-Za-z0-9._:-])" + re.escape(session) + r"(?![A-Za-z0-9._:-])")


def _section_lines(body: str, heading: str) -> list[str]:
    lines = body.split("\n")
    heads = headings(lines)
    for position, (index, text) in enumerate(heads):
        if lines[index].startswith("## ") and text.lower() == heading.lower():
            end = heads[position + 1][0] if position + 1 < len(heads) else len(lines)
            return [line for line in lines[index + 1:end] if line.strip()]
    return []


# --- the plan -------------------------------------------------------------------------------

class _Work:
    def __init__(self, current: Mapping[str, CurrentArc], now: datetime, unavailable: Mapping[str, str],
                 taken_ids: Collection[str], taken_paths: Collection[str], tick_id: str):
        self.current = current
        self.tick_id = tick_id
        self.texts = {cid: arc.text for cid, arc in current.items()}
        self.now = now
        self.unavailable = unavailable
        self.taken_ids = set(taken_ids)
        self.taken_paths = set(taken_paths)
        self.out = AnswerPlan(Plan())
        self.new_files: dict[str, str] = {}
        self.edges: dict[str, int] = {}

    @property
    def date(self) -> str:
        return iso(self.now)[:10]

    def arc(self, cid: str) -> str:
        if cid in self.unavailable:
            raise _Refused(self.unavailable[cid])
        if cid not in self.texts:
            raise _Refused("the arc was not read")
        return self.texts[cid]

    def keep(self, cid: str, text: str) -> None:
        """Adopt ``text`` for ``cid`` once it is known to parse as the same arc."""
        check(text, cid)
        self.texts[cid] = text

    def reject(self, kind: Kind, item: str, reason: str) -> None:
        self.out.rejected.append(Rejection(kind, item, reason))

    def done(self, kind: str, line: str) -> None:
        self.out.applied[kind] += 1
        self.out.diff_lines.append(line)


def check(text: str, cid: str) -> None:
    parsed = parse_text(text)
    if not parsed.parsed or parsed.meta is None:
        raise _Refused("the edit would not parse")
    if str(parsed.meta.get("cluster_id", "")).strip() != cid:
        raise _Refused("the edit would change the cluster_id")


def plan_answer(
    validated: Validated,
    current: Mapping[str, CurrentArc],
    *,
    now: datetime,
    unavailable: Mapping[str, str] | None = None,
    taken_ids: Collection[str] = (),
    taken_paths: Collection[str] = (),
    tick_id: str = "unknown",
) -> AnswerPlan:
    """The edits that apply ``validated`` to the ``current`` arcs (see the module docstring).

    ``unavailable`` maps arcs that could not be read to the reason (their changes are
    rejected with it); ``taken_ids`` and ``taken_paths`` are the cluster_ids and files that
    exist, which new split parts must not collide with; ``tick_id`` is the provenance of the
    lessons a synthesis writes (``source=ai:<tick_id>``).
    """
    work = _Work(current, now, unavailable or {}, taken_ids, taken_paths, tick_id)
    for merge in validated.merges:
        _attempt(work, "merge", f"{merge.absorb} into {merge.keep}", _merge, merge)
    for split in validated.splits:
        _attempt(work, "split", split.arc, _split, split)
    for change in validated.signals:
        _attempt(work, "signal", f"{change.action} {change.source} in {change.arc}", _signal, change)
    for edge in validated.edges:
        _attempt(work, "edge", f"{edge.source} -> {edge.target} ({edge.type})", _edge, edge)
    for synthesis in validated.syntheses:  # before summaries: a summary marks the arc synthesized too
        _attempt(work, "synthesis", synthesis.arc, _synthesis, synthesis)
    for summary in validated.summaries:
        _attempt(work, "summary", summary.arc, _summary, summary)

    out = work.out
    for cid, text in work.texts.items():
        arc = current[cid]
        if text != arc.text:
            out.plan.add(WriteFile(arc.path, text.encode("utf-8"), arc.expect, reason="ai"))
            if work.edges.get(cid):
                out.edges_by_path[arc.path] = work.edges[cid]
    for path in sorted(work.new_files):
        out.plan.add(WriteFile(path, work.new_files[path].encode("utf-8"), None, reason="ai: split part"))
        out.created.append(path)
    return out


def _attempt(work: _Work, kind: Kind, item: str, action: Callable[[_Work, T], None], change: T) -> None:
    """Apply one change, or reject it and leave every text as it was before it."""
    snapshot = (dict(work.texts), dict(work.new_files), dict(work.edges), set(work.taken_ids))
    try:
        action(work, change)
    except _Refused as exc:
        work.texts, work.new_files, work.edges, work.taken_ids = snapshot
        work.reject(kind, item, exc.reason)


# --- edges ----------------------------------------------------------------------------------

def _edge(work: _Work, edge: NewEdge) -> None:
    text = work.arc(edge.source)
    if any(m.type == "edge" and m.attr("target") == edge.target for m in body_markers(text)):
        raise _Refused("already exists (applied before)")
    arc = _Arc.of(text)
    attrs = (("type", edge.type), ("target", edge.target))
    body = append_to_section(arc.body, "Edges", [edge_line(attrs, edge.target, _said(edge.reason))])
    work.keep(edge.source, arc.render(body=body))
    work.edges[edge.source] = work.edges.get(edge.source, 0) + 1
    work.done("edges", f"edge [[{edge.source}]] → [[{edge.target}]] ({edge.type}): {_said(edge.reason)}")


# --- merges ---------------------------------------------------------------------------------

def _merge(work: _Work, merge: Merge) -> None:
    keep_text, absorb_text = work.arc(merge.keep), work.arc(merge.absorb)
    keep, absorb = _Arc.of(keep_text), _Arc.of(absorb_text)
    if absorb.meta.get("status") == "merged":
        raise _Refused("already applied: the absorbed arc is a merged tombstone")
    keep_info, absorb_info = arc_info(keep.meta), arc_info(absorb.meta)
    reason = _said(merge.reason)

    sessions = list(keep_info.source_sessions)
    sessions += [s for s in absorb_info.source_sessions if s not in sessions]
    activity = {name: getattr(keep_info.activity, name) + getattr(absorb_info.activity, name)
                for name in ACTIVITY_FIELDS}
    activity["sessions"] = len(sessions)
    updates: dict[str, Any] = {"source_sessions": sessions, "activity": activity}
    last = _instant(keep_info.last_active, absorb_info.last_active, later=True)
    if last != keep_info.last_active:
        updates["last_active"] = last
    if keep_info.created is not None:
        first = _instant(keep_info.created, absorb_info.created, later=False)
        if first != keep_info.created:
            updates["created"] = first
    agents = list(keep_info.agents) + [a for a in absorb_info.agents if a not in keep_info.agents]
    if agents != list(keep_info.agents):
        updates["agents"] = agents

    body = keep.body
    if merge.title is not None and _said(merge.title) != keep_info.title:
        title = _said(merge.title)
        updates["title"] = title
        old_heading = f"# {keep_info.title}"
        lines = body.split("\n")
        for index, line in enumerate(lines):
            if line.strip():
                if line.rstrip() == old_heading:
                    lines[index] = f"# {_inert(title)}"
                break
        body = "\n".join(lines)

    keep_markers = body_markers(keep_text)
    known = {_marker_key(m) for m in keep_markers}
    linked = {m.attr("target") for m in keep_markers if m.type == "edge"}
    carried: list[str] = []
    edges: list[str] = []
    for marker in body_markers(absorb_text):
        key = _marker_key(marker)
        if key in known:
            continue
        known.add(key)
        if marker.type == "edge":
            target = marker.attr("target")
            if not target or target in (merge.keep, merge.absorb) or target in linked:
                continue
            linked.add(target)
            edges.append(edge_line(marker.attrs, target))
        else:
            carried.append(rendered(marker))
    if edges:
        body = append_to_section(body, "Edges", edges)
    section = [f"## Merged from [[{merge.absorb}]]", "",
               f"Merged into this arc on {work.date}: {reason}", ""]
    for block in carried:
        section += [*block.split("\n"), ""]
    section += fenced(absorb.body)
    body = append_section(body, section)
    work.keep(merge.keep, keep.render(updates, body))

    tombstone = "\n".join([
        f"# {_inert(absorb_info.title)}",
        "",
        f"Merged into [[{merge.keep}]] on {work.date}: {reason}",
        "",
        f"The text of this arc now lives in [[{merge.keep}]], under \"Merged from [[{merge.absorb}]]\"; "
        "the tick journal keeps this file as it was, for `brain undo`.",
        "",
    ])
    work.keep(merge.absorb, absorb.render({"status": "merged", "merged_into": merge.keep, "heat": 0}, tombstone))
    work.done("merges", f"merged [[{merge.absorb}]] into [[{merge.keep}]]: {reason}")


# --- splits ---------------------------------------------------------------------------------

def _split(work: _Work, split: Split) -> None:
    text = work.arc(split.arc)
    original = _Arc.of(text)
    if original.meta.get("status") == "split":
        raise _Refused("already applied: the arc is a split tombstone")
    info = arc_info(original.meta)
    reason = _said(split.reason)
    path = work.current[split.arc].path
    folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    created = parse_instant(info.created) or date_in_text(split.arc) or work.now
    ids = [new_cluster_id(created, _said(part.title), part.sessions) for part in split.parts]
    if len(set(ids)) != len(ids):
        raise _Refused("two parts would get the same cluster_id")
    for pid in ids:
        if pid in work.taken_ids or f"{folder}{pid}.md" in work.taken_paths or f"{folder}{pid}.md" in work.new_files:
            raise _Refused(f"a part's cluster_id {pid} is already taken")

    recorded = recorded_sessions(original.body)
    exact = all(s in recorded for s in info.source_sessions)
    weights = [len(part.sessions) for part in split.parts]
    shares = {name: share(int(getattr(info.activity, name)), weights) for name in ACTIVITY_FIELDS}
    timeline = _section_lines(original.body, "Timeline")
    sources = _section_lines(original.body, "Source sessions")

    markers = body_markers(text)
    carried = [rendered(m) for m in markers if m.type != "edge"]
    edges: list[str] = []
    linked: set[str] = set()
    for marker in markers:
        target = marker.attr("target") if marker.type == "edge" else None
        if target and target not in linked and target != split.arc:
            linked.add(target)
            edges.append(edge_line(marker.attrs, target))

    for index, (part, pid) in enumerate(zip(split.parts, ids, strict=True)):
        title = _said(part.title)
        activity = {name: shares[name][index] for name in ACTIVITY_FIELDS}
        activity["sessions"] = len(part.sessions)
        last_active = info.last_active
        if exact:
            for figure, name in _RECORDED.items():
                activity[name] = sum(_int(recorded[s][1].get(figure)) for s in part.sessions)
            ends = [parse_instant(recorded[s][1].get("end")) for s in part.sessions]
            if all(end is not None for end in ends):
                last_active = iso(max(end for end in ends if end is not None))
        meta: dict[str, Any] = {}
        for key, value in original.meta.items():
            if key in ("summary", "merged_into", "split_into") or (key == "signals" and "activity" not in original.meta):
                continue
            meta[key] = value
        meta.update({"cluster_id": pid, "title": title, "source_sessions": list(part.sessions),
                     "activity": activity, "synthesized": False})
        if last_active is not None:
            meta["last_active"] = last_active
        patterns = [_id_pattern(s) for s in part.sessions]
        mine_timeline = [line for line in timeline if any(p.search(line) for p in patterns)]
        mine_sources = [line for line in sources if any(p.search(line) for p in patterns)] or \
            [f"- `{s}`" for s in part.sessions]
        lines = [f"# {_inert(title)}", "", f"Split from [[{split.arc}]] on {work.date}: {reason}", ""]
        if index == 0:
            for block in carried:
                lines += [*block.split("\n"), ""]
        lines += ["## Timeline", "", *mine_timeline, ""] if mine_timeline else []
        if index == 0 and edges:
            lines += ["## Edges", "", *edges, ""]
        lines += ["## Source sessions", "", *mine_sources, ""]
        part_text = f"---\n{frontmatter.dump(meta)}---\n" + "\n".join(lines)
        check(part_text, pid)
        work.new_files[f"{folder}{pid}.md"] = part_text
        work.taken_ids.add(pid)

    links = ", ".join(f"[[{pid}]]" for pid in ids)
    tombstone = [f"# {_inert(info.title)}", "", f"Split into {links} on {work.date}: {reason}", "",
                 "The text as it stood before the split follows; the parts carry its sessions, and the first "
                 "part its markers.", "", *fenced(original.body), ""]
    work.keep(split.arc, original.render({"status": "split", "split_into": ids, "heat": 0}, "\n".join(tombstone)))
    work.done("splits", f"split [[{split.arc}]] into {links}: {reason}")


def _int(value: Any) -> int:
    try:
        return max(0, int(str(value)))
    except ValueError:
        return 0


# --- signals --------------------------------------------------------------------------------

def _signal(work: _Work, change: SignalChange) -> None:
    text = work.arc(change.arc)
    targets = [
        m for m in body_markers(text)
        if m.is_open_signal and m.attr("source") == change.source and (m.attr("severity") or "") in SEVERITY_RANK
    ]
    if change.action == "escalate":
        targets = [m for m in targets if SEVERITY_RANK[m.attr("severity") or "info"] < SEVERITY_RANK[change.severity]]
    if not targets:
        raise _Refused("already applied: no open signal with this source below that severity"
                       if change.action == "escalate" else "already applied: no open signal with this source")
    reason = _said(change.reason)
    for marker in sorted(targets, key=lambda m: m.start, reverse=True):  # from the end: offsets stay valid
        if change.action == "escalate":
            text = replace_block(text, marker, with_attrs(marker, {"severity": change.severity}), None)
        else:
            attrs = with_attrs(marker, {"severity": "resolved", "cleared_at": iso(work.now)})
            content = marker.content or ""
            stripped = content.rstrip()
            content = f"{stripped} (CLEARED: {reason})" + content[len(stripped):]
            text = replace_block(text, marker, attrs, content if marker.is_block else None)
    work.keep(change.arc, text)
    if change.action == "escalate":
        work.done("signals", f"escalated signal `{change.source}` in [[{change.arc}]]: "
                             f"{change.previous_severity} → {change.severity}: {reason}")
    else:
        work.done("signals", f"cleared signal `{change.source}` in [[{change.arc}]]: {reason}")


# --- summaries ------------------------------------------------------------------------------

def _summary(work: _Work, summary: NewSummary) -> None:
    text = work.arc(summary.arc)
    arc = _Arc.of(text)
    existing = arc.meta.get("summary")
    if existing is not None and str(existing).strip():
        raise _Refused("the arc already has a summary (never overwritten)")
    work.keep(summary.arc, arc.render({"summary": _said(summary.summary), "synthesized": True}))
    work.done("summaries", f"summary for [[{summary.arc}]]")


# --- syntheses ------------------------------------------------------------------------------

def _synthesis(work: _Work, synthesis: NewSynthesis) -> None:
    text = work.arc(synthesis.arc)
    arc = _Arc.of(text)
    if arc.meta.get("synthesized") is True:
        raise _Refused("already applied: the arc is synthesized")
    held = {" ".join(m.text.split()) for m in body_markers(text) if m.type == "lesson"}
    source = f"ai:{work.tick_id}"
    blocks: list[str] = []
    for lesson in synthesis.lessons:
        said = _inert(_said(lesson))
        if said and said not in held:
            held.add(said)
            blocks.append(f"{render_tag('lesson', (('source', source),))}{said}<!-- @/lesson -->")
    body = arc.body
    if blocks:
        body = _append_in_place(body, "Lessons", blocks, before=("Resolution", "Edges", "Source sessions"))
    resolution = _inert(_said(synthesis.resolution)) if synthesis.resolution else ""
    if resolution:
        body = _append_in_place(body, "Resolution", [resolution], before=("Edges", "Source sessions"))
    work.keep(synthesis.arc, arc.render({"synthesized": True}, body))
    what = [f"{len(blocks)} lesson{'s' if len(blocks) != 1 else ''}"] + (["a resolution"] if resolution else [])
    work.done("syntheses", f"synthesis for [[{synthesis.arc}]]: {' and '.join(what)}")


def _append_in_place(body: str, heading: str, new_lines: Sequence[str], *, before: Sequence[str]) -> str:
    """``new_lines`` at the end of ``## heading``; a missing section goes before the first of the
    ``before`` sections the body has (the arc layout's order), else at the end."""
    lines = body.split("\n")
    heads = headings(lines)
    names = {text.lower() for index, text in heads if lines[index].startswith("## ")}
    if heading.lower() in names:
        return append_to_section(body, heading, new_lines)
    wanted = {name.lower() for name in before}
    at = next((index for index, text in heads if lines[index].startswith("## ") and text.lower() in wanted), None)
    if at is None:
        return append_to_section(body, heading, new_lines)
    return "\n".join([*lines[:at], f"## {heading}", "", *new_lines, "", *lines[at:]])
