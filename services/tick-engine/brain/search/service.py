"""Recall for callers outside the tick (``brain search``, ``brain mcp``): index upkeep and queries.

The tick keeps the index current from its own scan. Outside the tick, the index is built
from a scan when it is missing or unusable, and brought up to date on request
(``brain search --refresh``, and the MCP server at most once per :data:`SYNC_EVERY_SECONDS`).
The one call to the scanner outside the tick is :func:`scan_notes` (the standalone inbox drain
uses it too).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from brain.core.model import Note
from brain.search import index
from brain.search.query import Hit
from brain.settings import Settings

SYNC_EVERY_SECONDS = 60.0


def scan_notes(settings: Settings) -> Iterable[Note]:
    """The vault's notes as the one scanner sees them (its parse cache read, never written here)."""
    from brain.io.vault import scan

    vault = settings.vault_path
    snapshot = scan(vault, feed_dir=settings.feed_dir, max_note_bytes=settings.max_note_bytes, write_cache=False)
    return snapshot.notes.values()


def ensure_index(settings: Settings, *, refresh: bool = False) -> index.IndexStats | None:
    """Build the index when it is missing or unusable; with ``refresh``, sync it with a scan.

    Returns what was done, or None when the index was usable and no refresh was asked.
    """
    vault = settings.vault_path
    if index.exists(vault) and not refresh:
        return None
    return index.sync(vault, scan_notes(settings), max_bytes=settings.max_note_bytes)


def find(
    settings: Settings, query: str, *, project: str | None = None, kind: str | None = None, limit: int = 10,
    refresh: bool = False,
) -> list[Hit]:
    """Search the vault's index, building it first when missing."""
    vault = settings.vault_path
    ensure_index(settings, refresh=refresh)
    try:
        return index.search(vault, query, project=project, kind=kind, limit=limit)
    except index.SearchIndexError:  # damaged between the check and the query: build once more
        index.rebuild(vault, scan_notes(settings), max_bytes=settings.max_note_bytes)
        return index.search(vault, query, project=project, kind=kind, limit=limit)


class Syncer:
    """Keeps a long-lived reader's index fresh without scanning on every call."""

    def __init__(self, settings: Settings, every_seconds: float = SYNC_EVERY_SECONDS):
        self.settings = settings
        self.every = every_seconds
        self.last = float("-inf")

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            ensure_index(self.settings, refresh=True)
            self.last = now

