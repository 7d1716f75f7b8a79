"""A plan of many files is staged and committed in waves; the old files one wave swaps out hold the
next wave's new content (``brain.io.writer._reuse``). An old file still reachable by anything but the
writer (open in another process, linked twice, with a mode or attributes of its own, on a filesystem
other machines may open) is never written over: that would put one arc's text, or an editor's late
write, into another."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from brain.core.plan import Plan, WriteFile
from brain.core.timeutil import require_instant
from brain.io import writer
from brain.io.atomic import TMP_SUFFIX
from brain.io.transaction import transaction
from tests.support.vaults import NOW, init_vault

NOTES = 40


@pytest.fixture
def small_waves(monkeypatch: pytest.MonkeyPatch) -> int:
    """Waves of 8 files, so a plan of 40 runs in five of them."""
    monkeypatch.setattr(writer, "WAVE_MIN", 8)
    monkeypatch.setattr(writer, "WAVES", 1000)
    return 8


def _notes(vault: Path) -> list[str]:
    paths = [f"notes/{i % 4}/n{i:02d}.md" for i in range(NOTES)]
    for rel in paths:
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(f"old {rel}\n" * 20)
    return paths


def _apply(vault: Path, paths: list[str], tick_id: str = "t-1") -> writer.ApplyResult:
    with transaction(vault, "tick", tick_id, require_instant(NOW)) as tx:
        # new content shorter than the old: writing over an old file must cut what is left of it
        return tx.apply(Plan([WriteFile(rel, f"new {rel}\n".encode(), owned=True) for rel in paths]))


def _temp_files(vault: Path) -> list[Path]:
    return [p for p in vault.rglob("*") if p.name.endswith(TMP_SUFFIX)]


def test_a_plan_in_waves_writes_what_one_wave_writes_over_the_old_files(tmp_path: Path, small_waves: int) -> None:
    if writer.filesystem_type(tmp_path) not in writer.LOCAL_FILESYSTEMS:
        pytest.skip(f"the test folder is on {writer.filesystem_type(tmp_path)}: no old file is reused there")
    vault = init_vault(tmp_path / "v")
    paths = _notes(vault)
    old_inodes = {(vault / rel).stat().st_ino for rel in paths}
    result = _apply(vault, paths)
    assert not result.problems and sorted(result.written) == sorted(paths)
    for rel in paths:
        assert (vault / rel).read_bytes() == f"new {rel}\n".encode()
        assert stat.S_IMODE((vault / rel).stat().st_mode) == writer._fresh_mode()
    # every wave after the first wrote into the old files the one before swapped out
    reused = old_inodes & {(vault / rel).stat().st_ino for rel in paths}
    assert len(reused) == NOTES - small_waves
    assert not _temp_files(vault)


def test_one_wave_and_many_leave_the_same_files_and_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one, many = init_vault(tmp_path / "one"), init_vault(tmp_path / "many")
    paths = _notes(one)
    _notes(many)
    _apply(one, paths)
    monkeypatch.setattr(writer, "WAVE_MIN", 8)
    monkeypatch.setattr(writer, "WAVES", 1000)
    _apply(many, paths)

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
                if p.is_file() and "lock" not in p.name}

    assert files(one) == files(many)


def test_an_old_file_an_editor_holds_open_is_never_written_over(tmp_path: Path, small_waves: int) -> None:
    """An editor opened an arc of the first wave just before its exchange and writes after the
    later waves are committed: its bytes must not land in another arc."""
    vault = init_vault(tmp_path / "v")
    paths = _notes(vault)
    first = vault / paths[0]
    fd = os.open(first, os.O_WRONLY | os.O_APPEND)  # this process is the editor: its own open file
    try:
        result = _apply(vault, paths)
        os.write(fd, b"the editor's late line\n")
        held = os.fstat(fd).st_ino
    finally:
        os.close(fd)
    assert not result.problems
    for rel in paths:
        assert (vault / rel).read_bytes() == f"new {rel}\n".encode(), rel
        assert (vault / rel).stat().st_ino != held
    assert not _temp_files(vault)


def test_an_old_file_linked_twice_is_never_written_over(tmp_path: Path, small_waves: int) -> None:
    """The operator keeps a hard link to an arc elsewhere: after the tick it still holds the old text."""
    vault = init_vault(tmp_path / "v")
    paths = _notes(vault)
    (vault / "archive").mkdir()
    os.link(vault / paths[0], vault / "archive/kept.md")
    before = (vault / "archive/kept.md").read_bytes()
    _apply(vault, paths)
    assert (vault / "archive/kept.md").read_bytes() == before
    assert all((vault / rel).read_bytes() == f"new {rel}\n".encode() for rel in paths)


def test_an_old_file_with_a_mode_of_its_own_is_not_written_over(tmp_path: Path, small_waves: int) -> None:
    """Each file the tick writes has a new file's mode, whichever old file a wave wrote over."""
    vault = init_vault(tmp_path / "v")
    paths = _notes(vault)
    os.chmod(vault / paths[0], 0o600)
    os.chmod(vault / paths[1], 0o640)
    _apply(vault, paths)
    assert {stat.S_IMODE((vault / rel).stat().st_mode) for rel in paths} == {writer._fresh_mode()}


def test_recovery_drops_an_old_image_a_killed_wave_left_at_another_arcs_temp_name(tmp_path: Path) -> None:
    """Killed after a wave committed X and renamed X's old file to Y's temp name: the next run
    rolls X back and removes the temp file, without keeping X's old text as an edit of Y."""
    vault = init_vault(tmp_path / "v")
    (vault / "notes").mkdir()
    x, y = vault / "notes/x.md", vault / "notes/y.md"
    x.write_bytes(b"x old\n")
    y.write_bytes(b"y old\n")
    journal = writer.Journal(vault, "t-1", require_instant(NOW))
    journal.record([{"op": "write", "path": rel, "before": writer.sha1_bytes(old), "after": writer.sha1_bytes(new)}
                    for rel, old, new in (("notes/x.md", b"x old\n", b"x new\n"),
                                          ("notes/y.md", b"y old\n", b"y new\n"))],
                   [b"x old\n", b"y old\n"])
    x.write_bytes(b"x new\n")  # committed by the first wave
    writer.temp_path(y).write_bytes(b"x old\n")  # X's old file, renamed for the next wave, not yet written
    [result] = writer.recover(vault)
    assert result.done
    assert x.read_bytes() == b"x old\n" and y.read_bytes() == b"y old\n"
    assert not _temp_files(vault)
    assert not (vault / writer.JOURNAL_DIR / "t-1" / "preserved").exists()


def test_no_old_file_is_written_over_on_a_filesystem_other_machines_may_open(
        tmp_path: Path, small_waves: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a network or FUSE filesystem no lease sees an editor elsewhere: every temp file is new."""
    monkeypatch.setattr(writer, "LOCAL_FILESYSTEMS", frozenset())
    vault = init_vault(tmp_path / "v")
    paths = _notes(vault)
    old_inodes = {(vault / rel).stat().st_ino for rel in paths}
    result = _apply(vault, paths)
    assert not result.problems
    assert all((vault / rel).read_bytes() == f"new {rel}\n".encode() for rel in paths)
    assert not old_inodes & {(vault / rel).stat().st_ino for rel in paths}
    assert not _temp_files(vault)


def test_the_filesystem_of_a_path_comes_from_the_mount_table() -> None:
    assert writer.filesystem_type("/proc/self") == "proc"
    assert writer.filesystem_type("/proc/self/status") == "proc"
    assert writer.filesystem_type("/") is not None


def test_a_plan_of_new_files_is_one_wave(tmp_path: Path, small_waves: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """No old file comes out of its commits to write over (brain cluster's new arcs): one syncfs."""
    vault = init_vault(tmp_path / "v")
    monkeypatch.setattr(writer, "LOCAL_FILESYSTEMS", frozenset({writer.filesystem_type(tmp_path)}))
    staged, real = [], writer._stage

    def counted(jobs: list[tuple[str, bytes]], *args: object) -> set[str]:
        staged.append(len(jobs))
        return real(jobs, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(writer, "_stage", counted)
    result = _apply(vault, [f"notes/new-{i:02d}.md" for i in range(NOTES)])
    assert len(result.written) == NOTES and staged == [NOTES]
    staged.clear()
    _apply(vault, _notes(vault), "t-2")  # rewrites: waves
    assert staged == [small_waves] * (NOTES // small_waves)


def test_a_process_that_opens_an_old_file_while_it_is_leased_does_not_end_the_tick(tmp_path: Path) -> None:
    """The lease taken to prove an old file is open nowhere else lasts microseconds; a process that
    opens the file in that instant breaks it, and the kernel signals the writer: never with SIGIO,
    whose default would end the tick."""
    import subprocess
    import sys
    import time

    path = tmp_path / ".old.md.brain-tmp"
    path.write_bytes(b"old\n")
    fd = os.open(path, os.O_WRONLY)
    try:
        assert writer._lease(fd)
        opener = subprocess.Popen([sys.executable, "-c", f"import os; os.close(os.open({str(path)!r}, os.O_RDONLY))"])
        time.sleep(0.3)  # its open waits for the lease; the kernel has signalled this process by now
        assert opener.poll() is None
        writer._unlease(fd)
        assert opener.wait(timeout=30) == 0
    finally:
        os.close(fd)


def test_an_old_file_with_extended_attributes_is_not_written_over(tmp_path: Path, small_waves: int) -> None:
    """An arc's own attribute (a user's tag, an ACL) never passes to another arc."""
    vault = init_vault(tmp_path / "v")
    paths = _notes(vault)
    try:
        os.setxattr(vault / paths[0], "user.brain-test", b"x")
    except OSError as exc:
        pytest.skip(f"no user attributes on this filesystem: {exc}")
    _apply(vault, paths)
    assert [rel for rel in paths if os.listxattr(vault / rel)] == []
