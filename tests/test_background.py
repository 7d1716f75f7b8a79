"""A cold tick's work on a second core (brain.io.background): half the parsing and the search
index are done by forked children, and what they hand back is what this process would have
computed itself. Each check runs in a fresh interpreter: a process with other threads running
(a test session's) never forks, by design."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.vaults import init_vault, write_arc

NOW = "2026-11-21T12:00:00Z"


def _fresh(code: str, *args: str) -> tuple[dict[str, Any], str]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _vault(root: Path, arcs: int = 40) -> Path:
    vault = init_vault(root)
    for i in range(arcs):
        body = (f"Work on part {i}.\n\n<!-- @lesson -->\nLesson {i}: measure before tuning.\n<!-- @/lesson -->\n"
                f"<!-- @edge type=related target=arc-{(i + 1) % arcs:03d} --> [[arc-{(i + 1) % arcs:03d}]]\n")
        hot = i % 8 == 0  # promoted: moved to frontal-lobe/conscious and rewritten
        write_arc(vault, f"clusters/2026-11-{1 + i % 20:02d}", f"arc-{i:03d}", heat=0, tool_calls=400 if hot else 10 + i,
                  joy=3 if hot else 0, sessions=[f"arc-{i:03d}-s{k}" for k in range(4 if hot else 1)],
                  last_active="2026-11-21T10:00:00Z" if hot else f"2026-11-{1 + i % 20:02d}T{i % 24:02d}:00:00Z",
                  body=body,
                  extra={"project": f"proj{i % 3}", "files": [f"src/mod_{i}.py", "README.md"]})
    (vault / "clusters/2026-11-02/broken.md").write_text("---\ntitle: [unclosed\n---\nbody\n", encoding="utf-8")
    (vault / "left/projects/notes.md").write_text("# Notes\n\nAn operator's note, no frontmatter.\n", encoding="utf-8")
    return vault


FORKS = """
import brain.io.background as B
forks = []
_start = B.Forked.start.__func__
def start(cls, function):
    child = _start(cls, function)
    forks.append(child is not None)
    return child
B.Forked.start = classmethod(start)
"""

SCAN = FORKS + """
import json, sys
from pathlib import Path
import brain.io.vault as V
vault = Path(sys.argv[1])
def snap():
    s = V.scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=2_000_000, write_cache=False, keep_bytes=True,
               fork=True)
    return list(s.notes.items()), dict(s.raw), s.problems, s.delta, s.stats.parsed
if len(sys.argv) > 2:
    V._note_row = lambda note: 1 / 0  # the child cannot send its rows
V.PARALLEL_PARSE_FILES = V.KEEP_BYTES_FILES = 10**9
serial = snap()
V.PARALLEL_PARSE_FILES = V.KEEP_BYTES_FILES = 4  # as a scan of thousands of files: parsed in two, no bytes kept
forked = snap()
same = serial[0] == forked[0] and serial[2:] == forked[2:]
print(json.dumps({"same": same, "forks": forks, "notes": len(serial[0]), "raw": [len(serial[1]), len(forked[1])],
                  "problems": len(serial[2])}))
"""


def test_a_forked_scan_gives_the_notes_of_a_serial_one(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    out, _ = _fresh(SCAN, str(vault))
    assert out["forks"] == [True]  # the second scan forked (the first was under the threshold)
    assert out["same"], out  # same notes, in the same order, same problems and delta
    assert out["notes"] == 42 and out["raw"] == [42, 0] and out["problems"] >= 1


def test_a_parse_child_that_fails_leaves_its_half_to_this_process(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    out, stderr = _fresh(SCAN, str(vault), "fail")
    assert out["forks"] == [True]
    assert out["same"], out
    assert "background work failed: ZeroDivisionError" in stderr


TICK = FORKS + """
import json, sys
from pathlib import Path
import brain.pipeline.tick as T, brain.io.vault as V
from brain.settings import Settings
from brain.core.timeutil import require_instant
vault, mode = Path(sys.argv[1]), sys.argv[2]
if mode == "serial":  # and every byte the scan read kept for the plan and the writer
    T.INDEX_ALONGSIDE_NOTES = V.PARALLEL_PARSE_FILES = V.KEEP_BYTES_FILES = 10**9
else:  # as a cold tick on thousands of arcs: children, and no bytes kept
    T.INDEX_ALONGSIDE_NOTES = V.PARALLEL_PARSE_FILES = V.KEEP_BYTES_FILES = 4
if mode == "race":  # an operator saves an arc while the writer commits: the child indexed the keeper's bytes
    _alongside = T._index_alongside
    def alongside(tick, snapshot, kplan):
        _alongside(tick, snapshot, kplan)
        path = vault / "clusters/2026-11-05/arc-004.md"
        path.write_text(path.read_text() + "\\nOperator wrote zanzibar here.\\n")
    T._index_alongside = alongside
settings = Settings(vault=vault, fork_children=mode != "off")
report = T.run_tick(settings, require_instant(sys.argv[3]), no_ai=True, dry_run=False)
print(json.dumps({"forks": forks, "exit": report.exit_code, "conflicts": sorted(report.result.conflicts)}))
"""


def _index(vault: Path) -> dict[str, Any]:
    conn = sqlite3.connect(vault / ".brain/search.sqlite")
    try:
        docs = conn.execute("SELECT path, line, kind, project, cluster_id, heat, last_active, status, successors,"
                            " title, work FROM docs ORDER BY path, line, kind").fetchall()
        fts = conn.execute("SELECT d.path, d.line, f.title, f.body, f.kind, f.project, f.work FROM fts f"
                           " JOIN docs d ON d.id = f.rowid ORDER BY d.path, d.line, f.kind").fetchall()
        files = dict(conn.execute("SELECT path, sha1 FROM files").fetchall())
    finally:
        conn.close()
    return {"docs": docs, "fts": fts, "files": files}


def _files(vault: Path) -> dict[str, str]:
    return {p.relative_to(vault).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in sorted(vault.rglob("*"))
            if p.is_file() and ".brain" not in p.relative_to(vault).parts and p.name != "health.jsonl"}  # timed


def test_a_cold_tick_with_children_leaves_what_a_serial_one_does(tmp_path: Path) -> None:
    serial, forked = _vault(tmp_path / "serial"), _vault(tmp_path / "forked")
    one, _ = _fresh(TICK, str(serial), "serial", NOW)
    two, _ = _fresh(TICK, str(forked), "forked", NOW)
    assert one == {"forks": [], "exit": 0, "conflicts": []}
    assert two == {"forks": [True, True], "exit": 0, "conflicts": []}  # the scan's child, the index's
    assert _files(forked) == _files(serial)
    assert _index(forked) == _index(serial)
    assert _index(forked)["files"] == {path: sha for path, sha in _files(forked).items()
                                       if path in _index(forked)["files"]}
    indexed = _index(forked)["files"]
    assert sum("/arc-" in path for path in indexed) == 40 and "left/projects/notes.md" in indexed
    assert not any(path.endswith("broken.md") for path in indexed)
    assert sum(path.startswith("frontal-lobe/conscious/arc-") for path in indexed) >= 3  # moved and rewritten


def test_fork_children_false_keeps_a_cold_tick_in_one_process(tmp_path: Path) -> None:
    serial, off = _vault(tmp_path / "serial"), _vault(tmp_path / "off")
    _fresh(TICK, str(serial), "serial", NOW)
    out, _ = _fresh(TICK, str(off), "off", NOW)  # thresholds as low as the forked run's
    assert out == {"forks": [], "exit": 0, "conflicts": []}
    assert _files(off) == _files(serial) and _index(off) == _index(serial)


def test_the_index_built_alongside_follows_an_edit_that_won_the_race(tmp_path: Path) -> None:
    """The child indexed the bytes the keeper meant to write; the operator's save won, so those were
    never written. The index must not hold bytes that are on no disk: the tick's sync re-reads the
    arc (the scan kept no bytes of it) and indexes the operator's version; the next tick keeps it."""
    vault = _vault(tmp_path / "v")
    arc = vault / "clusters/2026-11-05/arc-004.md"
    out, _ = _fresh(TICK, str(vault), "race", NOW)
    assert out["forks"] == [True, True]
    assert out["conflicts"] == ["clusters/2026-11-05/arc-004.md"]  # the operator's bytes stay
    assert _index(vault)["files"]["clusters/2026-11-05/arc-004.md"] == hashlib.sha1(arc.read_bytes()).hexdigest()
    out, _ = _fresh(TICK, str(vault), "serial", "2026-11-21T14:00:00Z")
    index = _index(vault)
    (now,) = [path for path in index["files"] if path.endswith("/arc-004.md")]  # the keeper may move it
    assert index["files"][now] == hashlib.sha1((vault / now).read_bytes()).hexdigest()
    assert b"zanzibar" in (vault / now).read_bytes()
    assert any("zanzibar" in row[3] for row in index["fts"] if row[0] == now)


MADE_AHEAD = TICK.replace("settings = Settings(", """
import brain.io.precreate as P
P.MIN_FILES = 4  # as a cold tick that rewrites thousands of arcs: their temp files made ahead
if mode in ("waves", "remote"):  # as a cold tick of thousands of arcs: the writer stages them in waves
    import brain.io.writer as W
    W.WAVE_MIN, W.WAVES = 8, 1000
    if mode == "remote":  # on a network filesystem: no old file is written over, so no waves
        W.LOCAL_FILESYSTEMS = frozenset()
if mode == "fail":
    P.atomic_write = lambda *args: 1 / 0  # the child fails before it makes anything
if mode == "late":  # the child makes every file, then fails: this process is told of none of them
    _forked = P.Forked
    class LateFail:
        @staticmethod
        def start(function):
            return _forked.start(lambda: (function(), 1 / 0))
    P.Forked = LateFail
reused, _open_made = [], P.open_made
def open_made(tmp):
    fd = _open_made(tmp)
    reused.append(fd is not None)
    return fd
P.open_made = open_made
mode = "forked"
settings = Settings(""").replace('"conflicts": sorted(report.result.conflicts)}', '"conflicts": sorted(report.result.conflicts), "reused": reused}')


@pytest.mark.parametrize("mode", ["ahead", "waves", "remote"])
def test_a_cold_tick_whose_temp_files_are_made_ahead_leaves_what_a_serial_one_does(tmp_path: Path,
                                                                                    mode: str) -> None:
    """Once the keeper decided, a child makes the empty temp files the writer stages the rewritten arcs
    in; the writer writes into them. Files and index as a serial tick leaves them, and no temp file,
    nor the list of them, is left. In waves, the child makes the first wave's only (the later ones
    write over the old files the one before swapped out); where no old file may be written over
    (not a local filesystem), it makes every one."""
    serial, ahead = _vault(tmp_path / "serial"), _vault(tmp_path / "ahead")
    _fresh(TICK, str(serial), "serial", NOW)
    out, _ = _fresh(MADE_AHEAD, str(ahead), mode, NOW)
    assert out["forks"] == [True, True, True]  # the scan's child, the temp files', the index's
    assert out["exit"] == 0 and out["conflicts"] == []
    if mode == "waves":
        assert out["reused"] == [True] * 8  # the first wave, in files made ahead
    else:
        assert len(out["reused"]) >= 40 and all(out["reused"])  # every rewritten arc, in a file made ahead
    assert _files(ahead) == _files(serial) and _index(ahead) == _index(serial)
    assert not [p for p in ahead.rglob("*") if p.name.endswith(".brain-tmp")]
    assert not (ahead / ".brain/precreated").exists()


@pytest.mark.parametrize("when", ["fail", "late"])
def test_a_temp_file_child_that_fails_leaves_the_staging_to_the_writer(tmp_path: Path, when: str) -> None:
    """Before it made anything, or after it made every file: the writer makes each temp file
    itself (over one left there), and removes what the plan does not use."""
    serial, failed = _vault(tmp_path / "serial"), _vault(tmp_path / "failed")
    _fresh(TICK, str(serial), "serial", NOW)
    out, stderr = _fresh(MADE_AHEAD, str(failed), when, NOW)
    assert out["forks"] == [True, True, True] and out["exit"] == 0
    assert out["reused"] == []  # nothing was made ahead: the writer made every temp file itself
    assert "background work failed: ZeroDivisionError" in stderr
    assert _files(failed) == _files(serial)
    assert not [p for p in failed.rglob("*") if p.name.endswith(".brain-tmp")]


CRASHED = """
import json, os, sys
from pathlib import Path
import brain.io.precreate as P
from brain.io import writer
vault = Path(sys.argv[1])
targets = [f"frontal-lobe/conscious/arc-{i:03d}.md" for i in range(8)]
P.MIN_FILES = 4
started = P.start(vault, targets + ["../outside/arc.md"])
made = sorted(P.take().made())  # the tick is killed here: nothing staged, nothing cleared
listed = (vault / P.LIST_FILE).read_text().splitlines()
Path(made[0]).write_bytes(b"staged bytes the journal's recovery deals with")
(vault / P.LIST_FILE).write_text("\\n".join(listed + ["left/projects/notes.md"]))  # never a temp name: kept
writer.recover(vault)
left = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.brain-tmp"))
print(json.dumps({"started": started, "made": len(made), "left": left, "notes": (vault / "left/projects/notes.md").is_file(),
                  "list": (vault / P.LIST_FILE).exists(), "outside": (vault.parent / "outside").exists()}))
"""


def test_recovery_clears_the_temp_files_a_killed_tick_made_ahead(tmp_path: Path) -> None:
    """Killed after its child made the temp files, before it staged into them: the next run's
    recovery removes the empty ones it listed, and nothing it did not make. A target out of the
    vault was never made."""
    vault = _vault(tmp_path / "v")
    out, _ = _fresh(CRASHED, str(vault))
    assert out["started"] and out["made"] == 8
    assert out["left"] == ["frontal-lobe/conscious/.arc-000.md.brain-tmp"]  # it holds bytes: not an empty one
    assert out["notes"] and not out["list"] and not out["outside"]


LATER = FORKS + """
import json, os, sys, time
from pathlib import Path
import brain.pipeline.tick as T, brain.io.vault as V
from brain.settings import Settings
from brain.core.timeutil import require_instant
vault, mode = Path(sys.argv[1]), sys.argv[2]
T.LIST_BESIDE_FILES = 10**9 if mode == "serial" else 4  # as a vault of thousands of files: listed by a child
if mode == "fail":
    parent, listed = os.getpid(), V.listing_of
    def listing_of(vault, feed_dir):
        if os.getpid() != parent:
            raise OSError("the child cannot list")
        return listed(vault, feed_dir)
    V.listing_of = listing_of
if mode == "slow":  # the child lists long after the tick decided on the view: it plans meanwhile
    parent, listed = os.getpid(), V.listing_of
    def listing_of(vault, feed_dir):
        if os.getpid() != parent:
            time.sleep(0.5)
        return listed(vault, feed_dir)
    V.listing_of = listing_of
passes, keeper_pass = [], T._keeper_pass
def counted_pass(*args, planned=None, **kwargs):
    passes.append(planned is not None)
    return keeper_pass(*args, planned=planned, **kwargs)
T._keeper_pass = counted_pass
report = T.run_tick(Settings(vault=vault), require_instant(sys.argv[3]), no_ai=True, dry_run=False)
print(json.dumps({"forks": forks, "ahead": passes, "tick": [report.exit_code, bool(report.keeper.quiet), report.stats,
                                                             len(report.result.written)]}))
"""

LATER_TICKS = ("2026-11-21T14:00:00Z", "2026-11-21T20:00:00Z", "edit", "2026-11-22T02:00:00Z",
               "2026-11-29T02:00:00Z")


def test_ticks_whose_listing_comes_from_a_child_leave_what_serial_ones_do(tmp_path: Path) -> None:
    """Past the last tick's window, a child lists a large vault while the tick loads the heat
    memo, the feed files and the view the last tick left: every later tick (quiet, with an
    operator's edit, a week on) leaves the files and reports a serial one does; a child that
    fails leaves the listing to the tick. A quiet tick whose child is still listing once it
    decided plans meanwhile, and the listing that shows the view held lets it apply that plan."""
    runs, ahead = {}, {}
    for mode in ("serial", "forked", "fail", "slow"):
        vault = _vault(tmp_path / mode)
        _fresh(TICK, str(vault), "serial", NOW)
        forks, ticks = [], []
        for now in LATER_TICKS:
            if now == "edit":  # an operator's line in one arc: the next tick takes it up beside the view
                path = next(p for p in vault.rglob("arc-003.md") if ".brain" not in p.parts)
                path.write_text(path.read_text() + "\nOperator: checked the parser again.\n")
                continue
            out, stderr = _fresh(LATER, str(vault), mode, now)
            ahead.setdefault(mode, []).append(out["ahead"])
            forks.extend(out["forks"])
            ticks.append(out["tick"])
            assert ("background work failed: OSError: the child cannot list" in stderr) == (mode == "fail")
        runs[mode] = forks, ticks, _files(vault)
    assert runs["serial"][0] == [] and runs["forked"][0] == runs["fail"][0] == runs["slow"][0] == [True] * 4
    assert [tick[1] for tick in runs["serial"][1]][:3] == [True, True, True]  # quiet ticks on the view, the edit too
    assert runs["forked"][1:] == runs["serial"][1:] == runs["fail"][1:] == runs["slow"][1:]
    # Planned ahead: the two quiet ticks on the unchanged view; not the one after the edit (the
    # listing shows it: decided and planned again), never without a child.
    assert ahead["slow"][:3] == [[True], [True], [False]]
    assert ahead["serial"] == [[False]] * 4


CANCEL = """
import json, os, sys, time
from pathlib import Path
import brain.pipeline.tick as T, brain.search.index as I
from brain.settings import Settings
from brain.core.timeutil import require_instant
vault = Path(sys.argv[1])
T.INDEX_ALONGSIDE_NOTES = 4
def slow_rebuild(vault, notes, **kwargs):  # half a build on disk, then a long wait
    I.rebuild_temp(vault, os.getpid()).write_bytes(b"half an index")
    time.sleep(60)
I.rebuild = slow_rebuild
def fail(*args, **kwargs):
    raise RuntimeError("the run fails after the writes")
T.cached_candidates = fail
started = time.monotonic()
try:
    T.run_tick(Settings(vault=vault), require_instant(sys.argv[2]), no_ai=True, dry_run=False)
except RuntimeError:
    pass
try:
    os.waitpid(-1, os.WNOHANG)
    children = True
except ChildProcessError:
    children = False
print(json.dumps({"seconds": time.monotonic() - started, "children": children,
                  "left": sorted(p.name for p in (vault / ".brain").glob(".search.sqlite.*"))}))
"""


def test_a_run_that_fails_ends_its_index_child_and_its_half_built_file(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    out, _ = _fresh(CANCEL, str(vault), NOW)
    assert out["children"] is False  # killed and reaped, not left running or as a zombie
    assert out["left"] == []
    assert out["seconds"] < 30  # not waited for


FORKED = """
import json, threading
from brain.io.background import Forked
child = Forked.start(lambda: b"made in the child")
made = child.output(bytes)
failing = Forked.start(lambda: 1 / 0)
failed = failing.wait(), failing.output(bytes)
empty = Forked.start(lambda: None)
nothing = empty.output(bytes)
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
beside = Forked.start(lambda: b"x")
stop.set()
thread.join()
print(json.dumps({"made": made.decode(), "failed": list(failed), "nothing": nothing, "beside": beside is None}))
"""


REFUSED = FORKS + """
import errno, json, os, sys
from pathlib import Path
import brain.io.vault as V
def refuse():
    raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
os.fork = refuse  # a pod at its pid limit
V.PARALLEL_PARSE_FILES = V.KEEP_BYTES_FILES = 4
vault = Path(sys.argv[1])
s = V.scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=2_000_000, write_cache=False, keep_bytes=True,
           fork=True)
print(json.dumps({"forks": forks, "notes": len(s.notes), "parsed": s.stats.parsed}))
"""


def test_a_system_that_refuses_a_process_gets_the_work_done_here(tmp_path: Path) -> None:
    out, _ = _fresh(REFUSED, str(_vault(tmp_path / "v")))
    assert out == {"forks": [False], "notes": 42, "parsed": 42}


def test_a_forked_function_hands_back_its_bytes_or_its_failure() -> None:
    out, stderr = _fresh(FORKED)
    assert out == {"made": "made in the child", "failed": [False, None], "nothing": None, "beside": True}
    assert stderr.count("background work failed") == 1


DONE = """
import json, os, signal
from brain.io.background import Forked, reap_children
said = Forked.start(lambda: b"done")  # says it is done, then leaves: reaped later, not waited for
made = said.output(bytes)
killed = Forked.start(lambda: os.kill(os.getpid(), signal.SIGKILL))  # ends without a word
lost = killed.wait(), killed.output(bytes)
reap_children()
try:
    os.waitpid(-1, os.WNOHANG)
    zombies = True
except ChildProcessError:
    zombies = False
print(json.dumps({"made": made.decode(), "lost": list(lost), "zombies": zombies}))
"""


def test_a_child_that_said_it_was_done_is_reaped_and_one_killed_is_lost_not_waited_on() -> None:
    """A child writes a byte on a pipe once its bytes are in, and the tick reads them without
    waiting for the child to leave; a child killed before it said so is a failure (the end of
    the pipe, then its exit status). Every child is reaped by the end: no zombie left."""
    out, _ = _fresh(DONE)
    assert out == {"made": "done", "lost": [False, None], "zombies": False}


TICK_REAPS = FORKS + """
import json, os, sys
from pathlib import Path
import brain.pipeline.tick as T
from brain.settings import Settings
from brain.core.timeutil import require_instant
vault = Path(sys.argv[1])
T.LIST_BESIDE_FILES = 4  # as a vault of thousands of files: listed by a child
report = T.run_tick(Settings(vault=vault), require_instant(sys.argv[2]), no_ai=True, dry_run=False)
try:
    os.waitpid(-1, os.WNOHANG)
    zombies = True
except ChildProcessError:
    zombies = False
print(json.dumps({"forks": forks, "quiet": bool(report.keeper.quiet), "zombies": zombies}))
"""


def test_a_tick_leaves_no_child_behind(tmp_path: Path) -> None:
    vault = _vault(tmp_path / "v")
    _fresh(TICK, str(vault), "serial", NOW)
    out, _ = _fresh(TICK_REAPS, str(vault), "2026-11-21T14:00:00Z")
    assert out == {"forks": [True], "quiet": True, "zombies": False}


LISTING = """
import json, os, sys
from pathlib import Path
import brain.io.vault as V
vault = Path(sys.argv[1])
feed = vault / "brain-feed"
saved = V.stat_listing(vault, feed)
def listed(given, load):
    child = V.listing_beside(vault, feed, load)
    assert child is not None
    return V.found_listing(child, vault, feed, given)[0]
out = {"same": listed(saved, lambda: dict(saved)) is saved}
reordered = dict(reversed(list(saved.items())))
out["reordered"] = listed(reordered, lambda: dict(reordered)) is reordered
arc = next(p for p in sorted(vault.rglob("arc-003.md")) if ".brain" not in p.parts)
arc.write_text(arc.read_text() + "\\nOperator: one more line.\\n")
fresh = listed(saved, lambda: dict(saved))
rel = arc.relative_to(vault).as_posix()
out["edited"] = fresh is not saved and fresh[rel] != saved[rel] and fresh == V.stat_listing(vault, feed)
out["no copy here"] = listed(None, lambda: V.stat_listing(vault, feed)) == V.stat_listing(vault, feed)
print(json.dumps(out))
"""


def test_a_listing_child_that_finds_the_saved_listing_hands_back_only_that(tmp_path: Path) -> None:
    """The child compares its listing with the one the last tick left: the very same files,
    sizes, mtimes and order give the caller its own copy back (nothing else crosses); an edit or
    another order gives the listing as found; a caller without a copy lists for itself."""
    vault = _vault(tmp_path / "v")
    out, _ = _fresh(LISTING, str(vault))
    assert out == {"same": True, "reordered": False, "edited": True, "no copy here": True}


REORDERED = """
import json, marshal, sys
from pathlib import Path
import brain.io.vault as V
vault = Path(sys.argv[1])
feed = vault / "brain-feed"
found = V.stat_listing(vault, feed)
reordered = dict(reversed(list(found.items())))
child = V.listing_beside(vault, feed, lambda: dict(reordered))
reply = child.output(marshal.loads)
child = V.listing_beside(vault, feed, lambda: dict(reordered))
got = V.found_listing(child, vault, feed, reordered)[0]
edited = dict(reordered)
edited[next(iter(edited))] = (0, 0)
child = V.listing_beside(vault, feed, lambda: dict(edited))
print(json.dumps({"reply": [reply[0], len(reply[1])] if isinstance(reply, tuple) else type(reply).__name__,
                  "entries": len(found), "as found": list(got.items()) == list(found.items()),
                  "values are the copy's": all(got[k] is reordered[k] for k in got),
                  "edited": V.found_listing(child, vault, feed, edited)[0] == found}))
"""


def test_a_listing_child_that_finds_the_saved_files_in_another_order_hands_back_only_their_places(
        tmp_path: Path) -> None:
    """The same files in another order (what follows a tick that moved an arc): the child hands
    back each found entry's place in the saved listing, not the entries, and the caller rebuilds
    the listing as found, in the order found, from its own copy; a changed size still gives the
    listing as found."""
    vault = _vault(tmp_path / "v")
    out, _ = _fresh(REORDERED, str(vault))
    assert out["reply"] == ["the saved listing, reordered", 4 * out["entries"]] and out["entries"] > 10
    assert out["as found"] and out["values are the copy's"] and out["edited"]


AHEAD = FORKS + """
import json, os, sys, time
from pathlib import Path
import brain.pipeline.tick as T, brain.io.vault as V
from brain.settings import Settings
from brain.core.timeutil import require_instant
vault, order, flags = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[4])
T.LIST_BESIDE_FILES = 4  # as a vault of thousands of files: listed by a child
parent, listed = os.getpid(), V.listing_of

def wait_for(flag):
    for _ in range(1000):
        if (flags / flag).exists():
            return
        time.sleep(0.01)
    raise SystemExit("no " + flag)

def listing_of(vault, feed_dir):
    if os.getpid() == parent:
        return listed(vault, feed_dir)
    if order == "edit-first":  # the operator's save lands before the child lists
        wait_for("edited")
    found = listed(vault, feed_dir)
    (flags / "listed").touch()
    return found
V.listing_of = listing_of

decided, edited = T._decide_quiet, []
def decide_quiet(tick, snapshot, memo):
    out = decided(tick, snapshot, memo)
    if not edited:  # decided while the child lists: an operator saves an arc those decisions rewrite
        rel = next(d.note.path for d in out[0].changed())
        if order == "list-first":
            wait_for("listed")
        path = vault / rel
        path.write_text(path.read_text() + "\\nOperator: saved while the tick decided.\\n")
        edited.append(rel)
        (flags / "edited").touch()
    return out
T._decide_quiet = decide_quiet
report = T.run_tick(Settings(vault=vault), require_instant(sys.argv[3]), no_ai=True, dry_run=False)
print(json.dumps({"edited": edited, "exit": report.exit_code, "quiet": bool(report.keeper.quiet),
                  "conflicts": sorted(report.result.conflicts)}))
"""

EDIT_THEN_TICK = """
import json, sys
from pathlib import Path
import brain.pipeline.tick as T
from brain.settings import Settings
from brain.core.timeutil import require_instant
vault = Path(sys.argv[1])
T.LIST_BESIDE_FILES = 10**9
path = vault / sys.argv[3]
path.write_text(path.read_text() + "\\nOperator: saved while the tick decided.\\n")
report = T.run_tick(Settings(vault=vault), require_instant(sys.argv[2]), no_ai=True, dry_run=False)
print(json.dumps({"exit": report.exit_code, "conflicts": sorted(report.result.conflicts)}))
"""

LATER_DAY = "2026-11-22T12:00:00Z"  # the promoted arcs' heat steps down: the quiet tick rewrites them


def test_a_save_before_the_child_lists_discards_the_decisions_made_ahead(tmp_path: Path) -> None:
    """A quiet tick decides while its child lists the vault; an operator saves an arc those
    decisions rewrite before the listing: the listing shows the edit, the decisions made ahead
    are dropped and the tick decides again with the edited file, leaving what a tick that found
    the edit does."""
    ahead, twin = _vault(tmp_path / "ahead"), _vault(tmp_path / "twin")
    for vault in (ahead, twin):
        _fresh(TICK, str(vault), "serial", NOW)
    flags = tmp_path / "flags"
    flags.mkdir()
    out, _ = _fresh(AHEAD, str(ahead), "edit-first", LATER_DAY, str(flags))
    assert out["exit"] == 0 and out["conflicts"] == [] and out["quiet"]
    (rel,) = out["edited"]
    _fresh(EDIT_THEN_TICK, str(twin), LATER_DAY, rel)
    assert _files(ahead) == _files(twin)
    assert any("Operator: saved while the tick decided." in p.read_text() for p in ahead.rglob(Path(rel).name)
               if ".brain" not in p.parts)


def test_a_save_after_the_child_listed_is_a_conflict_and_kept(tmp_path: Path) -> None:
    """The save lands after the child listed: the decisions made ahead stand, and the keeper's read
    of the arc finds it changed since: a conflict, the operator's bytes kept, the next tick takes it up."""
    vault = _vault(tmp_path / "v")
    _fresh(TICK, str(vault), "serial", NOW)
    # Notes saved long before the view that lists them stand for their files by size and mtime
    # (a racily clean one is re-read, and that read would find the save): an hour old, listed again.
    old = time.time() - 3600
    for path in vault.rglob("*.md"):
        os.utime(path, (old, old))
    _fresh(TICK, str(vault), "serial", NOW)
    flags = tmp_path / "flags"
    flags.mkdir()
    out, _ = _fresh(AHEAD, str(vault), "list-first", LATER_DAY, str(flags))
    (rel,) = out["edited"]
    assert out["quiet"] and out["conflicts"] == [rel]
    assert "Operator: saved while the tick decided." in (vault / rel).read_text()
    _fresh(TICK, str(vault), "serial", "2026-11-22T14:00:00Z")
    (now,) = [p for p in vault.rglob(Path(rel).name) if ".brain" not in p.parts]
    assert "Operator: saved while the tick decided." in now.read_text()


SAID = """
import json, os, signal, time
from brain.io.background import Forked
gate_read, gate_write = os.pipe()
def work():
    os.read(gate_read, 1)  # until this process lets it go
    return b"listed"
child = Forked.start(work)
before = child.said_done()
os.write(gate_write, b"x")
for _ in range(500):
    if child.said_done():
        break
    time.sleep(0.01)
after = child.said_done()
made = child.output(bytes)
killed = Forked.start(lambda: (time.sleep(0.2), os.kill(os.getpid(), signal.SIGKILL)))
for _ in range(500):
    if killed.said_done():
        break
    time.sleep(0.01)
print(json.dumps({"before": before, "after": after, "made": made.decode(), "killed": killed.said_done(),
                  "lost": killed.wait()}))
"""


def test_a_child_is_asked_whether_it_said_it_was_done_without_waiting_for_it() -> None:
    """While a child works, ``said_done`` is False at once; once it has said so, or was killed
    (the end of its pipe), True; its bytes are still handed back after."""
    out, _ = _fresh(SAID)
    assert out == {"before": False, "after": True, "made": "listed", "killed": True, "lost": False}
