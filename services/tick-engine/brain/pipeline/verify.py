"""Phase 5 of a tick: the one independent re-read, of what the tick wrote, and the invariants
on the snapshot it leads to (SPEC §9); ``brain verify``'s checks on the vault as it is."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

from brain.core import feed
from brain.core.keeper import KeeperDecisions, decide, in_conscious
from brain.core.model import Note, Problem
from brain.core.snapshot import Snapshot, vault_note
from brain.core.vocab import TOMBSTONE_STATUSES
from brain.io import writer
from brain.io.atomic import read_regular
from brain.io.vault import read_stamped, scan
from brain.settings import Settings


def read_back(snapshot: Snapshot, paths: Iterable[str],
               keep: dict[str, bytes] | None = None) -> dict[str, Note]:
    """The notes of ``paths`` as the files are now. A file whose bytes hash to the note the
    snapshot already holds for it keeps that note (with its real mtime); any other is parsed.
    ``keep`` receives the bytes read (each the bytes its note was made from)."""
    found: dict[str, Note] = {}
    root = str(snapshot.vault)
    for path in sorted(paths):
        try:
            data, mtime = read_stamped(os.path.join(root, path))
        except OSError:
            continue
        known = snapshot.notes.get(path)
        if known is not None and known.size == len(data) and \
                known.sha1 == hashlib.sha1(data, usedforsecurity=False).hexdigest():
            found[path] = Note(path=path, size=known.size, mtime_ns=mtime, sha1=known.sha1, arc=known.arc,
                               markers=known.markers, problems=known.problems, parsed=known.parsed,
                               body_offset=known.body_offset, plain_front=known.plain_front)  # replace(), cheaper
        else:
            found[path] = vault_note(path, data, mtime_ns=mtime)
        if keep is not None:
            keep[path] = data
    return found


def reread(snapshot: Snapshot, result: writer.ApplyResult) -> Snapshot:
    """The snapshot after changes made by someone else's plan (the AI apply): those files re-read."""
    written = read_back(snapshot, {p for p in (*result.written, *(dst for _, dst in result.moved))
                                    if p.endswith(".md")})
    return snapshot.with_changes(written, moved=[m for m in result.moved if m[1] not in written],
                                 deleted=result.deleted)


def verify_written(
    s: Settings,
    now: datetime,
    snapshot: Snapshot,
    result: writer.ApplyResult,
    feed_rel: str | None,
    *,
    feed_tokens: int = 0,
    decided: KeeperDecisions | None = None,
    keep_bytes: bool = True,
) -> tuple[Snapshot, int, list[Problem]]:
    """SPEC §9 invariants after a tick; returns the snapshot as re-read, the files read, the failures.

    The one independent re-read: every file this tick wrote or moved is read back and hashed;
    one that matches what the tick wrote keeps its in-memory note (now with its real mtime),
    any other (edited since, or never written) is parsed as it is. The checks then run on
    that snapshot: no duplicate ``cluster_id``, every written arc parses, the conscious cap,
    the feed budget, and a second keeper pass at the same instant that changes nothing.
    ``decided``: the keeper's decisions at ``now``; the second pass recomputes heat only for the
    arcs whose note is not the one decided there (what this tick wrote or re-read).
    ``keep_bytes``: the returned snapshot holds the bytes read (for the search index to take).
    """
    read: dict[str, bytes] = {}
    updated = read_back(snapshot, {p for p in (*result.written, *(dst for _, dst in result.moved))
                                    if p in snapshot.notes}, read if keep_bytes else None)
    snapshot = snapshot.with_changes(updated, read=read)  # the search index takes the bytes from here
    failures: list[Problem] = []
    written = set(result.written) | {dst for _, dst in result.moved}
    for path in sorted(written):
        found = snapshot.notes.get(path)
        if path.endswith(".md") and (feed_rel is None or not path.startswith(feed_rel + "/")) and found is not None \
                and not found.parsed:
            failures.append(Problem(path, None, "verify: a file this tick wrote does not parse"))
    check = decide(snapshot.notes.values(), now, s, reuse=decided)
    failures[:0] = _duplicate_failures(check.duplicates)
    conscious = conscious_count(check)
    if conscious > s.conscious_cap:
        failures.append(Problem("frontal-lobe/conscious", None,
                                f"verify: {conscious} arcs in conscious, cap is {s.conscious_cap}"))
    folder = s.feed_dir
    if feed_rel is not None and folder.is_dir() and not folder.is_symlink():
        # May only exceed the budget by what is never cut (nuclear signals, top hot arcs, headers):
        # the keeper's own plan tells how small the feed can get.
        total = sum(folder_tokens(folder).values())
        if total > max(s.feed_token_budget, feed_tokens):
            failures.append(Problem(feed_rel, None, f"verify: feed is {total} tokens, budget {s.feed_token_budget}"))
    pending = [d.path if d.path == d.note.path else f"{d.note.path} → {d.path}" for d in check.changed()
               if not any(d.note.path.startswith(c) or d.path.startswith(c) for c in result.conflicts)]
    if pending:
        failures.append(Problem(pending[0], None,
                                f"verify: a second pass would still change {len(pending)} files: "
                                + ", ".join(pending[:5])))
    return snapshot, len(updated), failures


def static_failures(snapshot: Snapshot) -> list[Problem]:
    """The invariants a vault holds whatever its clock: no ``cluster_id`` in two files. What a
    dry run checks (it wrote nothing to re-read) and ``brain verify`` reports."""
    return _duplicate_failures({cid: sorted(n.path for n in notes)
                                for cid, notes in snapshot.arcs_by_id().items() if len(notes) > 1})


def verify_vault(s: Settings, vault: Path, feed_dir: Path) -> list[Problem]:
    """``brain verify``: the invariants on the vault as it is now (a fresh scan, nothing written)."""
    return static_failures(scan(vault, feed_dir=feed_dir, max_note_bytes=s.max_note_bytes, write_cache=False))


def _duplicate_failures(duplicates: Mapping[str, list[str]]) -> list[Problem]:
    """``duplicates``: cluster_id -> the sorted paths of the files that hold it."""
    return [
        Problem(paths[0], None, f"verify: cluster_id {cid} is in {len(paths)} files: " + ", ".join(paths))
        for cid, paths in sorted(duplicates.items())
    ]


def conscious_count(decisions: KeeperDecisions) -> int:
    """Live arcs in conscious (tombstones never move, so they do not count against the cap)."""
    return sum(1 for d in decisions.arcs.values() if in_conscious(d.path) and d.status not in TOMBSTONE_STATUSES)


def folder_tokens(feed_dir: Path) -> dict[str, int]:
    """Tokens of each feed file in the folder, by name: what the keeper counts beside the files it
    writes, and the feed verify weighs against the budget."""
    found: dict[str, int] = {}
    if feed_dir.is_dir():
        for other in sorted(feed_dir.glob("*.md")):
            try:
                found[other.name] = feed.tokens(read_regular(other).decode("utf-8", "replace"))
            except OSError:  # gone since, or not a file (never a named pipe's wait)
                continue
    return found
