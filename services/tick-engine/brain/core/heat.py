"""Heat (SPEC §7): an integer 0-10 from recency, sessions, tool volume, status and signals."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from brain.core.markers import Marker
from brain.core.model import Note
from brain.core.timeutil import date_in_text, parse_instant
from brain.core.vocab import ALARM_SEVERITIES, CLOSED_STATUSES
from brain.settings import Settings


@dataclass(frozen=True)
class HeatInputs:
    last_active: datetime
    sessions: int
    tool_calls: int
    status: str
    joy: int
    open_alarm: bool
    hot_floor: int | None


def last_active_of(note: Note) -> datetime:
    """``last_active``, then ``created``, the date in ``cluster_id``, the file name, the mtime."""
    arc = note.arc
    if arc is not None:
        for candidate in (arc.last_active, arc.created):
            parsed = parse_instant(candidate)
            if parsed is not None:
                return parsed
        from_id = date_in_text(arc.cluster_id)
        if from_id is not None:
            return from_id
    from_name = date_in_text(note.path.rsplit("/", 1)[-1])
    if from_name is not None:
        return from_name
    return datetime.fromtimestamp(note.mtime_ns / 1e9, tz=UTC)


def created_of(note: Note) -> datetime:
    """The arc's creation instant: ``created``, then the date in ``cluster_id``, then as last_active."""
    arc = note.arc
    if arc is not None:
        parsed = parse_instant(arc.created)
        if parsed is not None:
            return parsed
        from_id = date_in_text(arc.cluster_id)
        if from_id is not None:
            return from_id
    return last_active_of(note)


def open_signals(markers: tuple[Marker, ...]) -> list[Marker]:
    return [m for m in markers if m.type == "signal" and (m.attr("severity") or "info") != "resolved"]


def inputs_of(note: Note) -> HeatInputs:
    arc = note.arc
    assert arc is not None
    floors = []
    for marker in note.markers:
        if marker.type == "hot":
            try:
                floors.append(int(marker.attr("heat") or ""))
            except ValueError:
                continue
    return HeatInputs(
        last_active=last_active_of(note),
        sessions=arc.session_count,
        tool_calls=arc.activity.tool_calls,
        status=arc.status,
        joy=arc.activity.joy,
        open_alarm=any(m.attr("severity") in ALARM_SEVERITIES for m in open_signals(note.markers)),
        hot_floor=max(floors) if floors else None,
    )


def compute(inputs: HeatInputs, now: datetime, s: Settings) -> int:
    age = now - inputs.last_active
    if age < timedelta(0):
        age = timedelta(0)  # a clock ahead of ours is "just now"
    heat = 0
    if age <= timedelta(hours=24):
        heat += s.heat_recent_24h
    elif age <= timedelta(hours=72):
        heat += s.heat_recent_72h
    elif age <= timedelta(days=7):
        heat += s.heat_recent_7d
    heat += min(s.heat_sessions_max, max(0, inputs.sessions))
    if inputs.tool_calls >= 1000:
        heat += s.heat_tools_1000
    elif inputs.tool_calls >= 200:
        heat += s.heat_tools_200
    elif inputs.tool_calls >= 50:
        heat += s.heat_tools_50
    if inputs.status == "active":
        heat += s.heat_active_bonus
    if inputs.joy > 0:
        heat += s.heat_joy_bonus
    if inputs.open_alarm:
        heat += s.heat_critical_bonus
    idle_days = age.days
    if idle_days > s.heat_decay_grace_days and s.heat_decay_every_days > 0:
        heat -= (idle_days - s.heat_decay_grace_days) // s.heat_decay_every_days
    if inputs.hot_floor is not None and inputs.status not in CLOSED_STATUSES:
        heat = max(heat, inputs.hot_floor)
    return max(0, min(10, heat))


def inactive_days(inputs: HeatInputs, now: datetime) -> float:
    return max(0.0, (now - inputs.last_active).total_seconds() / 86400)
