"""Phase 1 decisions (SPEC §7): heat, promote / demote / graduate, signal tombstones.

Pure: takes the scanned notes and ``now``, returns one :class:`ArcDecision` per arc. Every
move is decided before any file is touched, and an arc gets at most one move per tick.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from brain.core import frontmatter, markers
from brain.core.heat import (
    HeatInputs,
    compute,
    created_of,
    date_problems,
    dates_in_content,
    inputs_of,
    next_change,
)
from brain.core.markers import Marker
from brain.core.model import Note, Problem, built, field_names, replaced
from brain.core.timeutil import parse_instant
from brain.core.vocab import (
    CONSCIOUS,
    DEFAULT_GRADUATION_FOLDER,
    GRADUATION_FOLDERS,
    MANAGED_ROOTS,
    UNCONSCIOUS,
)
from brain.settings import Settings

GRADUATED_ROOTS = ("left/", "right/", "pineal/")


@dataclass(frozen=True)
class ArcDecision:
    note: Note
    heat: int
    status: str  # the status after this tick
    path: str  # where the arc lives after this tick
    move: str | None = None  # "promoted" | "demoted" | "graduated"
    drop_signals: tuple[Marker, ...] = ()
    #: Decided with ``horizon``: the first instant the arc's heat or graduation may change (None: never).
    next_change: datetime | None = None
    last_active: datetime | None = None  # the instant heat counts from (None for tombstones)

    @property
    def cluster_id(self) -> str:
        assert self.note.arc is not None
        return self.note.arc.cluster_id

    @property
    def relists(self) -> bool:
        """The arc moves or changes status: what the dashboards list of it changes."""
        arc = self.note.arc
        assert arc is not None
        return self.path != self.note.path or arc.status != self.status

    @property
    def rewrites(self) -> bool:
        """The arc's bytes change (its heat, status or signals), not only its place."""
        arc = self.note.arc
        assert arc is not None
        return arc.heat != self.heat or arc.status != self.status or bool(self.drop_signals)

    @property
    def changes_file(self) -> bool:
        return self.path != self.note.path or self.rewrites


@dataclass
class KeeperDecisions:
    arcs: dict[str, ArcDecision] = field(default_factory=dict)  # cluster_id -> decision
    duplicates: dict[str, list[str]] = field(default_factory=dict)  # cluster_id -> paths
    problems: list[Problem] = field(default_factory=list)  # values the decisions could not use
    #: The first instant after ``now`` at which some live arc may be decided differently.
    next_change: datetime | None = None
    #: cluster_ids whose dates were reported as out of range (decided with ``horizon``).
    dated_badly: set[str] = field(default_factory=set)
    remembered: int = 0  # arcs whose heat came from the memo, not recomputed
    fresh: set[str] = field(default_factory=set)  # cluster_ids decided without the memo (with horizon)
    _changed: tuple[int, list[ArcDecision]] | None = field(default=None, repr=False, compare=False)

    def changed(self) -> list[ArcDecision]:
        """The decisions that change a file (worked out once: planner, diff and verify all ask)."""
        cached = self._changed
        if cached is None or cached[0] != len(self.arcs):
            cached = self._changed = (len(self.arcs), [d for d in self.arcs.values() if d.changes_file])
        return list(cached[1])

    @property
    def heat_changed(self) -> int:
        return sum(1 for d in self.changed() if d.note.arc is not None and d.note.arc.heat != d.heat)


_DECISION_FIELDS = field_names(ArcDecision)


def top_folder(path: str) -> str:
    return path.split("/", 1)[0] if "/" in path else ""


def is_managed(path: str) -> bool:
    """Arcs under the brain's compartments move; arcs the operator filed elsewhere stay put."""
    return top_folder(path) in MANAGED_ROOTS


def in_conscious(path: str) -> bool:
    return path.startswith(CONSCIOUS + "/")


def graduation_folder(region: str) -> str:
    return GRADUATION_FOLDERS.get(region, DEFAULT_GRADUATION_FOLDER)


def file_name(cluster_id: str) -> str:
    return f"{cluster_id}.md"


def is_tombstoned_signal(marker: Marker, now: datetime) -> bool:
    """A cleared signal (``severity=resolved`` + ``(CLEARED:``) whose clearing tick has passed."""
    if marker.type != "signal" or marker.attr("severity") != "resolved" or "(CLEARED:" not in (marker.content or ""):
        return False
    cleared_at = parse_instant(marker.attr("cleared_at"))
    return cleared_at is None or cleared_at < now


class Remembered(NamedTuple):
    """What a keeper pass decided for one arc's exact content, and until when it holds.

    Heat is a step function of time (:func:`brain.core.heat.next_change`): for the same bytes
    at the same path, under the same settings, every instant in ``[decided, until)`` gives the
    same heat. A tick two hours later on an unchanged vault reuses it instead of recomputing
    10 000 arcs' inputs; anything else (new bytes, an instant outside the window) is decided afresh.
    """

    sha1: str
    decided: int  # microseconds since the epoch (exact, unlike a float)
    until: int | None  # microseconds; None: the heat never changes again
    heat: int
    last_active: int  # microseconds
    dated_badly: bool = False  # its dates were out of range: report them again

    def holds(self, note: Note, now: int) -> bool:
        return note.sha1 == self.sha1 and self.decided <= now and (self.until is None or now < self.until)


_EPOCH, _MICRO = datetime(1970, 1, 1, tzinfo=UTC), timedelta(microseconds=1)


def micros(instant: datetime) -> int:
    return (instant - _EPOCH) // _MICRO


def instant_of(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


#: path -> what was decided for the content found there (see :class:`Remembered`).
HeatMemo = Mapping[str, Remembered]


def remembered(decisions: KeeperDecisions, notes: Mapping[str, Note], now: datetime,
               before: HeatMemo | None = None, *, only: Iterable[str] | None = None) -> dict[str, Remembered]:
    """The memo a later tick can reuse: each live arc decided with ``horizon`` whose file now
    holds the decided heat and status (``notes``: the snapshot after this tick's writes).

    ``before``: the memo this pass was decided with; an arc it answered for and whose file
    this tick left as it was keeps its entry as it is. ``only``: the cluster_ids to look at, in
    the order their entries come (the others' are not made).
    """
    out: dict[str, Remembered] = {}
    stamp = micros(now)
    arcs = decisions.arcs
    chosen = arcs.items() if only is None else ((cid, arcs[cid]) for cid in only if cid in arcs)
    for cluster_id, d in chosen:
        arc = d.note.arc
        if arc is None or arc.is_tombstone or d.last_active is None:
            continue
        final = notes.get(d.path)
        if final is None or final.arc is None:
            continue
        # asked only for a file this tick left as it was (a memo may load more rows for another)
        kept = before.get(d.path) if before is not None and final is d.note and cluster_id not in decisions.fresh \
            else None
        if kept is not None and kept.sha1 == final.sha1:
            out[d.path] = kept
            continue
        if final.arc.heat != d.heat or final.arc.status != d.status or not dates_in_content(final):
            continue
        out[d.path] = Remembered(final.sha1, stamp, micros(d.next_change) if d.next_change else None,
                                 d.heat, micros(d.last_active), cluster_id in decisions.dated_badly)
    return out


def decide(notes: Iterable[Note], now: datetime, s: Settings, *, horizon: bool = False,
           reuse: KeeperDecisions | None = None, memo: HeatMemo | None = None) -> KeeperDecisions:
    """One decision per arc at ``now``. ``horizon`` also finds :attr:`KeeperDecisions.next_change`
    (what the fast path of the next tick needs; a check pass does not).

    ``reuse``: decisions made at the same ``now`` with the same settings (verify's second pass
    reuses the keeper's). An arc whose note is the very object decided there, and that did not
    move, keeps its heat and dropped signals without recomputing them; the conscious ranking and
    every move are decided afresh over all arcs, exactly as without ``reuse``. Such an arc that
    still does not move keeps that very decision object (its ``next_change`` included).
    """
    by_id: dict[str, Note] = {}
    doubled: dict[str, list[Note]] = {}
    for note in notes:
        arc = note.arc
        if arc is not None:
            first = by_id.setdefault(arc.cluster_id, note)
            if first is not note:
                doubled.setdefault(arc.cluster_id, [first]).append(note)
    out = KeeperDecisions()
    for cluster_id, group in doubled.items():
        out.duplicates[cluster_id] = sorted(n.path for n in group)
        del by_id[cluster_id]
    live: list[tuple[Note, int, datetime, bool, bool]] = []  # note, heat, last active, managed, in conscious
    reused: dict[int, ArcDecision] = {}  # id(note) -> its decision in ``reuse``
    horizons: dict[int, datetime | None] = {}  # id(note) -> its next change (with horizon)
    stamp = micros(now)
    # Every arc of the view goes through these two loops twice a tick (the keeper, verify): the
    # lookups are bound once.
    remember = memo.get if memo is not None else None
    prior_of = reuse.arcs.get if reuse is not None and not horizon else None
    for cluster_id, note in by_id.items():
        arc = note.arc
        assert arc is not None
        path = note.path
        top = top_folder(path)
        if top == "amygdala":
            continue  # alarm files belong to the amygdala consumer
        if arc.is_tombstone:
            out.arcs[cluster_id] = ArcDecision(note, arc.heat if arc.heat is not None else 0, arc.status, path)
            continue
        hit = remember(path) if remember is not None else None
        if hit is not None and hit.holds(note, stamp):
            if horizon and hit.dated_badly:
                out.problems.extend(date_problems(note))
                out.dated_badly.add(cluster_id)
            heat, last_active = hit.heat, instant_of(hit.last_active)
            changes = instant_of(hit.until) if hit.until is not None else None
            out.remembered += 1
        else:
            if horizon:  # the keeper's pass reports bad dates; a check pass need not again
                bad = date_problems(note)
                if bad:
                    out.problems.extend(bad)
                    out.dated_badly.add(cluster_id)
            known = prior_of(cluster_id) if prior_of is not None else None
            if known is not None and known.note is note and known.move is None and known.last_active is not None:
                # compute(inputs, now, s) of this very note, at this very instant
                heat, last_active, changes = known.heat, known.last_active, None
                reused[id(note)] = known
            else:
                inputs = inputs_of(note)
                last_active = inputs.last_active
                heat = compute(inputs, now, s)
                changes = next_change(inputs, now, s, heat) if horizon else None
                if horizon:
                    out.fresh.add(cluster_id)
        live.append((note, heat, last_active, top in MANAGED_ROOTS, in_conscious(path)))
        if horizon:
            horizons[id(note)] = changes
            if changes is not None and (out.next_change is None or changes < out.next_change):
                out.next_change = changes

    # Conscious: hottest first, at most conscious_cap; arcs already there win ties (no churn).
    contenders = [
        item
        for item in live
        if item[3] and (item[1] >= s.promote_heat or (item[4] and item[1] >= s.demote_heat))
    ]
    contenders.sort(
        key=lambda item: (
            -item[1],
            0 if item[4] else 1,
            -item[2].timestamp(),
            item[0].arc.cluster_id if item[0].arc else "",
        )
    )
    chosen = {id(item[0]) for item in contenders[: max(0, s.conscious_cap)]}

    try:
        idle_since = now - timedelta(days=s.graduate_days)  # idle for longer: last active before this
    except OverflowError:  # a --now in the first century: nothing was active before it
        idle_since = datetime.min.replace(tzinfo=UTC)
    graduate_heat, arcs = s.graduate_heat, out.arcs
    for note, heat, last_active, managed, conscious in live:
        arc = note.arc
        assert arc is not None
        key = id(note)
        prior = reused.get(key) if reused else None
        drops = prior.drop_signals if prior is not None else None
        if drops is None:
            drops = ()
            for marker in note.markers:  # most notes have no signal: no generator, no tuple per arc
                if marker.type == "signal" and is_tombstoned_signal(marker, now):
                    drops = tuple(m for m in note.markers if m.type == "signal" and is_tombstoned_signal(m, now))
                    break
        status, path, move = arc.status, note.path, None
        if managed:
            if key in chosen:
                if not conscious:
                    path, move = f"{CONSCIOUS}/{file_name(arc.cluster_id)}", "promoted"
            elif (heat <= graduate_heat and last_active < idle_since
                  and not (arc.status == "graduated" and path.startswith(GRADUATED_ROOTS))):
                status, move = "graduated", "graduated"
                path = f"{graduation_folder(arc.region)}/{file_name(arc.cluster_id)}"
                graduated = _with_status(inputs_of(note), status)
                heat = compute(graduated, now, s)
                if key in horizons:  # what the memo keeps is the graduated arc's own horizon
                    horizons[key] = next_change(graduated, now, s, heat)
            elif conscious:
                path, move = f"{UNCONSCIOUS}/{file_name(arc.cluster_id)}", "demoted"
        if prior is not None and move is None and heat == prior.heat and status == prior.status:
            arcs[arc.cluster_id] = prior  # decided the same way: that very decision (verify's pass)
            continue
        arcs[arc.cluster_id] = built(ArcDecision, _DECISION_FIELDS,  # 10 000 a pass: no generated __init__
                                     (note, heat, status, path, move, drops, horizons.get(key), last_active))
    return out


def _with_status(inputs: HeatInputs, status: str) -> HeatInputs:
    return replaced(inputs, status=status)


def predict(note: Note, decision: ArcDecision, old: str, new: str, data: bytes) -> Note | None:
    """The note a re-parse of ``new`` would give, when the edit only touched heat/status lines.

    Only for edits that kept the body byte for byte and the line count: then every marker
    moved by the same number of characters and stayed on its line. Anything else (a dropped
    signal, a re-dumped frontmatter) returns None and is parsed for real.
    """
    arc = note.arc
    if arc is None or decision.drop_signals or new.count("\n") != old.count("\n"):
        return None
    body = old[note.body_offset:]
    if not new.endswith(body):
        return None
    delta = len(new) - len(old)
    return Note(
        path=decision.path,
        size=len(data),
        mtime_ns=0,
        sha1=hashlib.sha1(data, usedforsecurity=False).hexdigest(),
        arc=replaced(arc, heat=decision.heat, status=decision.status),
        markers=tuple(  # the constructor, not dataclasses.replace: 30 000 of them in a cold tick
            Marker(m.type, m.attrs, m.content, m.line, m.start + delta, m.open_end + delta, m.end + delta)
            for m in note.markers
        ),
        problems=tuple(replaced(p, path=decision.path) for p in note.problems),
        parsed=True,
        body_offset=note.body_offset + delta,
    )


def render(text: str, decision: ArcDecision) -> str:
    """The arc's new text: heat/status lines edited in place, tombstoned signals removed.

    ``text`` is the file's text the decision's note was parsed from (the scan's, or a read
    checked against it)."""
    document = frontmatter.split(text)
    assert document.frontmatter is not None
    arc = decision.note.arc
    assert arc is not None
    updates: dict[str, object] = {}
    if arc.heat != decision.heat:
        updates["heat"] = decision.heat
    if arc.status != decision.status:
        updates["status"] = decision.status
    body = text
    if decision.drop_signals:
        # Splice from the end so earlier offsets stay valid.
        for marker in sorted(decision.drop_signals, key=lambda m: m.start, reverse=True):
            body = markers.remove(body, marker)
        document = frontmatter.split(body)
        assert document.frontmatter is not None
    if updates:
        front = document.frontmatter or ""
        simple = frontmatter.set_scalars(front, updates, plain=decision.note.plain_front)  # type: ignore[arg-type]
        new_front = simple if simple is not None else frontmatter.set_keys(front, updates)
        document = replaced(document, frontmatter=new_front)
    return document.render()


def valid_until(decisions: KeeperDecisions, now: datetime, s: Settings, *,
                marked: Iterable[Note] | None = None) -> datetime:
    """The last instant at which the same files still give the same plan as at ``now``.

    Heat and graduation change at instants :func:`brain.core.heat.next_change` knows per arc
    (collected by :func:`decide`); inject expiry, signal tombstones and the feed's date at
    others. Until the earliest of them an unchanged vault plans nothing, which is what lets a
    steady-state tick stop after listing the files. ``marked``: the notes that hold a signal or an
    inject (the feed's :func:`brain.core.feed.with_markers`), when known: only their markers are
    read, not every arc's.
    """
    tick = timedelta(microseconds=1)
    # The feed carries the date: the window ends just before midnight.
    midnight = datetime(now.year, now.month, now.day, tzinfo=now.tzinfo) + timedelta(days=1) - tick
    candidates = [midnight]
    if decisions.next_change is not None:  # decided with horizon=True
        candidates.append(decisions.next_change - tick)
    if marked is None:
        notes: Iterable[Note] = (decision.note for decision in decisions.arcs.values())
    else:  # those of them decided (an arc's own note: not a duplicate, not an alarm file)
        arcs = decisions.arcs
        notes = (note for note in marked if note.arc is not None
                 and (known := arcs.get(note.arc.cluster_id)) is not None and known.note is note)
    for note in notes:
        if note.arc is None or note.arc.is_tombstone:
            continue
        for marker in note.markers:
            if marker.type == "inject":
                born = parse_instant(marker.attr("date")) or created_of(note)
                try:
                    ttl = int(marker.attr("ttl_days") or s.inject_ttl_days)
                    candidates.append(born + timedelta(days=ttl))
                except (ValueError, OverflowError):
                    continue
            elif marker.type == "signal" and marker.attr("severity") == "resolved":
                cleared = parse_instant(marker.attr("cleared_at"))
                if cleared is not None:
                    candidates.append(cleared)
    return min((c for c in candidates if c >= now), default=midnight)
