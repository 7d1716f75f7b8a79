"""Low-level atomic file primitives: temp file in the same folder, fsync, rename.

Everything that writes into a vault goes through :mod:`brain.io.writer`, which uses these.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path


def regular_stat(fd: int, path: str | Path) -> os.stat_result:
    """The ``fstat`` of an open file; OSError (EINVAL) when it is not a regular file (a folder, a
    named pipe: opened with ``O_NONBLOCK``, so the open itself never waited)."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return st


def read_regular(path: str | Path, limit: int = -1, *, tail: bool = False) -> bytes:
    """The bytes of ``path`` (at most ``limit``; its last ``limit`` with ``tail``) when it is a
    regular file; OSError otherwise. It is opened without blocking and checked before any read, so
    a named pipe in its place (an editor, a sync tool, a stray ``mkfifo``) is an error at once
    instead of a wait for a writer forever."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = regular_stat(fd, path)
        with os.fdopen(os.dup(fd), "rb") as handle:
            if tail and limit >= 0:
                handle.seek(max(0, st.st_size - limit))
            return handle.read(limit)
    finally:
        os.close(fd)


#: A temporary file's name is ``.<name>`` + this, beside the file it becomes (never scanned).
TMP_SUFFIX = ".brain-tmp"
#: ``O_NOFOLLOW`` where the system has it: an open that refuses a link at the name itself.
NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
#: A new file made at the name itself: never through a link, never a pipe opened (:func:`create_new`).
CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW


def temp_name(target: str) -> str:
    """Where the writer stages ``target``'s new bytes: a hidden file beside it."""
    head, name = os.path.split(target)
    return os.path.join(head, f".{name}{TMP_SUFFIX}")


def create_new(path: str | Path, mode: int = 0o644) -> int:
    """A descriptor open for writing on a new, empty regular file made at ``path`` itself. A temporary
    name is the brain's own: what sits there (the temporary file of a run that died, a link or a named
    pipe put there) is unlinked first, never written through (``O_EXCL`` makes the file here, not
    where a link points, and never opens a pipe). A folder there is an OSError, left as it is."""
    try:
        return os.open(path, CREATE_NEW, mode)
    except FileExistsError:
        os.unlink(path)  # a folder: IsADirectoryError (PermissionError on some systems), for the caller
        return os.open(path, CREATE_NEW, mode)


class ConfinementError(ValueError):
    """A path would leave the vault."""


def open_sole(path: str | Path) -> tuple[int, os.stat_result] | None:
    """A descriptor open for writing on ``path`` itself, with its stat, when it is a regular file
    linked once (None otherwise, or when it cannot be opened). Never through a link at the name,
    never waiting on a named pipe there; nothing else reaches the file by another name."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | NOFOLLOW)
    except OSError:
        return None
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
        return fd, st
    os.close(fd)
    return None


def confined(root: Path, relative: str, verified: set[str] | None = None) -> Path:
    """``root / relative``, refusing anything that escapes ``root`` (``..``, absolute, symlinks).

    ``verified`` caches the folders already proven to resolve inside ``root`` during one plan.
    """
    if verified is not None:
        return Path(confined_stat(root, relative, verified)[0])
    _refuse_escapes(relative)
    return _confined_walk(root, root / relative, relative, None)


def confined_stat(root: Path, relative: str, verified: set[str]) -> tuple[str, os.stat_result | None]:
    """:func:`confined` as a string, with the ``lstat`` of the file itself (None: there is none),
    the one the symlink check took: the writer checks ten thousand paths a cold tick, and reads
    their stat anyway."""
    parts = _refuse_escapes(relative)
    if relative.rpartition("/")[0] not in verified:
        _confined_walk(root, root / relative, relative, verified)
    # As ``root / relative`` spells it: a path with empty or "." parts the slow way.
    target = os.path.join(root, relative) if "" not in parts and "." not in parts else str(root / relative)
    try:
        st = os.lstat(target)
    except OSError:  # none there (or none to see): what os.path.islink says too
        return target, None
    if stat.S_ISLNK(st.st_mode):
        raise ConfinementError(f"path {relative!r} is a symbolic link")
    return target, st


def confined_folder(root: Path, relative: str, verified: set[str]) -> str:
    """The folder of ``relative`` (a file's vault-relative path), proven to resolve inside ``root``
    like :func:`confined_stat` proves it (``verified`` caches the folders proven), with no stat of
    the file itself."""
    _refuse_escapes(relative)
    folder = relative.rpartition("/")[0]
    if folder not in verified:
        _confined_walk(root, root / relative, relative, verified)
    return os.path.join(root, folder) if folder else str(root)


def _refuse_escapes(relative: str) -> list[str]:
    """``relative``'s parts; ConfinementError when it is not a path inside the vault."""
    if not relative or relative.startswith(("/", "\\")) or "\x00" in relative:
        raise ConfinementError(f"path {relative!r} is not a vault-relative path")
    parts = relative.split("/")
    if ".." in parts:  # the parts a POSIX path keeps: "." and empty ones are dropped
        raise ConfinementError(f"path {relative!r} leaves the vault")
    return parts


def _confined_walk(root: Path, target: Path, relative: str, verified: set[str] | None) -> Path:
    folder = relative.rpartition("/")[0]
    root_real = root.resolve()
    # Every existing ancestor must resolve inside the vault: a symlinked folder cannot redirect us.
    probe = target.parent
    while True:
        if probe.exists():
            real = probe.resolve()
            if real != root_real and root_real not in real.parents:
                raise ConfinementError(f"path {relative!r} resolves outside the vault")
            break
        if probe == root:  # a root that does not exist yet (a dry run into a new folder) holds nothing
            break
        probe = probe.parent
    if target.is_symlink():
        raise ConfinementError(f"path {relative!r} is a symbolic link")
    if verified is not None:
        # A folder that does not exist yet is proven by its nearest existing ancestor, as above:
        # the next file of the plan bound for it (a cold tick moves thousands into one) is not walked again.
        verified.add(folder)
    return target


def fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes, *, mode: int | None = None, durable: bool = True) -> None:
    """Write ``data`` to ``path`` so that a crash leaves either the old or the new file.

    ``durable`` False skips the two fsyncs: for the brain's own caches under ``.brain/``, each of
    which checks what it loads (a key, a tick id) and is only rebuilt when a crash lost it."""
    atomic_write_chunks(path, (data,), mode=mode, durable=durable)


def atomic_write_chunks(path: Path, chunks: Iterable[bytes], *, mode: int | None = None,
                        durable: bool = True) -> None:
    """:func:`atomic_write` of the concatenation of ``chunks``, never joined in memory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = create_new(tmp, 0o644 if mode is None else mode)
    try:
        for data in chunks:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    if mode is None:
        with contextlib.suppress(OSError):
            os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)


def append_line(path: Path, line: str) -> None:
    """Append one line (for ``health.jsonl``); a single write() of a whole line. Only to a regular
    file: a named pipe in its place is an OSError at once, never a wait for a reader."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, 0o644)
    try:
        regular_stat(fd, path)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
