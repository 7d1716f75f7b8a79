"""A tick that reuses the last tick's state writes exactly what a cold tick writes.

Differential: one vault ticked at T0 and once more a little later, edited at random, then copied
twice; one copy keeps its ``.brain`` (parse cache and its overlay, heat memo, tick state), the
other loses it. Both are ticked at the same later
instant (+2 h, +24 h, +7 d); every vault file and every feed file must be byte-identical, and
both ticks must verify clean.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.core.timeutil import iso, require_instant
from brain.pipeline.tick import run_tick
from brain.settings import Settings
from tests.support.vaults import NOW, init_vault, tree_digest, write_arc

FOLDERS = ("clusters/2026-11-20", "frontal-lobe/conscious", "frontal-lobe/unconscious", "left/notes")
HOURS_AGO = (1, 5, 20, 30, 70, 80, 160, 200, 24 * 20, 24 * 40)
LATER = (timedelta(hours=2), timedelta(hours=24), timedelta(days=7))

arc_spec = st.fixed_dictionaries({
    "folder": st.sampled_from(FOLDERS),
    "hours_ago": st.sampled_from(HOURS_AGO),
    "sessions": st.integers(1, 4),
    "tool_calls": st.sampled_from((0, 60, 250, 1500)),
    "status": st.sampled_from(("active", "active", "paused", "done")),
    "body": st.sampled_from(("", "Plain notes.\n",
                             "<!-- @hot heat=7 -->\n",
                             "<!-- @signal severity=critical source=ci -->\nCI red.\n<!-- @/signal -->\n",
                             "<!-- @lesson -->\nPin the version.\n<!-- @/lesson -->\n")),
})
edit = st.tuples(st.integers(0, 1000), st.sampled_from(("append", "touch_active", "delete", "new", "none")),
                 st.sampled_from(HOURS_AGO))


def _write(vault: Path, cid: str, spec: dict, now: str) -> None:
    last = iso(require_instant(now) - timedelta(hours=spec["hours_ago"]))
    created = iso(require_instant(now) - timedelta(hours=spec["hours_ago"] + 3))
    write_arc(vault, spec["folder"], cid, created=created, last_active=last, status=spec["status"],
              sessions=[f"{cid}-s{i}" for i in range(spec["sessions"])], tool_calls=spec["tool_calls"],
              body=spec["body"])


def _files(root: Path) -> dict[str, str]:
    """Every file the tick owns or edits: not its private state, not its journals, not the health log
    (which carries the tick's duration)."""
    return {rel: digest for rel, digest in tree_digest(root, include_state=False).items()
            if not rel.endswith("health.jsonl")}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arcs=st.lists(arc_spec, min_size=3, max_size=14), cap=st.integers(1, 4),
       edits=st.lists(edit, max_size=6), later=st.sampled_from(LATER))
def test_an_incremental_tick_writes_what_a_cold_tick_writes(arcs: list[dict], cap: int,
                                                            edits: list[tuple[int, str, int]],
                                                            later: timedelta) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        warm = init_vault(root / "warm")
        for i, spec in enumerate(arcs):
            _write(warm, f"2026-11-20-arc-{i:02d}", spec, NOW)
        t0 = require_instant(NOW)
        first = run_tick(Settings(vault=warm, conscious_cap=cap), t0, no_ai=True, dry_run=False)
        assert first.exit_code == 0, first.as_dict()
        # A tick in between: the warm copy's heat memo and parse-cache overlay span two ticks.
        between = run_tick(Settings(vault=warm, conscious_cap=cap), t0 + later / 4, no_ai=True, dry_run=False)
        assert between.exit_code == 0, between.as_dict()

        # Edits between the ticks (each one changes the file's size, as real edits do).
        for n, (index, kind, hours_ago) in enumerate(edits):
            present = sorted(p for p in warm.rglob("2026-11-20-arc-*.md") if ".brain" not in p.parts)
            if kind == "new":
                spec = dict(arcs[index % len(arcs)], hours_ago=hours_ago)
                _write(warm, f"2026-11-20-new-{n:02d}", spec, iso(t0 + later / 2))
                continue
            if not present or kind == "none":
                continue
            path = present[index % len(present)]
            if kind == "delete":
                path.unlink()
            elif kind == "append":
                with path.open("a", encoding="utf-8") as handle:
                    handle.write(f"\nOperator note {n}.\n")
            else:
                text = path.read_text(encoding="utf-8")
                stamp = iso(t0 + later / 2)
                lines = [f"last_active: '{stamp}'" if line.startswith("last_active:") else line
                         for line in text.split("\n")]
                path.write_text("\n".join(lines) + f"\n<!-- touched {n} -->\n", encoding="utf-8")

        cold = root / "cold"
        shutil.copytree(warm, cold, symlinks=True)  # copy2: sizes and mtimes as they are
        shutil.rmtree(cold / ".brain")
        (cold / ".brain").mkdir()

        then = t0 + later
        hot_report = run_tick(Settings(vault=warm, conscious_cap=cap), then, no_ai=True, dry_run=False)
        cold_report = run_tick(Settings(vault=cold, conscious_cap=cap), then, no_ai=True, dry_run=False)
        assert hot_report.exit_code == 0, hot_report.as_dict()
        assert cold_report.exit_code == 0, cold_report.as_dict()
        assert cold_report.keeper.parsed > 0  # the cold copy really parsed from scratch
        assert _files(warm) == _files(cold)
        assert hot_report.stats == cold_report.stats
