"""A tick that reuses the last tick's state writes exactly what a cold tick writes.

Differential: one vault ticked at T0 and once more a little later, edited at random, then copied
twice; one copy keeps its ``.brain`` (parse cache and its overlay, heat memo, tick state), the
other loses it. Both are ticked at the same later
instant (+2 h, +24 h, +7 d); every vault file and every feed file must be byte-identical, and
both ticks must verify clean.
"""

from __future__ import annotations

import gc
import json
import marshal
import os
import shutil
import sqlite3
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.core.model import Note
from brain.core.timeutil import iso, require_instant
from brain.io.vault import frame_spans, load_view, scan, stat_listing
from brain.pipeline.tick import run_tick
from brain.pipeline.tick_state import load_memo, write_memo_base
from brain.search.index import rebuild
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


def _tick_both(s: Settings, quiet: Path, full: Path, now: datetime) -> tuple[Any, Any]:
    """One tick on ``quiet`` (settings ``s``, free to take the quiet path) and one on its twin
    ``full`` with its view removed (the full scan); both must leave the same files, stats,
    problems, writes, moves and dashboards key. Returns both reports."""
    (full / ".brain" / "tick-view").unlink(missing_ok=True)  # no view: the full scan
    a = run_tick(s, now, no_ai=True, dry_run=False)
    b = run_tick(Settings(vault=full, conscious_cap=4), now, no_ai=True, dry_run=False)
    assert a.exit_code == b.exit_code == 0, (now, a.as_dict(), b.as_dict())
    assert _files(quiet) == _files(full), now
    assert a.stats == b.stats, now
    assert _problems(a) == _problems(b), now
    assert sorted(a.result.written) == sorted(b.result.written), now
    assert sorted(a.result.moved) == sorted(b.result.moved), now
    keys = [json.loads((v / ".brain" / "tick-state.json").read_text())["dashboards"] for v in (quiet, full)]
    assert keys[0] == keys[1], now  # a quiet tick updates the dashboards key for the lines it patched
    return a, b


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
        assert _index_dump(warm) == _index_dump(cold)  # refreshed by the change since vs built afresh


# --- the quiet tick: the last tick's view instead of a scan ------------------------------------------

QUIET_STEPS = (timedelta(hours=2), timedelta(hours=4), timedelta(hours=13), timedelta(hours=26),
               timedelta(hours=50), timedelta(days=4), timedelta(days=8), timedelta(days=31))


def _quiet_vault(vault: Path) -> None:
    """Three projects (one with more arcs than any feed file looks at), arcs cooling at every
    boundary, conscious arcs that cool out, graduations, a signal cleared later, injects that
    expire, a noise run, an arc with a bad date, a note outside the compartments with a signal."""
    t0 = require_instant(NOW)
    bodies = ("", "<!-- @lesson -->\nPin the version.\n<!-- @/lesson -->\n",
              "<!-- @decision -->\nUse uv.\n<!-- @/decision -->\n", "<!-- @hot heat=6 -->\n")
    n = 0
    for project, count, cwd in (("alpha", 27, "/work/alpha"), ("beta", 6, "/work/beta"), ("gamma", 3, "/work/alpha")):
        for i in range(count):
            hours = (1, 20, 23, 25, 47, 71, 73, 100, 160, 170, 200, 24 * 13, 24 * 20, 24 * 29, 24 * 45)[(n * 7) % 15]
            folder = ("clusters/2026-11-20", "frontal-lobe/conscious", "frontal-lobe/unconscious")[n % 3]
            cid = f"2026-11-20-{project}-{i:02d}"
            last = t0 - timedelta(hours=hours, minutes=n)
            write_arc(vault, folder, cid, title=f"{project} work {i}", created=iso(last - timedelta(hours=2)),
                      last_active=iso(last), status=("active", "paused", "done")[n % 3],
                      sessions=[f"{cid}-s{k}" for k in range(1 + n % 3)], tool_calls=(0, 60, 250)[n % 3],
                      body=bodies[n % 4],
                      extra={"project": project, "cwd": cwd, "files": [f"src/{project}/m{i % 5}.py", "README.md"],
                             "commands": ["pytest -x", f"make {project}"], "last_prompt": f"fix {project} {i}"})
            n += 1
    # Past every feed file's window (20 newer arcs of the same project): cold, but still to graduate.
    for i in range(24):
        last = t0 - (timedelta(hours=2 + i) if i < 20 else timedelta(days=12, hours=i))
        write_arc(vault, "clusters/2026-11-20", f"2026-11-20-delta-{i:02d}", title=f"delta {i}", status="paused",
                  created=iso(last - timedelta(hours=1)), last_active=iso(last), tool_calls=0,
                  extra={"project": "delta", "cwd": "/work/delta"})
    write_arc(vault, "frontal-lobe/conscious", "2026-11-20-alarm", title="CI red",
              created=iso(t0 - timedelta(hours=30)), last_active=iso(t0 - timedelta(hours=29)),
              extra={"project": "alpha"},
              body=("<!-- @signal severity=critical source=ci -->\nCI is red on main.\n<!-- @/signal -->\n"
                    f"<!-- @signal severity=resolved source=lint cleared_at={iso(t0 + timedelta(hours=5))} -->\n"
                    "Lint fixed (CLEARED: by ops)\n<!-- @/signal -->\n"
                    f"<!-- @inject target=all date={iso(t0 - timedelta(days=6))} ttl_days=7 -->\n"
                    "Freeze deploys until Monday.\n<!-- @/inject -->\n"
                    f"<!-- @inject target=claude.md date={iso(t0 - timedelta(days=1))} ttl_days=30 -->\n"
                    "Run `uv run pytest -x` first.\n<!-- @/inject -->\n"))
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-noise", title="Reply HELLO", extra={"project": "beta"},
              created=iso(t0 - timedelta(hours=3)), last_active=iso(t0 - timedelta(hours=3, seconds=-20)))
    # A project long cold whose newest arc is a one-shot run with no cwd: listed after its 21 real
    # arcs, past the feed files' window, yet the index's last_active is its own.
    one_turn = {"sessions": 1, "user_turns": 1, "tool_calls": 1, "errors": 0, "joy": 0, "compactions": 0}
    for i in range(21):
        last = t0 - timedelta(days=60, hours=i)
        write_arc(vault, "frontal-lobe/unconscious", f"2026-09-20-eps-{i:02d}", title=f"eps {i}", status="paused",
                  created=iso(last - timedelta(hours=1)), last_active=iso(last), tool_calls=0,
                  extra={"project": "eps", "cwd": "/work/eps"})
    write_arc(vault, "frontal-lobe/unconscious", "2026-09-21-eps-ping", title="Reply OK", status="paused",
              created=iso(t0 - timedelta(days=59)), last_active=iso(t0 - timedelta(days=59, seconds=-20)),
              extra={"project": "eps", "activity": one_turn})
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-baddate", extra={"project": "beta"},
              created="9999-12-31T00:00:00Z", last_active="9999-12-31T00:00:00Z")
    (vault / "notes").mkdir(exist_ok=True)
    (vault / "notes" / "ops.md").write_text("# Ops\n<!-- @signal severity=warning source=ops -->\nDisk at 80 %.\n"
                                            "<!-- @/signal -->\n", encoding="utf-8")


def _index_dump(vault: Path) -> tuple[list[tuple], list[tuple]]:
    """Every row of the search index, without row ids: (docs joined to their text, files)."""
    with sqlite3.connect(vault / ".brain" / "search.sqlite") as conn:
        docs = conn.execute("SELECT d.path, d.line, d.kind, d.project, d.cluster_id, d.heat, d.last_active, d.status, "
                            "d.successors, d.title, d.work, f.title, f.body, f.work FROM docs d "
                            "JOIN fts f ON f.rowid = d.id").fetchall()
        files = conn.execute("SELECT path, sha1 FROM files").fetchall()
    return sorted(docs), sorted(files)


def _rebuilt_index(vault: Path, copy: Path) -> tuple[list[tuple], list[tuple]]:
    """:func:`_index_dump` of the index a rebuild from ``vault``'s files gives (in a copy)."""
    shutil.copytree(vault, copy, symlinks=True)
    (copy / ".brain" / "search.sqlite").unlink()
    rebuild(copy, list(scan(copy, feed_dir=copy / "brain-feed", max_note_bytes=2_000_000,
                            write_cache=False).notes.values()))
    return _index_dump(copy)


def _problems(report: object) -> list[tuple[str, str]]:
    return sorted({(p["path"], p["message"]) for p in report.as_dict()["problems"]})  # type: ignore[attr-defined]


def test_a_quiet_tick_writes_what_a_full_tick_writes(tmp_path: Path) -> None:
    """Every later tick on an unchanged vault, run on the last tick's view and on a full scan of a
    copy, leaves the same files, stats and problems; the view is what most of them ran on."""
    quiet = init_vault(tmp_path / "quiet")
    _quiet_vault(quiet)
    s = Settings(vault=quiet, conscious_cap=4)
    t0 = require_instant(NOW)
    first = run_tick(s, t0, no_ai=True, dry_run=False)
    assert first.exit_code == 0, first.as_dict()
    assert (quiet / ".brain" / "tick-view").is_file()
    full = tmp_path / "full"
    shutil.copytree(quiet, full, symlinks=True)
    ran_quiet = []
    for step in QUIET_STEPS:
        a, b = _tick_both(s, quiet, full, t0 + step)
        assert not b.keeper.quiet
        ran_quiet.append(a.keeper.quiet)
    assert ran_quiet[0] and sum(ran_quiet) >= len(QUIET_STEPS) - 2, ran_quiet
    # The index the quiet ticks kept up to date (heat and status retagged in place) is the one a
    # rebuild from the files gives.
    assert _index_dump(quiet) == _rebuilt_index(quiet, tmp_path / "rebuilt")
    # An edit to an arc's frontmatter (its title) sends the next tick to the full scan: what the
    # quiet ticks wrote is not parsed again (the view holds those rows), only the edited file is.
    edited = _find(quiet, "2026-11-20-delta-03")
    edited.write_text(edited.read_text(encoding="utf-8").replace("title: delta 3\n", "title: delta three\n"),
                      encoding="utf-8")
    after_edit = run_tick(s, t0 + QUIET_STEPS[-1] + timedelta(hours=2), no_ai=True, dry_run=False)
    assert after_edit.exit_code == 0 and not after_edit.keeper.quiet
    assert after_edit.keeper.parsed == 1, after_edit.keeper
    # The full tick after the quiet ones finds nothing left to do.
    (quiet / ".brain" / "tick-view").unlink()
    again = run_tick(s, t0 + QUIET_STEPS[-1] + timedelta(hours=2), no_ai=True, dry_run=False)
    assert again.exit_code == 0 and not again.keeper.quiet
    assert [w for w in again.result.written if not w.startswith("brain-feed/")] == [], again.as_dict()


class _Later:
    """The clock of :mod:`brain.io.vault` ``seconds`` ahead of the wall's (the rest of ``time`` as is)."""

    def __init__(self, seconds: float) -> None:
        self.offset = int(seconds * 1e9)

    def time_ns(self) -> int:
        return time.time_ns() + self.offset

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _stamped_later(vault: Path, seconds: float) -> None:
    """The tick's view as the file system's clock stamps it when it is written ``seconds`` later
    than the wall's (what :class:`_Later` does to the tick's own clock): the racily clean rule
    compares a note's mtime with its view file's."""
    for path in (vault / ".brain").glob("tick-view*"):
        stamp = path.stat().st_mtime_ns + int(seconds * 1e9)
        os.utime(path, ns=(stamp, stamp))


def test_a_racily_clean_note_is_hashed_once_not_at_every_quiet_tick(tmp_path: Path, monkeypatch) -> None:
    """Notes written just before the view was saved are confirmed by their bytes at the next
    tick; that tick's view then vouches for them, so the tick after reads only what its
    predecessor wrote (git's racy-clean smudge), not every note the cold tick wrote."""
    import brain.io.vault as vault_module

    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    s = Settings(vault=vault, conscious_cap=4)
    t0 = require_instant(NOW)
    assert run_tick(s, t0, no_ai=True, dry_run=False).exit_code == 0  # every file it wrote is racy
    hashed: list[str] = []
    real = vault_module._same_content

    def counting(root: Path, rel: str, size: int, sha1: str) -> bool:
        hashed.append(rel)
        return real(root, rel, size, sha1)

    monkeypatch.setattr(vault_module, "_same_content", counting)
    monkeypatch.setattr(vault_module, "time", _Later(60))  # the next tick comes long after the writes
    second = run_tick(s, t0 + timedelta(hours=2), no_ai=True, dry_run=False)
    assert second.exit_code == 0 and second.keeper.quiet, second.as_dict()
    first_hashed = set(hashed)
    rewritten = set(second.result.written) | {dst for _src, dst in second.result.moved}
    assert first_hashed - rewritten, "the cold tick's writes were not racy: this test shows nothing"
    _stamped_later(vault, 60)
    hashed.clear()
    monkeypatch.setattr(vault_module, "time", _Later(120))
    third = run_tick(s, t0 + timedelta(hours=4), no_ai=True, dry_run=False)
    assert third.exit_code == 0 and third.keeper.quiet, third.as_dict()
    assert set(hashed) <= rewritten, sorted(set(hashed) - rewritten)


def test_the_racy_margin_is_one_tick_of_the_file_systems_clock(tmp_path: Path, monkeypatch) -> None:
    """Git's rule, on the clock that stamps the files: the notes a tick wrote more than
    ``RACY_FINE_NS`` before its view file's mtime are trusted by their size and mtime at the next
    tick; where the view's mtime is a whole second (a file system that keeps whole seconds) the
    ``RACY_SECONDS`` margin holds, and the latest of them are confirmed by their bytes."""
    import brain.io.vault as vault_module

    built = init_vault(tmp_path / "built")
    _quiet_vault(built)
    t0 = require_instant(NOW)
    monkeypatch.setattr(vault_module, "time", _Later(5))  # the view's own record of its writing is later still
    assert run_tick(Settings(vault=built, conscious_cap=4), t0, no_ai=True, dry_run=False).exit_code == 0
    monkeypatch.setattr(vault_module, "time", time)
    latest = max(p.stat().st_mtime_ns for p in built.rglob("*.md") if ".brain" not in p.parts)
    second = -(-latest // 1_000_000_000) * 1_000_000_000 + 1_000_000_000  # 1 to 2 s after the last write
    real = vault_module._same_content
    hashed: dict[str, list[str]] = {}
    for name, stamp in (("fine", second + 1), ("whole", second)):
        vault = tmp_path / name
        shutil.copytree(built, vault, symlinks=True)
        for view in (vault / ".brain").glob("tick-view*"):
            os.utime(view, ns=(stamp, stamp))
        hashed[name] = []

        def counting(root: Path, rel: str, size: int, sha1: str, into: list[str] = hashed[name]) -> bool:
            into.append(rel)
            return real(root, rel, size, sha1)

        monkeypatch.setattr(vault_module, "_same_content", counting)
        report = run_tick(Settings(vault=vault, conscious_cap=4), t0 + timedelta(hours=2), no_ai=True, dry_run=False)
        assert report.exit_code == 0 and report.keeper.quiet, report.as_dict()
    assert hashed["fine"] == []
    assert hashed["whole"], "the whole-second view trusted notes written less than RACY_SECONDS before it"


def _live_notes() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is Note)


def test_a_tick_leaves_no_note_alive_once_it_returns(tmp_path: Path) -> None:
    """A tick runs with the collector off and turns it back on as it returns: every note it
    loaded, decided or saved must be gone by then (the scanner's rows and the heat memo
    included), or the collector's first pass walks them all (66 ms after a +2 h tick on 50 000
    arcs). Both kinds of tick: the full one, and the quiet one that loads the view."""
    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    s = Settings(vault=vault, conscious_cap=4)
    t0 = require_instant(NOW)
    before = _live_notes()
    for later in (0, 2, 4):
        report = run_tick(s, t0 + timedelta(hours=later), no_ai=True, dry_run=False)
        assert report.exit_code == 0, report.as_dict()
        assert report.keeper.quiet == (later > 0), report.as_dict()
        assert _live_notes() <= before, f"notes alive after the tick at +{later} h"


def test_the_view_stores_a_string_many_arcs_share_once(tmp_path: Path) -> None:
    """Rows share equal strings (a project, a cwd): loaded back, the notes share one object each."""
    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    s = Settings(vault=vault, conscious_cap=4)
    report = run_tick(s, require_instant(NOW), no_ai=True, dry_run=False)
    assert report.exit_code == 0, report.as_dict()
    listing = stat_listing(vault, s.feed_dir)
    notes = load_view(vault, report.tick_id, listing)
    assert notes is not None
    alpha = [n.arc for n in notes.values() if n.arc is not None and n.arc.project == "alpha"]
    assert len(alpha) > 2
    objects: dict[str, set[int]] = {}
    for arc in alpha:
        for value in (arc.project, arc.cwd, *arc.files, *arc.commands):
            if value:
                objects.setdefault(value, set()).add(id(value))
    assert {value: len(ids) for value, ids in objects.items()} == dict.fromkeys(objects, 1)


def test_a_vault_copied_whole_to_another_folder_keeps_its_caches(tmp_path: Path) -> None:
    """The caches name no absolute path: a vault moved or copied with its times (``cp -a``, a
    volume mounted elsewhere) takes the quiet path at its next tick and writes what the
    original writes; a feed folder inside it counts by its place in the vault."""
    original = init_vault(tmp_path / "a" / "vault")
    _quiet_vault(original)
    t0 = require_instant(NOW)
    assert run_tick(Settings(vault=original, conscious_cap=4), t0, no_ai=True, dry_run=False).exit_code == 0
    moved = tmp_path / "b" / "mounted" / "vault"
    shutil.copytree(original, moved, symlinks=True)  # file times kept, like cp -a
    later = t0 + QUIET_STEPS[0]
    a = run_tick(Settings(vault=original, conscious_cap=4), later, no_ai=True, dry_run=False)
    b = run_tick(Settings(vault=moved, conscious_cap=4, brain_feed=moved / "brain-feed"), later, no_ai=True,
                 dry_run=False)
    assert a.exit_code == b.exit_code == 0
    assert a.keeper.quiet and b.keeper.quiet, b.as_dict()
    assert _files(original) == _files(moved)
    assert sorted(a.result.written) == sorted(b.result.written)
    # Another budget is another plan: the caches do not carry over.
    other = run_tick(Settings(vault=moved, conscious_cap=3), later + QUIET_STEPS[0], no_ai=True, dry_run=False)
    assert other.exit_code == 0 and not other.keeper.quiet


def test_an_arc_a_quiet_tick_moved_then_deleted_leaves_the_index(tmp_path: Path) -> None:
    """The parse cache still has the arc under its old path (quiet ticks leave it behind); the
    full scan must count the path the view had as gone, or the index keeps a deleted arc."""
    vault = init_vault(tmp_path / "v")
    t0 = require_instant(NOW)
    last, created = iso(t0 - timedelta(hours=1)), iso(t0 - timedelta(hours=4))
    write_arc(vault, "clusters/2026-11-20", "2026-11-20-floor", created=created, last_active=last, tool_calls=0,
              body="<!-- @hot heat=7 -->\nKeep warm.\n")
    for cid in ("2026-11-20-b", "2026-11-20-c"):
        write_arc(vault, "frontal-lobe/conscious", cid, created=created, last_active=last, tool_calls=250,
                  sessions=[f"{cid}-s{i}" for i in range(3)])
    s = Settings(vault=vault, conscious_cap=2)
    assert run_tick(s, t0, no_ai=True, dry_run=False).exit_code == 0
    promoted = run_tick(s, t0 + timedelta(days=12), no_ai=True, dry_run=False)
    assert promoted.keeper.quiet and promoted.stats["promoted"] == 1, promoted.as_dict()
    (vault / "frontal-lobe/conscious/2026-11-20-floor.md").unlink()
    after = run_tick(s, t0 + timedelta(days=12, hours=2), no_ai=True, dry_run=False)
    assert after.exit_code == 0 and not after.keeper.quiet
    assert _index_dump(vault) == _rebuilt_index(vault, tmp_path / "rebuilt")


@pytest.mark.parametrize("damage", ["tick-view", "tick-view-delta", "tick-listing", "heat-memo-delta"])
def test_a_damaged_quiet_state_file_costs_a_full_scan_not_a_wrong_tick(tmp_path: Path, damage: str) -> None:
    """Garbage in the view or its overlay, the listing or the memo overlay: the tick scans (or
    recomputes) and writes what a tick without any .brain/ state writes."""
    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    s = Settings(vault=vault, conscious_cap=4)
    t0 = require_instant(NOW)
    assert run_tick(s, t0, no_ai=True, dry_run=False).exit_code == 0
    base = (vault / ".brain" / "tick-view").read_bytes()
    # A quiet tick writes the memo and view overlays (the rows it rewrote), not the view again.
    assert run_tick(s, t0 + timedelta(hours=2), no_ai=True, dry_run=False).keeper.quiet
    assert (vault / ".brain" / "tick-view").read_bytes() == base and (vault / ".brain" / "tick-view-delta").is_file()
    cold = tmp_path / "cold"
    shutil.copytree(vault, cold, symlinks=True)
    shutil.rmtree(cold / ".brain")
    (cold / ".brain").mkdir()
    (vault / ".brain" / damage).write_bytes(b"\x00not marshal\xff")
    later = t0 + timedelta(hours=26)
    warm_report = run_tick(s, later, no_ai=True, dry_run=False)
    cold_report = run_tick(Settings(vault=cold, conscious_cap=4), later, no_ai=True, dry_run=False)
    assert warm_report.exit_code == cold_report.exit_code == 0
    assert warm_report.keeper.quiet == (damage == "heat-memo-delta")  # a bad overlay only loses its entries
    assert _files(vault) == _files(cold)
    assert warm_report.stats == cold_report.stats


def test_a_quiet_tick_adds_to_the_memo_overlay_only_what_it_decided_afresh(tmp_path: Path) -> None:
    """Every row of the heat memo's overlay says something the memo did not: an arc decided
    afresh (a heat step passed, a file rewritten), not the whole view again; and a later tick
    decides the same from base plus overlay as from a memo written whole."""
    import marshal

    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    s = Settings(vault=vault, conscious_cap=4)
    t0 = require_instant(NOW)
    assert run_tick(s, t0, no_ai=True, dry_run=False).exit_code == 0
    base = load_memo(vault, s).rows  # the base alone: a full tick leaves no overlay
    quiet = run_tick(s, t0 + timedelta(hours=2), no_ai=True, dry_run=False)
    assert quiet.keeper.quiet
    delta = marshal.loads((vault / ".brain" / "heat-memo-delta").read_bytes())[1]
    assert delta and all(base.get(path) != row for path, row in delta.items())
    assert len(delta) < quiet.keeper.remembered  # the rows the memo answered for stay in the base alone
    whole = tmp_path / "whole"
    shutil.copytree(vault, whole, symlinks=True)
    write_memo_base(whole, Settings(vault=whole, conscious_cap=4), {**base, **delta})
    (whole / ".brain" / "heat-memo-delta").unlink()
    later = t0 + timedelta(hours=5)
    overlaid = run_tick(s, later, no_ai=True, dry_run=False)
    merged = run_tick(Settings(vault=whole, conscious_cap=4), later, no_ai=True, dry_run=False)
    assert overlaid.keeper.remembered == merged.keeper.remembered > 0
    assert _files(vault) == _files(whole)


def test_a_quiet_tick_reads_only_the_memo_rows_of_its_view(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo's base puts the rows of the view first: the quiet ticks that follow (an arc
    promoted to a new path among them) answer from those and their own overlay, and never
    decode the rows of the arcs outside the view; a full tick, which decides every arc, does."""
    import brain.pipeline.tick_state as state_module

    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    s = Settings(vault=vault, conscious_cap=4)
    t0 = require_instant(NOW)
    assert run_tick(s, t0, no_ai=True, dry_run=False).exit_code == 0
    outside = len(load_memo(vault, s)) - len([n for n in load_view(vault, json.loads(
        (vault / ".brain/tick-state.json").read_text())["tick_id"], _listing(vault, s)).values() if n.arc])
    assert outside > 0, "every arc is in the view: this test shows nothing"
    loads: list[int] = []
    real = state_module._memo_base

    def counted(path: Path, digest: str) -> Any:
        found = real(path, digest)
        if found is None:
            return None
        view, rest, based = found

        def rest_counted() -> dict[str, Any]:
            loads.append(1)
            return rest()
        return view, rest_counted, based

    monkeypatch.setattr(state_module, "_memo_base", counted)
    moved = kept = 0
    for hours in (2, 4, 26, 50):
        base = (vault / ".brain/heat-memo").stat()
        report = run_tick(s, t0 + timedelta(hours=hours), no_ai=True, dry_run=False)
        assert report.exit_code == 0 and report.keeper.quiet and report.keeper.remembered, report.as_dict()
        after = (vault / ".brain/heat-memo").stat()
        if (after.st_ino, after.st_mtime_ns) != (base.st_ino, base.st_mtime_ns):
            loads.clear()  # the overlay outgrew a quarter of the base: the base is written again, whole
            continue
        assert loads == [], f"the tick at +{hours} h decoded the rows outside its view"
        kept += 1
        moved += len(report.result.moved)
    assert kept and moved, "no quiet tick moved an arc on the memo's base: this test shows nothing"
    (vault / ".brain/tick-state.json").unlink()
    full = run_tick(s, t0 + timedelta(hours=52), no_ai=True, dry_run=False)
    assert full.exit_code == 0 and not full.keeper.quiet
    assert loads == [1]


def test_a_heat_memo_damaged_past_its_view_rows_costs_only_recomputing(tmp_path: Path) -> None:
    """The memo's rows outside the view are decoded when first asked for: damaged there (its
    frames' lengths intact, their bytes not), the tick that reads them recomputes those arcs'
    heat and writes what a tick without any memo writes."""
    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    t0 = require_instant(NOW)
    assert run_tick(Settings(vault=vault, conscious_cap=4), t0, no_ai=True, dry_run=False).exit_code == 0
    memo = vault / ".brain/heat-memo"
    data = bytearray(memo.read_bytes())
    spans = frame_spans(memoryview(bytes(data)))
    assert spans is not None and len(spans) == 3 and spans[2][1] - spans[2][0] > 16
    data[spans[2][0]:spans[2][1]] = b"\xff" * (spans[2][1] - spans[2][0])
    memo.write_bytes(bytes(data))
    bare = tmp_path / "bare"
    shutil.copytree(vault, bare, symlinks=True)
    (bare / ".brain/heat-memo").unlink()
    for root in (vault, bare):
        (root / ".brain/tick-state.json").unlink()  # the full tick: every arc asks the memo
    later = t0 + timedelta(hours=30)
    damaged = run_tick(Settings(vault=vault, conscious_cap=4), later, no_ai=True, dry_run=False)
    without = run_tick(Settings(vault=bare, conscious_cap=4), later, no_ai=True, dry_run=False)
    assert damaged.exit_code == without.exit_code == 0, damaged.as_dict()
    assert 0 < damaged.keeper.remembered < load_memo(vault, Settings(vault=vault, conscious_cap=4)).size()
    assert _files(vault) == _files(bare)


def _listing(vault: Path, s: Settings) -> dict[str, tuple[int, int]]:
    return stat_listing(vault, s.feed_dir)


def test_a_quiet_tick_saves_only_its_changes_to_the_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing a full tick saved stays as it is; the quiet ticks after it save what they changed
    (arcs rewritten, moved) beside it, and base plus overlay are the files as they are, what the
    next tick compares with. Past its share of the base, the overlay is folded into a new base; a
    damaged overlay only costs the next tick its shortcut."""
    import brain.pipeline.tick_state as state_module

    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    s = Settings(vault=vault, conscious_cap=4)
    t0 = require_instant(NOW)
    assert run_tick(s, t0, no_ai=True, dry_run=False).exit_code == 0
    base, overlay = vault / ".brain/tick-listing", vault / ".brain/tick-listing-delta"
    stamp = (base.stat().st_ino, base.stat().st_mtime_ns)
    assert not overlay.exists()
    changed: set[str] = set()
    for hours in (2, 26, 50):
        report = run_tick(s, t0 + timedelta(hours=hours), no_ai=True, dry_run=False)
        assert report.exit_code == 0 and report.keeper.quiet, report.as_dict()
        changed |= {p for p in report.result.written if p.endswith(".md") and not p.startswith("brain-feed/")}
        changed |= {p for move in report.result.moved for p in move}
        assert (base.stat().st_ino, base.stat().st_mtime_ns) == stamp
        tag = json.loads((vault / ".brain/tick-state.json").read_text())["tick_id"]
        assert state_module.load_listing(vault, tag) == _listing(vault, s)
    delta = marshal.loads(overlay.read_bytes())[2]
    assert changed and set(delta) == changed, sorted(set(delta) ^ changed)
    # Past its share, the overlay becomes a new base.
    monkeypatch.setattr(state_module, "LISTING_DELTA_MIN", 0)
    monkeypatch.setattr(state_module, "LISTING_DELTA_SHARE", 0.0)
    report = run_tick(s, t0 + timedelta(hours=74), no_ai=True, dry_run=False)
    assert report.exit_code == 0 and report.keeper.quiet and (report.result.written or report.result.moved)
    assert not overlay.exists() and (base.stat().st_ino, base.stat().st_mtime_ns) != stamp
    tag = json.loads((vault / ".brain/tick-state.json").read_text())["tick_id"]
    assert state_module.load_listing(vault, tag) == _listing(vault, s)
    # A damaged overlay: no shortcut, the same files.
    monkeypatch.undo()
    run_tick(s, t0 + timedelta(hours=98), no_ai=True, dry_run=False)
    assert overlay.exists()
    overlay.write_bytes(b"\x00damaged")
    later = t0 + timedelta(hours=122)
    copy = tmp_path / "copy"
    shutil.copytree(vault, copy, symlinks=True)
    (copy / ".brain/tick-state.json").unlink()
    damaged = run_tick(s, later, no_ai=True, dry_run=False)
    full = run_tick(Settings(vault=copy, conscious_cap=4), later, no_ai=True, dry_run=False)
    assert damaged.exit_code == full.exit_code == 0 and not damaged.keeper.quiet
    assert _files(vault) == _files(copy)


def test_the_memo_rows_a_quiet_tick_adds_are_every_row_that_says_something_new(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The overlay's rows are made for the arcs decided afresh and those written only: they are
    exactly the rows of every arc decided that differ from what the memo said. A day on, both
    kinds say something new: an arc decided afresh whose file stays as it was (its heat holds,
    its window moved on), and one written whose heat came from the memo (it moved)."""
    import brain.pipeline.tick as tick_module
    from brain.core.keeper import remembered
    from brain.pipeline.tick_state import memo_news

    vault = init_vault(tmp_path / "v")
    _quiet_vault(vault)
    s = Settings(vault=vault, conscious_cap=4)
    t0 = require_instant(NOW)
    assert run_tick(s, t0, no_ai=True, dry_run=False).exit_code == 0
    seen: list[tuple[dict[str, Any], dict[str, Any], int, int]] = []
    saved = tick_module.save_memo

    def save_memo(vault: Path, s: Settings, decisions: Any, snapshot: Any, now: datetime, before: Any, *,
                  partial: bool = False, **rest: Any) -> None:
        every = {path: tuple(entry) for path, entry in remembered(decisions, snapshot.notes, now, before).items()}
        new = {path: row for path, row in every.items() if before.rows.get(path) != row}
        kinds = [(cid in decisions.fresh, snapshot.notes.get(d.path) is not d.note)
                 for cid, d in decisions.arcs.items() if d.path in new]
        seen.append((new, memo_news(decisions, snapshot, now, before), kinds.count((True, False)),
                     kinds.count((False, True))))
        saved(vault, s, decisions, snapshot, now, before, partial=partial, **rest)

    monkeypatch.setattr(tick_module, "save_memo", save_memo)
    quiet = run_tick(s, t0 + timedelta(hours=26), no_ai=True, dry_run=False)
    assert quiet.keeper.quiet
    ((new, news, fresh_kept, written_remembered),) = seen
    assert news == new and list(news) == list(new)  # the same rows, in the same order
    assert fresh_kept and written_remembered


# --- a quiet tick with edits: the view plus the files changed since ------------------------------

def _find(vault: Path, cid: str) -> Path:
    return next(p for p in vault.rglob(f"{cid}.md") if ".brain" not in p.parts)


def _append(vault: Path, cid: str, text: str) -> None:
    with _find(vault, cid).open("a", encoding="utf-8") as handle:
        handle.write(text)


def _replace(vault: Path, cid: str, old: str, new: str) -> None:
    path = _find(vault, cid)
    text = path.read_text(encoding="utf-8")
    assert old in text, (cid, old)
    path.write_text(text.replace(old, new), encoding="utf-8")


LESSON = "\n<!-- @lesson -->\nRetry once, then page.\n<!-- @/lesson -->\n"
#: Each step's edits, made the same way to both vaults, then both ticked at t0 + step; True: the
#: quiet tick takes them up (body edits, operator notes), False: they send it to the full scan.
EDITS: tuple[tuple[timedelta, list[Any], bool], ...] = (
    (timedelta(hours=2), [(_append, "2026-11-20-alpha-00", "\nOperator note.\n"),
                          (_append, "2026-11-20-delta-21", "\nStill open.\n"),
                          (_append, "2026-11-20-delta-05", "\nChecked.\n")], True),
    (timedelta(hours=4), [(_append, "2026-11-20-delta-22", LESSON), ("new", "notes/plan.md", "# Plan" + LESSON)], True),
    (timedelta(hours=13), [("delete", "notes/plan.md"), (_append, "2026-11-20-alpha-05", "\nMore.\n")], True),
    (timedelta(hours=26), [(_replace, "2026-11-20-beta-02", "title: beta work 2\n", "title: beta, renamed\n")],
     False),
    (timedelta(hours=50), [(_append, "2026-11-20-delta-23", "\n<!-- @signal severity=warning source=db -->\n"
                                                           "Replica lag.\n<!-- @/signal -->\n"),
                           (_append, "2026-11-20-gamma-01", "\nNoted.\n")], True),
    (timedelta(days=4), [(_replace, "2026-11-20-delta-22", LESSON, "\n")], True),
    (timedelta(days=6), [(_append, "2026-11-20-alpha-03", "\n<!-- @edge type=related target=2026-11-20-beta-01 -->\n")],
     False),
    (timedelta(days=8), [("arc", "2026-11-20-epsilon-00")], False),
    (timedelta(days=31), [(_append, "2026-11-20-delta-20", "\nArchived.\n"),
                          (_append, "2026-11-20-beta-04", "\nClosed.\n")], True),
)


def _edit(vault: Path, edit: list[Any], now: str) -> None:
    kind, *args = edit
    if kind == "new":
        (vault / args[0]).write_text(args[1], encoding="utf-8")
    elif kind == "delete":
        (vault / args[0]).unlink()
    elif kind == "arc":
        write_arc(vault, "clusters/2026-11-20", args[0], title="epsilon work", created=now, last_active=now,
                  extra={"project": "epsilon", "cwd": "/work/epsilon"})
    else:
        kind(vault, *args)


def test_a_quiet_tick_with_edits_writes_what_a_full_tick_writes(tmp_path: Path) -> None:
    """Files edited between ticks: the quiet tick parses only those and runs on the view (body
    edits, lessons, signals, operator notes added and deleted), or takes the full scan when an
    edit reaches beyond its note (a title, an edge, a new arc); either way every file, stat,
    problem and change is the full scan's, and the search index is a rebuild's."""
    quiet = init_vault(tmp_path / "quiet")
    _quiet_vault(quiet)
    s = Settings(vault=quiet, conscious_cap=4)
    t0 = require_instant(NOW)
    assert run_tick(s, t0, no_ai=True, dry_run=False).exit_code == 0
    full = tmp_path / "full"
    shutil.copytree(quiet, full, symlinks=True)
    for step, edits, takes_up in EDITS:
        for vault in (quiet, full):
            for edit in edits:
                _edit(vault, edit, iso(t0 + step - timedelta(hours=1)))
        a, b = _tick_both(s, quiet, full, t0 + step)
        assert a.keeper.quiet == takes_up and not b.keeper.quiet, (step, a.keeper)
        if takes_up:
            assert a.keeper.parsed == len({e[1] for e in edits if e[0] != "delete"}), (step, a.keeper)
        assert _index_dump(quiet) == _index_dump(full), step
    assert _index_dump(quiet) == _rebuilt_index(quiet, tmp_path / "rebuilt")
    # The full scan after those quiet ticks takes the rows of the files they parsed from the view.
    (quiet / ".brain" / "tick-view").unlink()
    again = run_tick(s, t0 + EDITS[-1][0], no_ai=True, dry_run=False)
    assert again.exit_code == 0 and again.keeper.parsed == 0, again.keeper
    assert [w for w in again.result.written if not w.startswith("brain-feed/")] == [], again.as_dict()


_PATHS = st.sampled_from([f"clusters/2026-11-0{d}/arc-{n}.md" for d in range(1, 4) for n in range(6)])
_STATS = st.tuples(st.integers(0, 3), st.integers(0, 3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=st.dictionaries(_PATHS, _STATS), delta=st.dictionaries(_PATHS, st.none() | _STATS),
       shuffle=st.randoms(use_true_random=False), edit=st.integers(-1, 20))
def test_the_saved_listing_in_columns_answers_the_child_as_the_listing_itself_does(
        base: dict[str, tuple[int, int]], delta: dict[str, tuple[int, int] | None], shuffle: Any, edit: int) -> None:
    """The listing child compares what it walked with the saved listing in columns (its base's
    paths, sizes and mtimes, and the overlay quiet ticks wrote): the answer is the one a comparison
    with the listing as a dictionary gives, the same files in the same order, in another order
    (each entry's place in that dictionary), or any difference (a size, an mtime, a file more or
    fewer), for any overlay: files changed, added, gone."""
    from array import array

    from brain.io.vault import SavedListing, _news

    saved = SavedListing(list(base), array("q", [v[0] for v in base.values()]),
                         array("q", [v[1] for v in base.values()]), delta)
    listing = saved.as_dict()
    assert list(zip(*saved.folded(), strict=True)) == [(rel, *entry) for rel, entry in listing.items()]
    entries = list(listing.items())
    if edit % 3 == 0:
        shuffle.shuffle(entries)
    if 0 <= edit < len(entries) and edit % 2:  # an edit that keeps the size
        rel, (size, mtime) = entries[edit]
        entries[edit] = (rel, (size, mtime + 1))
    if edit == 20 and entries:
        entries.pop()
    found = [(rel, size, mtime) for rel, (size, mtime) in entries]
    assert marshal.loads(_news(found, saved)) == marshal.loads(_news(found, listing))


def test_a_listing_with_an_mtime_past_2262_is_saved_and_read_back(tmp_path: Path) -> None:
    """An mtime no 64-bit integer holds (a file touched to the year 3000) is kept as it is."""
    import brain.pipeline.tick_state as state_module

    vault = tmp_path / "v"
    (vault / ".brain").mkdir(parents=True)
    listing = {"clusters/a.md": (10, 32_503_680_000 * 10**9), "clusters/b.md": (20, -5)}
    state_module.save_listing(vault, "t1", listing, {}, same=False)
    assert state_module.load_listing(vault, "t1") == listing
