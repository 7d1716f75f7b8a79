"""Heat (SPEC §7): an integer 0-10 from recency, sessions, tool volume, status and signals.

Heat counts work, not noise: an arc whose work was a scripted one-shot run (at most one
human turn, ``activity.user_turns`` 1) or a sub-minute session (``last_active`` less than
60 s after ``created``) gets no recency and no session heat, so ``claude -p "…"`` runs never
crowd the hot table. Tool volume, status, joy, alarms and ``@hot`` floors still count.

Heat is a step function of time: :func:`next_change` gives the first instant after ``now``
at which an arc's heat differs, so a tick on an unchanged vault only revisits arcs whose
instant has come.

Dates are range-checked: a ``last_active`` or ``created`` outside years
:data:`MIN_YEAR`-:data:`MAX_YEAR` (``9999-12-31``, a typo) is ignored like a missing one
and reported with its path (:func:`date_problems`); date arithmetic never overflows.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from brain.core.model import ArcInfo, Note, Problem
from brain.core.timeutil import EARLIEST, MAX_YEAR, MIN_YEAR, date_in_text, in_usable_years, parse_instant
from brain.core.vocab import ALARM_SEVERITIES, CLOSED_STATUSES
from brain.settings import Settings

#: The sub-minute rule: an arc whose whole work took less than this is noise, not work.
NOISE_SECONDS = 60
#: The one-shot rule: this many human turns or fewer (but at least one: 0 is "unknown").
NOISE_MAX_TURNS = 1


@dataclass(frozen=True)
class HeatInputs:
    last_active: datetime
    sessions: int
    tool_calls: int
    status: str
    joy: int
    open_alarm: bool
    hot_floor: int | None
    noise: bool = False  # a scripted one-shot or sub-minute run: no recency or session heat


def _in_range(instant: datetime | None) -> datetime | None:
    return instant if instant is not None and in_usable_years(instant) else None


@functools.lru_cache(maxsize=1 << 16)
def _instant(value: str | None) -> datetime | None:
    """A frontmatter date, in range (memoised: every arc's dates are read several times a tick)."""
    return _in_range(parse_instant(value))


def _mtime(note: Note) -> datetime:
    try:
        return _in_range(datetime.fromtimestamp(note.mtime_ns / 1e9, tz=UTC)) or EARLIEST
    except (OverflowError, OSError, ValueError):
        return EARLIEST


def last_active_of(note: Note) -> datetime:
    """``last_active``, then ``created``, the date in ``cluster_id``, the file name, the mtime."""
    arc = note.arc
    if arc is not None:
        for candidate in (arc.last_active, arc.created):
            parsed = _instant(candidate)
            if parsed is not None:
                return parsed
        from_id = _in_range(date_in_text(arc.cluster_id))
        if from_id is not None:
            return from_id
    from_name = _in_range(date_in_text(note.path.rsplit("/", 1)[-1]))
    if from_name is not None:
        return from_name
    return _mtime(note)


def dates_in_content(note: Note) -> bool:
    """Heat reads this arc's dates from the file's own bytes (not its name or mtime)."""
    arc = note.arc
    return arc is not None and (_instant(arc.last_active) is not None or _instant(arc.created) is not None)


def created_of(note: Note) -> datetime:
    """The arc's creation instant: ``created``, then the date in ``cluster_id``, then as last_active."""
    arc = note.arc
    if arc is not None:
        parsed = _instant(arc.created)
        if parsed is not None:
            return parsed
        from_id = _in_range(date_in_text(arc.cluster_id))
        if from_id is not None:
            return from_id
    return last_active_of(note)


def date_problems(note: Note) -> list[Problem]:
    """A ``last_active`` / ``created`` that parses but lies outside the years heat can use."""
    arc = note.arc
    if arc is None:
        return []
    problems = []
    for key, value in (("last_active", arc.last_active), ("created", arc.created)):
        if value is None or _instant(value) is not None:
            continue
        parsed = parse_instant(value)
        if parsed is not None:
            problems.append(Problem(note.path, None, f"{key} {value!r} is outside the years {MIN_YEAR}-{MAX_YEAR}; "
                                                     "ignored (heat uses the next date it can find)"))
    return problems


def is_noise(arc: ArcInfo) -> bool:
    """Scripted one-shot (1 human turn) or sub-minute work: it gets no recency or session heat."""
    if 0 < arc.activity.user_turns <= NOISE_MAX_TURNS:
        return True
    created, last = _instant(arc.created), _instant(arc.last_active)
    return created is not None and last is not None and timedelta(0) <= last - created < timedelta(
        seconds=NOISE_SECONDS)


#: Heat inputs of the notes seen lately, by identity (the same frozen note asks more than once a
#: tick: the keeper, then verify's second pass); the note is held so its id stays its own.
_INPUTS: dict[int, tuple[Note, HeatInputs]] = {}


def forget_inputs() -> None:
    """Drop the remembered inputs (the end of a tick: the notes they hold can go)."""
    _INPUTS.clear()


def inputs_of(note: Note) -> HeatInputs:
    known = _INPUTS.get(id(note))
    if known is not None and known[0] is note:
        return known[1]
    if len(_INPUTS) > 100_000:
        _INPUTS.clear()
    inputs = _inputs_of(note)
    _INPUTS[id(note)] = (note, inputs)
    return inputs


def _inputs_of(note: Note) -> HeatInputs:
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
        open_alarm=any(m.is_open_signal and m.attr("severity") in ALARM_SEVERITIES for m in note.markers),
        hot_floor=max(floors) if floors else None,
        noise=is_noise(arc),
    )


_ZERO, _DAY, _THREE_DAYS, _WEEK = timedelta(0), timedelta(hours=24), timedelta(hours=72), timedelta(days=7)


def compute(inputs: HeatInputs, now: datetime, s: Settings) -> int:
    age = now - inputs.last_active
    if age < _ZERO:
        age = _ZERO  # a clock ahead of ours is "just now"
    heat = 0
    if inputs.noise:
        pass  # noise earns no recency and no session heat
    elif age <= _DAY:
        heat += s.heat_recent_24h
    elif age <= _THREE_DAYS:
        heat += s.heat_recent_72h
    elif age <= _WEEK:
        heat += s.heat_recent_7d
    if not inputs.noise:
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


def next_change(inputs: HeatInputs, now: datetime, s: Settings, current: int | None = None) -> datetime | None:
    """The first instant after ``now`` at which the keeper may decide this arc differently:
    its heat (:func:`compute`) changes, or its inactivity passes ``graduate_days``. None: never.

    Heat is non-increasing in time and only steps at known instants (recency boundaries just
    after 24 h, 72 h and 7 days; decay on whole idle days), so the steps are walked in order
    until one changes the value; an arc already at its lowest heat (most graduated arcs) has
    no next change at all.
    """
    last = inputs.last_active
    tick = timedelta(microseconds=1)  # "within 24 h" holds at 24 h exactly and fails just after
    candidates: list[datetime] = []
    try:
        graduate_at = last + timedelta(days=s.graduate_days) + tick
        if graduate_at > now:
            candidates.append(graduate_at)
        if current is None:
            current = compute(inputs, now, s)
        # heat never rises with time: at 0 it stays (most graduated arcs), else find its floor
        lowest = 0 if current == 0 else compute(inputs, last + timedelta(days=36_500), s)
        if current != lowest:
            for offset in (timedelta(hours=24), timedelta(hours=72), timedelta(days=7)):
                candidates.append(last + offset + tick)
            grace, every = s.heat_decay_grace_days, max(1, s.heat_decay_every_days)
            first = max(grace + 1, (now - last).days + 1 if now > last else 0)
            day = first + (-(first - grace) % every)
            for _ in range(1000):  # never reached: heat falls by one per step and is at most a few dozen
                instant = last + timedelta(days=day)
                candidates.append(instant)
                if compute(inputs, instant, s) == lowest:
                    break
                day += every
    except OverflowError:
        return None
    for instant in sorted(t for t in candidates if t > now):
        if instant is not None and (instant == graduate_at or compute(inputs, instant, s) != current):
            return instant
    return None
