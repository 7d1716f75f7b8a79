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
