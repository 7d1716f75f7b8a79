"""Grouping: which arc each session updates, joins or starts (SPEC §4, §5). Pure.

Sessions are handled in (start, session id) order:

1. A session already listed in an arc's ``source_sessions`` updates that arc. When only a
   tombstone lists it, the ``merged_into`` chain is followed; a session that only a
   ``split`` tombstone lists is left alone (it was handed to the split parts).
2. A session that resumes another (``continues``) goes to the arc that holds the session it
   continues, whatever the gap: an existing arc, or one started earlier in the same run.
3. Any other session joins an open arc (status ``active``, ``stalled`` or unset) of the
   same project when it starts at most ``cluster_gap_minutes`` after the arc's
   ``last_active`` (or overlaps it) and the arc would still span at most
   ``cluster_max_span_hours``; arcs created earlier in the same run count too. Among
   several candidates the one active last wins.
4. Otherwise it starts a new arc.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from brain.core.model import ArcInfo
from brain.core.session import Session
from brain.core.timeutil import date_in_text, parse_instant
from brain.settings import Settings

JOINABLE_STATUSES = frozenset({"active", "stalled", ""})


@dataclass(frozen=True)
class ExistingArc:
    path: str
    info: ArcInfo


@dataclass
class _Group:
    project: str
    start: datetime
    end: datetime
    arc: ExistingArc | None = None
    sessions: list[Session] = field(default_factory=list)
    joined: list[str] = field(default_factory=list)  # session ids new to an existing arc
    order: int = 0

    def fits(self, session: Session, gap: timedelta, span: timedelta) -> bool:
        if session.start > self.end + gap or session.end < self.start - gap:
            return False
        return max(self.end, session.end) - min(self.start, session.start) <= span

    def take(self, session: Session, *, joined: bool) -> None:
        self.sessions.append(session)
        self.start = min(self.start, session.start)
        self.end = max(self.end, session.end)
        if joined:
            self.joined.append(session.session_id)


@dataclass(frozen=True)
class NewArc:
    sessions: tuple[Session, ...]


@dataclass(frozen=True)
class ArcUpdate:
    arc: ExistingArc
    sessions: tuple[Session, ...]  # every bundle session of this arc
    joined: tuple[str, ...]  # ids not yet in its source_sessions


@dataclass
class Assignment:
    new: list[NewArc] = field(default_factory=list)
    updates: list[ArcUpdate] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _arc_range(info: ArcInfo) -> tuple[datetime, datetime] | None:
    created = parse_instant(info.created) or date_in_text(info.cluster_id)
    last = parse_instant(info.last_active) or created
    if created is None or last is None:
        return None
    return min(created, last), max(created, last)


def assign(sessions: list[Session], arcs: list[ExistingArc], settings: Settings) -> Assignment:
    """Decide, for every session, the arc it updates, joins or starts (see the module doc)."""
    out = Assignment()
    gap = timedelta(minutes=settings.cluster_gap_minutes)
    span = timedelta(hours=settings.cluster_max_span_hours)
    ordered_arcs = sorted(arcs, key=lambda a: a.path)
    by_id: dict[str, ExistingArc] = {}
    for arc in ordered_arcs:
        by_id.setdefault(arc.info.cluster_id, arc)
    owner: dict[str, ExistingArc] = {}
    tomb_owner: dict[str, ExistingArc] = {}
    for arc in ordered_arcs:
        target = tomb_owner if arc.info.is_tombstone else owner
        for sid in arc.info.source_sessions:
            target.setdefault(sid, arc)

    groups: dict[str, _Group] = {}  # arc path -> group
    open_by_project: dict[str, list[_Group]] = {}
    placed: dict[str, _Group] = {}  # session id -> the group it went to in this run
    counter = 0

    def group_of(arc: ExistingArc) -> _Group | None:
        nonlocal counter
        if arc.path not in groups:
            found = _arc_range(arc.info)
            if found is None:
                return None
            counter += 1
            groups[arc.path] = _Group(arc.info.project or "", found[0], found[1], arc, order=counter)
        return groups[arc.path]

    def home_of(arc: ExistingArc, session: Session) -> _Group:
        group = group_of(arc)
        if group is None:
            group = _Group(arc.info.project or "", session.start, session.end, arc, order=0)
            groups[arc.path] = group
        return group

    for arc in ordered_arcs:
        if not arc.info.is_tombstone and arc.info.status in JOINABLE_STATUSES and arc.info.project:
            group = group_of(arc)
            if group is not None:
                open_by_project.setdefault(arc.info.project, []).append(group)

    new_groups: list[_Group] = []
    for session in sessions:
        sid = session.session_id
        home = owner.get(sid) or _follow(tomb_owner.get(sid), by_id)
        if home is None and sid in tomb_owner:
            out.problems.append(f"session {sid}: only a split tombstone lists it; left alone")
            continue
        if home is not None:
            group = home_of(home, session)
            group.take(session, joined=sid not in home.info.source_sessions)
            placed[sid] = group
            continue
        if session.continues:
            resumed = owner.get(session.continues) or _follow(tomb_owner.get(session.continues), by_id)
            chosen = home_of(resumed, session) if resumed is not None else placed.get(session.continues)
            if chosen is not None:
                chosen.take(session, joined=chosen.arc is not None)
                placed[sid] = chosen
                continue
        candidates = [g for g in open_by_project.get(session.project, []) if g.fits(session, gap, span)]
        if candidates:
            best = max(candidates, key=lambda g: (g.end, g.arc is not None, -g.order))
            best.take(session, joined=best.arc is not None)
            placed[sid] = best
            continue
        counter += 1
        group = _Group(session.project, session.start, session.end, None, order=counter)
        group.take(session, joined=False)
        new_groups.append(group)
        placed[sid] = group
        open_by_project.setdefault(session.project, []).append(group)

    for group in sorted(groups.values(), key=lambda g: g.arc.path if g.arc else ""):
        if group.arc is not None and group.sessions:
            out.updates.append(ArcUpdate(group.arc, tuple(group.sessions), tuple(group.joined)))
    out.new = [NewArc(tuple(g.sessions)) for g in new_groups]
    return out


def _follow(arc: ExistingArc | None, by_id: dict[str, ExistingArc]) -> ExistingArc | None:
    """A merged tombstone's live successor (a split tombstone has none)."""
    hops = 0
    while arc is not None and arc.info.is_tombstone and hops < 8:
        target = arc.info.merged_into
        arc = by_id.get(target) if target else None
        hops += 1
    if arc is None or arc.info.is_tombstone:
        return None
    return arc
