"""OpenCode sessions: ``<opencode-dir>/opencode.db`` and the older ``storage/`` tree (``session-formats.md`` §4).

``<opencode-dir>`` is OpenCode's data folder, ``~/.local/share/opencode`` (``$XDG_DATA_HOME``).
No real OpenCode capture with a licence that allows copying was found; the layout below is
the published one, read from OpenCode's own source (``packages/opencode/src/session/
session.sql.ts`` and ``message-v2.ts`` in anomalyco/opencode) and the storage notes cited in
``reference/session-formats.md`` §4.

- From v1.2 a SQLite database ``opencode.db``: table ``session`` (``id``, ``project_id``,
  ``parent_id``, ``directory``, ``title``, ``time_created``, ``time_updated`` in epoch ms …),
  ``message`` (``id``, ``session_id``, ``time_created``, ``data``: the message JSON without
  its ids) and ``part`` (``id``, ``message_id``, ``session_id``, ``time_created``, ``data``).
  It is opened read-only; a session whose ``time_updated`` is before the window is never
  read (counted with the files skipped by mtime).
- Up to v1.1 a JSON tree under ``storage/``: ``session/<projectID>/<sessionID>.json``,
  ``message/<sessionID>/<messageID>.json``, ``part/<messageID>/<partID>.json``. A session
  file older than the window is never opened. The one-time migration to the database
  skipped some installs, so both are read: the database first, then the JSON sessions it
  does not hold.
- The project is the session's ``directory`` (else an assistant message's ``path.cwd``); the
  session's ``title`` is its title once OpenCode has generated or been given one (not the
  placeholder ``New session - <date>``).
- A human turn is a ``user`` message with a text part that is not ``synthetic``; assistant
  turns are ``assistant`` messages. Tool calls are ``tool`` parts (``tool`` is the name,
  ``state.status: error`` an error; an assistant message with an ``error`` is one too).
  Files touched are the ``filePath`` of ``edit`` / ``write`` / ``multiedit`` calls, the files
  of ``apply_patch`` calls and of ``patch`` parts. ``compaction`` parts count compactions.
- A child session (``parent_id``, made by the ``task`` tool) is a subagent: its tool calls,
  errors and files fold into the parent when the parent is read. OpenCode records no branch.
- A file or row whose JSON is damaged is counted in ``damaged_lines`` and skipped.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain.core.session import MAX_PROMPTS
from brain.core.worklog import WorkLog
from brain.io.sessions import (
    MAX_FILES,
    PROMPT_KEEP_CHARS,
    RECORD_ERRORS,
    FileCounters,
    Progress,
    PromptTrack,
    ReadStats,
    Session,
    SessionReader,
    TimeRange,
    ToolCall,
    clean_prompt,
    decode_text,
    feed_work,
    from_key,
    one_line,
    project_name,
    register,
    relative_file,
    session_cwd,
    skipped_record,
    time_key,
    title_line,
    top_tools,
    work_fields,
)
from brain.io.sessions.incremental import Cursor

AGENT = "opencode"

#: A storage JSON file (one session, message or part) larger than this is not parsed.
MAX_JSON_BYTES = 64 * 1024 * 1024
EDIT_TOOLS = frozenset({"edit", "write", "multiedit"})
#: The title OpenCode gives a session until it generates one.
_PLACEHOLDER_TITLE = re.compile(r"^(?:New|Child) session - \d{4}-")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_DECODER = json.JSONDecoder()


def decode(raw: bytes | str | None, counters: FileCounters) -> dict[str, Any] | None:
    """One JSON object (a file or a ``data`` column); damage counted, never raised."""
    if raw is None:
        return None
    counters.lines += 1
    if isinstance(raw, bytes):
        counters.bytes += len(raw)
        text = decode_text(raw, counters)
    else:
        counters.bytes += len(raw)
        text = raw
    try:
        value = _DECODER.decode(text)
    except (ValueError, RecursionError):
        counters.damaged += 1
        return None
    if not isinstance(value, dict):
        counters.damaged += 1
        return None
    return value


@dataclass
class _Figures:
    tool_calls: int = 0
    tools: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    files: dict[str, None] = field(default_factory=dict)

    def file(self, path: Any) -> None:
        if isinstance(path, str) and path.strip() and len(self.files) < MAX_FILES:
            self.files.setdefault(path.strip(), None)

    def part(self, part: dict[str, Any]) -> None:
        kind = part.get("type")
        if kind == "tool":
            self.tool_calls += 1
            name = part.get("tool")
            name = name if isinstance(name, str) else ""
            if name:
                self.tools[name] += 1
            state = part.get("state")
            if not isinstance(state, dict):
                return
            if state.get("status") == "error":
                self.errors += 1
            args = state.get("input")
            if not isinstance(args, dict):
                return
            if name in EDIT_TOOLS:
                self.file(args.get("filePath"))
            patch = args.get("patchText")
            if isinstance(patch, str) and "*** " in patch:
                for match in _PATCH_FILE.finditer(patch):
                    self.file(match.group(1))
        elif kind == "patch":
            files = part.get("files")
            for path in files[:MAX_FILES] if isinstance(files, list) else []:
                self.file(path)

    def fold(self, other: _Figures) -> None:
        self.tool_calls += other.tool_calls
        self.tools.update(other.tools)
        self.errors += other.errors
        for path in other.files:
            self.file(path)


@dataclass
class _Message:
    role: str
    key: str | None
    text: list[str] = field(default_factory=list)
    images: bool = False
    calls: list[ToolCall] = field(default_factory=list)  # parts can arrive out of order: fed in message order


def tool_call(part: dict[str, Any]) -> ToolCall | None:
    """A ``tool`` part as the work log needs it."""
    name, state = part.get("tool"), part.get("state")
    if not isinstance(name, str) or not isinstance(state, dict):
        return None
    raw_id = part.get("callID")
    call_id = raw_id if isinstance(raw_id, str) else ""
    failed = state.get("status") == "error"
    error = state.get("error") if isinstance(state.get("error"), str) else state.get("output")
    output = str(error)[:6000] if failed and error is not None else ""
    status = state.get("status")
    if status not in ("completed", "error"):
        call_id = ""  # never finished: no result to resolve or fail
    raw_args = state.get("input")
    args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
    path = args.get("filePath") if isinstance(args.get("filePath"), str) else ""
    if name in EDIT_TOOLS and path:
        return ToolCall(name, call_id, edit=path, error=failed, output=output)
    patch = args.get("patchText")
    if isinstance(patch, str) and "*** " in patch:
        files = [m.group(1).strip() for m in _PATCH_FILE.finditer(patch)]
        if files:
            return ToolCall(name, call_id, edit=files[0], error=failed, output=output)
    if name == "read" and path:
        return ToolCall(name, call_id, read=(path,), error=failed, output=output)
    if name == "bash" and isinstance(args.get("command"), str):
        return ToolCall(name, call_id, command=args["command"][:4000], error=failed, output=output)
    if name == "todowrite" and isinstance(args.get("todos"), list):
        todos = tuple((str(t.get("status")) if t.get("status") in ("pending", "in_progress", "completed") else "pending",
                       one_line(t.get("content"), 300))
                      for t in args["todos"][:40] if isinstance(t, dict) and isinstance(t.get("content"), str))
        return ToolCall(name, call_id, todos=todos, error=failed, output=output)
    return ToolCall(name, call_id, error=failed, output=output)


@dataclass
class _OpenSession:
    session_id: str
    directory: str = ""
    parent_id: str = ""
    title: str = ""
    start: str | None = None
    updated: str | None = None
    figures: _Figures = field(default_factory=_Figures)
    times: TimeRange = field(default_factory=TimeRange)
    prompts: PromptTrack = field(default_factory=PromptTrack)
    cwds: Counter[str] = field(default_factory=Counter)
    messages: dict[str, _Message] = field(default_factory=dict)
    assistant: int = 0
    compactions: int = 0
    subagents: int = 0
    skipped: int = 0
    until: str | None = None  # messages created later are left out (``brain extract --until``)
    work: WorkLog | None = None
    first_prompts: list[str] = field(default_factory=list)
    last_text: str = ""

    def info(self, data: dict[str, Any]) -> None:
        for key, name in (("directory", "directory"), ("parentID", "parent_id"), ("parent_id", "parent_id"),
                          ("title", "title")):
            if isinstance(data.get(key), str) and data[key]:
                setattr(self, name, data[key])
        times = data.get("time")
        if isinstance(times, dict):
            self.start = time_key(times.get("created")) or self.start
            self.updated = time_key(times.get("updated")) or self.updated

    def message(self, mid: str, data: dict[str, Any], created: Any = None) -> None:
        role = data.get("role")
        if not isinstance(role, str):
            return
        times = data.get("time")
        key = time_key(times.get("created")) if isinstance(times, dict) else None
        key = key or time_key(created)
        if self.until is not None and key is not None and key > self.until:
            return
        self.times.add(key)
        done = time_key(times.get("completed")) if isinstance(times, dict) else None
        self.times.add(done if self.until is None or (done or "") <= self.until else self.until)
        if role == "assistant":
            self.assistant += 1
            if data.get("error"):
                self.figures.errors += 1
            path = data.get("path")
            if isinstance(path, dict) and isinstance(path.get("cwd"), str) and path["cwd"]:
                self.cwds[path["cwd"]] += 1
        self.messages[mid] = _Message(role, key)

    def part(self, mid: str, data: dict[str, Any]) -> None:
        if mid not in self.messages:
            return  # the part of a message left out (after --until) or unreadable
        kind = data.get("type")
        if kind == "compaction":
            self.compactions += 1
        self.figures.part(data)
        message = self.messages[mid]
        if kind == "tool":
            call = tool_call(data)
            if call is not None:
                message.calls.append(call)
        if message.role != "user":
            if kind == "text" and isinstance(data.get("text"), str) and data["text"].strip() and not data.get("synthetic"):
                message.text = [data["text"][:4000]]  # an answer's last text part
            return
        if kind == "text" and isinstance(data.get("text"), str) and not data.get("synthetic"):
            if sum(len(t) for t in message.text) < PROMPT_KEEP_CHARS:
                message.text.append(data["text"])
        elif kind == "file" and str(data.get("mime", "")).startswith("image/"):
            message.images = True

    def close_messages(self) -> None:
        """Prompts, answers and tool calls, in message order, once every part is in."""
        work = self.work = WorkLog(self.session_id[:8], cwd=self.directory or session_cwd(self.cwds))
        ordered = sorted(self.messages.items(), key=lambda item: (item[1].key or "~", item[0]))
        for line, (_mid, message) in enumerate(ordered, 1):  # the message's place stands for its line
            for call in message.calls:
                feed_work(work, line, call)
            text = "\n".join(message.text).strip()
            if message.role != "user":
                self.last_text = text or self.last_text
                continue
            if text or message.images:
                self.prompts.add(message.key, text or "[image]")
            if text:
                work.prompt(line, text, (message.key or "")[:10])
                if len(self.first_prompts) < MAX_PROMPTS:
                    self.first_prompts.append(text[:2000])
        self.messages.clear()

    def session(self) -> Session | None:
        self.times.add(self.start if self.times.first is None else None)
        if self.until is None or (self.updated or "") <= self.until:
            self.times.add(self.updated if self.times.last is None else None)
        if self.assistant == 0 and self.prompts.count == 0:
            return None
        if self.times.first is None or self.times.last is None:
            return None
        cwd = self.directory or session_cwd(self.cwds)
        first = self.prompts.first[1] if self.prompts.first else ""
        last = self.prompts.last[1] if self.prompts.last else ""
        return Session(
            session_id=one_line(self.session_id, 128),
            agent=AGENT,
            project=one_line(project_name(cwd)) if cwd else "unknown",
            cwd=one_line(cwd, 1000),
            git_branch="",
            start=from_key(self.times.first),
            end=from_key(self.times.last),
            user_turns=self.prompts.count,
            assistant_turns=self.assistant,
            tool_calls=self.figures.tool_calls,
            top_tools=top_tools(self.figures.tools),
            files_touched=tuple(sorted({one_line(relative_file(p, cwd), 500) for p in self.figures.files})),
            first_prompt=clean_prompt(first),
            last_prompt=clean_prompt(last),
            errors=self.figures.errors,
            joy=self.prompts.joy,
            compactions=self.compactions,
            subagents=self.subagents,
            skipped_lines=self.skipped,
            title="" if _PLACEHOLDER_TITLE.match(self.title) else title_line(self.title),
            **work_fields(self.work or WorkLog(self.session_id[:8], cwd=cwd), self.first_prompts, self.last_text),
        )


# ------------------------------------------------------------------------------ plan


@dataclass
class _Plan:
    database: Path | None = None
    db_sessions: list[str] = field(default_factory=list)  # ids, oldest update first
    db_states: dict[str, os.stat_result] = field(default_factory=dict)  # for the cursor: time_updated as mtime
    storage: Path | None = None
    json_sessions: list[Path] = field(default_factory=list)


def _connect(path: Path) -> sqlite3.Connection:
    """Read-only; a database whose WAL cannot be opened read-only is read as an immutable snapshot."""
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        connection.execute("SELECT 1 FROM session LIMIT 1").fetchall()
        return connection
    except sqlite3.Error:
        return sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)


def storage_of(opencode_dir: Path) -> Path | None:
    """The JSON tree: ``<dir>/storage`` or ``<dir>`` itself when it is the storage folder."""
    for candidate in (opencode_dir / "storage", opencode_dir):
        if (candidate / "session").is_dir():
            return candidate
    return None


def _row_state(updated: int) -> os.stat_result:
    """A database session as the extraction cursor sees a file: its ``time_updated`` is its mtime."""
    return os.stat_result((0, 0, 0, 0, 0, 0, 0, 0, updated // 1000, 0),
                          {"st_mtime": updated / 1000, "st_mtime_ns": updated * 1_000_000})


def _row_key(database: Path, sid: str) -> Path:
    return Path(f"{database}#{sid}")


def plan(opencode_dir: Path, since_ts: float | None, stats: ReadStats, cursor: Cursor | None = None) -> _Plan:
    """Sessions updated in the window (database sessions: and since the cursor, when one is given)."""
    found = _Plan()
    database = opencode_dir / "opencode.db"
    if database.is_file():
        since_ms = int(since_ts * 1000) if since_ts is not None else None
        try:
            with closing(_connect(database)) as connection:
                rows = connection.execute("SELECT id, time_updated FROM session ORDER BY time_updated, id").fetchall()
            found.database = database
        except sqlite3.Error as exc:
            stats.unreadable_files += 1
            stats.problems.append(f"OpenCode database not readable ({exc}): {database}")
            rows = []
        for sid, updated in rows:
            stats.files_seen += 1
            if since_ms is not None and isinstance(updated, int) and updated < since_ms:
                stats.files_skipped_by_mtime += 1
                continue
            if not isinstance(sid, str):
                continue
            if isinstance(updated, int):
                state = found.db_states[sid] = _row_state(updated)
                if cursor is not None and cursor.is_unchanged(_row_key(database, sid), state):
                    continue
            found.db_sessions.append(sid)
    storage = storage_of(opencode_dir)
    if storage is not None:
        found.storage = storage
        for project in sorted(os.scandir(storage / "session"), key=lambda e: e.name):
            if not project.is_dir(follow_symlinks=False):
                continue
            for entry in sorted(os.scandir(project.path), key=lambda e: e.name):
                if not entry.name.endswith(".json"):
                    continue
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    mtime = entry.stat(follow_symlinks=False).st_mtime
                except OSError:
                    stats.unreadable_files += 1
                    continue
                stats.files_seen += 1
                if since_ts is not None and mtime < since_ts:
                    stats.files_skipped_by_mtime += 1
                    continue
                found.json_sessions.append(Path(entry.path))
    return found


def units(found: _Plan) -> int:
    return len(found.db_sessions) + len(found.json_sessions)


# ------------------------------------------------------------------------------ read


def _from_database(connection: sqlite3.Connection, sid: str, stats: ReadStats, until: str | None) -> _OpenSession:
    counters = FileCounters()
    sink = _OpenSession(sid, until=until)
    row = connection.execute("SELECT directory, parent_id, time_created, time_updated, title FROM session WHERE id = ?",
                             (sid,)).fetchone()
    if row is not None:
        directory, parent, created, updated, title = row
        sink.directory = directory if isinstance(directory, str) else ""
        sink.parent_id = parent if isinstance(parent, str) else ""
        sink.title = title if isinstance(title, str) else ""
        sink.start, sink.updated = time_key(created), time_key(updated)
    for mid, created, data in connection.execute(
            "SELECT id, time_created, data FROM message WHERE session_id = ? ORDER BY time_created, id", (sid,)):
        value = decode(data, counters)
        if value is not None and isinstance(mid, str):
            sink.message(mid, value, created)
    for mid, data in connection.execute(
            "SELECT message_id, data FROM part WHERE session_id = ? ORDER BY message_id, id", (sid,)):
        value = decode(data, counters)
        if value is not None and isinstance(mid, str):
            sink.part(mid, value)
    sink.close_messages()
    sink.skipped = counters.damaged
    stats.count(counters, 0)
    return sink


def _json_files(folder: Path) -> Iterable[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return []
    return [Path(e.path) for e in entries if e.name.endswith(".json") and e.is_file(follow_symlinks=False)]


def _load(path: Path, counters: FileCounters, stats: ReadStats) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            stats.oversized_files += 1
            stats.problems.append(f"OpenCode storage file larger than {MAX_JSON_BYTES} bytes, not read: {path}")
            return None
        raw = path.read_bytes()
    except OSError:
        stats.unreadable_files += 1
        return None
    return decode(raw, counters)


def _from_storage(storage: Path, path: Path, stats: ReadStats, until: str | None) -> _OpenSession | None:
    counters = FileCounters()
    info = _load(path, counters, stats)
    files = 1
    if info is None:
        stats.count(counters, files)
        return None
    sid = info.get("id") if isinstance(info.get("id"), str) else path.stem
    sink = _OpenSession(str(sid), until=until)
    sink.info(info)
    messages: list[tuple[str, dict[str, Any]]] = []
    for message_path in _json_files(storage / "message" / sink.session_id):
        files += 1
        data = _load(message_path, counters, stats)
        if data is not None:
            mid = data.get("id") if isinstance(data.get("id"), str) else message_path.stem
            messages.append((str(mid), data))
    for mid, data in messages:
        sink.message(mid, data)
    for mid, _data in messages:
        for part_path in _json_files(storage / "part" / mid):
            files += 1
            part = _load(part_path, counters, stats)
            if part is not None:
                sink.part(mid, part)
    sink.close_messages()
    sink.skipped = counters.damaged
    stats.count(counters, files)
    return sink


def read(found: _Plan, stats: ReadStats, progress: Progress | None = None,
         done: int = 0, total: int = 0, *, until: str | None = None, cursor: Cursor | None = None) -> Iterator[Session]:
    """All planned sessions; child sessions fold into their parent when it is read too.

    ``until`` (a time key) leaves out the messages created later.
    """
    sinks: dict[str, _OpenSession] = {}

    def step() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total, stats.bytes_read)

    if found.database is not None and found.db_sessions:
        try:
            with closing(_connect(found.database)) as connection:
                for sid in found.db_sessions:
                    try:
                        sinks[sid] = _from_database(connection, sid, stats, until)
                    except RECORD_ERRORS as exc:  # a shape no check foresaw: this session only
                        skipped_record(stats, f"{found.database}#{sid}", 0, exc)
                    if cursor is not None and sid in found.db_states:
                        cursor.record(_row_key(found.database, sid), found.db_states[sid], 0)
                    step()
        except sqlite3.Error as exc:
            stats.unreadable_files += 1
            stats.problems.append(f"OpenCode database not readable ({exc}): {found.database}")
    if found.storage is not None:
        for path in found.json_sessions:
            if path.stem in sinks:
                step()
                continue  # migrated: the database holds it
            try:
                sink = _from_storage(found.storage, path, stats, until)
            except RECORD_ERRORS as exc:
                skipped_record(stats, path, 0, exc)
                sink = None
            if sink is not None and sink.session_id not in sinks:
                sinks[sink.session_id] = sink
            step()
    everything = dict(sinks)
    for sink in list(sinks.values()):
        if not sink.parent_id or sink.parent_id == sink.session_id:
            continue
        del sinks[sink.session_id]
        parent, hops = everything.get(sink.parent_id), 0
        while parent is not None and parent.parent_id and hops < 32:  # a task inside a task: fold into the root
            parent, hops = everything.get(parent.parent_id), hops + 1
        if parent is None:
            stats.orphan_subagent_files += 1  # a task's child session whose parent is not read
            continue
        parent.figures.fold(sink.figures)
        parent.skipped += sink.skipped
        parent.subagents += 1
        stats.subagent_files += 1
    for sink in sinks.values():
        session = sink.session()
        if session is None:
            stats.files_without_conversation += 1
            continue
        yield session


register(SessionReader(AGENT, "opencode_dir", "--opencode-dir", "OpenCode data folder", plan, units, read))
