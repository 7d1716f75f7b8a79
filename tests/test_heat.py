"""Heat formula (SPEC §7), each term checked against hand-computed values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from brain.core.heat import HeatInputs, compute, last_active_of
from brain.core.model import parse_note
from brain.settings import DEFAULTS
from tests.support.vaults import arc_text

NOW = datetime(2026, 11, 21, 12, tzinfo=UTC)


def inputs(age: timedelta, **kw: object) -> HeatInputs:
    base = dict(sessions=0, tool_calls=0, status="complete", joy=0, open_alarm=False, hot_floor=None)
    base.update(kw)
    return HeatInputs(last_active=NOW - age, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("age", "kw", "expected"),
    [
        (timedelta(hours=1), {}, 3),
        (timedelta(hours=48), {}, 2),
        (timedelta(days=5), {}, 1),
        (timedelta(days=7, hours=1), {}, 0),
        (timedelta(hours=1), {"sessions": 5}, 6),  # sessions capped at 3
        (timedelta(hours=1), {"tool_calls": 50}, 4),
        (timedelta(hours=1), {"tool_calls": 200}, 5),
        (timedelta(hours=1), {"tool_calls": 1000}, 6),
        (timedelta(hours=1), {"status": "active"}, 5),
        (timedelta(hours=1), {"joy": 2}, 4),
        (timedelta(hours=1), {"open_alarm": True}, 5),
        (timedelta(days=15), {"sessions": 3, "status": "active"}, 3),  # 3 + 2 - (15-7)//4
        (timedelta(days=40), {"sessions": 3}, 0),  # clamped at 0
        (timedelta(hours=1), {"sessions": 3, "tool_calls": 5000, "status": "active", "joy": 1, "open_alarm": True}, 10),
        (timedelta(days=30), {"hot_floor": 8, "status": "active"}, 8),  # floor in an open arc
        (timedelta(days=30), {"hot_floor": 8, "status": "complete"}, 0),  # closed arc: no floor
        (-timedelta(hours=5), {}, 3),  # a future last_active counts as now
    ],
)
def test_heat_terms(age: timedelta, kw: dict, expected: int) -> None:
    assert compute(inputs(age, **kw), NOW, DEFAULTS) == expected


def _note(text: str, path: str = "clusters/x.md", mtime: float = 0.0):
    return parse_note(path, text.encode(), size=len(text), mtime_ns=int(mtime * 1e9), sha1="x")


def test_legacy_agentibrain_signals_layout_is_read() -> None:
    note = _note(arc_text("2026-04-09-old-arc-0123456789ab", legacy=True, tool_calls=250, joy=2,
                          created=None, last_active=None, sessions=["a", "b"]))
    assert note.arc is not None
    assert note.arc.activity.tool_calls == 250 and note.arc.activity.joy == 2 and note.arc.session_count == 2
    assert last_active_of(note) == datetime(2026, 4, 9, tzinfo=UTC)  # from the cluster_id


def test_date_fallback_chain() -> None:
    with_created = _note(arc_text("x-1", created="2026-03-01T00:00:00Z", last_active=None))
    assert last_active_of(with_created) == datetime(2026, 3, 1, tzinfo=UTC)
    from_name = _note(arc_text("nodate", created=None, last_active=None), path="clusters/2025-12-24-notes.md")
    assert last_active_of(from_name) == datetime(2025, 12, 24, tzinfo=UTC)
    from_mtime = _note(arc_text("nodate", created=None, last_active=None), path="clusters/plain.md",
                       mtime=1_700_000_000)
    assert last_active_of(from_mtime) == datetime.fromtimestamp(1_700_000_000, tz=UTC)


# --- heat counts work, not noise (issue 11 item 4) -----------------------------------------------

def _run_note(**kw: object) -> object:
    text = arc_text("2026-11-21-run-0123456789ab", **kw).encode()  # type: ignore[arg-type]
    return parse_note("clusters/2026-11-21/x.md", text, size=len(text), mtime_ns=0, sha1="x")


def _heat(**kw: object) -> int:
    from brain.core.heat import inputs_of

    return compute(inputs_of(_run_note(**kw)), NOW, DEFAULTS)  # type: ignore[arg-type]


def test_a_scripted_one_turn_run_gets_no_recency_or_session_heat() -> None:
    work = dict(sessions=["a", "b", "c"], status="complete", created="2026-11-21T10:00:00Z",
                last_active="2026-11-21T11:00:00Z")
    assert _heat(**work) == 3 + 3  # recency + sessions
    scripted = dict(work, extra={"activity": {"sessions": 3, "user_turns": 1, "tool_calls": 10}})
    assert _heat(**scripted) == 0


def test_a_sub_minute_session_gets_no_recency_or_session_heat_but_keeps_the_rest() -> None:
    quick = dict(sessions=["a"], status="active", created="2026-11-21T11:00:00Z", last_active="2026-11-21T11:00:40Z",
                 tool_calls=60)
    assert _heat(**quick) == 2 + 1  # active + tools; no recency, no sessions
    minute = dict(quick, last_active="2026-11-21T11:01:00Z")
    assert _heat(**minute) == 3 + 1 + 2 + 1


def test_arcs_without_turn_counts_are_not_noise() -> None:
    """Old agentibrain arcs (a ``signals:`` mapping, no ``activity``) carry no turn count: not noise."""
    assert _heat(sessions=["a"], status="complete", legacy=True, created="2026-11-21T09:00:00Z",
                 last_active="2026-11-21T11:00:00Z") == 3 + 1


def test_next_change_is_the_first_instant_heat_differs() -> None:
    from brain.core.heat import next_change

    fresh = inputs(timedelta(hours=1), sessions=1)
    at = next_change(fresh, NOW, DEFAULTS)
    assert at == NOW - timedelta(hours=1) + timedelta(hours=24, microseconds=1)
    assert compute(fresh, at - timedelta(microseconds=1), DEFAULTS) == compute(fresh, NOW, DEFAULTS) != compute(
        fresh, at, DEFAULTS)
    cold = inputs(timedelta(days=400))  # heat 0 for good, graduated long ago: nothing ever changes
    assert next_change(cold, NOW, DEFAULTS) is None
    # decay on whole idle days: 15 days idle with grace 7 / every 4 -> next step at 19 days
    decaying = inputs(timedelta(days=15), sessions=3, status="active")
    assert next_change(decaying, NOW, DEFAULTS) == NOW - timedelta(days=15) + timedelta(days=19)
