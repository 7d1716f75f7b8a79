"""The one scanner: walks the vault, parses notes, keeps a parse cache in ``.brain/``.

An unchanged file (same size and mtime) is never parsed again: its parsed form comes from the
parse cache (``.brain/parse-cache``, a :mod:`marshal` of plain tuples: loading 10 000 notes
costs a fraction of the JSON it replaced, and it holds no code, unlike a pickle). The cache
is keyed on the field names of the cached types, so a field added to ``ArcInfo`` or
``Note`` invalidates it instead of loading wrong values; it is rebuilt if missing or corrupt.
Entries whose mtime is not safely older than the cache's own writing are confirmed by a
content hash (an edit in the same clock tick would keep the size and mtime): git's "racily
clean" rule, on the file system's own clock (:func:`_settled_before`).

Arcs are the ``cluster_id`` notes in the compartment folders (SPEC §3); anywhere else a
``cluster_id`` note is the operator's, read for its markers only.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import hashlib
import marshal
import os
import time
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from brain.core.markers import Marker
from brain.core.model import (
    LAST_PROMPT_CHARS,
    WORK_ITEM_CHARS,
    WORK_LIST_ITEMS,
    Activity,
    ArcInfo,
    Note,
    Problem,
    built,
    field_names,
)
from brain.core.plan import Expect
from brain.core.progress import Step, counted
from brain.core.snapshot import ScanDelta, ScanStats, Snapshot, vault_note
from brain.io.atomic import NOFOLLOW, atomic_write, atomic_write_chunks, read_regular, regular_stat
from brain.io.background import Forked

if TYPE_CHECKING:
    import mmap

__all__ = [
    "ChangedError",
    "ScanStats",
    "Snapshot",
    "drop_view",
    "expect_of",
    "feed_relative",
    "folded_into",
    "forget_loaded",
    "found_listing",
    "frame_spans",
    "frames",
    "listing_beside",
    "listing_of",
    "load_marshal",
    "load_view",
    "read_current",
    "read_file",
    "read_stamped",
    "read_texts",
    "read_view",
    "save_cache",
    "save_view",
    "scan",
    "stat_listing",
    "walk",
]

CACHE_FILE = ".brain/parse-cache"
#: Bump when the cache's meaning changes without a field change (e.g. the arc-folder rule).
CACHE_VERSION = 6
#: How much older than the cache's writing a file's mtime must be for its size and mtime to
#: vouch for its bytes, on a file system that keeps whole seconds (FAT's 2 s, HFS+, ext3) ...
RACY_SECONDS = 2
#: ... and on one whose times carry fractions of a second (ext4, XFS, btrfs, tmpfs, APFS, NTFS:
#: stamped from a clock that moves every few milliseconds). Git's rule (``racy-git.txt``) has no
#: margin at all: a file is racily clean when its mtime is not older than the index file's.
RACY_FINE_NS = 500_000_000
_SECOND_NS = 1_000_000_000


class ChangedError(Exception):
    """The file on disk is no longer the one the scan parsed."""

    def __init__(self, path: str):
        super().__init__(f"{path} changed since the scan")
        self.path = path


def expect_of(note: Note) -> Expect:
    return Expect(note.size, note.mtime_ns, note.sha1)


# --- the parse cache ----------------------------------------------------------------------

_NOTE_NAMES, _ARC_NAMES, _ACTIVITY_NAMES = field_names(Note), field_names(ArcInfo), field_names(Activity)
_MARKER_NAMES, _PROBLEM_NAMES = field_names(Marker), field_names(Problem)
#: Changes whenever a cached type gains, loses or reorders a field, or the bounds on what an
#: arc's work keys hold change.
CACHE_KEY = hashlib.sha1(repr((CACHE_VERSION, _NOTE_NAMES, _ARC_NAMES, _ACTIVITY_NAMES, _MARKER_NAMES,
                               _PROBLEM_NAMES, WORK_LIST_ITEMS, WORK_ITEM_CHARS, LAST_PROMPT_CHARS)).encode(),
                         usedforsecurity=False).hexdigest()
_ACTIVITY_AT = _ARC_NAMES.index("activity")


#: Each cached type's field values as one tuple, in field order (one C call, not a getattr per field).
_NOTE_FIELDS, _ARC_FIELDS, _ACTIVITY_FIELDS = (attrgetter(*_NOTE_NAMES), attrgetter(*_ARC_NAMES),
                                               attrgetter(*_ACTIVITY_NAMES))
_MARKER_FIELDS, _PROBLEM_FIELDS = attrgetter(*_MARKER_NAMES), attrgetter(*_PROBLEM_NAMES)
_PATH_AT, _SIZE_AT, _MTIME_AT = (_NOTE_NAMES.index(n) for n in ("path", "size", "mtime_ns"))
_NOTE_ARC_AT, _MARKERS_AT, _PROBLEMS_AT = (_NOTE_NAMES.index(n) for n in ("arc", "markers", "problems"))


def _note_row(note: Note) -> tuple[Any, ...]:
    row = list(_NOTE_FIELDS(note))
    arc = note.arc
    if arc is not None:
        values = list(_ARC_FIELDS(arc))
        values[_ACTIVITY_AT] = _ACTIVITY_FIELDS(arc.activity)
        row[_NOTE_ARC_AT] = tuple(values)
    row[_MARKERS_AT] = tuple([_MARKER_FIELDS(m) for m in note.markers])
    row[_PROBLEMS_AT] = tuple([_PROBLEM_FIELDS(p) for p in note.problems])
    return tuple(row)


def _note_of(row: tuple[Any, ...]) -> Note:
    values = list(row)
    arc_row = values[_NOTE_ARC_AT]
    if arc_row is not None:
        arc_values = list(arc_row)
        arc_values[_ACTIVITY_AT] = built(Activity, _ACTIVITY_NAMES, arc_values[_ACTIVITY_AT])
        values[_NOTE_ARC_AT] = built(ArcInfo, _ARC_NAMES, arc_values)
    if values[_MARKERS_AT]:
        values[_MARKERS_AT] = tuple([built(Marker, _MARKER_NAMES, m) for m in values[_MARKERS_AT]])
    if values[_PROBLEMS_AT]:
        values[_PROBLEMS_AT] = tuple([built(Problem, _PROBLEM_NAMES, p) for p in values[_PROBLEMS_AT]])
    note: Note = built(Note, _NOTE_NAMES, values)
    return note


#: The rows the last scan of this process loaded, by path, with the note built from each: saving
#: the cache again re-serialises only the notes that changed.
_LOADED: dict[str, tuple[Note, tuple[Any, ...]]] = {}
#: The base file the last load read (its writing time and paths) and the paths its overlay held.
_BASE: dict[str, Any] = {"vault": None, "written": 0, "paths": frozenset(), "overlay": frozenset()}

#: Small changes go to an overlay beside the base (``parse-cache-delta``) instead of rewriting
#: every row: a tick that edits 20 arcs of 10 000 writes 20 rows. The base is rewritten when the
#: overlay would hold more than this share of the notes (or :data:`OVERLAY_MIN` rows).
OVERLAY_SHARE, OVERLAY_MIN = 0.25, 256
OVERLAY_FILE = CACHE_FILE + "-delta"


def load_marshal(path: Path) -> Any:
    """A :mod:`marshal` file's value, or None when it is missing or damaged (the brain's state
    files are best effort: a bad one only costs recomputing it)."""
    try:
        data = read_regular(path)  # never a named pipe's wait
    except OSError:
        return None
    enabled = gc.isenabled()
    gc.disable()  # a million small tuples: the collector would walk them again and again
    try:
        return marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return None
    finally:
        if enabled:
            gc.enable()


#: Rows per frame of the parse cache's base (:func:`frames`), written in path order after a
#: header naming each frame's first path: a cold tick writes 10 000 rows without holding them all,
#: or their bytes, at once (its peak memory); a load reads every frame without copying, and a
#: quiet tick that needs the old rows of a few edited files decodes only their frames (5 rows
#: each: the tick after 1 % of 10 000 arcs changed decodes 500 rows, not 2 500, and a full load
#: takes as long as with 25).
FRAME_ROWS = 5
_FRAME_HEADER = 8


def frames(values: Iterable[Any]) -> Iterator[bytes]:
    """Each value as a frame: its :mod:`marshal` length (8 bytes, little-endian), then its bytes."""
    for value in values:
        data = marshal.dumps(value)
        yield len(data).to_bytes(_FRAME_HEADER, "little")
        yield data


def frame_spans(data: memoryview) -> list[tuple[int, int]] | None:
    """Where each frame's bytes lie in ``data``; None when it is cut short."""
    spans, at = [], 0
    while at < len(data):
        if at + _FRAME_HEADER > len(data):
            return None
        size = int.from_bytes(data[at:at + _FRAME_HEADER], "little")
        at += _FRAME_HEADER
        if at + size > len(data):
            return None
        spans.append((at, at + size))
        at += size
    return spans


def _read_cache(vault: Path, only: Collection[str] | None = None) -> tuple[dict[str, tuple[Any, ...]], int]:
    """The base's rows (with ``only``: at least those of these paths it holds, read from their
    frames alone) and when it was written; ({}, 0) when missing, stale or damaged."""
    try:
        data = memoryview(read_regular(vault / CACHE_FILE))  # never a named pipe's wait
    except OSError:
        return {}, 0
    spans = frame_spans(data)
    if not spans:
        return {}, 0
    rows: dict[str, tuple[Any, ...]] = {}
    enabled = gc.isenabled()
    gc.disable()  # a million small tuples: the collector would walk them again and again
    try:
        head = marshal.loads(data[spans[0][0]:spans[0][1]])
        if not (isinstance(head, tuple) and len(head) == 4 and head[0] == CACHE_KEY and isinstance(head[1], int)
                and isinstance(head[2], int) and isinstance(head[3], tuple) and len(head[3]) == len(spans) - 1):
            return {}, 0
        wanted = range(1, len(spans)) if only is None else sorted(
            {bisect.bisect_right(head[3], path) for path in only} - {0})
        for index in wanted:
            frame = marshal.loads(data[spans[index][0]:spans[index][1]])
            if not isinstance(frame, dict):
                return {}, 0
            rows.update(frame)
    except (EOFError, ValueError, TypeError):
        return {}, 0
    finally:
        if enabled:
            gc.enable()
    if only is None and len(rows) != head[2]:
        return {}, 0  # not the rows that were written
    return rows, head[1]


def _load_cache(vault: Path) -> tuple[dict[str, tuple[Any, ...]], int, dict[str, int]]:
    """The cached rows, the time the base was written (0 when missing, stale or corrupt), and
    for the rows that came from the overlay, the mtime below which they are settled
    (:func:`_settled_before` the overlay's writing)."""
    _BASE.update(vault=vault, written=0, paths=frozenset(), overlay=frozenset())
    rows, written = _read_cache(vault)
    if not written:
        return {}, 0, {}
    _BASE.update(written=written, paths=frozenset(rows))
    later = _overlaid(vault, rows, written)
    if later is not None:
        _BASE["overlay"] = frozenset(later[0]) | frozenset(later[1])
        return rows, written, dict.fromkeys(later[0], _settled_before(later[2], _stat_pair(vault / OVERLAY_FILE)))
    return rows, written, {}


def _overlaid(vault: Path, rows: dict[str, tuple[Any, ...]], written: int) -> tuple[Any, ...] | None:
    """``rows`` with the overlay of the base written at ``written`` applied; the overlay's rows,
    its removed paths and when it was written (None: no overlay of that base)."""
    overlay = load_marshal(vault / OVERLAY_FILE)
    if not (isinstance(overlay, tuple) and len(overlay) == 5 and overlay[0] == CACHE_KEY and overlay[1] == written
            and isinstance(overlay[2], int) and isinstance(overlay[3], dict) and isinstance(overlay[4], tuple)):
        return None
    for path in overlay[4]:
        rows.pop(path, None)
    rows.update(overlay[3])
    return overlay[3], overlay[4], overlay[2]


def _matches(row: Any, st: Any) -> bool:
    return (isinstance(row, tuple) and len(row) == len(_NOTE_NAMES) and row[_SIZE_AT] == st.st_size
            and row[_MTIME_AT] == st.st_mtime_ns)


def _settled_before(written: int, stat: tuple[int, int] | None) -> int:
    """The mtime below which a file's size and mtime vouch for the bytes a row of a state file holds
    for it: the state file written at ``written`` (this machine's clock), ``stat`` its size and mtime
    now (:func:`_stat_pair`; None: unknown).

    Like git's index, the reference is the state file's own mtime, stamped by the clock that
    stamps the notes (a network file system's server, not this machine), or ``written`` if
    earlier; the margin is one tick of that clock, and more: :data:`RACY_FINE_NS` where times
    carry fractions of a second, :data:`RACY_SECONDS` where they are whole seconds (or unknown).
    A note a tick wrote just before saving the state is confirmed by its hash at the next tick;
    the notes it wrote earlier in its run are not, as git trusts what it staged before the index
    was written."""
    if stat is None:
        return written - RACY_SECONDS * _SECOND_NS
    stamped = stat[1]
    margin = RACY_SECONDS * _SECOND_NS if stamped % _SECOND_NS == 0 else RACY_FINE_NS
    return min(written, stamped) - margin


def _trusted(vault: Path, note: Note, trusted_before: int) -> bool:
    """A cached note may stand for its file: its mtime is safely older than the row's writing
    (:func:`_settled_before`; a note whose own mtime is a whole second takes the whole-second margin
    as well), or (racily clean) the file's bytes still hash to it."""
    mtime = note.mtime_ns
    if mtime % _SECOND_NS == 0:
        trusted_before -= RACY_SECONDS * _SECOND_NS - RACY_FINE_NS
    return mtime < trusted_before or _same_content(vault, note.path, note.size, note.sha1)


def _view_file(vault: Path) -> tuple[str, list[tuple[tuple[Any, ...], int]]] | None:
    """The last tick's view (see :func:`save_view`): its key and its rows in order, each with
    the mtime below which it is settled (:func:`_settled_before` the writing of the base, or of the
    overlay that holds it); None when missing or damaged."""
    _VIEW_BASE.update(vault=None, key=None, rows={}, stat=None)
    raw = load_marshal(vault / VIEW_FILE)
    if not (isinstance(raw, tuple) and len(raw) == 4 and raw[0] == CACHE_KEY and isinstance(raw[1], str)
            and isinstance(raw[2], int) and isinstance(raw[3], tuple)
            and all(isinstance(row, tuple) and len(row) == len(_NOTE_NAMES) for row in raw[3])):
        return None
    key, base, stat = raw[1], raw[3], _stat_pair(vault / VIEW_FILE)
    settled = _settled_before(raw[2], stat)
    by_path = {row[_PATH_AT]: row for row in base}
    rows = [(row, settled) for row in base]
    delta = load_marshal(vault / VIEW_DELTA_FILE)
    if (isinstance(delta, tuple) and len(delta) == 6 and delta[0] == CACHE_KEY and delta[1] == key
            and isinstance(delta[2], str) and isinstance(delta[3], int) and isinstance(delta[4], tuple)
            and isinstance(delta[5], dict)
            and all(isinstance(row, tuple) and len(row) == len(_NOTE_NAMES) for row in delta[5].values())):
        changed, later = delta[5], _settled_before(delta[3], _stat_pair(vault / VIEW_DELTA_FILE))
        rows = []
        for path in delta[4]:
            row = changed.get(path)
            if row is None and path not in by_path:
                return None
            rows.append((row, later) if row is not None else (by_path[path], settled))
        key = delta[2]
    _VIEW_BASE.update(vault=vault, key=raw[1], rows=by_path, stat=stat)
    return key, rows


def _stat_pair(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _view_rows(vault: Path) -> dict[str, tuple[tuple[Any, ...], int]]:
    """The rows of the last tick's view by path, each with the mtime below which it is settled."""
    view = _view_file(vault)
    return {} if view is None else {row[_PATH_AT]: (row, written) for row, written in view[1]}


def save_cache(vault: Path, notes: Mapping[str, Note]) -> None:
    """Persist the parse cache (best effort: a missing cache only costs a re-parse).

    Rows of notes this process loaded and did not change are reused as they are; when few
    rows changed since the base was written, only those go to the overlay; else the base is
    written again, :data:`FRAME_ROWS` rows at a time."""
    kept = {path: note for path, note in notes.items() if note.mtime_ns}

    def row(path: str) -> tuple[Any, ...]:
        known = _LOADED.get(path)
        return known[1] if known is not None and known[0] is kept[path] else _note_row(kept[path])

    now = time.time_ns()
    base_written, base_paths = _BASE["written"], _BASE["paths"]
    if base_written and _BASE["vault"] == vault:  # the base this process loaded is this vault's
        fresh = {path for path, note in kept.items() if (_LOADED.get(path) or (None,))[0] is not note}
        changed = fresh | (_BASE["overlay"] & kept.keys())
        removed = tuple(sorted(base_paths - kept.keys()))
        if len(changed) + len(removed) <= max(OVERLAY_MIN, int(len(kept) * OVERLAY_SHARE)):
            delta = {path: row(path) for path in changed}
            with contextlib.suppress(OSError):
                atomic_write(vault / OVERLAY_FILE, marshal.dumps((CACHE_KEY, base_written, now, delta, removed)),
                             durable=False)
                _BASE["overlay"] = frozenset(delta) | frozenset(removed)
            return

    def values() -> Iterator[Any]:
        paths = sorted(kept)
        yield CACHE_KEY, now, len(paths), tuple(paths[::FRAME_ROWS])
        for start in range(0, len(paths), FRAME_ROWS):
            yield {path: row(path) for path in paths[start:start + FRAME_ROWS]}

    with contextlib.suppress(OSError):
        atomic_write_chunks(vault / CACHE_FILE, frames(values()), durable=False)
        (vault / OVERLAY_FILE).unlink(missing_ok=True)
        _BASE.update(vault=vault, written=now, paths=frozenset(kept), overlay=frozenset())


VIEW_FILE = ".brain/tick-view"
#: What later ticks changed in the view, beside its base: the order of every row and the rows
#: that differ from the base's. The base is written again when the overlay would hold more than
#: this share of the rows (or :data:`VIEW_DELTA_MIN`): a quiet tick that rewrote 20 arcs saves
#: 20 rows, not the 1 500 of its view.
VIEW_DELTA_FILE = VIEW_FILE + "-delta"
VIEW_DELTA_SHARE, VIEW_DELTA_MIN = 0.25, 64
#: The base view this process loaded or wrote: its vault, key, rows by path, and the file's size
#: and mtime then (an overlay is only written beside that very file).
_VIEW_BASE: dict[str, Any] = {"vault": None, "key": None, "rows": {}, "stat": None}


def save_view(vault: Path, key: str, notes: Iterable[Note]) -> None:
    """Persist the notes a quiet tick needs (best effort: a missing view only costs a full scan).

    ``key`` names the vault state they belong to (the tick_id of the tick that left the files);
    the rows keep the order given, which is the scan's. When the base view this process loaded
    still holds most rows as they are, only the order and the other rows go to the overlay
    (:data:`VIEW_DELTA_FILE`). Equal strings of the rows made anew (paths, commands, projects
    that many arcs share) become one object, which :mod:`marshal` stores once and loads as
    one: a third smaller, loaded in half the time, and the rows loaded from it keep sharing them."""
    pool: dict[str, str] = {}
    rows = {note.path: _row_of(note, pool) for note in notes if note.mtime_ns}
    now = time.time_ns()
    same = _VIEW_BASE["vault"] == vault and _VIEW_BASE["stat"] is not None \
        and _VIEW_BASE["stat"] == _stat_pair(vault / VIEW_FILE)
    base = _VIEW_BASE["rows"] if same else None
    with contextlib.suppress(OSError):
        if base is not None:
            changed = {path: row for path, row in rows.items() if base.get(path) is not row}
            if len(changed) <= max(VIEW_DELTA_MIN, int(len(rows) * VIEW_DELTA_SHARE)):
                atomic_write(vault / VIEW_DELTA_FILE,
                             marshal.dumps((CACHE_KEY, _VIEW_BASE["key"], key, now, tuple(rows), changed)),
                             durable=False)
                return
        atomic_write(vault / VIEW_FILE, marshal.dumps((CACHE_KEY, key, now, tuple(rows.values()))), durable=False)
        (vault / VIEW_DELTA_FILE).unlink(missing_ok=True)
        _VIEW_BASE.update(vault=vault, key=key, rows=rows, stat=_stat_pair(vault / VIEW_FILE))


def _row_of(note: Note, pool: dict[str, str]) -> tuple[Any, ...]:
    """The cached row of ``note``: the one it was loaded from (scan or view), else made anew
    with its strings taken from ``pool`` (:func:`_shared`)."""
    known = _LOADED.get(note.path)
    if known is not None and known[0] is note:
        return known[1]
    row: tuple[Any, ...] = _shared(_note_row(note), pool)
    return row


def _shared(value: Any, pool: dict[str, str]) -> Any:
    """``value`` with each string in its nested tuples replaced by the equal one in ``pool``."""
    if type(value) is str:
        return pool.setdefault(value, value)
    if type(value) is tuple:
        return tuple([_shared(item, pool) for item in value])
    return value


def forget_loaded() -> None:
    """Let go of the rows and notes this process loaded or saved (the end of a tick). They are
    kept only to write the caches' overlays within the tick; left alive they are what the
    garbage collector's first pass walks once the tick turns it back on (66 ms on a 50 000-arc
    vault's +2 h tick, 217 000 objects). A later load starts from the files, as it always does."""
    _LOADED.clear()
    _VIEW_BASE.update(vault=None, key=None, rows={}, stat=None)


def drop_view(vault: Path) -> None:
    _VIEW_BASE.update(vault=None, key=None, rows={}, stat=None)
    with contextlib.suppress(OSError):
        (vault / VIEW_DELTA_FILE).unlink(missing_ok=True)
        (vault / VIEW_FILE).unlink(missing_ok=True)


#: The view as :func:`read_view` loaded it: its key, and each row's note, the row, and the mtime
#: below which its file's size and mtime vouch for it (:func:`_settled_before`).
LoadedView = tuple[str, list[tuple[Note, tuple[Any, ...], int]]]


def read_view(vault: Path) -> LoadedView | None:
    """The notes :func:`save_view` kept, built but not yet checked against the files (a tick
    builds them while a child lists the vault, :func:`listing_beside`); None when the view is
    missing or damaged."""
    view = _view_file(vault)
    if view is None:
        return None
    enabled = gc.isenabled()
    gc.disable()
    try:
        return view[0], [(_note_of(row), row, written) for row, written in view[1]]
    except (TypeError, ValueError):
        return None
    finally:
        if enabled:
            gc.enable()


def load_view(vault: Path, key: str, listing: Mapping[str, tuple[int, int]], *,
              changed: Collection[str] = frozenset(), before: dict[str, Note] | None = None,
              loaded: LoadedView | None = None) -> dict[str, Note] | None:
    """The notes :func:`save_view` kept for ``key``, each still the file on disk (same size and
    mtime in ``listing``; a racily clean one confirmed by its hash), in the order saved; None
    when the view is missing, damaged, of another state, or any of its files differs.

    ``changed``: paths known to differ from the view (edited or deleted since): their notes go
    to ``before`` as the view held them, not to the result. ``loaded``: the view as
    :func:`read_view` read it earlier in this run (else it is read now)."""
    view = loaded if loaded is not None else read_view(vault)
    if view is None or view[0] != key:
        return None
    # A racily clean note whose mtime is older than this was not written in the same clock tick as now.
    old_enough = time.time_ns() - RACY_SECONDS * _SECOND_NS
    notes: dict[str, Note] = {}
    kept: dict[str, tuple[Note, tuple[Any, ...]]] = {}
    confirmed: set[str] = set()
    try:
        for note, row, settled in view[1]:
            if note.path in changed:
                if before is not None:
                    before[note.path] = note
                continue
            if listing.get(note.path) != (note.size, note.mtime_ns) or not _trusted(vault, note, settled):
                return None
            if old_enough > note.mtime_ns >= settled:
                confirmed.add(note.path)
            notes[note.path] = note
            kept[note.path] = (note, row)
    except (TypeError, ValueError):
        return None
    _LOADED.clear()  # the rows a later save (of the view) reuses for the notes it did not change
    _LOADED.update(kept)
    if _VIEW_BASE["vault"] == vault:
        # A racily clean row its bytes confirmed, long after its mtime, leaves what the next save
        # compares with: that save writes it again as of its own time (git's "smudge"), so the
        # note is hashed once, not by every later tick until the view's base is written again.
        for path in confirmed:
            _VIEW_BASE["rows"].pop(path, None)
    return notes


def cache_stamp(vault: Path) -> list[list[int] | None]:
    """Size and mtime of the parse cache's files (base, overlay; None: missing): a later tick
    that relies on the cache as a tick left it compares them."""
    stamps: list[list[int] | None] = []
    for rel in (CACHE_FILE, OVERLAY_FILE):
        try:
            st = os.stat(os.path.join(vault, rel))
        except OSError:
            stamps.append(None)
            continue
        stamps.append([st.st_size, st.st_mtime_ns])
    return stamps


def cached_notes(vault: Path, stats: Mapping[str, tuple[int, int]]) -> dict[str, Note] | None:
    """The parse cache's notes of ``stats``' paths (path -> size, mtime), each as the file stood
    with that size and mtime; None when the cache lacks one of them or holds another version."""
    cache, written = _read_cache(vault, stats)
    if not written:
        return None
    _overlaid(vault, cache, written)
    found: dict[str, Note] = {}
    try:
        for rel, (size, mtime) in stats.items():
            row = cache.get(rel)
            if not (isinstance(row, tuple) and len(row) == len(_NOTE_NAMES) and row[_SIZE_AT] == size
                    and row[_MTIME_AT] == mtime):
                return None
            found[rel] = _note_of(row)
    except (TypeError, ValueError):
        return None
    return found


def parse_files(vault: Path, stats: Mapping[str, tuple[int, int]], max_note_bytes: int,
                keep: dict[str, bytes] | None = None) -> dict[str, Note]:
    """Each of ``stats``' files (path -> size, mtime as listed) parsed as the scan parses it."""
    return {rel: _parse_file(vault, rel, Listed(size, mtime), max_note_bytes, keep, False)
            for rel, (size, mtime) in stats.items()}


def _same_content(vault: Path, rel: str, size: int, sha1: str) -> bool:
    """The file still holds ``size`` bytes hashing to ``sha1``. At most ``size + 1`` bytes are read
    (a longer file differs), never a wait on a named pipe put in its place."""
    try:
        data = read_regular(os.path.join(vault, rel), size + 1)
    except OSError:
        return False
    return len(data) == size and hashlib.sha1(data, usedforsecurity=False).hexdigest() == sha1


#: Folders are read through a descriptor where the system can (Linux, macOS): each file's stat is
#: then an ``fstatat`` of its name in that folder, not an ``lstat`` that walks the whole path
#: again (10-20 % of a listing of 10 000 files).
_BY_DESCRIPTOR = os.scandir in os.supports_fd and os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")


def walk(vault: Path, skip: frozenset[str] = frozenset()) -> list[tuple[str, int, int]]:
    """Every ``*.md`` file (vault-relative POSIX path, size, mtime), dot-folders and symlinks excluded.

    ``skip`` holds vault-relative folders to leave out (the brain-feed folder). No stat object is
    kept per file (a listing child hands these on; 50 000 of them are 10 MB its pages would hold).
    """
    found: list[tuple[str, int, int]] = []
    stack = [(str(vault), "")]
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
    nofollow = flags | NOFOLLOW
    while stack:
        folder, rel = stack.pop()
        fd = -1
        try:
            if _BY_DESCRIPTOR:
                # The vault itself may be a link (to a synced folder); a folder inside it that was
                # swapped for a link since it was listed is not followed.
                fd = os.open(folder, nofollow if rel else flags)
                entries = os.scandir(fd)
            else:
                entries = os.scandir(folder)
        except OSError:
            if fd >= 0:
                os.close(fd)
            continue
        try:
            with entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith(".") or entry.is_symlink():
                        continue  # dot-folders (.brain, .obsidian, .trash, .git) are hidden; symlinks are never followed
                    child = f"{rel}{name}"
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if child not in skip:
                                stack.append((f"{folder}/{name}", child + "/"))
                        elif name.endswith(".md") and entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            found.append((child, st.st_size, st.st_mtime_ns))
                    except OSError:
                        continue
        finally:
            if fd >= 0:
                os.close(fd)
    return found


def feed_relative(vault: Path, feed_dir: Path) -> str | None:
    """The feed folder relative to the vault, or None when it lives elsewhere.

    Decided on the path as written, not where a symlink leads: a ``brain-feed`` inside the
    vault that links out of it is still the vault's folder, and the confined writer refuses it.
    """
    target = os.path.abspath(feed_dir)
    for root in (os.path.abspath(vault), os.path.realpath(vault)):
        try:
            rel = Path(target).relative_to(root).as_posix()
        except ValueError:
            continue
        return rel if rel != "." else None
    return None


class Listed(NamedTuple):
    """The two fields of a stat the scanner reads, for a file listed earlier (size, mtime)."""

    st_size: int
    st_mtime_ns: int


def listing_of(vault: Path, feed_dir: Path) -> list[tuple[str, int, int]]:
    """Every note of the vault but the feed folder's: (path, size, mtime), as :func:`walk` lists them."""
    rel = feed_relative(vault, feed_dir)
    return walk(vault, frozenset() if rel is None else frozenset({rel}))


def stat_listing(vault: Path, feed_dir: Path) -> dict[str, tuple[int, int]]:
    """:func:`listing_of` as path -> (size, mtime), what a tick compares with the last one's."""
    return {rel: (size, mtime) for rel, size, mtime in listing_of(vault, feed_dir)}


def folded_into(listing: dict[str, tuple[int, int]], changes: Mapping[str, tuple[int, int] | None],
                ) -> dict[str, tuple[int, int]]:
    """``listing`` (changed in place) with ``changes``: each entry set, or dropped for None."""
    for rel, entry in changes.items():
        if entry is None:
            listing.pop(rel, None)
        else:
            listing[rel] = entry
    return listing


class SavedListing(NamedTuple):
    """A listing as saved (:func:`brain.pipeline.tick_state.load_saved_listing`): its base as
    columns, the paths in order and their sizes and mtimes in arrays (a 50 000-file listing
    loads in 7 ms, not the 30 of a dictionary of tuples), and the changes quiet ticks made since
    (path -> size and mtime, or None for a file gone)."""

    paths: list[str]
    sizes: Sequence[int]  # an array of 64-bit integers, or a list where one did not fit (a hostile mtime)
    mtimes: Sequence[int]
    delta: dict[str, tuple[int, int] | None]

    def as_dict(self) -> dict[str, tuple[int, int]]:
        """path -> (size, mtime): the base with the changes on top, in that order (a file the
        base has keeps its place, a new one comes last)."""
        return folded_into(dict(zip(self.paths, zip(self.sizes, self.mtimes, strict=True), strict=True)), self.delta)

    def folded(self) -> tuple[list[str], Sequence[int], Sequence[int]]:
        """:meth:`as_dict` as columns, in the same order, without a tuple per entry."""
        if not self.delta:
            return self.paths, self.sizes, self.mtimes
        delta, met = self.delta, set()
        paths: list[str] = []
        sizes: list[int] = []
        mtimes: list[int] = []
        for rel, size, mtime in zip(self.paths, self.sizes, self.mtimes, strict=True):
            if rel in delta:
                met.add(rel)
                entry = delta[rel]
                if entry is None:
                    continue
                size, mtime = entry
            paths.append(rel)
            sizes.append(size)
            mtimes.append(mtime)
        for rel, entry in delta.items():
            if entry is not None and rel not in met:
                paths.append(rel)
                sizes.append(entry[0])
                mtimes.append(entry[1])
        return paths, sizes, mtimes


def _news(found: list[tuple[str, int, int]], saved: Mapping[str, tuple[int, int]] | SavedListing) -> bytes:
    """What a listing child hands back (:func:`listing_beside`) for what it walked (``found``:
    :func:`listing_of`): :data:`SAME_LISTING`, the places of the saved entries in the order found,
    or the listing as found. ``saved`` as a dictionary is compared as its columns."""
    if isinstance(saved, SavedListing):
        paths, sizes, mtimes = saved.folded()
    else:
        paths, sizes, mtimes = list(saved), [e[0] for e in saved.values()], [e[1] for e in saved.values()]
    if len(paths) == len(found):
        place = dict(zip(paths, range(len(paths)), strict=True))  # the walk names each file once: one match each
        for rel, size, mtime in found:
            index = place.get(rel)
            if index is None or sizes[index] != size or mtimes[index] != mtime:
                break
        else:
            if all(entry[0] == path for entry, path in zip(found, paths, strict=True)):
                return marshal.dumps(SAME_LISTING)
            return marshal.dumps((REORDERED_LISTING, array("I", [place[entry[0]] for entry in found]).tobytes()))
    return marshal.dumps({rel: (size, mtime) for rel, size, mtime in found})


def listing_beside(vault: Path, feed_dir: Path,
                   saved: Callable[[], Mapping[str, tuple[int, int]] | SavedListing | None] | None = None,
                   ) -> Forked | None:
    """:func:`stat_listing` in a forked child, so this process loads what the last tick left
    while the child waits on the file system; None when it cannot fork (list here instead).

    ``saved`` loads, in the child, the listing the last tick left (a :class:`SavedListing`, or a
    dictionary like the one this returns): when the child finds the very
    same files (sizes, mtimes and order), it says so instead of handing back every entry, and
    :func:`found_listing` gives the caller its own copy of that listing. The same files in another
    order (the last tick moved an arc: the folder lists it elsewhere than at the end, where that
    tick put it) come back as each found entry's place in that listing, and the caller rebuilds
    the listing as found from its copy: an index per entry crosses, not the entry."""
    def work() -> bytes:
        found = listing_of(vault, feed_dir)
        before = saved() if saved is not None else None
        if before is None:
            return marshal.dumps({rel: (size, mtime) for rel, size, mtime in found})
        return _news(found, before)

    return Forked.start(work)


#: What a listing child hands back when it found the very listing it was given (:func:`listing_beside`).
SAME_LISTING = "same as the saved listing"
#: ... and the tag before the places of its entries when it found them in another order.
REORDERED_LISTING = "the saved listing, reordered"


def found_listing(child: Forked, vault: Path, feed_dir: Path, saved: dict[str, tuple[int, int]] | None = None,
                  ) -> tuple[dict[str, tuple[int, int]], bool]:
    """The listing ``child`` (:func:`listing_beside`) made: ``saved`` (this process's copy of the
    listing the child compared with) when the child found it unchanged, or its entries in the
    order the child found them; listed here when the child failed, or found it unchanged while
    this process has no copy. And whether the child found the very entries of ``saved`` (in any
    order): the caller need not compare the two again (50 000 entries: 13 ms a comparison)."""
    found = child.output(marshal.loads)
    if isinstance(found, dict):
        return found, False
    if found == SAME_LISTING and saved is not None:
        return saved, True
    if (isinstance(found, tuple) and len(found) == 2 and found[0] == REORDERED_LISTING and saved is not None
            and isinstance(found[1], bytes) and len(found[1]) == array("I").itemsize * len(saved)):
        places, paths, entries = array("I"), list(saved), list(saved.values())
        places.frombytes(found[1])
        with contextlib.suppress(IndexError):
            listing = {paths[index]: entries[index] for index in places}  # by place, not by key: half the time
            if len(listing) == len(paths):
                return listing, True
    return stat_listing(vault, feed_dir), False


def scan(
    vault: Path,
    *,
    feed_dir: Path,
    max_note_bytes: int,
    write_cache: bool,
    listing: Iterable[tuple[str, Any]] | None = None,
    keep_bytes: bool = False,
    arcs_anywhere: bool = False,
    fork: bool = False,
    progress: Step | None = None,
) -> Snapshot:
    """Parse the vault, reusing the cache for files whose size and mtime are unchanged.

    Like git's index, a cache entry whose mtime is not safely older than the cache itself
    ("racily clean": an edit in the same clock tick keeps size and mtime) is trusted only
    after its content hash is checked. ``arcs_anywhere`` (a standalone ``brain cluster``
    folder, not a vault) treats a ``cluster_id`` note in any folder as an arc. ``fork``: many files
    to parse are shared with a forked child (:func:`_parse_all`). ``progress`` hears of the files parsed.
    """
    started = time.perf_counter()
    cache, cache_written, later = _load_cache(vault)
    # Files a quiet tick rewrote after the cache was saved: their rows are in the view.
    view = _view_rows(vault) if cache_written else {}
    racy_from = _settled_before(cache_written, _stat_pair(vault / CACHE_FILE))
    found: list[tuple[str, Note | None]] = []  # in listing order; None: parsed below
    todo: list[tuple[str, Any]] = []
    raw: dict[str, bytes] = {}
    cached = viewed = 0
    loaded: dict[str, tuple[Note, tuple[Any, ...]]] = {}
    enabled = gc.isenabled()
    gc.disable()
    try:
        for rel, st in listing if listing is not None else [(rel, Listed(size, mtime))
                                                            for rel, size, mtime in listing_of(vault, feed_dir)]:
            row: Any = cache.get(rel)
            since, from_view = later.get(rel), False
            fits = _matches(row, st)
            if not fits and rel in view:
                (row, since), from_view = view[rel], True
                fits = _matches(row, st)
            if fits:
                try:
                    note: Note | None = _note_of(row)
                except (TypeError, ValueError):
                    note = None
                if note is not None and _trusted(vault, note, racy_from if since is None else since):
                    found.append((rel, note))
                    if from_view:
                        viewed += 1  # a row from the view is new to the cache: saved as changed
                    else:
                        loaded[rel] = (note, row)
                    cached += 1
                    continue
            found.append((rel, None))
            todo.append((rel, st))
        # The bytes of a few files parsed are kept for the plan and the writer; a cold scan's are not:
        # its plan reads each arc again as it renders it, never every old and new text at once.
        keep = raw if keep_bytes and len(todo) < KEEP_BYTES_FILES else None
        parsed = iter(_parse_all(vault, todo, max_note_bytes, keep, arcs_anywhere, fork, progress))
        notes = {rel: note if note is not None else next(parsed) for rel, note in found}
    finally:
        if enabled:
            gc.enable()
    _LOADED.clear()
    _LOADED.update(loaded)
    removed = tuple(sorted((set(cache) | set(view)) - set(notes))) if cache_written else ()
    problems = tuple(p for note in notes.values() for p in note.problems)
    stats = ScanStats(len(notes), len(todo), cached, (time.perf_counter() - started) * 1000, viewed)
    snapshot = Snapshot(vault, notes, problems, stats, ScanDelta(tuple(rel for rel, _ in todo), removed), raw)
    if write_cache and (todo or removed or viewed or not cache_written):
        save_cache(vault, notes)
    return snapshot


#: What :func:`scan` counts for its ``progress``.
PARSED = "files parsed"

#: A scan with this many files to parse (a cold tick's) keeps none of their bytes, and parses half
#: of them in a forked child.
PARALLEL_PARSE_FILES = KEEP_BYTES_FILES = 2000


def _parse_all(vault: Path, todo: list[tuple[str, Any]], max_note_bytes: int, keep: dict[str, bytes] | None,
               arcs_anywhere: bool, fork: bool, progress: Step | None = None) -> list[Note]:
    """The notes of the (path, stat) pairs in ``todo``, in order; ``keep`` gets each file's bytes.
    Many of them, none kept: the second half is parsed by a forked child (:mod:`brain.io.background`)
    meanwhile, and comes back as parse-cache rows; a child that fails leaves its half to this process.
    ``progress`` counts this process's files (the child's half is counted when it comes back)."""
    many = fork and keep is None and len(todo) >= PARALLEL_PARSE_FILES
    theirs = todo[len(todo) // 2:] if many else []

    def parse_theirs() -> bytes:
        return marshal.dumps([_note_row(_parse_file(vault, rel, st, max_note_bytes, None, arcs_anywhere))
                              for rel, st in theirs])

    child = Forked.start(parse_theirs) if theirs else None
    mine = todo[:len(todo) - len(theirs)] if child is not None else todo
    notes = [_parse_file(vault, rel, st, max_note_bytes, keep, arcs_anywhere)
             for rel, st in counted(mine, progress, PARSED, len(todo))]
    if child is None:
        return notes
    rows = child.output(_parsed_rows) or []
    if len(rows) != len(theirs):
        notes += [_parse_file(vault, rel, st, max_note_bytes, keep, arcs_anywhere) for rel, st in theirs]
    else:
        notes += [_note_of(row) for row in rows]
    if progress is not None:
        progress(PARSED, len(todo), len(todo))
    return notes


def _parsed_rows(data: mmap.mmap) -> list[tuple[Any, ...]]:
    """The rows a parsing child sent; none when they do not load."""
    try:
        rows = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return []
    return rows if isinstance(rows, list) else []


def _read_all(fd: int, size_hint: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, max(size_hint + 1, 65536)):
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_file(path: str, size_hint: int = 0) -> bytes:
    """A file's bytes with plain system calls (no buffered file object: a cold scan reads 10 000).
    Opened without blocking: a named pipe put where a note was listed reads as empty or fails at
    once (its hash or its parse tells), never a wait for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        return _read_all(fd, size_hint)
    finally:
        os.close(fd)


def read_stamped(path: str) -> tuple[bytes, int]:
    """A file's bytes and the mtime of the very file read, stat'ed before the read: an edit
    during the read leaves a newer mtime on disk than the one returned, so the parse cache
    re-parses it instead of trusting bytes it never saw. Only a regular file is read (OSError else)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = regular_stat(fd, path)
        return _read_all(fd, st.st_size), st.st_mtime_ns
    finally:
        os.close(fd)


def _parse_file(vault: Path, rel: str, st: Any, max_note_bytes: int, keep: dict[str, bytes] | None,
                arcs_anywhere: bool) -> Note:
    if st.st_size > max_note_bytes:
        problem = Problem(rel, None, f"too large to parse ({st.st_size} bytes > {max_note_bytes}); file left as it is")
        return Note(rel, st.st_size, st.st_mtime_ns, "", problems=(problem,), parsed=False)
    try:
        data = read_file(os.path.join(vault, rel), st.st_size)
    except OSError as exc:
        return Note(rel, st.st_size, st.st_mtime_ns, "", problems=(Problem(rel, None, f"unreadable: {exc}"),),
                    parsed=False)
    if keep is not None:
        keep[rel] = data
    # The stat may be older than the read; the note's size is the read's, so expectations stay honest.
    return vault_note(rel, data, mtime_ns=st.st_mtime_ns, arcs_anywhere=arcs_anywhere)


def read_current(vault: Path, note: Note, snapshot: Snapshot | None = None) -> str:
    """The file's text, guaranteed to be the text the scan parsed.

    With the ``snapshot`` that kept the file's bytes, those are used (the writer still
    checks the file against the scan before replacing it).
    """
    kept = snapshot.raw.get(note.path) if snapshot is not None else None
    if kept is not None and len(kept) == note.size:
        return kept.decode("utf-8")
    try:
        data = read_file(os.path.join(vault, note.path), note.size)
    except OSError:
        raise ChangedError(note.path) from None
    if len(data) != note.size or hashlib.sha1(data, usedforsecurity=False).hexdigest() != note.sha1:
        raise ChangedError(note.path)
    return data.decode("utf-8")


class _Texts(Mapping[str, str]):
    """Arc texts read when the planner asks, one at a time, each the bytes the scan parsed (its
    kept bytes, or a re-read checked against its hash): a cold tick never holds the old text of
    every arc beside the new one. A file that changed, vanished or is not UTF-8 is missing (a
    ``KeyError``), with a problem in :attr:`problems`."""

    def __init__(self, snapshot: Snapshot, notes: Iterable[Note]):
        self._snapshot = snapshot
        self._notes = {note.path: note for note in notes}
        self._failed: set[str] = set()
        self.problems: list[Problem] = []

    def __getitem__(self, path: str) -> str:
        note = self._notes[path]
        if path not in self._failed:
            try:
                return read_current(self._snapshot.vault, note, self._snapshot)
            except ChangedError:
                self._fail(path, "changed since the scan; the next tick takes it up")
            except UnicodeDecodeError:
                self._fail(path, "not valid UTF-8; file left as it is")
        raise KeyError(path)

    def _fail(self, path: str, why: str) -> None:
        self._failed.add(path)
        self.problems.append(Problem(path, None, why))

    def __iter__(self) -> Iterator[str]:
        return iter(self._notes)

    def __len__(self) -> int:
        return len(self._notes)


def read_texts(snapshot: Snapshot, notes: Iterable[Note]) -> _Texts:
    """The text of each note as the scan saw it, read when asked (:class:`_Texts`).

    A file that changed, vanished or is not UTF-8 is left out with a problem (in the result's
    ``problems`` once it was asked for): the next tick takes it up. This is the only read a plan
    needs; the planners themselves never read.
    """
    return _Texts(snapshot, notes)
