"""What a tick leaves for the next one, and the keys that tell whether it still holds.

The state file (what the last clean tick verified: its instant, validity window, stats,
problems, candidate report, dashboards key, index and cache stamps, feed inputs), the listing
it left, the heat memo (:class:`brain.core.keeper.Remembered` per arc) and the notes a quiet
tick runs on (the *view*, :func:`view_notes`). Everything here is best effort: a missing or
damaged file costs the next tick its shortcut, never a wrong plan, because every entry is
checked against the settings, the code and the files it was made from.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import marshal
import os
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from brain import __version__
from brain.core.candidates import candidate_report
from brain.core.feed import FEED_MARKERS
from brain.core.heat import created_of, last_active_of
from brain.core.keeper import ArcDecision, KeeperDecisions, Remembered, in_conscious, remembered
from brain.core.model import Note
from brain.core.snapshot import Snapshot
from brain.io import writer
from brain.io.atomic import atomic_write, atomic_write_chunks, read_regular
from brain.io.vault import SavedListing, folded_into, frame_spans, frames, load_marshal
from brain.settings import Settings
from brain.settings import values as settings_values

#: What the last clean tick verified (JSON).
STATE_FILE = ".brain/tick-state.json"


#: What the keeper decided per arc content, reused while it holds (:class:`brain.core.keeper.Remembered`).
MEMO_FILE = ".brain/heat-memo"


#: What quiet ticks decided since the memo was last written whole (read on top of it).
MEMO_DELTA_FILE = ".brain/heat-memo-delta"


#: The listing the last tick left (path -> size, mtime), tagged with its tick_id.
LISTING_FILE = ".brain/tick-listing"


#: What the quiet ticks since :data:`LISTING_FILE` was written whole changed in it: the base's tag,
#: this listing's tag, and path -> (size, mtime), or None for a file gone. A tick that wrote 20 files
#: of 50 000 saves 20 entries; the base is written again when the overlay would hold more than this
#: share of its entries (or :data:`LISTING_DELTA_MIN`).
LISTING_DELTA_FILE = LISTING_FILE + "-delta"
LISTING_DELTA_SHARE, LISTING_DELTA_MIN = 0.25, 64
#: The base listing this process loaded (:func:`load_listing`): its vault, tag, size and mtime,
#: how many entries it holds, and the overlay read on top of it.
_NO_LISTING_BASE: dict[str, Any] = {"vault": None, "tag": None, "stat": None, "count": 0, "delta": {}}
_LISTING_BASE: dict[str, Any] = dict(_NO_LISTING_BASE)


Listing = dict[str, tuple[int, int]]  # vault-relative path -> (size, mtime_ns)


def settings_digest(s: Settings) -> str:
    """The settings a plan depends on, wherever the vault lies: a folder inside the vault counts
    by its place in it, so a vault moved or copied whole (``cp -a``, a volume mounted elsewhere)
    keeps its caches, and its next tick is as cheap as the last one's successor would be. The
    feed folder counts as the one the tick writes (``--brain-feed`` or the vault's own)."""
    vault = s.vault_path
    tunables = {k: _placed(s.feed_dir if k == "brain_feed" else v, vault) for k, v in settings_values(s).items()
                if k not in ("now", "llm_api_key", "redis_url", "vault")}
    return hashlib.sha1(json.dumps([__version__, tunables], sort_keys=True).encode(),
                        usedforsecurity=False).hexdigest()


def _placed(value: object, vault: Path) -> str:
    if isinstance(value, Path) and value.is_absolute():
        try:
            return f"<vault>/{value.relative_to(vault).as_posix()}"
        except ValueError:
            pass
    return str(value)


def fingerprint(s: Settings, feed_dir: Path) -> str:
    """What a deterministic plan depends on besides the clock and the vault's listing (kept whole
    in :data:`LISTING_FILE`, compared as it is): settings, code, the feed folder's files."""
    digest = hashlib.sha1(settings_digest(s).encode(), usedforsecurity=False)
    if feed_dir.is_dir():
        for path in sorted(feed_dir.glob("*.md")) + sorted(feed_dir.glob("projects/*")):
            if path.name.startswith("."):
                continue  # a writer's temp file (an old image waiting to be unlinked): gone by the next tick
            st = path.stat()
            digest.update(f"feed:{path.relative_to(feed_dir)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


#: What :meth:`MemoRows.row` says of a row it did not load (never equal to a row).
UNKNOWN = object()


class MemoRows(Mapping[str, Remembered]):
    """The heat memo as saved (path -> plain row): an entry becomes a :class:`Remembered` when
    asked for, so a quiet tick that asks for a few hundred does not build ten thousand.
    ``delta``: the rows that came from the overlay quiet ticks write (:data:`MEMO_DELTA_FILE`).

    ``rest``: loads the base's rows outside its view (:func:`save_memo`), on the first question
    the rows at hand cannot answer; ``rows`` may hold None for a path of the view without a row.
    """

    def __init__(self, rows: dict[str, Any], delta: dict[str, Any] | None = None, *,
                 rest: Callable[[], dict[str, Any]] | None = None, based: int = 0):
        self._rows = rows
        self.delta = delta or {}
        self._rest = rest
        self._based = based  # rows in the base (both parts), told without reading the rest

    def _load_rest(self) -> None:
        if self._rest is not None:
            rest, self._rest = self._rest(), None
            for path, row in rest.items():
                self._rows.setdefault(path, row)  # a row of the overlay stands over the base's

    @property
    def rows(self) -> dict[str, Any]:
        """Every plain row (the base's rest loaded)."""
        self._load_rest()
        return {path: row for path, row in self._rows.items() if row is not None}

    def row(self, path: str, *, load: bool = True) -> Any:
        """The plain row saved for ``path`` (None: none); the rest is loaded only when ``path`` is
        not among the rows at hand. ``load`` False: :data:`UNKNOWN` rather than loading it."""
        if path not in self._rows:
            if not load and self._rest is not None:
                return UNKNOWN
            self._load_rest()
        return self._rows.get(path)

    def get(self, path: str, default: Any = None) -> Any:
        row = self.row(path)
        if not (isinstance(row, tuple) and len(row) == len(Remembered._fields)):
            return default
        return Remembered._make(row)

    def __getitem__(self, path: str) -> Remembered:
        found = self.get(path)
        if found is None:
            raise KeyError(path)
        return cast(Remembered, found)

    def __iter__(self) -> Iterator[str]:
        self._load_rest()
        return (path for path, row in self._rows.items() if row is not None)

    def __len__(self) -> int:
        self._load_rest()
        return sum(1 for row in self._rows.values() if row is not None)

    def size(self) -> int:
        """About how many rows the memo holds, told without reading the base's rest: the base's
        count plus the overlay's (an arc of both counts twice)."""
        return self._based + len(self.delta) if self._rest is not None else len(self)


#: The base memo file: a header frame (its format, the settings digest, how many rows), then the
#: rows of the notes the next quiet tick runs on (the view, :func:`view_notes`: path -> row, None
#: for a view note without one), then every other row (:func:`brain.io.vault.frames`). A quiet
#: tick decodes the first two: on 50 000 arcs, 7 400 rows of 51 000, 5 ms instead of 50.
_MEMO_FORMAT = "heat-memo/2"


def _memo_overlay(path: Path, digest: str) -> dict[str, Any] | None:
    raw = load_marshal(path)
    return raw[1] if isinstance(raw, tuple) and len(raw) == 2 and raw[0] == digest and isinstance(raw[1], dict) \
        else None


def _memo_base(path: Path, digest: str) -> tuple[dict[str, Any], Callable[[], dict[str, Any]], int] | None:
    """The base's view rows, what loads its other rows, and how many rows it holds."""
    try:
        data = memoryview(read_regular(path))
    except OSError:
        return None
    spans = frame_spans(data)
    if spans is None or len(spans) != 3:
        return None
    try:
        head = marshal.loads(data[spans[0][0]:spans[0][1]])
        if not (isinstance(head, tuple) and len(head) == 3 and head[0] == _MEMO_FORMAT and head[1] == digest
                and isinstance(head[2], int)):
            return None
        view = marshal.loads(data[spans[1][0]:spans[1][1]])
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(view, dict):
        return None

    def rest() -> dict[str, Any]:
        try:
            rows = marshal.loads(data[spans[2][0]:spans[2][1]])
        except (EOFError, ValueError, TypeError):
            return {}
        return rows if isinstance(rows, dict) else {}

    return view, rest, head[2]


def load_memo(vault: Path, s: Settings) -> MemoRows:
    """The heat memo the last ticks left (missing, corrupt, other settings or code: nothing).

    An entry is a fact about one file's bytes in one window of time (:class:`Remembered`), so a
    base and an overlay from any ticks combine safely: a stale entry never holds. The base's rows
    outside its view are read when first needed (a quiet tick on the view needs none)."""
    digest = settings_digest(s)
    delta = _memo_overlay(vault / MEMO_DELTA_FILE, digest) or {}
    enabled = gc.isenabled()
    gc.disable()  # tens of thousands of small tuples: the collector would walk them again and again
    try:
        base = _memo_base(vault / MEMO_FILE, digest)
    finally:
        if enabled:
            gc.enable()
    if base is None:
        return MemoRows(dict(delta), delta)
    rows, rest, based = base
    rows.update(delta)
    return MemoRows(rows, delta, rest=rest, based=based)


def save_memo(vault: Path, s: Settings, decisions: KeeperDecisions, snapshot: Snapshot, now: datetime,
              before: MemoRows, *, partial: bool = False, view: Collection[str] = ()) -> None:
    """Best effort: a missing memo only costs recomputing every arc's heat once.

    ``partial``: the snapshot holds some of the vault's notes (a quiet tick): their entries go
    to the overlay, the base stays as it is until it is the smaller of the two. ``view``: the
    paths of the notes the next quiet tick runs on, whose rows a base written now puts first."""
    live = sum(1 for d in decisions.arcs.values() if d.last_active is not None)
    # a quiet tick's memo is stale when it wrote an arc; a full tick's when the arcs are not the memo's
    stale = any(d.changes_file for d in decisions.changed()) if partial else live != len(before)
    if decisions.remembered == live and not snapshot.delta and not stale:
        return  # every arc came from the memo and none was written: it is still the one on disk
    digest = settings_digest(s)
    with contextlib.suppress(OSError):
        if partial:
            # The overlay gains only the rows that differ from what the memo already answers: a
            # quiet tick that decided 80 arcs afresh in a 7 000-note view adds 80 rows, not 7 000.
            news = memo_news(decisions, snapshot, now, before)
            if not news:
                return
            delta = {**before.delta, **news}
            if len(delta) * 4 < before.size():
                atomic_write(vault / MEMO_DELTA_FILE, marshal.dumps((digest, delta)), durable=False)
                return
            decided = {d.note.path for d in decisions.arcs.values()}
            memo = {**{path: row for path, row in before.rows.items() if path not in decided},
                    **_memo_of(decisions, snapshot, now, before)}
        else:
            memo = _memo_of(decisions, snapshot, now, before)
        write_memo_base(vault, s, memo, view)
        (vault / MEMO_DELTA_FILE).unlink(missing_ok=True)


def write_memo_base(vault: Path, s: Settings, rows: Mapping[str, Any], view: Collection[str] = ()) -> None:
    """The memo's base file holding ``rows`` (path -> plain row), those of ``view`` first
    (:data:`_MEMO_FORMAT`)."""
    rest = dict(rows)
    first = {path: rest.pop(path, None) for path in view}
    count = len(rest) + sum(1 for row in first.values() if row is not None)
    atomic_write_chunks(vault / MEMO_FILE, frames(((_MEMO_FORMAT, settings_digest(s), count), first, rest)),
                        durable=False)


def memo_news(decisions: KeeperDecisions, snapshot: Snapshot, now: datetime, before: MemoRows,
              ) -> dict[str, tuple[Any, ...]]:
    """The memo's rows for ``decisions`` that say something ``before`` did not. Only the arcs
    decided afresh and those whose file changed (written, or read again by verify) can: every
    other one took its row from ``before``, and keeps it as it is, so no other row is made. A
    row for a path ``before`` holds outside the rows it loaded (an arc moved to a new path) is
    kept without reading the rest: at worst the overlay repeats a row of the base."""
    notes, fresh = snapshot.notes, decisions.fresh
    only = [cid for cid, d in decisions.arcs.items() if cid in fresh or notes.get(d.path) is not d.note]
    return {path: row for path, row in _memo_of(decisions, snapshot, now, before, only).items()
            if before.row(path, load=False) != row}


def _memo_of(decisions: KeeperDecisions, snapshot: Snapshot, now: datetime, before: MemoRows,
             only: Iterable[str] | None = None) -> dict[str, tuple[Any, ...]]:
    """The memo's rows (path -> plain row) of :func:`brain.core.keeper.remembered`."""
    return {path: tuple(entry) for path, entry in remembered(decisions, snapshot.notes, now, before, only=only).items()}


def load_state(vault: Path) -> dict[str, Any]:
    try:
        state = json.loads(read_regular(vault / STATE_FILE))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def listing_tag(s: Settings, state: Mapping[str, Any]) -> str | None:
    """The tick_id :data:`LISTING_FILE` must carry to stand for the files the last tick left
    (:func:`load_listing`), told without reading it: the last tick's, when this tick runs under
    the same settings and code with the feed folder as it left it; None otherwise."""
    tag = state.get("tick_id")
    return tag if isinstance(tag, str) and state.get("fingerprint") == fingerprint(s, s.feed_dir) else None


def load_listing(vault: Path, tag: str) -> Listing | None:
    """The files the last tick left (path -> size, mtime): :data:`LISTING_FILE` when it carries
    ``tag`` (:func:`listing_tag`), else with :data:`LISTING_DELTA_FILE` on top when that carries it;
    None when missing, damaged or another tick's. Equal to this tick's listing: the vault holds the
    very files the last tick left. A wrong entry only costs the shortcut: the listing child compares
    it with the files themselves (:func:`brain.io.vault.listing_beside`)."""
    saved = load_saved_listing(vault, tag)
    return None if saved is None else saved.as_dict()


def load_saved_listing(vault: Path, tag: str) -> SavedListing | None:
    """:func:`load_listing` as saved, its base in columns (what the listing child compares with)."""
    _LISTING_BASE.update(_NO_LISTING_BASE)
    path = vault / LISTING_FILE
    saved = load_marshal(path)
    if not (isinstance(saved, tuple) and len(saved) == 5 and saved[0] == _LISTING_FORMAT
            and isinstance(saved[1], str) and isinstance(saved[2], str)):
        return None
    _, base_tag, joined, size_column, mtime_column = saved
    paths = joined.split("\0") if joined else []
    sizes, mtimes = _numbers(size_column), _numbers(mtime_column)
    if sizes is None or mtimes is None or not len(paths) == len(sizes) == len(mtimes):
        return None
    delta: dict[str, Any] = {}
    if base_tag != tag:
        overlay = load_marshal(vault / LISTING_DELTA_FILE)
        if not (isinstance(overlay, tuple) and len(overlay) == 3 and overlay[0] == base_tag and overlay[1] == tag
                and isinstance(overlay[2], dict)):
            return None
        delta = overlay[2]
    _LISTING_BASE.update(count=len(paths))
    with contextlib.suppress(OSError):
        st = os.stat(path)
        _LISTING_BASE.update(vault=vault, tag=base_tag, stat=(st.st_size, st.st_mtime_ns), delta=delta)
    return SavedListing(paths, sizes, mtimes, delta)


#: :data:`LISTING_FILE`'s form: its format, its tag, the paths joined by NUL (no path holds one),
#: and the sizes and mtimes as arrays of 64-bit integers.
_LISTING_FORMAT = "tick-listing/2"


def _listing_bytes(tag: str, listing: Listing) -> bytes:
    return marshal.dumps((_LISTING_FORMAT, tag, "\0".join(listing), _column([entry[0] for entry in listing.values()]),
                          _column([entry[1] for entry in listing.values()])))


def _column(values: list[int]) -> bytes | list[int]:
    """An array's bytes, or the integers themselves where one does not fit in 64 bits (an mtime
    past the year 2262 that someone set on a file)."""
    try:
        return array("q", values).tobytes()
    except OverflowError:
        return values


def _numbers(column: Any) -> Sequence[int] | None:
    """A column :func:`_column` wrote; None when it is not one."""
    if isinstance(column, bytes):
        numbers = array("q")
        try:
            numbers.frombytes(column)
        except ValueError:
            return None
        return numbers
    if isinstance(column, list) and all(type(value) is int for value in column):
        return column
    return None


def save_listing(vault: Path, tag: str, listing: Listing, changes: Mapping[str, tuple[int, int] | None], *,
                 same: bool) -> int:
    """Save the listing the next tick compares with: ``listing`` (this tick's, as it began) with this
    tick's ``changes`` (:func:`listing_changes`); returns how many files it holds. ``same``: that
    listing is the one :func:`load_listing` gave in this process (the files the last tick left):
    then only the changes since the base go to the overlay, while they are few."""
    base = _LISTING_BASE
    with contextlib.suppress(OSError):
        on_disk = os.stat(vault / LISTING_FILE)
        if same and base["vault"] == vault and base["stat"] == (on_disk.st_size, on_disk.st_mtime_ns):
            delta = {**base["delta"], **changes}
            if len(delta) <= max(LISTING_DELTA_MIN, int(base["count"] * LISTING_DELTA_SHARE)):
                atomic_write(vault / LISTING_DELTA_FILE, marshal.dumps((base["tag"], tag, delta)), durable=False)
                base["delta"] = delta
                return len(listing) + sum(1 for rel, entry in changes.items() if entry is not None and rel not in listing) \
                    - sum(1 for rel, entry in changes.items() if entry is None and rel in listing)
    after = folded_into(dict(listing), changes)
    atomic_write(vault / LISTING_FILE, _listing_bytes(tag, after), durable=False)
    with contextlib.suppress(OSError):
        (vault / LISTING_DELTA_FILE).unlink(missing_ok=True)
    _LISTING_BASE.update(_NO_LISTING_BASE)
    return len(after)


def listed_files(state: Mapping[str, Any]) -> int | None:
    """How many files the last tick left (the length of :func:`load_listing`'s listing, in the state); None
    from a state written before it was."""
    files = state.get("files")
    return files if isinstance(files, int) and not isinstance(files, bool) else None


def feed_before(feed_dir: Path, state: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The feed files the last clean tick wrote with their inputs digest, each read back and
    kept only while it holds the very text written then (an edit or a later write drops it)."""
    saved = state.get("feed_inputs")
    out: dict[str, tuple[str, str]] = {}
    if not isinstance(saved, dict):
        return out
    for name, entry in saved.items():
        if not (isinstance(name, str) and isinstance(entry, list) and len(entry) == 2
                and all(isinstance(v, str) for v in entry)) or name.startswith("/") or ".." in name.split("/"):
            continue
        try:
            data = read_regular(feed_dir / name)
        except OSError:
            continue
        if writer.sha1_bytes(data) == entry[1]:  # the bytes written from a str: they decode
            out[name] = (entry[0], data.decode("utf-8"))
    return out


def _dashboard_row(decision: ArcDecision, *, before: bool = False) -> int:
    """One arc's line of the dashboards key (``before``: as its file stood, not as decided)."""
    arc = decision.note.arc
    assert arc is not None
    status, path = (arc.status, decision.note.path) if before else (decision.status, decision.path)
    row = f"{decision.cluster_id}\0{arc.created or ''}\0{arc.title}\0{status}\0{path}"
    return int.from_bytes(hashlib.sha1(row.encode(), usedforsecurity=False).digest()[:8], "big")


_KEY_MOD = 1 << 64


def dashboards_key(decisions: KeeperDecisions) -> str:
    """What the dashboards list (ids, titles, dates, statuses, folders): unchanged key, unchanged
    files. A sum of one hash per arc, so a tick that changes a few arcs can update it
    (:func:`dashboards_key_after`) without the others."""
    total = sum(_dashboard_row(d) for d in decisions.arcs.values() if d.note.arc is not None)
    return f"{total % _KEY_MOD:016x}"


def dashboards_key_after(key: str | None, changed: Iterable[ArcDecision]) -> str | None:
    """``key`` with the lines of ``changed`` as decided instead of as their files stood."""
    try:
        total = int(key or "", 16)
    except ValueError:
        return None
    for d in changed:
        if d.note.arc is not None:
            total += _dashboard_row(d) - _dashboard_row(d, before=True)
    return f"{total % _KEY_MOD:016x}"


def arcs_key(snapshot: Snapshot) -> str:
    """What the candidate pairs are computed from: not heat, status or folder (a keeper edit or
    move leaves them as they are), only whether an arc is a tombstone or an alarm file."""
    rows = []
    for path, note in snapshot.notes.items():
        arc = note.arc
        if arc is not None:
            edges = ",".join(m.attr("target") or "" for m in note.markers if m.type == "edge")
            rows.append(f"{arc.cluster_id}\0{path.startswith('amygdala/')}\0{arc.is_tombstone}\0{arc.title}\0"
                        f"{arc.project}\0{arc.created}\0{arc.last_active}\0{','.join(arc.source_sessions)}\0"
                        f"{edges}\n")
    rows.sort()
    return hashlib.sha1("".join(rows).encode(), usedforsecurity=False).hexdigest()


def cached_candidates(snapshot: Snapshot, state: Mapping[str, Any], *, same_files: bool = False) -> tuple[str, dict[str, Any]]:
    """The ``--no-ai`` candidate report (and its key), reused from the last tick while the arcs are the same.

    ``same_files``: the listing is the very one the last tick left (:func:`_same_files`: files, sizes,
    mtimes, settings, code), so the arcs are too and their key is the one saved, not recomputed.
    """
    cached = state.get("candidates")
    saved = cached.get("key") if isinstance(cached, dict) else None
    key = saved if same_files and isinstance(saved, str) else arcs_key(snapshot)
    if isinstance(cached, dict) and cached.get("key") == key and isinstance(cached.get("report"), dict):
        return key, dict(cached["report"])
    return key, candidate_report(snapshot.notes.values())


def view_notes(snapshot: Snapshot, decisions: KeeperDecisions, feed_reads: frozenset[str]) -> list[Note] | None:
    """The notes a later tick needs while the files stay as this tick left them: every arc whose
    heat is above 0 or can still change (:func:`brain.core.heat.next_change`) or that sits in
    conscious, the arcs the feed can list (``feed_reads``) or whose dates are reported, and every
    note with signals, injects or problems. The others keep heat 0 and their place for good, and
    no feed file reads them. None: no quiet tick (duplicate cluster_ids need every note)."""
    if decisions.duplicates:
        return None
    keep = {d.path for cid, d in decisions.arcs.items()
            if d.heat > 0 or d.next_change is not None or in_conscious(d.path) or cid in feed_reads
            or cid in decisions.dated_badly}
    return [note for path, note in snapshot.notes.items()
            if path in keep or note.problems or path.startswith("amygdala/")
            or any(m.type in FEED_MARKERS for m in note.markers)]


def listing_changes(listing: Listing, snapshot: Snapshot, result: writer.ApplyResult,
                    ) -> dict[str, tuple[int, int] | None]:
    """This tick's own changes to ``listing`` as the next tick will see them, stat'ed once: path ->
    (size, mtime), or None for a file it moved away or deleted."""
    changes: dict[str, tuple[int, int] | None] = {}
    for src, _dst in result.moved:
        changes[src] = None
    for path in result.deleted:
        changes[path] = None
    for path in sorted({*result.written, *(dst for _, dst in result.moved)}):
        note = snapshot.notes.get(path)
        if note is not None and note.mtime_ns:
            changes[path] = (note.size, note.mtime_ns)
        elif path in snapshot.notes or path in listing:
            try:
                st = os.stat(snapshot.vault / path)
            except OSError:
                changes[path] = None
                continue
            changes[path] = (st.st_size, st.st_mtime_ns)
    return changes


def same_standing(old: Note | None, new: Note | None) -> bool:
    """An edit (``old`` -> ``new``; None: no file) that reaches no note but its own: both are not
    arcs (a note outside the compartments, an unparsable one, none), or both are the same arc by
    every fact read outside it (its frontmatter, its dates and its edges), so its dashboard line,
    candidate row and rank in every feed stay as they were. A new or deleted arc is not."""
    if old is None or new is None:
        only = new if old is None else old
        return only is None or only.arc is None
    if old.arc is None or new.arc is None:
        return old.arc is None and new.arc is None
    return (old.arc == new.arc and created_of(old) == created_of(new) and last_active_of(old) == last_active_of(new)
            and _edges(old) == _edges(new))


def _edges(note: Note) -> list[str | None]:
    return [m.attr("target") for m in note.markers if m.type == "edge"]
