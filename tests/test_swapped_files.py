"""Files swapped after the scan for something a tick must not read or write through: a named
pipe (a read or an append would wait forever for the other end), a link out of the vault. Each is
reported with its path, left as it is, and the tick ends at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.vaults import run_tick_json, write_mixed_arcs


@pytest.mark.parametrize("cold", [False, True])
def test_a_named_pipe_put_where_an_arc_was_scanned_is_reported_not_waited_on(
    vault: Path, monkeypatch: pytest.MonkeyPatch, cold: bool
) -> None:
    """Between the scan and the planner's read of the arc (a sync tool, a stray ``mkfifo``); in a
    cold tick, whose scan kept no bytes, the search index reads it too."""
    import os
    import signal
    import time

    import brain.io.vault as vault_module
    import brain.pipeline.tick as tick_module

    if cold:
        monkeypatch.setattr(vault_module, "KEEP_BYTES_FILES", 1)

    write_mixed_arcs(vault, 6)
    arc = vault / "clusters/2026-11-01/2026-11-01-lean-000-0123456789ab.md"  # hot: the keeper rewrites and moves it
    real = tick_module.read_texts

    def swap_then_read(*args: Any, **kwargs: Any) -> Any:
        arc.unlink()
        os.mkfifo(arc)
        return real(*args, **kwargs)

    def waited(*_: Any) -> None:
        raise TimeoutError("the tick waited on a named pipe")

    monkeypatch.setattr(tick_module, "read_texts", swap_then_read)
    previous = signal.signal(signal.SIGALRM, waited)
    signal.alarm(20)
    started = time.monotonic()
    try:
        code, report = run_tick_json(vault)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 10
    assert code == 0, report.get("problems")
    rel = arc.relative_to(vault).as_posix()
    assert any(p["path"] == rel and "changed since the scan" in p["message"] for p in report["problems"])
    assert arc.is_fifo()  # left as it is


def test_a_link_put_where_an_arc_was_scanned_is_refused_and_the_tick_succeeds(
    vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Swapped in after the scan, pointing out of the vault: never followed or written through,
    left for the operator, and not a failed verify (the tick did nothing wrong)."""
    import brain.pipeline.tick as tick_module

    write_mixed_arcs(vault, 6)
    outside = vault.parent / "outside.md"
    outside.write_text("not the vault's\n", encoding="utf-8")
    arc = vault / "clusters/2026-11-01/2026-11-01-lean-000-0123456789ab.md"
    real = tick_module.plan_keeper

    def swap_then_plan(*args: Any, **kwargs: Any) -> Any:
        plan = real(*args, **kwargs)
        arc.unlink()
        arc.symlink_to(outside)
        return plan

    monkeypatch.setattr(tick_module, "plan_keeper", swap_then_plan)
    code, report = run_tick_json(vault)
    assert code == 0, report["problems"]
    rel = arc.relative_to(vault).as_posix()
    assert any(p["path"] == rel and p["message"].startswith("refused:") for p in report["problems"])
    assert arc.is_symlink() and outside.read_text(encoding="utf-8") == "not the vault's\n"


def test_a_named_pipe_for_health_jsonl_is_reported_and_the_tick_ends(vault: Path) -> None:
    """The health row is appended to ``brain-feed/health.jsonl``: a pipe there (no reader) must not
    hold the tick forever."""
    import os
    import subprocess
    import sys

    write_mixed_arcs(vault, 3)
    (vault / "brain-feed").mkdir(exist_ok=True)
    os.mkfifo(vault / "brain-feed/health.jsonl")
    done = subprocess.run([sys.executable, "-m", "brain", "tick", "--vault", str(vault), "--no-ai", "--json",
                           "--now", "2026-11-21T12:00:00Z"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    problems = json.loads(done.stdout)["problems"]
    assert any(p["path"].endswith("health.jsonl") and "health row not written" in p["message"] for p in problems)
    assert (vault / "brain-feed/health.jsonl").is_fifo()


@pytest.mark.parametrize(("name", "command"), [("health.jsonl", "health"), ("intent.md", "prompt")])
def test_commands_that_read_a_feed_file_never_wait_on_a_pipe_there(vault: Path, name: str, command: str) -> None:
    """``brain health`` reads ``health.jsonl``, ``brain prompt`` (and an AI tick) the last ``intent.md``."""
    import os
    import subprocess
    import sys

    write_mixed_arcs(vault, 3)
    (vault / "brain-feed").mkdir(exist_ok=True)
    os.mkfifo(vault / "brain-feed" / name)
    done = subprocess.run([sys.executable, "-m", "brain", command, "--vault", str(vault)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert (vault / "brain-feed" / name).is_fifo()


def test_a_folder_where_a_feed_file_goes_is_reported_and_the_rest_is_written(vault: Path) -> None:
    """The writer replaces the brain's own files whatever they hold, but never a folder an operator
    (or a sync tool) put there: every tick reports it and writes the rest of the feed."""
    write_mixed_arcs(vault, 6)
    (vault / "brain-feed" / "hot-arcs.md").mkdir(parents=True)
    (vault / "brain-feed" / "hot-arcs.md" / "keep.txt").write_text("mine\n", encoding="utf-8")
    for now in ("2026-11-21T12:00:00Z", "2026-11-21T14:00:00Z"):
        code, report = run_tick_json(vault, now=now)
        assert code == 0, report["problems"]
        assert any(p["path"] == "brain-feed/hot-arcs.md" and "not a regular file" in p["message"]
                   for p in report["problems"])
    assert (vault / "brain-feed" / "hot-arcs.md" / "keep.txt").read_text(encoding="utf-8") == "mine\n"
    assert (vault / "brain-feed" / "signals.md").is_file()


def test_undo_never_removes_a_folder_put_where_the_tick_wrote_a_file(vault: Path) -> None:
    from typer.testing import CliRunner

    from brain.cli import app

    write_mixed_arcs(vault, 6)
    code, report = run_tick_json(vault)
    assert code == 0
    made = vault / "brain-feed" / "hot-arcs.md"  # the tick created it: undo would remove it
    made.unlink()
    made.mkdir()
    result = CliRunner().invoke(app, ["undo", "--vault", str(vault), "--tick", report["tick_id"], "--force"])
    assert result.exit_code == 0, result.output
    assert made.is_dir()
    assert not (vault / "frontal-lobe/conscious/2026-11-01-lean-000-0123456789ab.md").exists()  # the rest undone
    assert (vault / "clusters/2026-11-01/2026-11-01-lean-000-0123456789ab.md").is_file()


@pytest.mark.parametrize("what", ["link", "file", "pipe", "folder"])
def test_what_sits_at_a_temporary_name_is_never_written_through(vault: Path, what: str) -> None:
    """The writer stages an arc's new bytes at ``.<name>.brain-tmp`` beside it. A link put there
    made the tick write the arc out of the vault and leave the arc itself a link to that file; a
    named pipe made it wait for a reader. What sits there is removed and the arc written; a folder
    is left as it is, with the arc, and reported."""
    import os

    write_mixed_arcs(vault, 6)
    outside = vault.parent / "outside.md"
    outside.write_text("not the vault's\n", encoding="utf-8")
    name = "2026-11-01-lean-000-0123456789ab.md"  # hot: promoted, so moved to conscious and rewritten
    src, dst = vault / "clusters/2026-11-01" / name, vault / "frontal-lobe/conscious" / name
    before = src.read_bytes()
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{name}.brain-tmp")
    if what == "link":
        tmp.symlink_to(outside)
    elif what == "file":
        tmp.write_text("left by a run that died\n", encoding="utf-8")
    elif what == "pipe":
        os.mkfifo(tmp)
    else:
        tmp.mkdir()
        (tmp / "keep.txt").write_text("mine\n", encoding="utf-8")
    code, report = run_tick_json(vault)
    assert code == 0, report.get("problems")
    assert outside.read_text(encoding="utf-8") == "not the vault's\n"
    rel = src.relative_to(vault).as_posix()
    if what == "folder":
        assert src.read_bytes() == before and not dst.exists()
        assert any(p["path"] == rel and "a folder sits at its temporary name" in p["message"]
                   for p in report["problems"])
        assert (tmp / "keep.txt").read_text(encoding="utf-8") == "mine\n"
        return
    assert not src.exists() and dst.is_file() and not dst.is_symlink()
    assert dst.read_bytes() != before and b"heat:" in dst.read_bytes()
    assert not os.path.lexists(tmp)
    assert not [p for p in report["problems"] if p["path"] == rel]


def test_recovery_removes_a_link_at_a_temporary_name_without_reading_through_it(tmp_path: Path) -> None:
    """A crash leaves staged files for recovery to clear; one that is a link (put there, never the
    tick's) is removed, not read: its target's bytes never reach the journal."""
    from datetime import UTC, datetime

    from brain.io import writer
    from tests.support.vaults import init_vault, write_arc

    vault = init_vault(tmp_path / "v")
    arc = write_arc(vault, "clusters/2026-11-21", "2026-11-21-x-0123456789ab", sessions=["a"])
    secret = tmp_path / "secret.txt"
    secret.write_text("private key\n", encoding="utf-8")
    now = datetime(2026, 11, 21, 12, tzinfo=UTC)
    journal = writer.Journal(vault, "20261121T120000Z-tick", now)
    before = arc.read_bytes()
    rel = arc.relative_to(vault).as_posix()
    journal.record([{"op": "write", "path": rel, "before": writer.sha1_bytes(before),
                     "after": writer.sha1_bytes(b"new")}], [before])
    writer.temp_path(arc).symlink_to(secret)
    [result] = writer.recover(vault)
    assert result.done and arc.read_bytes() == before
    assert not writer.temp_path(arc).is_symlink() and secret.read_text(encoding="utf-8") == "private key\n"
    assert not [p for p in (vault / writer.JOURNAL_DIR).rglob("*") if p.is_file() and b"private key" in p.read_bytes()]


def test_atomic_write_never_writes_through_a_link_at_its_temporary_name(tmp_path: Path) -> None:
    """Every file the brain keeps (its state, the hook's session files, journals) is written to a
    temporary name and renamed: a link put at that name had its target overwritten."""
    import os

    from brain.io.atomic import atomic_write

    outside = tmp_path / "outside.txt"
    outside.write_text("not the vault's\n", encoding="utf-8")
    target = tmp_path / "state" / "cache.json"
    target.parent.mkdir()
    temp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    temp.symlink_to(outside)
    atomic_write(target, b"{}\n", durable=False)
    assert outside.read_text(encoding="utf-8") == "not the vault's\n"
    assert target.read_bytes() == b"{}\n" and not target.is_symlink() and not os.path.lexists(temp)
