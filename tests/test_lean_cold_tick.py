"""A cold tick never holds every arc's old bytes beside the new ones: the scan keeps no bytes of a
large parse, the planner reads each arc as it renders it, and the writer's journal reads each
before-image again as it packs it, checked against the hash it was resolved with. What it must
not lose for that: undo restores every file exactly, and an edit made between the check and the
journal stays the operator's."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from brain.cli import app
from tests.support.vaults import init_vault, run_tick_json, tree_digest, write_arc, write_mixed_arcs

runner = CliRunner()


def test_a_cold_tick_that_kept_no_bytes_is_undone_exactly(vault: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import brain.io.vault as vault_module
    import brain.pipeline.tick as tick_module

    write_mixed_arcs(vault)
    before = tree_digest(vault, include_state=False)
    monkeypatch.setattr(vault_module, "KEEP_BYTES_FILES", 1)  # as a scan of thousands of files
    kept: list[int] = []
    real_scan = tick_module.scan

    def scan(*args: Any, **kwargs: Any) -> Any:
        snapshot = real_scan(*args, **kwargs)
        kept.append(len(snapshot.raw))
        return snapshot

    monkeypatch.setattr(tick_module, "scan", scan)
    code, report = run_tick_json(vault)
    assert code == 0, report["problems"]
    assert kept == [0]  # the scan parsed every file and kept none of their bytes
    assert len(report["changes"]["moved"]) >= 4 and report["changes"]["written"]
    manifest = json.loads(next((vault / ".brain/journal").glob("*/manifest.json")).read_text())
    packed = [op for op in manifest["ops"] if op["before"] is not None]
    assert len(packed) >= len(report["changes"]["moved"])  # every before-image read back into the pack
    result = runner.invoke(app, ["undo", "--vault", str(vault)])
    assert result.exit_code == 0, result.stderr
    after = tree_digest(vault, include_state=False)
    after.pop("brain-feed/health.jsonl")
    assert after == before


@pytest.mark.parametrize("swap", ["edit", "fifo", "fifo before the check"])
def test_an_edit_between_the_check_and_the_journal_stays_the_operators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        swap: str) -> None:
    """An operator's save, or a named pipe some tool put there (read, it would wait forever)."""
    import os
    import signal
    import time

    from brain.core.plan import Expect, Plan, WriteFile
    from brain.io import writer

    vault = init_vault(tmp_path / "v")
    edited = write_arc(vault, "clusters/2026-11-21", "2026-11-21-e-0123456789ab")
    other = write_arc(vault, "clusters/2026-11-21", "2026-11-21-o-0123456789ab")
    plan = Plan()
    for path in (edited, other):
        rel = path.relative_to(vault).as_posix()
        data = path.read_bytes()
        expect = Expect(len(data), path.stat().st_mtime_ns, writer.sha1_bytes(data))
        plan.add(WriteFile(rel, data.replace(b"heat: 0", b"heat: 3"), expect, reason="heat"))  # no before
    real_images = writer._images

    def images(root: Path, items: Any, changed: set[int]) -> Any:
        if swap == "fifo before the check":
            pass
        elif swap == "fifo":
            edited.unlink()
            os.mkfifo(edited)
        else:
            edited.write_bytes(edited.read_bytes() + b"\nThe operator saved this meanwhile.\n")
        return real_images(root, items, changed)

    monkeypatch.setattr(writer, "_images", images)
    now = datetime(2026, 11, 21, 12, tzinfo=UTC)
    journal = writer.Journal(vault, "20261121T120000Z-lean", now)
    def waited(*_: Any) -> None:
        raise TimeoutError("the journal waited on a named pipe")

    previous = signal.signal(signal.SIGALRM, waited)
    signal.alarm(20)  # a read that waits on the pipe fails the test instead of hanging it
    started = time.monotonic()
    if swap == "fifo before the check":  # the writer's own check (step 2) meets it
        edited.unlink()
        os.mkfifo(edited)
    try:
        result = writer.apply_plan(vault, plan, journal=journal, dry_run=False)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 10
    writer.flush_discards()
    edited_rel = edited.relative_to(vault).as_posix()
    assert result.conflicts == {edited_rel}
    # Caught by the check or the journal's re-read (its hash), before any commit: no image in the pack
    # that is not its hash's.
    why = "not a regular file" if swap == "fifo before the check" else "changed since the scan"
    assert [p.message for p in result.problems if p.path == edited_rel] == [
        f"{why}; left as it is, the next tick takes it up"]
    assert result.written == [other.relative_to(vault).as_posix()]
    if swap.startswith("fifo"):
        assert edited.is_fifo()  # left as it is
    else:
        assert edited.read_bytes().endswith(b"The operator saved this meanwhile.\n")
        assert b"heat: 0" in edited.read_bytes()
    assert b"heat: 3" in other.read_bytes()
    manifest = writer.load_manifest(vault, journal.tick_id)  # every field checked: a journal undo can trust
    assert [op["path"] for op in manifest["ops"]] == [other.relative_to(vault).as_posix()]
    assert writer.before_image(vault / writer.JOURNAL_DIR / journal.tick_id, manifest["ops"][0]) is not None


def test_a_journaled_write_reads_each_arc_once_and_a_same_size_edit_is_still_caught(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's check of an arc the plan expects is a stat; its one read is the journal's, which
    compares the bytes with the plan's hash. An edit that keeps the file's size (only its bytes can
    tell) made after the plan is a conflict there, before anything is written."""
    from brain.core.plan import Expect, MoveFile, Plan, WriteFile
    from brain.io import writer

    vault = init_vault(tmp_path / "v")
    edited = write_arc(vault, "clusters/2026-11-21", "2026-11-21-e-0123456789ab")
    kept = write_arc(vault, "clusters/2026-11-21", "2026-11-21-k-0123456789ab")
    moved = write_arc(vault, "clusters/2026-11-21", "2026-11-21-m-0123456789ab")
    plan = Plan()
    for path in (edited, kept, moved):
        rel = path.relative_to(vault).as_posix()
        data = path.read_bytes()
        expect = Expect(len(data), path.stat().st_mtime_ns, writer.sha1_bytes(data))
        new = data.replace(b"heat: 0", b"heat: 3")
        if path is moved:
            plan.add(MoveFile(rel, f"left/projects/{path.name}", content=new, expect=expect, reason="graduated"))
        else:
            plan.add(WriteFile(rel, new, expect, reason="heat"))
    text = edited.read_bytes()
    edited.write_bytes(text.replace(b"heat: 0", b"heat: 9"))  # same size, other bytes
    reads: list[str] = []
    real_read = writer._read

    def read(path: Path) -> bytes | None:
        reads.append(Path(path).relative_to(vault).as_posix())
        return real_read(path)

    monkeypatch.setattr(writer, "_read", read)
    journal = writer.Journal(vault, "20261121T120000Z-once", datetime(2026, 11, 21, 12, tzinfo=UTC))
    result = writer.apply_plan(vault, plan, journal=journal, dry_run=False)
    writer.flush_discards()
    edited_rel = edited.relative_to(vault).as_posix()
    assert sorted(reads) == sorted(p.relative_to(vault).as_posix() for p in (edited, kept, moved))  # once each
    assert result.conflicts == {edited_rel}
    assert [p.message for p in result.problems] == ["changed since the scan; left as it is, the next tick takes it up"]
    assert b"heat: 9" in edited.read_bytes()
    assert b"heat: 3" in kept.read_bytes() and b"heat: 3" in (vault / "left/projects" / moved.name).read_bytes()
    assert not moved.exists()
    manifest = writer.load_manifest(vault, journal.tick_id)
    assert sorted(op["path"] for op in manifest["ops"]) == sorted(p.relative_to(vault).as_posix() for p in (kept, moved))
