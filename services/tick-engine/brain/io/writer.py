"""The one writer: executes plans atomically, journals before-images, holds the vault lock.

Order of work for a plan (SPEC §9):

1. resolve every operation against the disk; a file that changed since the scan is a
   conflict: reported, not touched (the next tick takes it up); no-ops are dropped;
2. write the journal entry (``.brain/journal/<tick_id>/``: manifest + a pack of before-images),
   fsynced, state ``pending``;
3. execute: each file via temp file + fsync + rename; a move is one ``rename``. A plan of
   thousands of files does this in waves, and the old files one wave swaps out hold the next
   wave's new content (:func:`_reuse`): making a file costs far more than writing into one;
4. mark the journal ``complete``.

A tick killed anywhere leaves every file either as it was or as it should be. A journal
left ``pending`` is rolled back by the next tick (:func:`recover`) before it scans, and
``brain undo`` restores any complete journal.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from brain.core.model import Problem
from brain.core.plan import DeleteFile, Expect, MoveFile, Plan, WriteFile
from brain.core.progress import Step, counted
from brain.core.timeutil import iso, wall_clock
from brain.io import precreate
from brain.io.atomic import (
    NOFOLLOW,
    ConfinementError,
    atomic_write,
    atomic_write_chunks,
    confined,
    confined_stat,
    create_new,
    fsync_dir,
    open_sole,
    read_regular,
    temp_name,
)
from brain.io.workers import Workers, run_all

STATE_DIR = ".brain"
JOURNAL_DIR = f"{STATE_DIR}/journal"
#: Threads for the fsyncs of a plan under :data:`SYNCFS_THRESHOLD` files (and of its folders). Each
#: is a thread started for the call: on two cores and a virtio disk, 20 files' fsyncs took 4.1 ms
#: one after the other, 2.6 with 4 threads, 3.4 with 8 and 5.3 with 32; 60 files' 10.2, 6.2, 5.9
#: and 9.8 ms. Past a few in flight, starting threads costs more than the disk gains.
FSYNC_WORKERS = 8
SYNCFS_THRESHOLD = 64
#: What :func:`apply_plan` counts for its ``progress``.
COMMITTED = "files written"


def sha1_bytes(data: bytes) -> str:
    return hashlib.sha1(data, usedforsecurity=False).hexdigest()


class LockHeld(Exception):
    def __init__(self, path: Path, holder: str):
        super().__init__(f"another brain process holds the vault lock ({path}): {holder}")
        self.path = path
        self.holder = holder


@contextlib.contextmanager
def vault_lock(vault: Path, command: str, *, wait_seconds: float = 0.0) -> Iterator[None]:
    """``flock`` on ``.brain/lock``: released by the OS when the process dies, never stale.

    ``wait_seconds`` > 0 waits that long for a holder to finish (the amygdala consumer waits
    for a tick); 0 fails at once (a second tick exits 3).
    """
    state = vault / STATE_DIR
    state.mkdir(exist_ok=True)
    path = state / "lock"
    flags = os.O_RDWR | os.O_CREAT | NOFOLLOW
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        os.unlink(path)  # a link put at the brain's own lock file: removed, never truncated through
        fd = os.open(path, flags, 0o644)
    deadline = time.monotonic() + wait_seconds
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raw = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
                try:
                    info = json.loads(raw)
                    holder = (f"{info.get('command')} pid {info.get('pid')} on {info.get('host')} "
                              f"since {info.get('started')}")
                except (ValueError, AttributeError):
                    holder = raw or "unknown holder"
                raise LockHeld(path, holder) from None
        info = {"pid": os.getpid(), "host": os.uname().nodename, "command": command, "started": iso(wall_clock())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@dataclass
class ApplyResult:
    written: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    conflicts: set[str] = field(default_factory=set)

    def merge(self, other: ApplyResult) -> None:
        self.written += other.written
        self.moved += other.moved
        self.deleted += other.deleted
        self.problems += other.problems
        self.conflicts |= other.conflicts

    @property
    def changed(self) -> bool:
        return bool(self.written or self.moved or self.deleted)


def _read(path: str | Path) -> bytes | None:
    """The bytes of the regular file at ``path``; None when there is none: gone, or something
    else put there since the scan (a named pipe is never waited on, a folder never read)."""
    try:
        return read_regular(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.EINVAL:  # read_regular's "not a regular file"
            return None
        raise


RACY_NS = 2_000_000_000


def _current(path: str | Path, expect: Expect | None, before: bytes | None) -> tuple[bytes | None, tuple[int, int, int] | None]:
    """The file's bytes (the planner's copy when size and an old-enough mtime still match), and
    its (size, mtime_ns, inode) taken before the read: a file changed between the two never
    matches that stat at commit, so it is a conflict, never overwritten."""
    seen = _stat_of(path)
    if seen is None:
        return None, None
    size, mtime_ns, _ = seen
    if (
        before is not None
        and expect is not None
        and size == expect.size == len(before)
        and mtime_ns == expect.mtime_ns
        and mtime_ns < time.time_ns() - RACY_NS
    ):
        return before, seen
    data = _read(path)
    return data, seen if data is not None else None


def _matches(path: str | Path, expect: Expect, data: bytes | None) -> bool:
    if data is None:
        return False
    if len(data) != expect.size:
        return False
    return sha1_bytes(data) == expect.sha1


class Journal:
    """Before-images of one tick; several plans of one tick append to the same journal.

    Before-images go into one pack file per plan (``pack-<n>``), written and fsynced once,
    so journaling costs one fsync per plan, not one per file.
    """

    def __init__(self, vault: Path, tick_id: str, now: datetime):
        self.vault = vault
        self.tick_id = tick_id
        self.root = vault / JOURNAL_DIR / tick_id
        self.manifest: dict[str, Any] = {"tick_id": tick_id, "now": iso(now), "state": "pending", "ops": []}
        self.opened = False
        self.packs = 0

    def _save(self) -> None:
        atomic_write(self.root / "manifest.json", json.dumps(self.manifest, separators=(",", ":")).encode())

    def record(self, ops: list[dict[str, Any]], befores: Iterable[bytes | None]) -> None:
        """Pack the before-images and add ``ops`` to the manifest. ``befores`` is read once, in
        step with ``ops``, each image written as it comes (a generator may read them from disk one
        at a time); an op that names a ``before`` hash but gets no image is left out (its file
        changed: the caller does not carry it out)."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.packs += 1
        pack_name = f"pack-{self.packs}"
        offset = 0

        def chunks() -> Iterator[bytes]:
            nonlocal offset
            for op, before in zip(ops, befores, strict=True):
                if before is not None:
                    op["pack"], op["offset"], op["length"] = pack_name, offset, len(before)
                    offset += len(before)
                    yield before

        atomic_write_chunks(self.root / pack_name, chunks())  # never one more copy of every before-image
        self.manifest["state"] = "pending"
        self.manifest["ops"].extend(op for op in ops if op["before"] is None or "pack" in op)
        self._save()
        self.opened = True

    def skip(self, path: str) -> None:
        """An operation the operator's edit pre-empted: undo must not touch its file."""
        self.manifest["ops"] = [op for op in self.manifest["ops"] if op["path"] != path]
        self._save()

    def preserve(self, path: str, data: bytes) -> str:
        """Keep bytes an operator wrote while the tick committed ``path``; returns where."""
        target = self.root / "preserved" / path
        copy = 1
        while target.exists():  # the same file raced twice in one run: keep both
            target = self.root / "preserved" / f"{path.removesuffix('.md')}.{copy}.md"
            copy += 1
        atomic_write(target, data)
        return target.relative_to(self.vault).as_posix()

    def complete(self) -> None:
        """Mark the journal done (durably, once: the tick completes it when its last write is
        made, and the transaction's end finds nothing left to do)."""
        if self.opened and self.manifest["state"] != "complete":
            self.manifest["state"] = "complete"
            self._save()


def before_image(root: Path, op: dict[str, Any]) -> bytes | None:
    if op.get("before") is None:
        return None
    with (root / op["pack"]).open("rb") as handle:
        handle.seek(int(op["offset"]))
        data: bytes = handle.read(int(op["length"]))
    return data


class JournalError(ValueError):
    """A journal that cannot be trusted (unreadable, damaged, naming paths outside the vault,
    before-images that do not match their hashes): never rolled back or undone."""


JOURNAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_PACK_NAME = re.compile(r"^pack-[0-9]{1,9}$")
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_OPS = ("write", "move", "delete")


def load_manifest(vault: Path, tick_id: str) -> dict[str, Any]:
    """The manifest of journal ``tick_id``, every field checked (:func:`_manifest_problem`).
    Raises FileNotFoundError when there is none, :class:`JournalError` when it cannot be trusted."""
    if not JOURNAL_ID.match(tick_id):
        raise JournalError(f"{tick_id!r} is not a journal id")
    path = vault / JOURNAL_DIR / tick_id / "manifest.json"
    try:
        data = json.loads(read_regular(path))  # a named pipe here is damage, never a wait
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise JournalError(f"{path} cannot be read: {exc.strerror}") from None
    except ValueError:
        raise JournalError(f"{path} is not JSON") from None
    problem = _manifest_problem(vault, tick_id, data)
    if problem is not None:
        raise JournalError(f"{path}: {problem}")
    return cast(dict[str, Any], data)


def _manifest_problem(vault: Path, tick_id: str, data: Any) -> str | None:
    if not isinstance(data, dict):
        return "not a JSON object"
    if data.get("tick_id") != tick_id:
        return f"its tick_id {data.get('tick_id')!r} is not the name of its folder"
    if data.get("state") not in ("pending", "complete", "undone"):
        return f"unknown state {data.get('state')!r}"
    ops = data.get("ops")
    if not isinstance(ops, list):
        return "ops is not a list"
    verified: set[str] = set()
    for number, op in enumerate(ops):
        if not isinstance(op, dict) or op.get("op") not in _OPS:
            return f"ops[{number}] is not a write, move or delete"
        for key in ("path", "dst") if op["op"] == "move" else ("path",):
            if not isinstance(op.get(key), str):
                return f"ops[{number}].{key} is not a path"
            try:
                confined(vault, op[key], verified)
            except ConfinementError as exc:
                return f"ops[{number}]: {exc}"
        for key in ("before", "after"):
            value = op.get(key)
            if value is not None and not (isinstance(value, str) and _SHA1.match(value)):
                return f"ops[{number}].{key} is not a sha1"
        if op.get("before") is not None and not (
            isinstance(op.get("pack"), str) and _PACK_NAME.match(op["pack"])
            and all(isinstance(op.get(k), int) and not isinstance(op.get(k), bool) and op[k] >= 0
                    for k in ("offset", "length"))
        ):
            return f"ops[{number}] names no before-image a pack can hold"
    return None


def _before_images(root: Path, ops: list[dict[str, Any]]) -> list[bytes | None]:
    """Every before-image of ``ops``, each checked against its hash, before anything is restored."""
    images = []
    for number, op in enumerate(ops):
        try:
            image = before_image(root, op)
        except OSError as exc:
            raise JournalError(f"{root}: the before-image of ops[{number}] cannot be read: {exc.strerror}") from None
        if image is not None and sha1_bytes(image) != op["before"]:
            raise JournalError(f"{root}: the before-image of ops[{number}] ({op['path']}) does not match its hash")
        images.append(image)
    return images


@dataclass
class _Resolved:
    op: WriteFile | MoveFile | DeleteFile
    #: The file's bytes when the plan handed them over (the planner's copy, held anyway); None when
    #: they were read here only to be checked: the journal reads them again as it packs them, so a
    #: plan of 10 000 files never holds every old file and every new one at once.
    before: bytes | None
    before_sha1: str | None  # None: no file there
    after_sha1: str | None  # None: no file there after (a delete)
    #: (size, mtime_ns, inode) of the file the plan was checked against; re-checked at commit.
    seen: tuple[int, int, int] | None = None


def _resolved(op: WriteFile | MoveFile | DeleteFile, current: bytes | None, after: bytes | None,
              seen: tuple[int, int, int] | None) -> _Resolved:
    # Feed files and dashboards (owned, few and small) keep theirs: they are replaced whatever they hold.
    kept = current if current is not None and (current is getattr(op, "before", None)
                                               or getattr(op, "owned", False)) else None
    return _Resolved(op, kept, sha1_bytes(current) if current is not None else None,
                     sha1_bytes(after) if after is not None else None, seen)


def apply_plan(
    vault: Path,
    plan: Plan,
    *,
    journal: Journal | None,
    dry_run: bool,
    progress: Step | None = None,
) -> ApplyResult:
    """Execute ``plan`` (or, with ``dry_run``, only work out what it would change); ``progress``
    hears of the files committed."""
    result = ApplyResult()
    resolved: list[_Resolved] = []
    verified: set[str] = set()
    for op in plan.operations:
        try:
            item = _resolve(vault, op, result, verified, journaled=journal is not None and not dry_run)
        except ConfinementError as exc:
            path = _source(op)
            result.problems.append(Problem(path, None, f"refused: {exc}"))
            result.conflicts.add(path)  # left as it is, like an edit: not a failed second pass for verify
            continue
        if item is not None:
            resolved.append(item)
    if dry_run or not resolved:
        for item in resolved:
            _note_result(item.op, result)
        return result
    if journal is not None:
        entries = []
        for item in resolved:
            op = item.op
            entry: dict[str, Any] = {
                "op": "move" if isinstance(op, MoveFile) else "delete" if isinstance(op, DeleteFile) else "write",
                "path": _source(op),
                "before": item.before_sha1,
                "after": item.after_sha1,
            }
            if isinstance(op, MoveFile):
                entry["dst"] = op.dst
            entries.append(entry)
        changed: set[int] = set()
        journal.record(entries, _images(vault, resolved, changed))
        for index in sorted(changed):  # edited between the check and the journal: not ours to touch
            _conflict(result, _source(resolved[index].op), "changed since the scan")
        resolved = [item for index, item in enumerate(resolved) if index not in changed]
    for item in _execute_all(vault, resolved, result, journal, progress):
        _note_result(item.op, result)
    if journal is None:
        flush_discards()  # no transaction to wait for them at its end
        take_kept()  # already in this result's problems
    return result


def planned_result(plan: Plan) -> ApplyResult:
    """The result of ``plan`` if every operation is carried out (what a run may work from while
    the writer is still at it; the real result, conflicts and all, comes from :func:`apply_plan`)."""
    result = ApplyResult()
    for op in plan.operations:
        _note_result(op, result)
    return result


def _source(op: WriteFile | MoveFile | DeleteFile) -> str:
    return op.src if isinstance(op, MoveFile) else op.path


def _images(vault: Path, items: list[_Resolved], changed: set[int]) -> Iterator[bytes | None]:
    """Each item's before-image, in order, for the journal's pack: the bytes it holds, else the
    file read again and checked against the hash it had when resolved (None, and its index in
    ``changed``, when it no longer has it). One file's bytes at a time."""
    for index, item in enumerate(items):
        if item.before_sha1 is None or item.before is not None:
            yield item.before
            continue
        data = _read(os.path.join(vault, _source(item.op)))  # a link swapped in is caught by the hash
        if data is None or sha1_bytes(data) != item.before_sha1:
            changed.add(index)
            yield None
            continue
        yield data


def _note_result(op: WriteFile | MoveFile | DeleteFile, result: ApplyResult) -> None:
    if isinstance(op, MoveFile):
        result.moved.append((op.src, op.dst))
    elif isinstance(op, DeleteFile):
        result.deleted.append(op.path)
    else:
        result.written.append(op.path)


def _conflict(result: ApplyResult, path: str, why: str) -> None:
    result.conflicts.add(path)
    result.problems.append(Problem(path, None, f"{why}; left as it is, the next tick takes it up"))


def _checked_by_journal(st: os.stat_result | None, op: WriteFile | MoveFile, after_sha1: str,
                        result: ApplyResult) -> _Resolved | None:
    """An arc change the journal will check: its bytes are read once, by the journal as it packs
    them (:func:`_images`), and compared with the hash the plan expects; here only a stat. A file
    gone, not a regular file any more, or of another size is a conflict at once; one of the same
    size whose bytes differ is one when the journal reads it, before anything is written.
    ``op.expect`` is set and ``op.before`` is None (the planner kept no copy); ``after_sha1`` is
    the hash of what the file holds once ``op`` is carried out (:func:`_deferred`); ``st``: the
    file's ``lstat`` as its path was confined (None: none there)."""
    assert op.expect is not None
    source = _source(op)
    if st is None or not stat.S_ISREG(st.st_mode):
        _conflict(result, source, "not a regular file" if st is not None and isinstance(op, WriteFile)
                  else "changed since the scan")
        return None
    if st.st_size != op.expect.size:
        _conflict(result, source, "changed since the scan")
        return None
    return _Resolved(op, None, op.expect.sha1, after_sha1, (st.st_size, st.st_mtime_ns, st.st_ino))


def _deferred(op: WriteFile | MoveFile, journaled: bool) -> str | None:
    """When the journal's read is the only one ``op`` needs (:func:`_checked_by_journal`), the hash
    of what its file holds once it is carried out; None otherwise. Only an arc the plan expects,
    with no planner copy, whose new content is not what it already holds."""
    if not journaled or op.expect is None or op.before is not None or (isinstance(op, WriteFile) and op.owned):
        return None
    if op.content is None:  # a move: the same bytes, elsewhere
        return op.expect.sha1
    after = sha1_bytes(op.content)
    return None if len(op.content) == op.expect.size and after == op.expect.sha1 else after


def _resolve(
    vault: Path, op: WriteFile | MoveFile | DeleteFile, result: ApplyResult, verified: set[str], *,
    journaled: bool = False,
) -> _Resolved | None:
    """``op`` checked against the file it will replace, move or delete (None: nothing to do, or a
    conflict added to ``result``). ``journaled``: the journal reads each before-image as it packs
    it, so an arc the plan expects is checked there rather than read twice."""
    if isinstance(op, MoveFile):
        (src, src_stat), (_, dst_stat) = confined_stat(vault, op.src, verified), confined_stat(vault, op.dst, verified)
        after_sha1 = _deferred(op, journaled)
        if after_sha1 is not None:
            item = _checked_by_journal(src_stat, op, after_sha1, result)
        else:
            current, seen = _current(src, op.expect, op.before)
            if not _matches(src, op.expect, current):
                _conflict(result, op.src, "changed since the scan")
                return None
            item = _resolved(op, current, op.content if op.content is not None else current, seen)
        if item is not None and dst_stat is not None:  # a file there (a link is refused by confined_stat)
            _conflict(result, op.dst, f"cannot move {op.src} here: the file already exists")
            return None
        return item
    path, path_stat = confined_stat(vault, op.path, verified)
    if isinstance(op, WriteFile):
        after_sha1 = _deferred(op, journaled)
        if after_sha1 is not None:
            return _checked_by_journal(path_stat, op, after_sha1, result)
        current, seen = _current(path, op.expect, op.before)
        if current is None and os.path.lexists(path):  # a folder or a named pipe there: never replaced
            _conflict(result, op.path, "not a regular file")
            return None
    else:
        current = _read(path)
    if isinstance(op, DeleteFile):
        if current is None:
            return None
        if not op.owned and (op.expect is None or not _matches(path, op.expect, current)):
            _conflict(result, op.path, "changed since the scan")
            return None
        return _resolved(op, current, None, _stat_of(path))
    if current == op.content:
        return None
    if not op.owned:
        if op.expect is None and current is not None:
            _conflict(result, op.path, "a file appeared here since the scan")
            return None
        if op.expect is not None and not _matches(path, op.expect, current):
            _conflict(result, op.path, "changed since the scan")
            return None
    return _resolved(op, current, op.content, seen if current is not None else None)


def temp_path(target: Path) -> Path:
    """Where new content is staged: a hidden file beside the target (never scanned)."""
    return Path(temp_name(os.fspath(target)))


def _parallel(function: Any, items: list[Any]) -> None:
    if len(items) < 8:
        for item in items:
            function(item)
        return
    run_all(function, items, FSYNC_WORKERS)


def _write_only(job: tuple[str, bytes]) -> None:
    tmp, data = job
    _write_into(create_new(tmp), data)  # never through a link put at the temporary name: out of the vault


def _write_into(fd: int, data: bytes, *, over: bool = False) -> None:
    """Write ``data`` from the start of ``fd`` (``over``: over what the file held, cut after it), then close it."""
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if over:
            os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_SYNCFS: Any = None


def _syncfs(folder: str | Path) -> bool:
    """Flush the whole filesystem holding ``folder`` in one call (Linux ``syncfs``)."""
    global _SYNCFS
    if _SYNCFS is None:
        try:
            import ctypes

            _SYNCFS = ctypes.CDLL(None, use_errno=True).syncfs
        except (OSError, AttributeError):
            _SYNCFS = False
    if not _SYNCFS:
        return False
    fd = os.open(folder, os.O_RDONLY)
    try:
        return int(_SYNCFS(fd)) == 0
    finally:
        os.close(fd)


def _stage(jobs: list[tuple[str, bytes]], made: set[str], spares: list[_Old]) -> set[str]:
    """Write every temp file, then make them all durable before any rename; returns the temp paths
    a folder blocks (their files are not written: the caller leaves them as they are).

    Each temp file is the one a child made for it ahead (``made``: :mod:`brain.io.precreate`),
    else an old image an earlier wave swapped out (``spares``: :func:`_reuse`), else a new file.
    Many files: one ``syncfs`` per filesystem involved (far cheaper than thousands of
    fsyncs); few files, or no syncfs: an fsync per file, in parallel.
    """
    flush_discards()  # an old image still waiting at a temp path this plan stages to must go first
    blocked: set[str] = set()
    for job in jobs:  # sequential: parallel creates only contend for the folder locks
        fd = precreate.open_made(job[0]) if job[0] in made else None
        if fd is not None:
            _write_into(fd, job[1])
            continue
        fd = _reuse(spares, job[0]) if spares else None
        if fd is not None:
            _write_into(fd, job[1], over=True)
            continue
        try:
            _write_only(job)
        except (IsADirectoryError, PermissionError):
            if not os.path.isdir(job[0]) or os.path.islink(job[0]):
                raise
            blocked.add(job[0])
    jobs = [job for job in jobs if job[0] not in blocked] if blocked else jobs
    if len(jobs) >= SYNCFS_THRESHOLD:
        devices: dict[int, str] = {}
        for folder in {os.path.dirname(tmp) for tmp, _ in jobs}:
            devices.setdefault(os.stat(folder).st_dev, folder)
        if all(_syncfs(folder) for folder in devices.values()):
            return blocked
    _parallel(_fsync_file, [tmp for tmp, _ in jobs])
    return blocked


RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
_AT_FDCWD = -100
_RENAMEAT2: Any = None


def load_renameat2() -> Any:
    """Linux ``renameat2`` through :mod:`ctypes` (False where there is none), looked up once. The
    import of ctypes is 3 ms: a tick that lists its vault in a child does it while it waits for
    the listing, not on the way to its first commit."""
    global _RENAMEAT2
    if _RENAMEAT2 is None:
        try:
            import ctypes

            function = ctypes.CDLL(None, use_errno=True).renameat2
            function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
            _RENAMEAT2 = function
        except (OSError, AttributeError):
            _RENAMEAT2 = False
    return _RENAMEAT2


def _renameat2(src: str, dst: str, flags: int) -> bool:
    """Linux ``renameat2``; False when the system or the filesystem cannot do it (then the
    caller falls back to a plain rename). Raises OSError (ENOENT, EEXIST…) like ``os.rename``."""
    function = load_renameat2()
    if not function:
        return False
    if function(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    import ctypes
    import errno

    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), dst)


def _stat_of(path: str | Path) -> tuple[int, int, int] | None:
    """(size, mtime_ns, inode) of ``path`` itself (not a link's target), None when it is gone."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


#: Keeps bytes an operator wrote while the tick committed a file; returns the reported problem.
Keep = Callable[[bytes], Problem]
#: An old image a commit swapped out: where it sits, its stat then, what keeps bytes written to it since.
_Old = tuple[str, tuple[int, int, int] | None, Keep]

#: Old images a commit swapped out, unlinked by background threads while the run goes on (freeing
#: an inode costs ten times the exchange that replaced it); :func:`flush_discards` waits for them.
#: Paths go to the workers in batches (one queued call per batch, not per file: 10 000 calls weigh MBs).
#: Each goes with the stat it had when it was swapped out, and what keeps bytes written to it since.
_PENDING: list[tuple[str, tuple[int, int, int] | None, Keep]] = []
#: Old images an editor wrote to after the swap (it had opened the file just before): kept, not
#: unlinked. Appended by the workers (list.append is atomic), handled by :func:`flush_discards`.
_LATE: list[tuple[str, Keep]] = []
_KEPT: list[Problem] = []
_DISCARDER: Workers | None = None  # started with the first batch of old images
DISCARD_WORKERS, DISCARD_BATCH = 4, 128


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _unlink_all(batch: list[tuple[str, tuple[int, int, int] | None, Keep]]) -> None:
    """Unlink each old image, unless it changed since the swap (an editor that opened the file
    just before it wrote into the old inode afterwards): that one waits for :func:`flush_discards`."""
    for path, swapped, keep in batch:
        if swapped is not None and _stat_of(path) not in (swapped, None):
            _LATE.append((path, keep))
            continue
        _unlink_quietly(path)


def _send_pending(parts: int = 1) -> None:
    """Hand the pending old images to the workers, in ``parts`` batches."""
    global _DISCARDER
    if not _PENDING:
        return
    if _DISCARDER is None:
        _DISCARDER = Workers(DISCARD_WORKERS, "brain-discard")
    batch = _PENDING[:]
    _PENDING.clear()
    for part in range(min(parts, len(batch))):
        _DISCARDER.submit(_unlink_all, batch[part::parts])


def _discard(path: str, swapped: tuple[int, int, int] | None, keep: Keep) -> None:
    _PENDING.append((path, swapped, keep))
    if len(_PENDING) >= DISCARD_BATCH:
        _send_pending()


def flush_discards() -> None:
    """Wait until every swapped-out old image is unlinked (the end of a transaction, or of a
    plan applied outside one). An old image written to after its swap is handed to its ``keep``
    (the journal's ``preserved/`` folder, and a reported problem: :func:`take_kept`) before it
    goes, so an append racing the commit is never lost. An unlink that fails leaves a hidden
    ``.brain-tmp`` file, never a visible one; the next commit to that file overwrites it."""
    # What is left goes to every worker at once: this process only waits now, and unlinks made in
    # parallel end sooner (90 old images on ext4: 7-11 ms on one thread, 3-5 ms on four).
    _send_pending(DISCARD_WORKERS)
    if _DISCARDER is not None:
        for error in _DISCARDER.wait():
            if not isinstance(error, OSError):
                raise error
    while _LATE:
        path, keep = _LATE.pop()
        try:
            _KEPT.append(keep(Path(path).read_bytes()))
        except OSError:
            continue  # left as a hidden .brain-tmp file rather than lost
        _unlink_quietly(path)


def take_kept() -> list[Problem]:
    """The problems :func:`flush_discards` reported since the last call (the transaction adds
    them to its run's report: they come after the plan's own result was read)."""
    kept = _KEPT[:]
    _KEPT.clear()
    return kept


#: A plan that stages many files stages and commits them in waves of :func:`wave_size` files.
WAVES, WAVE_MIN = 20, 250
_FRESH_MODE: int | None = None
#: Filesystems whose files only this machine's processes open, so a lease sees every other opener
#: (:func:`_unshared`): the only ones where an old file is written over. On a network or FUSE
#: filesystem (a VM's shared folder), an editor on another machine may hold an arc open unseen.
LOCAL_FILESYSTEMS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "f2fs", "bcachefs", "zfs",
                               "overlay"})
_FS_TYPES: dict[str, str | None] = {}
_MOUNT_ESCAPE = re.compile(r"\\([0-7]{3})")


def filesystem_type(path: str | Path) -> str | None:
    """The type of the filesystem ``path`` is on (Linux: the mount in ``/proc/self/mountinfo``
    with the longest mount point above its real path, the last mounted of those), looked up once
    per path; None where it cannot be told."""
    key = os.fspath(path)
    if key in _FS_TYPES:
        return _FS_TYPES[key]
    real = os.path.realpath(key)
    found, longest = None, -1
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as handle:
            for line in handle:
                head, sep, tail = line.partition(" - ")
                fields = head.split()
                if not sep or len(fields) < 5 or not tail.split():
                    continue
                mount = _MOUNT_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[4])
                if (real == mount or real.startswith(mount.rstrip("/") + "/")) and len(mount) >= longest:
                    found, longest = tail.split()[0], len(mount)
    except OSError:
        pass
    _FS_TYPES[key] = found
    return found


def wave_size(files: int) -> int:
    """How many of a plan's ``files`` each wave stages: about :data:`WAVES` waves, of at least
    :data:`WAVE_MIN` files (each wave costs one ``syncfs``). Cold ticks of the bench's vaults on
    its disk, medians of three: 10 000 arcs, 6.8 s in one wave, 4.5 s in waves of 1 000, 4.4 s
    of 500, 4.6 s of 250; 1 000 arcs, 1.30 s in one wave, 0.87 s in waves of 500, 0.71 s of 250;
    50 000 arcs, 23.9 s in one wave, 21.6 s in waves of 2 000, 22.9 s of 500."""
    return max(WAVE_MIN, files // WAVES)


def waved(vault: str | Path, rewrites: int) -> bool:
    """Whether a plan that swaps out ``rewrites`` old files of ``vault`` is staged in waves: when
    there are many, and the filesystem is one where an old file may be written over."""
    return rewrites > WAVE_MIN and filesystem_type(vault) in LOCAL_FILESYSTEMS


def first_wave(vault: str | Path, rewrites: int) -> int:
    """How many new temporary files a plan that rewrites ``rewrites`` files of ``vault`` makes:
    its first wave's (the later ones write over old files), or all of them in one wave."""
    return wave_size(rewrites) if waved(vault, rewrites) else rewrites


def _fresh_mode() -> int:
    """The mode a file made here with 0o644 gets (the process's umask applied), read once."""
    global _FRESH_MODE
    if _FRESH_MODE is None:
        mode = 0o644
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith("Umask:"):
                    mode &= ~int(line.split()[1], 8)
        _FRESH_MODE = mode
    return _FRESH_MODE


def _lease(fd: int) -> bool:
    """Take a write lease on the file of ``fd`` (Linux): granted only when no other process has it
    open, nor mapped; False then, or where leases are not supported. A process that opens the file
    while it is held breaks it, which the kernel tells with a signal: SIGURG, ignored unless
    handled, rather than SIGIO, whose default ends this process."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
    except (OSError, AttributeError):
        return False
    return True


def _unlease(fd: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)


def _plain(fd: int) -> bool:
    """Whether the file of ``fd`` has no extended attribute that would pass to another arc with it
    (an ACL, a user's tag); the security label every file of a folder gets is not one."""
    try:
        names = os.listxattr(fd)
    except OSError as exc:
        return exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP)  # a filesystem without them
    return all(name.startswith("security.") for name in names)


def _unshared(fd: int) -> bool:
    """Whether no other process has the file of ``fd`` open, nor mapped: a lease, let go at once."""
    if not _lease(fd):
        return False
    _unlease(fd)
    return True


def _reuse(spares: list[_Old], tmp: str) -> int | None:
    """A descriptor for writing the temp file ``tmp`` over an old image an earlier wave of the
    plan swapped out, renamed to ``tmp`` (None: none can serve; the caller makes a new file).

    On the bench's disk making a file costs 20-400 µs of kernel time (and unlinking an old one
    80 µs); renaming one and writing over its blocks, 30 µs. An old image serves only when
    nothing can reach it but this writer: the very file the exchange swapped out (no write since),
    a regular file linked once, ours, with a new file's mode and no extended attribute of its own,
    and open nowhere else (an editor that opened the arc just before the exchange and writes after
    it must not write into another arc). Any other goes to :func:`_discard`, which keeps what was
    written to it.
    """
    while spares:
        path, swapped, keep = spares.pop()
        found = open_sole(path)  # None: gone, linked twice, or not to be written (immutable, append-only)
        if found is None:
            _discard(path, swapped, keep)
            continue
        fd, st = found
        if (st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) != _fresh_mode()
                or (st.st_size, st.st_mtime_ns, st.st_ino) != swapped or not _plain(fd) or not _unshared(fd)):
            os.close(fd)
            _discard(path, swapped, keep)
            continue
        try:
            if _renameat2(path, tmp, RENAME_NOREPLACE):
                return fd
        except OSError:
            pass  # something sits at tmp: the new file the caller makes deals with it
        os.close(fd)
        _unlink_quietly(path)
        return None
    return None


class _Raced(Exception):
    """The operator changed, deleted or renamed the file while the tick was committing it."""


def _commit_over(tmp: str, target: str, seen: tuple[int, int, int] | None, written: tuple[int, int] | None,
                 keep: Any, spares: list[_Old] | None = None) -> None:
    """Put the staged ``tmp`` in place of ``target``, which must still be the file the plan read.

    Checked as late as possible: a stat just before; then an atomic exchange (``renameat2``),
    after which the old file sits at ``tmp`` and can be inspected. If the operator saved in
    between, the exchange is undone, so the file holds the operator's bytes, and the tick's
    bytes (with anything appended to them meanwhile) go to ``keep``; nothing is lost either way.
    The old file goes to ``spares`` (a later wave writes over it), else to :func:`_discard`.
    """
    now = _stat_of(target)
    if now is None:
        raise _Raced("deleted or renamed during the tick")
    if seen is not None and now != seen:
        raise _Raced("edited during the tick")
    try:
        exchanged = _renameat2(tmp, target, RENAME_EXCHANGE)
    except FileNotFoundError:
        raise _Raced("deleted or renamed during the tick") from None
    if not exchanged:
        os.replace(tmp, target)  # no atomic exchange here: the stat above is the last check
        return
    old = _stat_of(tmp)
    if seen is None or old == seen:  # the very inode the plan read, untouched: the commit stands
        if spares is None:
            _discard(tmp, old, keep)
        else:
            spares.append((tmp, old, keep))
        return
    # The operator saved between the stat and the exchange: give the file back to them.
    with contextlib.suppress(OSError):
        _renameat2(tmp, target, RENAME_EXCHANGE)
    ours = _stat_of(tmp)
    if ours is not None and written is not None and ours[:2] != written:
        keep(Path(tmp).read_bytes())  # appended to the tick's copy in the instant it was in place
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    raise _Raced("edited during the tick")


def _place_new(tmp: str, target: str) -> None:
    """A file that must not exist yet: never replaces one that appeared meanwhile."""
    try:
        if _renameat2(tmp, target, RENAME_NOREPLACE):
            return
    except FileExistsError:
        os.unlink(tmp)
        raise _Raced("a file appeared here during the tick") from None
    if os.path.lexists(target):
        os.unlink(tmp)
        raise _Raced("a file appeared here during the tick")
    os.replace(tmp, target)


def _move(src: str, dst: str, seen: tuple[int, int, int] | None) -> None:
    now = _stat_of(src)
    if now is None:
        raise _Raced("deleted or renamed during the tick")
    if seen is not None and now != seen:
        raise _Raced("edited during the tick")
    try:
        if _renameat2(src, dst, RENAME_NOREPLACE):
            return
    except FileNotFoundError:
        raise _Raced("deleted or renamed during the tick") from None
    except FileExistsError:
        raise _Raced(f"cannot move here, {dst} appeared during the tick") from None
    if os.path.lexists(dst):
        raise _Raced(f"cannot move here, {dst} appeared during the tick")
    try:
        os.rename(src, dst)
    except FileNotFoundError:
        raise _Raced("deleted or renamed during the tick") from None


def _execute_all(vault: Path, items: list[_Resolved], result: ApplyResult,
                 journal: Journal | None, progress: Step | None = None) -> list[_Resolved]:
    """Stage every new content as a durable temp file, then commit file by file in plan order;
    in waves of :func:`wave_size` staged files, each staged once the one before is committed.

    Each commit is atomic, so a kill at any instant leaves every file old or new; folder
    entries are fsynced once per folder at the end. A file the operator touched since it was
    checked is a reported conflict, never overwritten and never a crash (see
    :func:`_commit_over`); returns the operations that were carried out.
    """
    root = str(vault)
    staged: dict[int, str] = {}
    jobs: list[tuple[str, bytes]] = []  # (temp path, content), in the order of staged
    rewrites = 0
    folders: set[str] = set()
    for index, item in enumerate(items):
        op = item.op
        if isinstance(op, DeleteFile):
            folders.add(os.path.dirname(os.path.join(root, op.path)))
            continue
        if isinstance(op, MoveFile):
            folders.add(os.path.dirname(os.path.join(root, op.src)))
            target = os.path.join(root, op.dst)
            folders.add(os.path.dirname(target))
            if op.content is None or item.after_sha1 == item.before_sha1:
                continue
        else:
            target = os.path.join(root, op.path)
            folders.add(os.path.dirname(target))
        assert op.content is not None
        staged[index] = temp_name(target)
        jobs.append((staged[index], op.content))
        if item.before_sha1 is not None:  # its commit swaps an old file out
            rewrites += 1
    for folder in sorted(folders):
        os.makedirs(folder, exist_ok=True)
    if progress is not None:
        progress(COMMITTED, 0, len(items))
    ahead = precreate.take()  # the temp files a child made while the plan was worked out
    made = ahead.made() if ahead is not None else set()
    # The waves, by the index in the plan each starts at. The old images the commits of one
    # wave swap out are the spares the next one writes over; the last one's are unlinked.
    # Waves only where old files come out to write over (not a plan of new files: brain cluster's).
    size = wave_size(len(jobs)) if waved(root, rewrites) else max(1, len(jobs))
    waves: dict[int, list[tuple[str, bytes]]] = {}
    wave: list[tuple[str, bytes]] = []
    for index, job in zip(staged, jobs, strict=True):
        if not waves or len(wave) == size:
            wave = waves[index] = []
        wave.append(job)
    last = max(waves, default=0)
    spares: list[_Old] = []
    blocked: set[str] = set()
    done: list[_Resolved] = []
    try:
        for index, item in enumerate(counted(items, progress, COMMITTED)):
            if index in waves:
                blocked |= _stage(waves[index], made, spares)
            if _commit(root, index, item, staged, blocked, spares if index < last else None, result, journal):
                done.append(item)
    finally:
        if ahead is not None:
            precreate.done(ahead, staged.values())
        for old in spares:  # more than the last wave needed
            _discard(*old)
    _parallel(fsync_dir, [Path(f) for f in sorted(folders)])
    return done


def _commit(root: str, index: int, item: _Resolved, staged: dict[int, str], blocked: set[str],
            spares: list[_Old] | None, result: ApplyResult, journal: Journal | None) -> bool:
    """Carry out one operation of the plan, its content staged at ``staged[index]``; False when it
    did not happen (a reported conflict). The old image it swaps out goes to ``spares``."""
    op = item.op
    path = op.src if isinstance(op, MoveFile) else op.path

    def keep(data: bytes, path: str = path) -> Problem:
        where = journal.preserve(path, data) if journal is not None else None
        problem = Problem(path, None, "an edit made while the tick committed this file "
                          + (f"is kept in {where}" if where else "could not be kept"))
        result.problems.append(problem)
        return problem

    try:
        if staged.get(index) in blocked:
            raise _Raced(f"a folder sits at its temporary name {os.path.relpath(staged[index], root)}")
        if isinstance(op, MoveFile):
            dst = os.path.join(root, op.dst)
            _move(os.path.join(root, op.src), dst, item.seen)
            if index in staged:
                try:
                    _commit_over(staged[index], dst, item.seen, _staged_stat(staged[index]), keep, spares)
                except (_Raced, OSError) as exc:  # moved, but the operator's text stays as they saved it
                    result.conflicts.add(op.dst)
                    result.problems.append(Problem(op.dst, None, f"{_why(exc)}; not rewritten, the next tick "
                                                                 "takes it up"))
        elif isinstance(op, DeleteFile):
            now = _stat_of(os.path.join(root, op.path))
            if now is None:
                return False  # already gone
            if not op.owned and item.seen is not None and now != item.seen:
                raise _Raced("edited during the tick")
            os.unlink(os.path.join(root, op.path))
        elif item.before_sha1 is None:
            if op.owned:
                os.replace(staged[index], os.path.join(root, op.path))
            else:
                _place_new(staged[index], os.path.join(root, op.path))
        else:
            target = os.path.join(root, op.path)
            if op.owned and not os.path.lexists(target):
                os.replace(staged[index], target)
            else:
                _commit_over(staged[index], target, None if op.owned else item.seen,
                             _staged_stat(staged[index]), keep, spares)
    except (_Raced, OSError) as exc:  # raced, or this one file refused (EACCES, ENOSPC): the run goes on
        with contextlib.suppress(OSError):
            if index in staged and os.path.lexists(staged[index]):
                os.unlink(staged[index])
        if journal is not None:
            journal.skip(path)
        _conflict(result, path, _why(exc))
        return False
    return True


def _why(exc: Exception) -> str:
    """What a commit that did not happen met: the race, or the system's words for the refusal."""
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


def _staged_stat(tmp: str) -> tuple[int, int] | None:
    found = _stat_of(tmp)
    return None if found is None else found[:2]


# --- recovery and undo -------------------------------------------------------------------


@dataclass
class UndoResult:
    tick_id: str
    restored: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    done: bool = False
    damaged: str | None = None  # why the journal could not be trusted (then nothing was restored)


def journals(vault: Path) -> list[dict[str, Any]]:
    """All journal manifests, oldest first (tick ids sort by time)."""
    root = vault / JOURNAL_DIR
    found: list[dict[str, Any]] = []
    if not root.is_dir():
        return found
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        try:
            manifest = json.loads(read_regular(entry / "manifest.json"))
        except (OSError, ValueError):
            continue
        if isinstance(manifest, dict) and isinstance(manifest.get("tick_id"), str):
            found.append(manifest)
    return found


#: What :func:`_sha_of` says of a folder or a named pipe where a file was: no image's hash, so
#: undo never counts it as its file, and never removes or overwrites it, even with ``force``.
NOT_A_FILE = "not a regular file"


def _sha_of(path: Path) -> str | None:
    data = _read(path)
    if data is None:
        return NOT_A_FILE if os.path.lexists(path) else None
    return sha1_bytes(data)


def _not_a_file(path: Path) -> bool:
    """Something stands at ``path`` that :func:`_sha_of` calls :data:`NOT_A_FILE` (told by a stat,
    not a read and a hash)."""
    return os.path.lexists(path) and not os.path.isfile(path)


def undo(vault: Path, tick_id: str, *, force: bool, dry_run: bool = False) -> UndoResult:
    """Restore the before-images of ``tick_id``; refuse files edited since unless ``force``."""
    root = vault / JOURNAL_DIR / tick_id
    manifest = load_manifest(vault, tick_id)
    result = UndoResult(tick_id)
    state: dict[str, str | None] = {}

    def current(rel: str) -> str | None:
        if rel not in state:
            state[rel] = _sha_of(vault / rel)
        return state[rel]

    for op in reversed(manifest["ops"]):
        if op["op"] == "move":
            at_dst, at_src = current(op["dst"]), current(op["path"])
            if at_dst is None and at_src == op["before"]:
                continue  # never happened
            if at_dst not in (op["after"], op["before"]) or at_src is not None:
                result.conflicts.append(op["dst"])
            state[op["dst"]], state[op["path"]] = None, op["before"]
        else:
            now_sha = current(op["path"])
            if now_sha == op["before"]:
                continue
            if now_sha != op["after"]:
                result.conflicts.append(op["path"])
            state[op["path"]] = op["before"]
    if result.conflicts and not force:
        return result
    if dry_run:
        result.done = True
        return result
    images = _before_images(root, manifest["ops"])  # all of them, checked, before any file changes
    for op, before in reversed(list(zip(manifest["ops"], images, strict=True))):
        blocked = [rel for rel in (op["path"], op.get("dst")) if rel and _not_a_file(vault / rel)]
        if blocked:  # a folder or a pipe stands there now: left as it is, even with force
            result.conflicts.extend(rel for rel in blocked if rel not in result.conflicts)
            continue
        if op["op"] == "move":
            dst, src = vault / op["dst"], vault / op["path"]
            if before is not None:
                atomic_write(src, before)
            with contextlib.suppress(FileNotFoundError):
                dst.unlink()
            result.restored.append(op["path"])
        else:
            path = vault / op["path"]
            if before is None:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
            elif _read(path) != before:
                atomic_write(path, before)
            result.restored.append(op["path"])
    manifest["state"] = "undone"
    atomic_write(root / "manifest.json", json.dumps(manifest, indent=1).encode())
    result.done = True
    return result


_HEAD_STATE = re.compile(rb'^\{"tick_id":"[^"]*","now":"[^"]*","state":"([a-z]+)","ops":')


def _completed(manifest: Path) -> bool:
    """Whether a journal is complete, from the first bytes of its manifest (the journal writes
    ``tick_id``, ``now``, ``state`` before ``ops``): a tick does not parse a 10 000-op manifest
    to learn it has nothing to roll back. Anything else is read in full by the caller."""
    try:
        head = read_regular(manifest, 512)
    except OSError:
        return False
    match = _HEAD_STATE.match(head)
    return match is not None and match.group(1) == b"complete"


#: In a journal's folder once its run ended and the old files its exchanges swapped out are all
#: unlinked (or kept): a complete journal without it is the run of a process killed after its
#: last write (its journal is complete from there, see ``pipeline/tick.py``) and before its end.
SWEPT = "swept"


def mark_swept(journal: Journal) -> None:
    """The run of ``journal`` ended with its old images gone (:func:`flush_discards`). Not fsynced:
    a mark a crash loses only makes the next recovery look at the journal's temp files again."""
    if journal.opened:
        _mark_swept(journal.root)


def _mark_swept(folder: Path) -> None:
    with contextlib.suppress(OSError):
        os.close(os.open(folder / SWEPT, os.O_WRONLY | os.O_CREAT | NOFOLLOW, 0o644))


def _sweep(vault: Path, entry: Path) -> None:
    """The old images a complete journal's run left at its temp names when it was killed before
    its end (each holds the before image the pack holds too): removed, or kept in the journal
    when they hold anything else (an append that reached one after its swap); then marked."""
    try:
        manifest = load_manifest(vault, entry.name)
    except (FileNotFoundError, JournalError):
        manifest = None  # paths that cannot be trusted: nothing is touched
    if manifest is not None:
        _clear_all_staged(vault, manifest)
    _mark_swept(entry)


def _clear_all_staged(vault: Path, manifest: dict[str, Any]) -> None:
    """:func:`_clear_staged` at the temp name of every path the journal's operations name."""
    # What the run itself put at a temp name: a before or after image of one of its operations
    # (a later wave's temp file may still hold the old image of another arc, see _reuse).
    own = {op[key] for op in manifest["ops"] for key in ("before", "after") if op.get(key)}
    for op in manifest["ops"]:
        for rel in (op["path"], op.get("dst")):
            if rel:
                _clear_staged(vault, manifest["tick_id"], rel, own)


def recover(vault: Path) -> list[UndoResult]:
    """Roll back every journal a crashed process left ``pending`` (files edited since are kept),
    and clear what a process killed after its last write left (:data:`SWEPT`)."""
    results = []
    root = vault / JOURNAL_DIR
    entries = sorted(root.iterdir(), key=lambda p: p.name) if root.is_dir() else []
    newest: Path | None = None  # the newest complete journal
    for entry in entries:
        if _completed(entry / "manifest.json"):
            newest = entry
            continue
        if not entry.is_dir():
            continue
        try:
            manifest = load_manifest(vault, entry.name)
        except FileNotFoundError:
            continue  # killed before its first plan was recorded: nothing of it was carried out
        except JournalError as exc:
            results.append(UndoResult(entry.name, damaged=str(exc)))
            continue
        if manifest.get("state") == "pending":
            _clear_all_staged(vault, manifest)  # content staged but never renamed into place
            try:
                result = undo(vault, manifest["tick_id"], force=False)
            except JournalError as exc:  # a pack that lost or changed bytes: nothing was restored
                results.append(UndoResult(entry.name, damaged=str(exc)))
                continue
            if not result.done:
                # Someone edited a file after the crash: keep their text, roll back the rest.
                result = _undo_unconflicted(vault, manifest, result)
            results.append(result)
    # Only the newest complete journal can lack its mark: every run recovers before it writes.
    if newest is not None and not (newest / SWEPT).exists():
        _sweep(vault, newest)
    precreate.clear_left(vault)  # temp files made ahead for a plan the crash stopped before staging
    return results


def _clear_staged(vault: Path, tick_id: str, rel: str, own: set[str]) -> None:
    """Remove a staged temp file; one holding none of the run's own images (``own``: their sha1s)
    is an operator's save caught mid-exchange by the crash: it is kept in the journal, not deleted."""
    staged = temp_path(vault / rel)
    if staged.is_symlink():  # never the tick's: not read through (it may point anywhere), only removed
        with contextlib.suppress(OSError):
            staged.unlink()
        return
    data = _read(staged)
    if data is None:
        return
    if data and sha1_bytes(data) not in own:
        with contextlib.suppress(OSError):
            atomic_write(vault / JOURNAL_DIR / tick_id / "preserved" / rel, data)
    with contextlib.suppress(OSError):
        staged.unlink()


def _undo_unconflicted(vault: Path, manifest: dict[str, Any], first: UndoResult) -> UndoResult:
    keep = set(first.conflicts)
    manifest["ops"] = [op for op in manifest["ops"] if op.get("dst", op["path"]) not in keep and op["path"] not in keep]
    root = vault / JOURNAL_DIR / manifest["tick_id"]
    atomic_write(root / "manifest.json", json.dumps(manifest, indent=1).encode())
    result = undo(vault, manifest["tick_id"], force=True)
    result.conflicts = first.conflicts
    return result


def prune_journals(vault: Path, keep: int) -> None:
    root = vault / JOURNAL_DIR
    if not root.is_dir():
        return
    entries = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.name)
    for entry in entries[: max(0, len(entries) - keep)]:
        shutil.rmtree(entry, ignore_errors=True)
