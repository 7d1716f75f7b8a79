"""Numbered record reading and the extraction cursor (issue 11 item 5: fresh arcs).

``read_numbered`` streams a JSONL file like :func:`brain.io.sessions.read_file` and also
tells the handler the line each record sits on (lessons cite ``<session>:<line>``), and
drops every record stamped after ``until`` (a session still running at ``--until T`` is cut
at T: nothing after T gets through, and its end is at most T).

The cursor (``<vault>/.brain/extract-cursor.json`` or ``--cursor FILE``) remembers, per log
file, the size, the mtime and the offset of the last complete line read. A file whose size
and mtime are unchanged is not opened again; a file that grew is read again from the start,
because a session's figures in the bundle are absolute (``brain cluster`` replaces a
session's old figures with the new ones, it never adds them), so a partial read would
undercount. Claude Code files of the same project folder that are inside the window are read
with it (resume copies records between them, and they are counted once per folder). A run
after an idle period opens nothing and costs one ``stat`` per file.

The cursor is committed in two steps so that a failed ``brain cluster`` loses nothing:
``brain extract`` writes ``<cursor>.pending`` and names its token in the bundle;
``brain cluster`` renames the pending file over the cursor once the arcs are written, and
only when the token matches. Until then the next extraction reads the same files again.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from brain.io.atomic import atomic_write, read_regular
from brain.io.sessions import (
    RECORD_ERRORS,
    FileCounters,
    ReadStats,
    _lines,
    decode_line,
    skipped_record,
    time_key,
)

CURSOR_VERSION = 1
CURSOR_NAME = "extract-cursor.json"

RecordHandler = Callable[[dict[str, Any], int], None]


def read_numbered(path: Path, handle: RecordHandler, stats: ReadStats, until: str | None = None) -> FileCounters:
    """Stream ``path`` into ``handle(record, line)``; records after ``until`` are dropped."""
    counters = FileCounters()
    cut = False
    try:
        with open(path, "rb", buffering=1 << 20) as raw_handle:
            for raw in _lines(raw_handle, counters):
                if raw is None:
                    counters.lines += 1
                    counters.damaged += 1
                    continue
                for record in decode_line(raw, counters):
                    if until is not None:
                        stamp = record.get("timestamp")
                        key = time_key(stamp) if stamp is not None else None
                        if key is not None and key > until:
                            cut = True
                            continue
                        if key is None and cut:
                            continue  # an unstamped record after the cut belongs to the future too
                    try:
                        handle(record, counters.lines)
                    except RECORD_ERRORS as exc:
                        counters.damaged += 1
                        skipped_record(stats, path, counters.lines, exc)
    except OSError:
        stats.unreadable_files += 1
    stats.files_read += 1
    stats.bytes_read += counters.bytes
    stats.lines_read += counters.lines
    stats.damaged_lines += counters.damaged
    stats.salvaged_records += counters.salvaged
    stats.repaired_lines += counters.repaired
    return counters


@dataclass(frozen=True)
class FileState:
    size: int
    mtime_ns: int
    offset: int  # bytes up to the end of the last complete line


class Cursor:
    """What the last committed extraction read, per log file (absolute path)."""

    def __init__(self, path: Path, files: dict[str, FileState] | None = None) -> None:
        self.path = path
        self.files: dict[str, FileState] = dict(files or {})
        self.seen: dict[str, FileState] = {}
        self.changed = 0
        self.unchanged = 0
        #: With ``--until T``: a file modified after T may hold records after T that were
        #: dropped, so it is not marked as read (the next run reads it again).
        self.until_ts: float | None = None

    @classmethod
    def load(cls, path: Path) -> Cursor:
        """The committed cursor; a missing or unreadable one is empty (everything is read)."""
        try:
            data = json.loads(read_regular(path))
        except (OSError, ValueError):
            return cls(path)
        files: dict[str, FileState] = {}
        raw = data.get("files") if isinstance(data, dict) and data.get("version") == CURSOR_VERSION else None
        if isinstance(raw, dict):
            for name, state in raw.items():
                if isinstance(state, list) and len(state) == 3 and all(isinstance(v, int) for v in state):
                    files[str(name)] = FileState(state[0], state[1], state[2])
        return cls(path, files)

    def is_unchanged(self, path: Path, info: os.stat_result) -> bool:
        """True when ``path`` is as the cursor last saw it (then it is not read again)."""
        key = str(path)
        state = FileState(info.st_size, info.st_mtime_ns, info.st_size)
        known = self.files.get(key)
        if known is not None and known.size == state.size and known.mtime_ns == state.mtime_ns:
            self.seen[key] = known
            self.unchanged += 1
            return True
        self.changed += 1
        return False

    def record(self, path: Path, info: os.stat_result, offset: int) -> None:
        """``path`` was read up to ``offset``; keep it out of the next run unless it changes."""
        if self.until_ts is not None and info.st_mtime > self.until_ts:
            return
        self.seen[str(path)] = FileState(info.st_size, info.st_mtime_ns, offset)

    def write_pending(self) -> str:
        """Write ``<cursor>.pending`` with what this run saw; returns the token the bundle carries."""
        token = secrets.token_hex(8)
        files = {**self.files, **self.seen}
        data = {"version": CURSOR_VERSION, "token": token,
                "files": {name: [s.size, s.mtime_ns, s.offset] for name, s in sorted(files.items())}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(pending_path(self.path), (json.dumps(data, separators=(",", ":")) + "\n").encode())
        return token


def pending_path(cursor: Path) -> Path:
    return cursor.with_name(cursor.name + ".pending")


def commit(cursor: Path, token: str) -> bool:
    """Promote ``<cursor>.pending`` to the cursor when it carries ``token``; False otherwise."""
    pending = pending_path(cursor)
    try:
        data = json.loads(pending.read_bytes())
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("token") != token or data.get("version") != CURSOR_VERSION:
        return False
    os.replace(pending, cursor)
    return True
