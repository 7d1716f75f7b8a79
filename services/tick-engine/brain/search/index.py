"""The recall index: SQLite FTS5 under ``<vault>/.brain/search.sqlite`` (SPEC §15).

One row per arc (title, summary, project and body text without its markers, and its work
items: the files, commands, errors (open or met) and identifiers of its frontmatter,
CLUSTERS.md) and
one per marker block (lesson, decision, signal, todo, inject) anywhere in the vault. Ranked
by BM25 (titles and work items weigh more), then heat, then recency. Only redacted text is
stored.

The tick keeps it current from its own scan: :func:`refresh` re-reads only the files it is
told changed, :func:`sync` works out what changed by content hash (no second walk: it takes
the scan's notes). A missing, corrupt or outdated index is rebuilt whole (:func:`rebuild`),
into a temporary file renamed into place, so a reader never sees half an index.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from brain.search.query import KINDS, MARKER_KINDS, Hit, expression, one_line
from brain.search.query import terms as query_terms

if TYPE_CHECKING:  # the recall hook imports this module: yaml and the parsers load only to index
    from brain.core.model import ArcInfo, Note

DB_FILE = ".brain/search.sqlite"
SCHEMA_VERSION = "5"
#: Files under these folders are not indexed: agent notes waiting for the next tick.
SKIPPED_PREFIXES = ("raw/inbox/",)
BODY_MAX_CHARS = 200_000
#: Candidates fetched per wanted hit before heat and recency break near-ties.
CANDIDATES_PER_HIT = 4
SNIPPET_TOKENS = 24
#: BM25 scores closer than this count as a tie, broken by heat then recency.
TIE_DECIMALS = 2
BUSY_TIMEOUT_SECONDS = 10.0

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(path TEXT PRIMARY KEY, sha1 TEXT NOT NULL);
CREATE TABLE docs(
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    line INTEGER NOT NULL,
    kind TEXT NOT NULL,
    project TEXT,
    cluster_id TEXT,
    heat INTEGER NOT NULL,
    last_active TEXT,
    status TEXT NOT NULL,
    successors TEXT NOT NULL,
    title TEXT NOT NULL,
    work TEXT NOT NULL
);
CREATE INDEX docs_path ON docs(path);
CREATE INDEX docs_cluster ON docs(cluster_id);
CREATE INDEX docs_project ON docs(project, kind, last_active);
CREATE VIRTUAL TABLE fts USING fts5(title, body, kind, project, work, tokenize='porter unicode61 remove_diacritics 2');
INSERT INTO fts(fts, rank) VALUES ('rank', 'bm25(4.0, 1.0, 0.0, 0.0, 2.0)');
"""


class SearchIndexError(Exception):
    """The index is missing, corrupt or from another version: rebuild it."""


@dataclass
class IndexStats:
    files_read: int = 0
    rows_written: int = 0
    files_removed: int = 0
    rebuilt: bool = False
    ms: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {"files_read": self.files_read, "rows_written": self.rows_written,
                "files_removed": self.files_removed, "rebuilt": self.rebuilt, "ms": round(self.ms, 2)}


@dataclass(frozen=True)
class Row:
    path: str
    line: int
    kind: str
    project: str | None
    cluster_id: str | None
    heat: int
    last_active: str | None
    status: str
    successors: tuple[str, ...]
    title: str
    body: str
    #: The arc's work items, searchable and shown by recall (arc rows only).
    work: WorkItems = ()


def db_path(vault: Path) -> Path:
    return vault / DB_FILE


def indexed(path: str) -> bool:
    return path.endswith(".md") and not path.startswith(SKIPPED_PREFIXES)


# --- rows (pure: a note and its text in, rows out) ---------------------------------------------

#: An arc's work items as (field, values) pairs in :data:`WORK_FIELDS` order, empty fields left out.
WorkItems = tuple[tuple[str, tuple[str, ...]], ...]
#: Frontmatter work fields (CLUSTERS.md) and the name recall shows them under.
WORK_FIELDS = (("files", "files"), ("commands", "commands"), ("open_errors", "errors"), ("identifiers", "ids"))
#: Frontmatter fields shown under an earlier field's name: errors met and resolved are errors too.
WORK_EXTRA = {"open_errors": ("errors_met",)}
#: At most this many values of one field are indexed (a huge arc must not drown the rest).
WORK_MAX_VALUES = 60
WORK_VALUE_CHARS = 200


def work_items(arc: ArcInfo) -> WorkItems:
    """The arc's files (relative to its cwd when under it: what an agent in that checkout types),
    commands, errors (open, then met) and identifiers."""
    base = (arc.cwd or "").rstrip("/")
    under = base + "/" if base else ""
    out = []
    for attr, name in WORK_FIELDS:
        values = getattr(arc, attr)
        for extra in WORK_EXTRA.get(attr, ()):
            values = (*values, *getattr(arc, extra, ()))
        if attr == "files" and under:
            values = [v[len(under):] if v.startswith(under) else v for v in values]
        kept = _distinct(values)
        if kept:
            out.append((name, kept[:WORK_MAX_VALUES]))
    return tuple(out)


def _distinct(values: Iterable[str]) -> tuple[str, ...]:
    """``values`` stripped and cut to :data:`WORK_VALUE_CHARS`, blanks and repeats left out, in order."""
    seen = dict.fromkeys(map(str.strip, values))
    seen.pop("", None)
    if seen and max(map(len, seen)) > WORK_VALUE_CHARS:  # cut, two values may become one
        return tuple(dict.fromkeys(v[:WORK_VALUE_CHARS] for v in seen))
    return tuple(seen)


def encode_work(work: WorkItems) -> str:
    return json.dumps({name: list(values) for name, values in work}, ensure_ascii=False) if work else ""


def decode_work(text: str | None) -> WorkItems:
    if not text:
        return ()
    try:
        data = json.loads(text)
    except ValueError:
        return ()
    if not isinstance(data, dict):
        return ()
    return tuple((str(k), tuple(str(v) for v in vals)) for k, vals in data.items() if isinstance(vals, list))


def work_text(work: WorkItems) -> str:
    return "\n".join(itertools.chain.from_iterable(values for _, values in work))


def rows_for(note: Note, text: str) -> list[Row]:
    """The index rows of one parsed note; ``text`` is the file's text the note was parsed from."""
    if not note.parsed or not indexed(note.path):
        return []
    arc = note.arc
    project = arc.project if arc is not None else None
    cluster_id = arc.cluster_id if arc is not None else None
    heat = (arc.heat or 0) if arc is not None else 0
    last_active = (arc.last_active or arc.created) if arc is not None else None
    status = arc.status if arc is not None else ""
    successors: tuple[str, ...] = ()
    if arc is not None and arc.is_tombstone:
        successors = tuple(s for s in ((arc.merged_into,) if arc.merged_into else arc.split_into) if s)
    texts: list[str] = []  # redacted in one call below: a file's rows share one pass of the patterns
    kinds: list[tuple[str, int]] = []
    work = work_items(arc) if arc is not None else ()
    flat = list(itertools.chain.from_iterable(values for _, values in work))
    if arc is not None:
        texts.append(arc.title)
        texts.extend(flat)
        pieces, cursor = [], note.body_offset
        for marker in note.markers:  # marker blocks get rows of their own; tags are noise
            if marker.start >= cursor:
                pieces.append(text[cursor:marker.start])
                cursor = marker.end
        pieces.append(text[cursor:])
        body = " ".join(p for p in (arc.summary or "", arc.project or "", arc.last_prompt or "", "".join(pieces)) if p)
        texts.append(body[:BODY_MAX_CHARS])
        kinds.append(("arc", 1))
    for marker in note.markers:
        if marker.type not in MARKER_KINDS or not marker.is_block or not marker.text:
            continue
        extra = " ".join(v for k, v in marker.attrs if k in ("source", "severity", "target"))
        texts.append(f"{marker.text} {extra}".strip()[:BODY_MAX_CHARS])
        kinds.append((marker.type, marker.line))
    if not kinds:
        return []
    clean = _redact_all(texts)
    title = clean.pop(0) if arc is not None else ""  # shown with every hit; searched on the arc row only
    if flat:  # the work items, redacted, back into their fields
        redacted, at, fields = clean[:len(flat)], 0, []
        del clean[:len(flat)]
        for name, items in work:
            fields.append((name, tuple(redacted[at:at + len(items)])))
            at += len(items)
        work = tuple(fields)
    return [Row(note.path, line, kind, project, cluster_id, heat, last_active, status, successors, title, body,
                work if kind == "arc" else ())
            for (kind, line), body in zip(kinds, clean, strict=True)]


_SEPARATOR = "\n\n\x1e\x1e\n\n"


def _redact_all(texts: list[str]) -> list[str]:
    """``redact`` of each text, in one call when the separator survives (it is whitespace to every pattern)."""
    from brain.core.redaction import redact

    joined = redact(_SEPARATOR.join(texts))
    parts = joined.split(_SEPARATOR)
    return parts if len(parts) == len(texts) else [redact(t) for t in texts]


# --- the database ------------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


@contextlib.contextmanager
def _open(vault: Path) -> Iterator[sqlite3.Connection]:
    """The index, schema-checked; SearchIndexError when missing, corrupt or outdated."""
    path = db_path(vault)
    if not path.is_file():
        raise SearchIndexError(f"no index at {path}")
    try:
        conn = _connect(path)
    except sqlite3.Error as exc:
        if _busy(exc):
            raise
        raise SearchIndexError(f"cannot open {path}: {exc}") from None
    try:
        try:
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.DatabaseError as exc:
            if _busy(exc):
                raise  # held by another writer: busy, not broken
            raise SearchIndexError(f"unreadable index {path}: {exc}") from None
        if row is None or row[0] != SCHEMA_VERSION:
            raise SearchIndexError(f"index {path} has schema {row[0] if row else None}, want {SCHEMA_VERSION}")
        yield conn
    finally:
        conn.close()


def exists(vault: Path) -> bool:
    """True when a usable index is there (schema checked)."""
    try:
        with _open(vault):
            return True
    except SearchIndexError:
        return False
    except sqlite3.OperationalError as exc:
        if _busy(exc):
            return True  # another process is writing it
        raise


def _read(vault: Path, rel: str) -> bytes | None:
    """The file's bytes when it is a regular file (a named pipe put there is never waited on)."""
    from brain.io.atomic import read_regular

    try:
        return read_regular(os.path.join(vault, rel))
    except OSError:
        return None


def _note_and_text(vault: Path, rel: str, note: Note | None, max_bytes: int,
                   raw: Mapping[str, bytes] | None = None) -> tuple[Note, str, str] | None:
    """The file's current note, text and sha1 (the scan's note when the bytes still match it).

    ``raw``: bytes the caller read moments ago, each the very bytes its note was made from
    (the tick's scan and verify): used instead of reading the file once more."""
    import hashlib

    from brain.core.model import parse_note

    kept = raw.get(rel) if raw is not None else None
    if kept is not None and note is not None and len(kept) == note.size and len(kept) <= max_bytes:
        try:
            return note, kept.decode("utf-8"), note.sha1
        except UnicodeDecodeError:
            pass
    data = _read(vault, rel)
    if data is None or len(data) > max_bytes:
        return None
    sha1 = hashlib.sha1(data, usedforsecurity=False).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if note is None or note.sha1 != sha1:
        note = parse_note(rel, data, size=len(data), mtime_ns=0, sha1=sha1)
    return note, text, sha1


#: Rows go to SQLite after this many files (bounded memory; ids are assigned here either way).
FLUSH_FILES = 1000


@dataclass
class _Batch:
    """Rows waiting for one ``executemany`` per table (ids assigned here, not by SQLite)."""

    next_id: int
    docs: list[tuple[object, ...]]
    fts: list[tuple[object, ...]]
    files: list[tuple[str, str]]

    def add(self, rows: list[Row]) -> int:
        for row in rows:
            self.docs.append((self.next_id, row.path, row.line, row.kind, row.project, row.cluster_id, row.heat,
                              row.last_active, row.status, ",".join(row.successors), row.title,
                              encode_work(row.work)))
            self.fts.append((self.next_id, row.title if row.kind == "arc" else "", row.body, row.kind,
                             row.project or "", work_text(row.work)))
            self.next_id += 1
        return len(rows)

    def flush(self, conn: sqlite3.Connection) -> None:
        conn.executemany("INSERT INTO docs(id, path, line, kind, project, cluster_id, heat, last_active, status,"
                         " successors, title, work) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", self.docs)
        conn.executemany("INSERT INTO fts(rowid, title, body, kind, project, work) VALUES (?, ?, ?, ?, ?, ?)",
                         self.fts)
        conn.executemany("INSERT OR REPLACE INTO files(path, sha1) VALUES (?, ?)", self.files)
        self.docs, self.fts, self.files = [], [], []


#: Paths bound in one ``IN (…)`` (SQLite allows 999 parameters in older builds).
IN_CHUNK = 500


def _in_chunks(paths: Iterable[str]) -> Iterator[tuple[list[str], str]]:
    """``paths`` sorted and deduplicated, :data:`IN_CHUNK` at a time, each with its ``?, ?, …``."""
    wanted = sorted(set(paths))
    for start in range(0, len(wanted), IN_CHUNK):
        chunk = wanted[start:start + IN_CHUNK]
        yield chunk, ",".join("?" * len(chunk))


def _forget(conn: sqlite3.Connection, paths: Iterable[str]) -> None:
    """Drop every row of ``paths``, a few hundred paths a statement. FTS5 rows go by rowid, one
    statement each: it plans ``rowid IN (SELECT …)`` as a scan of the whole table (1 ms a file on
    10 000 arcs)."""
    for chunk, marks in _in_chunks(paths):
        conn.executemany("DELETE FROM fts WHERE rowid = ?",
                         conn.execute(f"SELECT id FROM docs WHERE path IN ({marks}) ORDER BY id", chunk).fetchall())
        conn.execute(f"DELETE FROM docs WHERE path IN ({marks})", chunk)
        conn.execute(f"DELETE FROM files WHERE path IN ({marks})", chunk)


def _index_files(
    conn: sqlite3.Connection, vault: Path, paths: Iterable[str], notes: Mapping[str, Note], stats: IndexStats,
    max_bytes: int, known: Mapping[str, str], raw: Mapping[str, bytes] | None = None,
) -> None:
    """Index ``paths`` as they are on disk now; ``known`` is what the index holds (path -> sha1)."""
    batch = _Batch(conn.execute("SELECT coalesce(max(id), 0) + 1 FROM docs").fetchone()[0], [], [], [])
    stale: list[str] = []  # rows to drop, always before the batch that replaces them is written
    for rel in sorted(set(paths)):
        if not indexed(rel) or rel not in notes:
            # The scan's view decides what is a note (never the feed folder or a dot-folder).
            if rel in known:
                stale.append(rel)
                stats.files_removed += 1
            continue
        found = _note_and_text(vault, rel, notes.get(rel), max_bytes, raw)
        stats.files_read += 1
        if found is not None and known.get(rel) == found[2]:
            continue  # told it changed, but the index already holds these very bytes
        if rel in known:
            stale.append(rel)
        if found is None:
            stats.files_removed += 1
            continue
        note, text, sha1 = found
        stats.rows_written += batch.add(rows_for(note, text))
        batch.files.append((rel, sha1))
        if len(batch.files) >= FLUSH_FILES:  # a rebuild never holds every arc's rows at once
            _forget(conn, stale)
            stale.clear()
            batch.flush(conn)
    _forget(conn, stale)
    batch.flush(conn)


DEFAULT_MAX_BYTES = 2_000_000
#: A rebuild's temporary file untouched this long belongs to a process that died.
STALE_TEMP_SECONDS = 3600


def rebuild_temp(vault: Path, pid: int) -> Path:
    """Where process ``pid`` builds a new index before renaming it into place."""
    target = db_path(vault)
    return target.with_name(f".{target.name}.{pid}.tmp")


def rebuild(vault: Path, notes: Iterable[Note], *, max_bytes: int = DEFAULT_MAX_BYTES,
            raw: Mapping[str, bytes] | None = None) -> IndexStats:
    """Build the whole index from the scan's notes into a new file, then rename it into place.

    ``raw``: the bytes each note was made from, where the caller holds them (not read again)."""
    started = time.perf_counter()
    stats = IndexStats(rebuilt=True)
    by_path = {n.path: n for n in notes}
    target = db_path(vault)
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = rebuild_temp(vault, os.getpid())
    for left in target.parent.glob(f".{target.name}.*.tmp"):  # a killed rebuild's, once it is clearly dead
        with contextlib.suppress(OSError):
            if left == temp or left.stat().st_mtime < time.time() - STALE_TEMP_SECONDS:
                left.unlink()
    conn = sqlite3.connect(str(temp), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=OFF")
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("BEGIN")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute("INSERT INTO meta(key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,))
        conn.execute("INSERT INTO fts(fts, rank) VALUES ('automerge', 0)")  # one merge at the end instead
        _index_files(conn, vault, (p for p, n in by_path.items() if n.parsed), by_path, stats, max_bytes, {}, raw)
        conn.execute("COMMIT")
        conn.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        conn.execute("INSERT INTO fts(fts, rank) VALUES ('automerge', 4)")  # FTS5's default, for refreshes
    except BaseException:
        conn.close()
        temp.unlink(missing_ok=True)
        raise
    conn.close()
    with open(temp, "rb") as handle:
        os.fsync(handle.fileno())
    for stale in (target.with_name(target.name + "-journal"), target.with_name(target.name + "-wal")):
        stale.unlink(missing_ok=True)  # a leftover journal must never be replayed onto the new file
    os.replace(temp, target)
    stats.ms = (time.perf_counter() - started) * 1000
    return stats


def _busy(exc: Exception) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _known(conn: sqlite3.Connection, paths: Iterable[str]) -> dict[str, str]:
    """What the index holds (path -> sha1) for ``paths`` only: a refresh of 20 files does not
    read the row of every indexed file."""
    found: dict[str, str] = {}
    for chunk, marks in _in_chunks(paths):
        found.update(conn.execute(f"SELECT path, sha1 FROM files WHERE path IN ({marks})", chunk).fetchall())
    return found


def refresh(
    vault: Path, notes: Iterable[Note], changed: Iterable[str], removed: Iterable[str], *,
    max_bytes: int = DEFAULT_MAX_BYTES, raw: Mapping[str, bytes] | None = None, partial: bool = False,
    retagged: Mapping[str, tuple[str, str]] | None = None,
    moved: Mapping[str, tuple[str, str, str]] | None = None,
) -> IndexStats:
    """Re-index the ``changed`` files (read from disk now) and drop the ``removed`` ones.

    ``notes`` are those of the scan that saw the change: a changed path it does not hold (a
    feed file, anything under a dot-folder) is not a note and is never indexed. Cost is
    proportional to the change. A missing, corrupt or outdated index is rebuilt
    from ``notes`` instead, unless they are ``partial`` (some of the vault's notes only):
    then it raises :class:`SearchIndexError` and the index is left for a full pass.

    ``retagged``: changed files whose edit touched only the arc's ``heat`` and ``status`` lines
    (path -> the sha1 before and after the keeper's edit): while the index holds the version
    before and the file is the version after, its rows get the new heat and status in place, and
    nothing is read or re-tokenised. ``moved``: the same for files the keeper moved, edited so or
    not at all (new path -> old path, sha1 before and after): while the index holds the version
    before at the old path and nothing at the new one, the rows move to the new path.
    """
    note_list = notes if isinstance(notes, list) else list(notes)
    started = time.perf_counter()
    stats = IndexStats()
    try:
        with _open(vault) as conn:
            by_path = {n.path: n for n in note_list}
            changed_set, removed_set = set(changed), set(removed) - set(changed)
            conn.execute("BEGIN IMMEDIATE")
            try:
                known = _known(conn, changed_set | removed_set)
                docs: list[tuple[str, int, str, str]] = []
                files: list[tuple[str, str, str]] = []
                retags = [(rel, rel, before, after) for rel, (before, after) in (retagged or {}).items()]
                retags += [(rel, src, before, after) for rel, (src, before, after) in (moved or {}).items()]
                for rel, src, before, after in sorted(retags):
                    note = by_path.get(rel)
                    if rel not in changed_set or known.get(src) != before or note is None or note.sha1 != after \
                            or not note.parsed or note.arc is None or note.arc.is_tombstone or not indexed(rel):
                        continue
                    if src != rel and rel in known:
                        continue  # rows at the new path already: read it as any change
                    docs.append((rel, note.arc.heat or 0, note.arc.status, src))
                    files.append((rel, note.sha1, src))
                    changed_set.discard(rel)
                    removed_set.discard(src)
                conn.executemany("UPDATE docs SET path = ?, heat = ?, status = ? WHERE path = ?", docs)
                conn.executemany("UPDATE files SET path = ?, sha1 = ? WHERE path = ?", files)
                gone = [rel for rel in removed_set if rel in known]
                _forget(conn, gone)
                stats.files_removed += len(gone)
                _index_files(conn, vault, changed_set, by_path, stats, max_bytes, known, raw)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    except (SearchIndexError, sqlite3.DatabaseError) as exc:
        if _busy(exc) or partial:
            raise  # another writer holds it, or the notes are not all of the vault: not a reason to rebuild
        return rebuild(vault, note_list, max_bytes=max_bytes, raw=raw)
    stats.ms = (time.perf_counter() - started) * 1000
    return stats


def sync(vault: Path, notes: Iterable[Note], *, max_bytes: int = DEFAULT_MAX_BYTES,
         raw: Mapping[str, bytes] | None = None) -> IndexStats:
    """Bring the index in line with a scan: files whose hash differs are re-read, gone ones dropped."""
    note_list = [n for n in notes if n.parsed and indexed(n.path)]
    try:
        with _open(vault) as conn:
            known = dict(conn.execute("SELECT path, sha1 FROM files").fetchall())
    except (SearchIndexError, sqlite3.DatabaseError) as exc:
        if _busy(exc):
            raise  # another writer holds it: not a reason to rebuild
        return rebuild(vault, note_list, max_bytes=max_bytes, raw=raw)
    current = {n.path: n.sha1 for n in note_list}
    changed = [p for p, sha in current.items() if known.get(p) != sha]
    removed = [p for p in known if p not in current]
    if not changed and not removed:
        return IndexStats()
    return refresh(vault, note_list, changed, removed, max_bytes=max_bytes, raw=raw)


# --- queries -----------------------------------------------------------------------------------

def search(
    vault: Path, query: str, *, project: str | None = None, kind: str | None = None, limit: int = 10,
    any_term: bool = False, drop_stopwords: bool = False,
) -> list[Hit]:
    """The best ``limit`` hits for free text ``query``; every term must match unless ``any_term``.

    With every term required and nothing found, it falls back to any term, so a search
    box never answers empty for one unknown word. Raises SearchIndexError when the index
    is missing or unusable; never raises for the query's text.
    """
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
    limit = max(1, min(int(limit), 200))
    with _open(vault) as conn:
        try:
            hits = _query(conn, query, project, kind, limit, any_term, drop_stopwords)
            if not hits and not any_term:
                hits = _query(conn, query, project, kind, limit, True, drop_stopwords)
        except sqlite3.DatabaseError as exc:
            if _busy(exc):
                raise
            raise SearchIndexError(f"damaged index {db_path(vault)}: {exc}") from None
        return hits


#: With any term allowed, terms in more than this share of the rows say nothing: left out.
COMMON_TERM_SHARE = 0.2
#: ... and at most this many of the rarest terms are kept (a whole prompt stays a fast query).
MAX_ANY_TERMS = 8


def _informative(conn: sqlite3.Connection, found: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """The rarest terms, frequent ones dropped: an OR over common words is slow and means nothing."""
    total = conn.execute("SELECT count(*) FROM docs").fetchone()[0] or 1
    rated = []
    for word, prefix in found:
        single = expression([(word, prefix)])
        if single is None:
            continue
        df = conn.execute("SELECT count(*) FROM fts WHERE fts MATCH ?", (single,)).fetchone()[0]
        if 0 < df <= max(50, COMMON_TERM_SHARE * total):
            rated.append((df, word, prefix))
    rated.sort()
    return [(word, prefix) for _, word, prefix in rated[:MAX_ANY_TERMS]]


def _query(
    conn: sqlite3.Connection, text: str, project: str | None, kind: str | None, limit: int, any_term: bool,
    drop_stopwords: bool,
) -> list[Hit]:
    found = query_terms(text, drop_stopwords=drop_stopwords)
    if any_term:
        found = _informative(conn, found)
    match = expression(found, any_term=any_term)
    if match is None:
        return []
    # FTS5 ranks and cuts on its own (its fast path); kind and project are columns of the FTS
    # table too (weight 0), so a filter narrows the match instead of scanning a join.
    if any_term:
        match = f"({match})"
    if kind is not None:
        match = f'kind : "{kind}" AND {match}'
    if project is not None:
        words = expression(query_terms(project))
        if words is None:
            return []
        match = f"project : ({words}) AND {match}"
    try:
        ranked = conn.execute("SELECT rowid, rank FROM fts WHERE fts MATCH ? ORDER BY rank LIMIT ?",
                              (match, limit * CANDIDATES_PER_HIT)).fetchall()
    except sqlite3.OperationalError as exc:
        if "fts5" in str(exc).lower() or "syntax" in str(exc).lower():
            return []  # belt and braces: the query holds only quoted terms
        raise
    if not ranked:
        return []
    rank_of = {int(rowid): float(rank) for rowid, rank in ranked}
    marks = ",".join("?" * len(rank_of))
    rows = conn.execute(
        "SELECT id, path, line, kind, project, cluster_id, heat, last_active, status, successors, title, work"
        f" FROM docs WHERE id IN ({marks})", list(rank_of)).fetchall()
    if project is not None:
        rows = [r for r in rows if (r[4] or "").lower() == project.lower()]
    # Stable sorts, last key first: BM25 (near-ties equal), then heat, then the latest activity.
    rows.sort(key=lambda r: (r[1], r[2]))
    rows.sort(key=lambda r: r[7] or "", reverse=True)
    rows.sort(key=lambda r: r[6], reverse=True)
    rows.sort(key=lambda r: round(rank_of[r[0]], TIE_DECIMALS))
    rows = rows[:limit]
    marks = ",".join("?" * len(rows))
    snippets = dict(conn.execute(
        f"SELECT rowid, snippet(fts, 1, '', '', '…', {SNIPPET_TOKENS}) FROM fts WHERE fts MATCH ? AND rowid IN ({marks})",
        [match, *(r[0] for r in rows)],
    ).fetchall())
    hits = []
    for rowid, path, line, kind_, proj, cid, heat, last, status, succ, title, work in rows:
        snippet = snippets.get(rowid) or ""
        if not snippet.strip():
            body = conn.execute("SELECT body FROM fts WHERE rowid = ?", (rowid,)).fetchone()
            snippet = body[0] if body else ""
        hits.append(Hit(
            cluster_id=cid, path=path, line=line, snippet=one_line(snippet or title, 240), kind=kind_,
            project=proj, score=-rank_of[rowid], title=title, heat=heat, last_active=last, status=status,
            successors=tuple(s for s in succ.split(",") if s), work=decode_work(work),
        ))
    return hits


@dataclass(frozen=True)
class ProjectWork:
    """What a project's live arcs worked on, most arcs first: recall's answer to a prompt naming the project."""

    project: str
    arcs: int
    last_active: str | None
    work: tuple[tuple[str, tuple[str, ...]], ...]


def projects(vault: Path) -> list[str]:
    """The projects of the indexed arcs (empty when there is no usable index)."""
    try:
        with _open(vault) as conn:
            return [str(p) for (p,) in conn.execute(
                "SELECT DISTINCT project FROM docs WHERE project IS NOT NULL AND kind = 'arc' ORDER BY project")]
    except (SearchIndexError, sqlite3.DatabaseError):
        return []


#: A named project's line is drawn from its most recently active arcs, at most this many.
PROJECT_RECENT_ARCS = 100


def project_work(vault: Path, project: str, *, per_field: int = 12) -> ProjectWork | None:
    """The work items of ``project``'s latest live arcs (no tombstones; at most
    :data:`PROJECT_RECENT_ARCS`), each field's values ranked by how many of those arcs had them,
    then by the latest such arc."""
    try:
        with _open(vault) as conn:
            arcs = conn.execute("SELECT count(*) FROM docs WHERE project = ? AND kind = 'arc' AND successors = ''",
                                (project,)).fetchone()[0]
            rows = conn.execute("SELECT work, last_active FROM docs WHERE project = ? AND kind = 'arc'"
                                " AND successors = '' ORDER BY last_active DESC LIMIT ?",
                                (project, PROJECT_RECENT_ARCS)).fetchall()
    except (SearchIndexError, sqlite3.DatabaseError):
        return None
    if not rows:
        return None
    counts: dict[str, dict[str, tuple[int, str]]] = {}
    for work, last in rows:
        for name, values in decode_work(work):
            field_counts = counts.setdefault(name, {})
            for value in values:
                n, latest = field_counts.get(value, (0, ""))
                field_counts[value] = (n + 1, max(latest, last or ""))
    ranked = tuple((name, _top(counts[name], per_field)) for _, name in WORK_FIELDS if counts.get(name))
    newest = max((str(last or "") for _, last in rows), default="")
    return ProjectWork(project, int(arcs), newest or None, ranked)


def _top(counted: dict[str, tuple[int, str]], limit: int) -> tuple[str, ...]:
    """Values by how many arcs had them, then the latest such arc first, then by name: three
    stable sorts, the last key first (no per-character key for the descending date)."""
    items = sorted(counted.items(), key=lambda kv: kv[0])
    items.sort(key=lambda kv: kv[1][1], reverse=True)
    items.sort(key=lambda kv: kv[1][0], reverse=True)
    return tuple(value for value, _ in items[:limit])


def arc_path(vault: Path, cluster_id: str) -> str | None:
    """Where the arc ``cluster_id`` lives, per the index (None when not indexed or no index)."""
    try:
        with _open(vault) as conn:
            row = conn.execute("SELECT path FROM docs WHERE cluster_id = ? AND kind = 'arc' ORDER BY path LIMIT 1",
                               (cluster_id,)).fetchone()
    except (SearchIndexError, sqlite3.DatabaseError):
        return None
    return str(row[0]) if row else None


def counts(vault: Path) -> dict[str, int]:
    """Indexed rows per kind (empty when there is no usable index)."""
    try:
        with _open(vault) as conn:
            return {str(k): int(n) for k, n in conn.execute("SELECT kind, count(*) FROM docs GROUP BY kind")}
    except (SearchIndexError, sqlite3.DatabaseError):
        return {}
