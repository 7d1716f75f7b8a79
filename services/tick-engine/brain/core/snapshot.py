"""The vault as one frozen value: what the one scanner saw, and what a plan makes of it.

A tick scans once. Every later phase works on a :class:`Snapshot`; a plan that was applied
is folded into it in memory (:meth:`Snapshot.with_changes`), so keeper → AI → keeper compose
without walking the disk again. Only the files a tick wrote are read back (verify).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from brain.core.model import Note, Problem, parse_note
from brain.core.vocab import MANAGED_ROOTS

#: Top-level folders whose ``cluster_id`` notes are arcs (SPEC §3): the managed compartments and
#: the amygdala's alarm files. A ``cluster_id`` note anywhere else (templates/, daily notes) is
#: the operator's: its markers count, it is never edited or moved.
ARC_ROOTS = MANAGED_ROOTS | {"amygdala"}


def in_arc_folder(path: str) -> bool:
    """Whether a vault-relative path lies where arcs live (SPEC §3)."""
    head, sep, _ = path.partition("/")
    return bool(sep) and head in ARC_ROOTS


def vault_note(path: str, data: bytes, *, mtime_ns: int, arcs_anywhere: bool = False) -> Note:
    """A vault file's note: :func:`parse_note`, with the arc rule of SPEC §3 applied."""
    note = parse_note(path, data, size=len(data), mtime_ns=mtime_ns,
                      sha1=hashlib.sha1(data, usedforsecurity=False).hexdigest())
    if note.arc is not None and not arcs_anywhere and not in_arc_folder(path):
        return dataclasses.replace(note, arc=None)
    return note


@dataclass(frozen=True)
class ScanStats:
    files: int = 0
    parsed: int = 0
    cached: int = 0
    ms: float = 0.0
    from_view: int = 0  # of the cached, rows taken from the last tick's view (newer than the parse cache)


@dataclass(frozen=True)
class ScanDelta:
    """Note paths whose content is new or changed since the last scan, and paths gone since.

    Consumers that keep their own index of the vault (search) refresh exactly these.
    """

    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changed or self.removed)


@dataclass(frozen=True)
class Snapshot:
    """Every note of the vault (vault-relative path -> :class:`Note`) at one instant."""

    vault: Path
    notes: Mapping[str, Note]
    problems: tuple[Problem, ...] = ()
    stats: ScanStats = ScanStats()
    delta: ScanDelta = ScanDelta()
    #: Bytes of the files this scan read, keyed by path; the planner uses them instead of a re-read.
    raw: Mapping[str, bytes] = field(default_factory=dict, compare=False, repr=False)

    @property
    def arcs(self) -> list[Note]:
        return [n for n in self.notes.values() if n.arc is not None]

    def arcs_by_id(self) -> dict[str, list[Note]]:
        grouped: dict[str, list[Note]] = defaultdict(list)
        for note in self.notes.values():
            if note.arc is not None:
                grouped[note.arc.cluster_id].append(note)
        return grouped

    def with_changes(
        self,
        written: Mapping[str, Note],
        *,
        moved: Iterable[tuple[str, str]] = (),
        deleted: Iterable[str] = (),
        read: Mapping[str, bytes] | None = None,
    ) -> Snapshot:
        """The snapshot after a plan was applied: ``written`` are the new notes (by their new
        path), ``moved`` the (src, dst) renames, ``deleted`` the removed paths. ``read``: the
        bytes of written notes as they were just read back (each the bytes its note was made from)."""
        notes = dict(self.notes)
        raw = dict(self.raw)
        for src, dst in moved:
            note = notes.pop(src, None)
            raw.pop(src, None)
            if note is not None and dst not in written:
                notes[dst] = dataclasses.replace(
                    note, path=dst, problems=tuple(dataclasses.replace(p, path=dst) for p in note.problems))
        for path in deleted:
            notes.pop(path, None)
            raw.pop(path, None)
        for path, note in written.items():
            notes[path] = note
            raw.pop(path, None)
        if read:
            raw.update((path, data) for path, data in read.items() if path in written)
        problems = tuple(p for note in notes.values() for p in note.problems)
        return dataclasses.replace(self, notes=notes, problems=problems, raw=raw)
