"""Temporary files made ahead: a cold tick's writer stages thousands of files, and on some disks
making a file costs far more than writing into one.

The writer stages each new file at ``.<name>.brain-tmp`` beside its target (:mod:`brain.io.writer`).
On the bench's virtual disk, making such a file costs 20-400 µs of the kernel's CPU time, writing
4 KB into one that exists 9 µs: ten thousand made one after the other are most of a cold tick.
Once the keeper has decided which arcs it rewrites (before it reads and renders them), a forked
child makes the temporary files of the writer's first wave, empty, on the second core; the writer
then only writes into them (:func:`take`). Each later wave writes over the old files the one
before swapped out (``brain.io.writer._reuse``).

Nothing is lost if this goes wrong: a temporary file the child did not make (something else was
there, or the child failed) is made by the writer as always, and one it made but the plan does
not use is removed. The child first writes the list of the files it will make (``.brain/precreated``,
fsynced); the transaction's recovery removes those still empty after a crash (:func:`clear_left`),
so a tick killed between the two leaves no empty hidden file behind. The child holds the tick's
lock with it (it inherits the descriptor), so no other run recovers while it still makes files,
and it stops as soon as the tick is gone.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from brain.io.atomic import (
    CREATE_NEW,
    TMP_SUFFIX,
    ConfinementError,
    atomic_write,
    confined_folder,
    open_sole,
    read_regular,
    temp_name,
)
from brain.io.background import Forked

#: The list of the files a child makes, for recovery after a crash.
LIST_FILE = ".brain/precreated"
#: Fewer files than this are made by the writer as it stages them (a fork costs more).
MIN_FILES = 100


class Ahead:
    """The child making the temporary files ``tmps`` of the plan to come, in ``vault``."""

    def __init__(self, vault: Path, child: Forked, tmps: list[str]) -> None:
        self.vault = vault
        self.child = child
        self.tmps = tmps

    def made(self) -> set[str]:
        """The temporary files the child made (absolute paths), once it is done; none when it failed."""
        found = self.child.output(lambda data: bytes(data).decode("utf-8", "surrogateescape"))
        return set(found.split("\0")) if found else set()


_AHEAD: Ahead | None = None


def start(vault: Path, targets: Iterable[str]) -> bool:
    """Have a forked child make the empty temporary file of each of ``targets`` (vault-relative
    paths the next plan writes); False when there are too few, or no child could start. Each
    target's folder is proven to be inside the vault here, before the child makes anything."""
    global _AHEAD
    if _AHEAD is not None:
        return False
    verified: set[str] = set()
    tmps: list[str] = []
    folders: set[str] = set()
    for rel in targets:
        try:
            folder = confined_folder(vault, rel, verified)
        except ConfinementError:
            continue  # the writer refuses it and reports it
        folders.add(folder)
        tmps.append(temp_name(os.path.join(vault, rel)))
    if len(tmps) < MIN_FILES:
        return False
    listed = "\n".join(os.path.relpath(tmp, vault) for tmp in tmps).encode("utf-8", "surrogateescape")

    def make() -> bytes:
        parent = os.getppid()
        atomic_write(vault / LIST_FILE, listed)  # durable before any file it names exists
        for folder in sorted(folders):
            os.makedirs(folder, exist_ok=True)
        made = []
        for tmp in tmps:
            if os.getppid() != parent:
                break  # the tick was killed: stop now, and let go of its lock (the next tick clears up)
            try:
                os.close(os.open(tmp, CREATE_NEW, 0o644))
            except OSError:
                continue  # something is there already: the writer deals with it as it stages
            made.append(tmp)
        return "\0".join(made).encode("utf-8", "surrogateescape")

    child = Forked.start(make)
    if child is None:
        return False
    _AHEAD = Ahead(vault, child, tmps)
    return True


def take() -> Ahead | None:
    """The files being made ahead, for the plan the writer stages now (None: none are); the writer
    calls :func:`done` once it has staged."""
    global _AHEAD
    ahead, _AHEAD = _AHEAD, None
    return ahead


def open_made(tmp: str) -> int | None:
    """A descriptor for writing into ``tmp``, a file made ahead, when it is still that very file:
    regular, empty, linked once (None: something else is there now; the caller makes it anew)."""
    found = open_sole(tmp)
    if found is None:
        return None
    fd, st = found
    if st.st_size == 0:
        return fd
    os.close(fd)
    return None


def done(ahead: Ahead, staged: Iterable[str] = ()) -> None:
    """The plan is staged (``staged``: its temp files): remove those the child was to make that
    the plan did not use and that are still empty (made, or made before a child that failed
    stopped), then the list."""
    for tmp in set(ahead.tmps).difference(staged):
        _remove_if_empty(tmp)
    with contextlib.suppress(OSError):
        os.unlink(ahead.vault / LIST_FILE)


def cancel() -> None:
    """A run that ends before staging what was made ahead for it: the child is waited for and its
    files are removed."""
    ahead = take()
    if ahead is not None:
        ahead.child.wait()
        done(ahead)


def clear_left(vault: Path) -> None:
    """After a crash: remove the files a child made ahead that are still empty, then the list.
    A listed file that holds bytes is left to the journal's recovery, which ran before."""
    try:
        listed = read_regular(vault / LIST_FILE).decode("utf-8", "surrogateescape").splitlines()
    except OSError:
        return
    verified: set[str] = set()
    for rel in listed:
        if not os.path.basename(rel).startswith(".") or not rel.endswith(TMP_SUFFIX):
            continue  # never a name the writer stages to: not ours to remove
        try:
            confined_folder(vault, rel, verified)
        except ConfinementError:
            continue
        _remove_if_empty(os.path.join(vault, rel))
    with contextlib.suppress(OSError):
        os.unlink(vault / LIST_FILE)


def _remove_if_empty(path: str) -> None:
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_size == 0:
            os.unlink(path)
