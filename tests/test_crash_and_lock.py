"""Crash safety (SIGKILL at random instants) and the vault lock (SPEC §9)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from brain.core.model import parse_note
from brain.io.writer import vault_lock
from tests.support.vaults import NOW, init_vault, write_arc

BRAIN = [sys.executable, "-m", "brain"]


def _tick(vault: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*BRAIN, "tick", "--vault", str(vault), "--no-ai", "--json", "--now", NOW, *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _busy_vault(root: Path, n: int = 150) -> Path:
    vault = init_vault(root)
    for i in range(n):
        hot = i % 3 == 0
        write_arc(vault, f"clusters/2026-11-{10 + i % 10:02d}", f"2026-11-{10 + i % 10:02d}-arc-{i:03d}-0123456789ab",
                  sessions=[f"s{i}-{k}" for k in range(3 if hot else 1)], tool_calls=1500 if hot else 5,
                  created="2026-09-01T00:00:00Z" if i % 5 == 1 else "2026-11-10T00:00:00Z",
                  last_active="2026-11-21T11:00:00Z" if hot else ("2026-09-01T00:00:00Z" if i % 5 == 1 else
                                                                   "2026-11-15T00:00:00Z"),
                  status="active" if hot else "complete",
                  body="<!-- @signal severity=resolved source=x -->\nold (CLEARED: fixed)\n<!-- @/signal -->\n"
                  if i % 7 == 0 else "text\n")
    return vault


def _arc_files(vault: Path) -> dict[str, tuple[str, bytes]]:
    """cluster_id -> (path, bytes) for every arc; fails on a duplicate or a torn file."""
    out: dict[str, tuple[str, bytes]] = {}
    for path in vault.rglob("*.md"):
        rel = path.relative_to(vault).as_posix()
        if rel.startswith((".brain", "brain-feed")):
            continue
        data = path.read_bytes()
        note = parse_note(rel, data, size=len(data), mtime_ns=0, sha1=hashlib.sha1(data).hexdigest())
        assert note.parsed, f"{rel} is not whole after the kill: {note.problems}"
        if note.arc is None:
            continue
        assert note.arc.cluster_id not in out, f"{note.arc.cluster_id} is in two files"
        out[note.arc.cluster_id] = (rel, data)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("arcs, attempts", [(150, 20), (700, 10)])  # 700: the writer stages and commits in waves
def test_sigkill_at_random_points_never_tears_a_file_and_the_next_tick_recovers(tmp_path: Path, arcs: int,
                                                                                  attempts: int) -> None:
    pristine = _busy_vault(tmp_path / "pristine", arcs)
    originals = {cid: data for cid, (_, data) in _arc_files(pristine).items()}
    reference = tmp_path / "reference"
    shutil.copytree(pristine, reference)
    started = time.perf_counter()
    assert _tick(reference).wait(timeout=120) == 0
    duration = time.perf_counter() - started
    expected = _arc_files(reference)
    rng = random.Random(20261121)
    kills_mid_write = 0
    for attempt in range(attempts):
        vault = tmp_path / f"v{attempt}"
        shutil.copytree(pristine, vault)
        proc = _tick(vault)
        time.sleep(rng.uniform(0.05, duration))  # the instant of the kill, not a wait for time to pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        state = _arc_files(vault)
        assert set(state) == set(originals)
        for cid, (_, data) in state.items():
            assert data in (originals[cid], expected[cid][1]), cid
        if any(data != originals[cid] for cid, (_, data) in state.items()):
            kills_mid_write += 1
        # the next tick rolls back the interrupted one and redoes the work
        after = _tick(vault)
        out, err = after.communicate(timeout=120)
        assert after.returncode == 0, err
        report = json.loads(out)
        assert report["phases"]["verify"]["ok"]
        final = _arc_files(vault)
        assert {cid: v for cid, v in final.items()} == expected, f"attempt {attempt} did not converge"
        # nor a temp file: staged, made ahead (brain.io.precreate), or an old file an exchange swapped
        # out that the killed run had not unlinked yet (writer.SWEPT); nor the list of those made ahead
        assert not [p for p in vault.rglob("*") if p.name.endswith(".brain-tmp")], attempt
        assert not (vault / ".brain" / "precreated").exists()
    assert kills_mid_write >= 1  # at least some kills landed in the middle of writing


def test_a_second_tick_exits_3_naming_the_holder(vault: Path) -> None:
    with vault_lock(vault, "test-holder"):
        proc = _tick(vault)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3
    assert f"test-holder pid {os.getpid()}" in err and "Error: vault is locked" in err and out == ""
    # released: the next tick runs
    assert _tick(vault).wait(timeout=60) == 0


def test_a_killed_holder_leaves_no_stale_lock(vault: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from brain.io.writer import vault_lock\n"
        f"with vault_lock(Path({str(vault)!r}), 'sleeper'):\n print('locked', flush=True); time.sleep(60)")],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    assert _tick(vault).wait(timeout=60) == 3
    holder.kill()
    holder.wait()
    assert _tick(vault).wait(timeout=60) == 0


def test_a_link_put_at_the_lock_file_is_never_written_through(vault: Path, tmp_path: Path) -> None:
    """The lock is truncated and rewritten by its holder: a link put at ``.brain/lock`` emptied the
    file it pointed to, out of the vault. It is replaced by the brain's own lock file."""
    outside = tmp_path / "outside.txt"
    outside.write_text("not the vault's\n", encoding="utf-8")
    lock = vault / ".brain" / "lock"
    lock.parent.mkdir(exist_ok=True)
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside)
    assert _tick(vault).wait(timeout=60) == 0
    assert outside.read_text(encoding="utf-8") == "not the vault's\n"
    assert lock.is_file() and not lock.is_symlink()


def test_concurrent_ticks_never_both_write(tmp_path: Path) -> None:
    vault = _busy_vault(tmp_path / "v", n=60)
    codes = []
    for _ in range(3):
        procs = [_tick(vault), _tick(vault)]
        codes.extend(p.wait(timeout=120) for p in procs)
    assert set(codes) <= {0, 3} and 0 in codes
    _arc_files(vault)
    check = subprocess.run([*BRAIN, "verify", "--vault", str(vault), "--now", NOW], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr


EDITOR = r"""
import os, random, sys, time
vault, log_path, stop_path, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rng = random.Random(seed)
paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(vault) if "/." not in d for f in fs if f.endswith(".md"))
# arcs the operator deletes or renames are never appended to, so every append must survive
doomed = paths[::40]
paths = [p for p in paths if p not in set(doomed)]
log = open(log_path, "a", buffering=1)
n = 0
while not os.path.exists(stop_path):
    n += 1
    try:
        if seed == 0:
            if not doomed:
                time.sleep(0.01)
                continue
            path = doomed.pop(rng.randrange(len(doomed)))
            if rng.random() < 0.5:
                os.unlink(path)
                log.write(f"deleted {path}\n")
            else:
                os.rename(path, path + ".renamed.md")
                log.write(f"renamed {path}\n")
            time.sleep(rng.random() / 50)
            continue
        path = rng.choice(paths)
        token = f"operator-append-{seed}-{n}"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)  # no O_CREAT: a moved file is not re-created
        try:
            os.write(fd, f"\n{token}\n".encode())
        finally:
            os.close(fd)
        log.write(f"appended {token}\n")
    except FileNotFoundError:
        continue
    time.sleep(rng.random() / 2000)
"""


@pytest.mark.slow
def test_operator_edits_racing_a_tick_are_never_lost(tmp_path: Path) -> None:
    """Issue 12 item 1: editors append to, delete and rename arcs of a 2 000-arc vault while ticks run.

    Every append ends up in the vault or, when it raced the commit of that file, in the journal
    (and is reported); a deleted or renamed arc is a reported conflict, never a crash and never
    brought back.
    """
    vault = _busy_vault(tmp_path / "v", n=2000)
    log, stop = tmp_path / "edits.log", tmp_path / "stop"
    editors = [subprocess.Popen([sys.executable, "-c", EDITOR, str(vault), str(log), str(stop), str(seed)])
               for seed in (0, 1, 2)]  # 0 deletes and renames, 1 and 2 append
    reports = []
    try:
        time.sleep(0.2)
        for now in (NOW, "2026-11-21T14:00:00Z", "2026-11-23T12:00:00Z"):
            tick = subprocess.run([*BRAIN, "tick", "--vault", str(vault), "--no-ai", "--json", "--now", now],
                                  capture_output=True, text=True, check=False)
            assert tick.returncode in (0, 1), tick.stderr  # 1: verify may see an edit made after the write
            assert "unexpected" not in tick.stderr and "Traceback" not in tick.stderr, tick.stderr
            reports.append(json.loads(tick.stdout))
    finally:
        stop.touch()
        for editor in editors:
            editor.wait(timeout=30)
    lines = log.read_text().splitlines()
    appended = {line.split()[1] for line in lines if line.startswith("appended ")}
    deleted = {Path(line.split()[1]).stem for line in lines if line.startswith("deleted ")}
    renamed = {Path(line.split()[1]).stem for line in lines if line.startswith("renamed ")}
    gone = deleted | renamed
    assert len(appended) > 200 and gone, "the editors did not race the ticks"
    found: set[str] = set()
    for path in vault.rglob("*.md"):
        if ".brain/journal" in path.as_posix() and "/preserved/" not in path.as_posix():
            continue
        found.update(line for line in path.read_text(errors="replace").splitlines() if "operator-append-" in line)
    preserved = {line for path in vault.glob(".brain/journal/*/preserved/**/*.md")
                 for line in path.read_text(errors="replace").splitlines()}
    lost = appended - found - preserved
    assert not lost, f"{len(lost)} of {len(appended)} appends vanished, e.g. {sorted(lost)[:3]}"
    if preserved & appended:  # kept in the journal: the tick said so
        assert any("is kept in .brain/journal/" in p["message"] for r in reports for p in r["problems"])
    # a deleted arc never comes back; a renamed one is still there once (the keeper may file it again
    # under its canonical name, <cluster_id>.md)
    arcs = _arc_files(vault)  # no torn file, no arc in two files
    assert not deleted & set(arcs), sorted(deleted & set(arcs))[:3]
    assert renamed <= set(arcs), sorted(renamed - set(arcs))[:3]
    conflicts = [p for r in reports for p in r["problems"]
                 if "during the tick" in p["message"] or "changed since the scan" in p["message"]]
    assert conflicts, "no edit raced a commit: the test proved nothing"


def test_recovery_keeps_a_staged_file_that_is_neither_image(tmp_path: Path) -> None:
    """A crash in the instant an operator's save was exchanged out leaves their bytes in the
    staged file: recovery keeps them in the journal instead of deleting them."""
    from brain.io import writer
    from brain.pipeline.tick import new_tick_id

    vault = init_vault(tmp_path / "v")
    arc = write_arc(vault, "clusters/2026-11-21", "2026-11-21-x-0123456789ab", sessions=["a"])
    rel = arc.relative_to(vault).as_posix()
    before = arc.read_bytes()
    journal = writer.Journal(vault, new_tick_id(vault, datetime_now()), datetime_now())
    journal.record([{"op": "write", "path": rel, "before": writer.sha1_bytes(before),
                     "after": writer.sha1_bytes(b"new")}], [before])
    writer.temp_path(arc).write_bytes(before + b"\noperator line\n")  # the state the crash left
    [result] = writer.recover(vault)
    assert result.done and arc.read_bytes() == before
    kept = vault / writer.JOURNAL_DIR / journal.tick_id / "preserved" / rel
    assert kept.read_bytes() == before + b"\noperator line\n"
    assert not writer.temp_path(arc).exists()


def test_recovery_clears_the_old_files_a_run_killed_after_its_last_write_left(tmp_path: Path) -> None:
    """Its journal is complete (nothing is rolled back), but the old files its exchanges swapped out
    were still waiting to be unlinked: recovery removes those that hold the before image, keeps in
    the journal one an append reached after the swap, and marks the journal so it looks once."""
    from brain.io import writer
    from brain.pipeline.tick import new_tick_id

    vault = init_vault(tmp_path / "v")
    one = write_arc(vault, "clusters/2026-11-21", "2026-11-21-x-0123456789ab", sessions=["a"])
    two = write_arc(vault, "clusters/2026-11-21", "2026-11-21-y-0123456789ab", sessions=["b"])
    journal = writer.Journal(vault, new_tick_id(vault, datetime_now()), datetime_now())
    befores = {arc: arc.read_bytes() for arc in (one, two)}
    journal.record([{"op": "write", "path": arc.relative_to(vault).as_posix(), "before": writer.sha1_bytes(data),
                     "after": writer.sha1_bytes(data + b"new\n")} for arc, data in befores.items()],
                   list(befores.values()))
    for arc, data in befores.items():
        arc.write_bytes(data + b"new\n")  # committed
    journal.complete()  # then killed before its old files were unlinked
    writer.temp_path(one).write_bytes(befores[one])
    writer.temp_path(two).write_bytes(befores[two] + b"appended after the swap\n")
    assert writer.recover(vault) == []  # nothing rolled back
    assert not writer.temp_path(one).exists() and not writer.temp_path(two).exists()
    kept = vault / writer.JOURNAL_DIR / journal.tick_id / "preserved" / two.relative_to(vault).as_posix()
    assert kept.read_bytes() == befores[two] + b"appended after the swap\n"
    assert one.read_bytes() == befores[one] + b"new\n" and two.read_bytes() == befores[two] + b"new\n"
    assert (journal.root / writer.SWEPT).is_file()
    writer.temp_path(one).write_bytes(befores[one])  # a swept journal is not looked at again
    writer.recover(vault)
    assert writer.temp_path(one).exists()


def datetime_now() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 11, 21, 12, tzinfo=UTC)


def test_two_plans_writing_one_file_in_one_transaction_both_land(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The first commit's old image is unlinked in the background; the second plan stages to the
    same temp path and must never see its staged file vanish (a spurious "deleted" conflict)."""
    from brain.core.plan import Plan, WriteFile
    from brain.core.timeutil import require_instant
    from brain.io import writer
    from brain.io.transaction import transaction

    real_unlink = writer._unlink_quietly

    def slow_unlink(path: str) -> None:  # a busy disk: the old images are still going when the next plan stages
        time.sleep(0.01)
        real_unlink(path)

    monkeypatch.setattr(writer, "_unlink_quietly", slow_unlink)

    vault = init_vault(tmp_path / "v")
    paths = [f"notes/n{i}.md" for i in range(300)]  # several discard batches; the parallel and syncfs paths
    for rel in paths:
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text("zero\n")
    with transaction(vault, "tick", "t-1", require_instant(NOW)) as tx:
        for round_ in ("one", "two", "three"):
            result = tx.apply(Plan([WriteFile(rel, f"{round_} {rel}\n".encode(), owned=True) for rel in paths]))
            assert not result.problems and sorted(result.written) == sorted(paths), result.problems[:3]
    assert all((vault / rel).read_text() == f"three {rel}\n" for rel in paths)
    assert not [p for p in (vault / "notes").iterdir() if p.name.endswith(".brain-tmp")]  # no old image left


def test_an_append_through_a_file_opened_before_the_commit_is_kept(tmp_path: Path) -> None:
    """An editor that opened the file just before the tick swapped it in writes into the old
    inode afterwards: that write is kept in the journal and reported, never unlinked with it."""
    import hashlib

    from brain.core.plan import Expect, Plan, WriteFile
    from brain.core.timeutil import require_instant
    from brain.io import writer
    from brain.io.transaction import transaction

    vault = init_vault(tmp_path / "v")
    rel = "notes/n.md"
    (vault / "notes").mkdir()
    (vault / rel).write_bytes(b"zero\n")
    st = (vault / rel).stat()
    expect = Expect(st.st_size, st.st_mtime_ns, hashlib.sha1(b"zero\n").hexdigest())  # as the scan saw it
    fd = os.open(vault / rel, os.O_WRONLY | os.O_APPEND)  # opened before the commit
    try:
        with transaction(vault, "tick", "t-1", require_instant(NOW)) as tx:
            result = tx.apply(Plan([WriteFile(rel, b"one\n", expect=expect)]))
            os.write(fd, b"operator line\n")  # lands in the swapped-out old inode
    finally:
        os.close(fd)
    assert (vault / rel).read_bytes() == b"one\n"
    assert (vault / writer.JOURNAL_DIR / "t-1" / "preserved" / rel).read_bytes() == b"zero\noperator line\n"
    assert any("is kept in .brain/journal/t-1/preserved/" in p.message for p in result.problems), result.problems
    assert [p.path for p in tx.late] == [rel]  # what the tick adds to its report after the block
    assert not [p for p in (vault / "notes").iterdir() if p.name.endswith(".brain-tmp")]


def _pending_journal(vault: Path, manifest: Any, pack: bytes = b"") -> Path:
    folder = vault / ".brain" / "journal" / "20250101T000000Z-tick"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (folder / "pack-1").write_bytes(pack)
    return folder


_OTHER = hashlib.sha1(b"x").hexdigest()


@pytest.mark.parametrize(("manifest", "why"), [
    ([1], "not a JSON object"),
    ({"tick_id": "x", "state": "pending", "ops": []}, "its tick_id 'x' is not the name of its folder"),
    ({"tick_id": "20250101T000000Z-tick", "state": "pending", "ops": 5}, "ops is not a list"),
    ({"tick_id": "20250101T000000Z-tick", "state": "pending", "ops": [{"op": "write"}]}, "ops[0].path is not a path"),
    ({"tick_id": "20250101T000000Z-tick", "state": "pending",
      "ops": [{"op": "write", "path": "../outside.md", "before": None, "after": _OTHER}]}, "leaves the vault"),
    ({"tick_id": "20250101T000000Z-tick", "state": "pending",
      "ops": [{"op": "move", "path": "clusters/a.md", "dst": "/etc/passwd", "before": _OTHER, "after": _OTHER,
               "pack": "pack-1", "offset": 0, "length": 1}]}, "not a vault-relative path"),
    ({"tick_id": "20250101T000000Z-tick", "state": "pending",
      "ops": [{"op": "write", "path": "clusters/a.md", "before": _OTHER, "after": None, "pack": "../../x",
               "offset": 0, "length": 1}]}, "names no before-image a pack can hold"),
    ({"tick_id": "20250101T000000Z-tick", "state": "pending",
      "ops": [{"op": "write", "path": "clusters/a.md", "before": hashlib.sha1(b"old").hexdigest(),
               "after": hashlib.sha1(b"the operator's note\n").hexdigest(), "pack": "pack-1", "offset": 0,
               "length": 3}]}, "does not match its hash"),
])
def test_a_damaged_pending_journal_is_reported_never_rolled_back_and_ticks_go_on(
        tmp_path: Path, manifest: Any, why: str) -> None:
    # Every one of these stopped each tick that followed (KeyError, TypeError, FileNotFoundError),
    # and one would have written outside the vault on recovery.
    vault = init_vault(tmp_path / "v")
    arc = write_arc(vault, "clusters/2026-11-21", "2026-11-21-x-0123456789ab", sessions=["a"])
    (vault / "clusters" / "a.md").write_text("the operator's note\n")
    folder = _pending_journal(vault, manifest, pack=b"new")
    before = {p: p.read_bytes() for p in (arc, vault / "clusters" / "a.md")}
    for _ in range(2):
        done = subprocess.run([*BRAIN, "tick", "--vault", str(vault), "--no-ai", "--json", "--now", NOW],
                              capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        [problem] = [p for p in json.loads(done.stdout)["problems"] if p["path"].startswith(".brain/journal/")]
        assert problem["path"] == ".brain/journal/20250101T000000Z-tick"
        assert problem["message"].startswith("a damaged journal, not rolled back:") and why in problem["message"]
    assert (vault / "clusters" / "a.md").read_bytes() == before[vault / "clusters" / "a.md"]
    assert not (tmp_path / "outside.md").exists() and (folder / "manifest.json").is_file()
    undo = subprocess.run([*BRAIN, "undo", "--vault", str(vault), "--tick", folder.name], capture_output=True,
                          text=True, check=False)
    assert undo.returncode == 1 and "cannot undo 20250101T000000Z-tick" in undo.stderr and why in undo.stderr
    assert "Traceback" not in undo.stderr


def test_undo_takes_only_a_journal_id(vault: Path) -> None:
    # `--tick ..` named .brain/manifest.json: a journal's file outside the journal folder
    (vault / ".brain" / "journal").mkdir(exist_ok=True)
    (vault / ".brain" / "manifest.json").write_text(json.dumps({"tick_id": "..", "state": "complete", "ops": []}))
    for tick in ("..", "../../etc", "/tmp", "a/b"):
        done = subprocess.run([*BRAIN, "undo", "--vault", str(vault), "--tick", tick], capture_output=True,
                              text=True, check=False)
        assert done.returncode == 2 and "unknown tick" in done.stderr, done.stderr


def test_a_full_disk_is_a_clear_error_and_the_next_tick_recovers(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from typer.testing import CliRunner

    from brain.cli import app
    from brain.io import writer

    vault = _busy_vault(tmp_path / "v", n=30)
    before = _arc_files(vault)
    write_only, calls = writer._write_only, []

    def filling(job: Any) -> None:
        calls.append(job)
        if len(calls) > 3:  # the disk fills up in the middle of the write wave
            raise OSError(errno.ENOSPC, "No space left on device")
        write_only(job)

    monkeypatch.setattr(writer, "_write_only", filling)
    monkeypatch.delenv("BRAIN_DEBUG", raising=False)
    full = CliRunner().invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--now", NOW])
    assert full.exit_code == 1 and len(calls) > 3
    assert "Error: cannot write: No space left on device; free space" in full.stderr
    assert "unexpected" not in full.stderr
    monkeypatch.setattr(writer, "_write_only", write_only)
    done = subprocess.run([*BRAIN, "tick", "--vault", str(vault), "--no-ai", "--json", "--now", NOW],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert any(p["message"].startswith("rolled back an interrupted run") for p in json.loads(done.stdout)["problems"])
    after = _arc_files(vault)  # every arc whole, none twice
    assert set(after) == set(before)
    assert not [p for p in vault.rglob("*") if ".brain-tmp" in p.name]
