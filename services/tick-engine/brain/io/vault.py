"""The one scanner: walks the vault, parses notes, keeps a parse cache in ``.brain/``.

An unchanged file (same size and mtime) is never parsed again: its parsed form comes from
``.brain/cache.json``. The cache is rebuilt if missing or corrupt, and entries whose mtime
is within :data:`RACY_SECONDS` of the cache's own writing are confirmed by a content hash
(an edit in the same clock tick would keep the size and mtime).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain.core.model import Note, Problem, parse_note
from brain.core.plan import Expect
from brain.io.atomic import atomic_write

CACHE_FILE = ".brain/cache.json"
CACHE_VERSION = 4
RACY_SECONDS = 2


class ChangedError(Exception):
    """The file on disk is no longer the one the scan parsed."""

    def __init__(self, path: str):
        super().__init__(f"{path} changed since the scan")
        self.path = path


@dataclass
class ScanStats:
    files: int = 0
    parsed: int = 0
    cached: int = 0
    ms: float = 0.0


@dataclass
class Snapshot:
    vault: Path
    notes: dict[str, Note]
    problems: list[Problem] = field(default_factory=list)
    stats: ScanStats = field(default_factory=ScanStats)
    cache_dirty: bool = False
    #: Bytes of the files this scan parsed (with ``keep_bytes``), so planners need not re-read them.
    raw: dict[str, bytes] = field(default_factory=dict)

    @property
    def arcs(self) -> list[Note]:
        return [n for n in self.notes.values() if n.arc is not None]

    def arcs_by_id(self) -> dict[str, list[Note]]:
        grouped: dict[str, list[Note]] = defaultdict(list)
        for note in self.notes.values():
            if note.arc is not None:
                grouped[note.arc.cluster_id].append(note)
        return grouped

    def unique_arcs(self) -> dict[str, Note]:
        """cluster_id -> note, for ids held by exactly one file (duplicates are verify problems)."""
        return {cid: notes[0] for cid, notes in self.arcs_by_id().items() if len(notes) == 1}


def expect_of(note: Note) -> Expect:
    return Expect(note.size, note.mtime_ns, note.sha1)


def _load_cache(vault: Path) -> tuple[dict[str, Any], int]:
    """The cached notes and the time the cache was written (0 when missing or corrupt)."""
    try:
        raw = json.loads((vault / CACHE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, 0
    if not isinstance(raw, dict) or raw.get("version") != CACHE_VERSION or not isinstance(raw.get("notes"), dict):
        return {}, 0
    notes: dict[str, Any] = raw["notes"]
    written = raw.get("written_ns")
    return notes, written if isinstance(written, int) else 0


def save_cache(snapshot: Snapshot) -> None:
    """Persist the parse cache of ``snapshot`` (one write per tick, only when it changed)."""
    if not snapshot.cache_dirty:
        return
    entries = {path: note.to_json() for path, note in snapshot.notes.items()}
    data = {"version": CACHE_VERSION, "written_ns": time.time_ns(), "notes": entries}
    with contextlib.suppress(OSError):
        atomic_write(snapshot.vault / CACHE_FILE, json.dumps(data, separators=(",", ":")).encode())
    snapshot.cache_dirty = False


def _same_content(vault: Path, rel: str, size: int, sha1: str) -> bool:
    try:
        data = (vault / rel).read_bytes()
    except OSError:
        return False
    return len(data) == size and hashlib.sha1(data, usedforsecurity=False).hexdigest() == sha1


def walk(vault: Path, skip: frozenset[str] = frozenset()) -> list[tuple[str, os.stat_result]]:
    """Every ``*.md`` file (vault-relative POSIX path, stat), dot-folders and symlinks excluded.

    ``skip`` holds vault-relative folders to leave out (the brain-feed folder).
    """
    found: list[tuple[str, os.stat_result]] = []
    stack = [(str(vault), "")]
    while stack:
        folder, rel = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                name = entry.name
                if name.startswith(".") or entry.is_symlink():
                    continue  # dot-folders (.brain, .obsidian, .trash, .git) are hidden; symlinks are never followed
                child = f"{rel}{name}"
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if child not in skip:
                            stack.append((entry.path, child + "/"))
                    elif name.endswith(".md") and entry.is_file(follow_symlinks=False):
                        found.append((child, entry.stat(follow_symlinks=False)))
                except OSError:
                    continue
    return found


def feed_relative(vault: Path, feed_dir: Path) -> str | None:
    """The feed folder relative to the vault, or None when it lives elsewhere."""
    try:
        return feed_dir.resolve().relative_to(vault.resolve()).as_posix()
    except ValueError:
        return None


def listing_of(vault: Path, feed_dir: Path) -> list[tuple[str, os.stat_result]]:
    rel = feed_relative(vault, feed_dir)
    return walk(vault, frozenset() if rel is None else frozenset({rel}))


def scan(
    vault: Path,
    *,
    feed_dir: Path,
    max_note_bytes: int,
    write_cache: bool,
    listing: list[tuple[str, os.stat_result]] | None = None,
    known: dict[str, Note] | None = None,
    keep_bytes: bool = False,
) -> Snapshot:
    """Parse the vault, reusing the cache for files whose size and mtime are unchanged.

    Like git's index, a cache entry whose mtime is not safely older than the cache itself
    ("racily clean": an edit in the same clock tick keeps size and mtime) is trusted only
    after its content hash is checked. ``known`` holds notes the caller predicted for files
    it just wrote (the keeper's own edits); each is used only if the file's bytes hash to it.
    """
    started = time.perf_counter()
    cache, cache_written = _load_cache(vault)
    racy_from = cache_written - RACY_SECONDS * 1_000_000_000
    notes: dict[str, Note] = {}
    raw: dict[str, bytes] = {}
    stats = ScanStats()
    dirty = not cache_written
    for rel, st in listing if listing is not None else listing_of(vault, feed_dir):
        stats.files += 1
        predicted = known.get(rel) if known else None
        if predicted is not None and predicted.size == st.st_size and _same_content(vault, rel, predicted.size,
                                                                                    predicted.sha1):
            notes[rel] = dataclasses.replace(predicted, mtime_ns=st.st_mtime_ns)
            stats.cached += 1
            dirty = True
            continue
        entry = cache.get(rel)
        if entry is not None and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns:
            try:
                note = Note.from_json(entry)
            except (KeyError, TypeError, ValueError):
                note = None
            if note is not None and (st.st_mtime_ns < racy_from or _same_content(vault, rel, note.size, note.sha1)):
                notes[rel] = note
                stats.cached += 1
                continue
        notes[rel] = _parse_file(vault, rel, st, max_note_bytes, raw if keep_bytes else None)
        stats.parsed += 1
        dirty = True
    if len(notes) != len(cache):
        dirty = True
    problems = [p for note in notes.values() for p in note.problems]
    snapshot = Snapshot(vault, notes, problems, stats, cache_dirty=dirty, raw=raw)
    if write_cache:
        save_cache(snapshot)
    stats.ms = (time.perf_counter() - started) * 1000
    return snapshot


def _parse_file(
    vault: Path, rel: str, st: os.stat_result, max_note_bytes: int, keep: dict[str, bytes] | None = None
) -> Note:
    if st.st_size > max_note_bytes:
        problem = Problem(rel, None, f"too large to parse ({st.st_size} bytes > {max_note_bytes}); file left as it is")
        return Note(rel, st.st_size, st.st_mtime_ns, "", problems=(problem,), parsed=False)
    try:
        data = (vault / rel).read_bytes()
    except OSError as exc:
        return Note(rel, st.st_size, st.st_mtime_ns, "", problems=(Problem(rel, None, f"unreadable: {exc}"),),
                    parsed=False)
    sha1 = hashlib.sha1(data, usedforsecurity=False).hexdigest()
    if keep is not None:
        keep[rel] = data
    # The stat may be older than the read; use the read's size so expectations stay honest.
    return parse_note(rel, data, size=len(data), mtime_ns=st.st_mtime_ns, sha1=sha1)


def read_current(vault: Path, note: Note, snapshot: Snapshot | None = None) -> str:
    """The file's text, guaranteed to be the text the scan parsed.

    With the ``snapshot`` that kept the file's bytes, those are used (the writer still
    checks the file against the scan before replacing it).
    """
    kept = snapshot.raw.get(note.path) if snapshot is not None else None
    if kept is not None and len(kept) == note.size:
        return kept.decode("utf-8")
    try:
        data = (vault / note.path).read_bytes()
    except OSError:
        raise ChangedError(note.path) from None
    if len(data) != note.size or hashlib.sha1(data, usedforsecurity=False).hexdigest() != note.sha1:
        raise ChangedError(note.path)
    return data.decode("utf-8")
