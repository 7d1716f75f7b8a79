"""Gemini CLI chats: ``<gemini-dir>/<project>/chats/session-*.json[l]`` (``reference/session-formats.md`` §3).

Rules:

- ``<gemini-dir>`` is ``~/.gemini/tmp``; each folder under it is one project (a SHA-256
  ``projectHash`` in older versions, a readable slug with a ``.project_root`` file in newer
  ones). Every folder's ``chats/session-*.json`` and ``chats/session-*.jsonl`` are sessions;
  ``chats/<parent-session-id>/*.jsonl`` are subagent chats folded into their parent.
- The legacy single-JSON file ``{sessionId, projectHash, startTime, lastUpdated, messages[]}``
  cannot be streamed: it is parsed once, and a file over :data:`MAX_JSON_BYTES` is not read
  (counted in ``oversized_files`` and named in the bundle's warnings). A damaged file keeps
  the complete messages before the damage.
- The ``.jsonl`` chat log is streamed line by line: a metadata line, message records upserted
  by ``id`` (an assistant message can be rewritten), ``{"$set": {...}}`` metadata updates
  (``$set.messages`` replaces the whole list: a checkpoint) and ``{"$rewindTo": id}``, which
  drops that message and everything after it. Only a digest of each message is kept.
- The session file holds no cwd. The project comes from the recorded paths: ``.project_root``
  when present; else the ancestor of the recorded absolute paths whose SHA-256 is the
  ``projectHash``; else the folder a relative tool argument resolved to in the tool's own
  output (``hello.md`` -> ``wrote /home/me/app/hello.md``); else the deepest folder holding
  most of the absolute paths the tools were given. All chats of one project folder share
  the project found for any of them.
- ``logs.json`` (``[{sessionId, messageId, type, message, timestamp}]``, the prompt log) adds
  the sessions that have no chat file (versions before chat recording): prompts only.
- Human turns are ``user`` messages that are not harness context (``<session_context>`` …);
  assistant turns are ``gemini`` messages; tool calls are ``toolCalls[]`` entries; errors are
  tool calls with ``status: error`` and ``error`` messages; files touched are the paths given
  to ``write_file`` / ``replace`` / ``edit``. Gemini records no git branch. The chat's
  ``summary`` (metadata, for the resume list) is the session's recorded title.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
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
    TranscriptReader,
    clean_prompt,
    decode_text,
    feed_work,
    from_key,
    iter_records,
    one_line,
    project_name,
    register,
    regular_file,
    relative_file,
    skipped_record,
    time_key,
    title_line,
    top_tools,
    work_fields,
)
from brain.io.sessions.incremental import Cursor

AGENT = "gemini-cli"

#: A legacy single-JSON chat or a ``logs.json`` larger than this is not parsed (it is held whole).
MAX_JSON_BYTES = 64 * 1024 * 1024
#: Files whose path arguments are the files a session changed.
EDIT_TOOLS = frozenset({"write_file", "replace", "edit", "smart_edit"})
#: Tool arguments that hold a path (a file or a folder).
PATH_ARGS = ("file_path", "absolute_path", "path", "dir_path", "directory")
_TODO_STATUSES = ("pending", "in_progress", "completed")
#: User text the CLI injected, not the human.
HARNESS_PREFIXES = ("<session_context>", "<state_snapshot>", "This is the Gemini CLI. We are setting up the context")
_DECODER = json.JSONDecoder()


def _is_absolute(path: str) -> bool:
    return path.startswith("/") or (len(path) > 2 and path[1] == ":" and path[2] in "\\/")


def _parent(path: str) -> str:
    cut = max(path.rstrip("/\\").rfind("/"), path.rstrip("/\\").rfind("\\"))
    return path[:cut] if cut > 0 else ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
    return "\n".join(parts)


def _outputs(call: dict[str, Any]) -> str:
    """The text a tool call returned (``result[].functionResponse.response.output``), cut short."""
    found: list[str] = []
    result = call.get("result")
    if isinstance(result, list):
        for item in result:
            response = item.get("functionResponse") if isinstance(item, dict) else None
            body = response.get("response") if isinstance(response, dict) else None
            if isinstance(body, dict):
                for key in ("output", "error"):
                    if isinstance(body.get(key), str):
                        found.append(body[key][:4000])
    return "\n".join(found)


def _resolved_folder(relative: str, output: str) -> str | None:
    """The folder a relative path argument resolved to, when the tool's output names it absolutely."""
    rel = relative.strip().lstrip("./")
    if not rel or not output:
        return None
    for sep in ("/", "\\"):
        index = output.find(sep + rel)
        if index <= 0:
            continue
        start = index
        while start > 0 and output[start - 1] not in " \t\n'\"`(:[":
            start -= 1
        if start > 0 and output[start - 1] == ":" and start >= 2 and output[start - 2].isalpha() and (
            start < 3 or not output[start - 3].isalnum()
        ):
            start -= 2  # a Windows drive letter
        folder = output[start:index]
        if _is_absolute(folder + sep):
            return folder
    return None


@dataclass
class _Message:
    """What one chat message contributes (a digest: the message itself is not kept)."""

    kind: str
    key: str | None
    prompt: str | None = None
    text: str = ""  # an answer's own text (the session's last state)
    calls: tuple[ToolCall, ...] = ()
    tools: tuple[str, ...] = ()
    errors: int = 0
    edits: tuple[str, ...] = ()
    anchors: tuple[tuple[str, bool], ...] = ()  # (absolute path, is a folder)
    resolved: tuple[str, ...] = ()  # folders relative arguments resolved to


def digest(message: dict[str, Any]) -> _Message | None:
    kind = message.get("type")
    if not isinstance(kind, str):
        return None
    key = time_key(message.get("timestamp"))
    if kind == "user":
        text = _content_text(message.get("content")).strip()
        human = text and not text.lstrip().startswith(HARNESS_PREFIXES)
        return _Message(kind, key, prompt=text[:PROMPT_KEEP_CHARS] if human else None)
    if kind == "error":
        return _Message(kind, key, errors=1)
    if kind != "gemini":
        return _Message(kind, key)
    tools: list[str] = []
    edits: list[str] = []
    anchors: list[tuple[str, bool]] = []
    resolved: list[str] = []
    work: list[ToolCall] = []
    errors = 0
    calls = message.get("toolCalls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        name = call.get("name")
        name = name if isinstance(name, str) else ""
        tools.append(name)
        failed = call.get("status") == "error"
        errors += failed
        args = call.get("args")
        if not isinstance(args, dict):
            continue
        work.append(_tool(name, call, args, failed))
        output: str | None = None
        for arg in PATH_ARGS:
            value = args.get(arg)
            if not isinstance(value, str) or not value.strip():
                continue
            if name in EDIT_TOOLS and arg in ("file_path", "absolute_path", "path"):
                edits.append(value)
            if _is_absolute(value):
                anchors.append((value, arg in ("dir_path", "directory") or name in ("list_directory", "glob")))
            else:
                output = _outputs(call) if output is None else output
                folder = _resolved_folder(value, output)
                if folder:
                    resolved.append(folder)
        many = args.get("paths")
        if isinstance(many, list):
            anchors.extend((p, False) for p in many[:50] if isinstance(p, str) and _is_absolute(p))
    text = _content_text(message.get("content")).strip()[:4000]
    return _Message(kind, key, text=text, calls=tuple(work), tools=tuple(tools), errors=errors, edits=tuple(edits),
                    anchors=tuple(anchors), resolved=tuple(resolved))


def _tool(name: str, call: dict[str, Any], args: dict[str, Any], failed: bool) -> ToolCall:
    raw_id = call.get("id")
    call_id = raw_id if isinstance(raw_id, str) else ""
    output = _outputs(call)[:6000] if failed else ""
    path = next((args[a] for a in ("file_path", "absolute_path") if isinstance(args.get(a), str) and args[a]), "")
    if name in EDIT_TOOLS and path:
        return ToolCall(name, call_id, edit=path, error=failed, output=output)
    if name == "read_file" and path:
        return ToolCall(name, call_id, read=(path,), error=failed, output=output)
    if name == "read_many_files" and isinstance(args.get("paths"), list):
        return ToolCall(name, call_id, read=tuple(p for p in args["paths"][:50] if isinstance(p, str)), error=failed,
                     output=output)
    if name == "run_shell_command" and isinstance(args.get("command"), str):
        return ToolCall(name, call_id, command=args["command"][:4000], error=failed, output=output)
    if name == "write_todos" and isinstance(args.get("todos"), list):
        todos = tuple((str(t.get("status")) if t.get("status") in _TODO_STATUSES else "pending",
                       one_line(t.get("description"), 300))
                      for t in args["todos"][:40] if isinstance(t, dict) and isinstance(t.get("description"), str))
        return ToolCall(name, call_id, todos=todos, error=failed, output=output)
    return ToolCall(name, call_id, error=failed, output=output)


@dataclass
class _Chat:
    """One chat file: its metadata and the digests of its current messages, in order."""

    fallback_id: str
    session_id: str = ""
    project_hash: str = ""
    kind: str = ""
    summary: str = ""  # the one-line summary Gemini CLI writes for its resume list
    start: str | None = None
    updated: str | None = None
    messages: dict[str, _Message] = field(default_factory=dict)
    skipped: int = 0
    until: str | None = None  # messages stamped later are left out (``brain extract --until``)
    _anonymous: int = 0

    def meta(self, data: dict[str, Any]) -> None:
        if isinstance(data.get("sessionId"), str) and data["sessionId"]:
            self.session_id = data["sessionId"]
        if isinstance(data.get("projectHash"), str):
            self.project_hash = data["projectHash"]
        if isinstance(data.get("kind"), str):
            self.kind = data["kind"]
        if isinstance(data.get("summary"), str):
            self.summary = data["summary"][:1000]
        self.start = time_key(data.get("startTime")) or self.start
        self.updated = time_key(data.get("lastUpdated")) or self.updated

    def upsert(self, message: dict[str, Any]) -> None:
        found = digest(message)
        if found is None or (self.until is not None and found.key is not None and found.key > self.until):
            return
        mid = message.get("id")
        if not isinstance(mid, str) or not mid:
            self._anonymous += 1
            mid = f"\0{self._anonymous}"
        self.messages[mid] = found  # a rewritten message keeps its place (dicts keep first insertion order)

    def rewind(self, mid: Any) -> None:
        if not isinstance(mid, str) or mid not in self.messages:
            return
        ids = list(self.messages)
        for drop in ids[ids.index(mid) :]:
            del self.messages[drop]

    def record(self, record: dict[str, Any]) -> None:
        """One ``.jsonl`` line."""
        if "$rewindTo" in record:
            self.rewind(record["$rewindTo"])
        elif "$set" in record:
            update = record["$set"]
            if isinstance(update, dict):
                self.meta(update)
                if isinstance(update.get("messages"), list):
                    self.messages.clear()
                    for message in update["messages"]:
                        if isinstance(message, dict):
                            self.upsert(message)
        elif isinstance(record.get("type"), str) and ("id" in record or "timestamp" in record):
            self.upsert(record)
        elif "sessionId" in record or "projectHash" in record:
            self.meta(record)


def _read_json(path: Path, counters: FileCounters, stats: ReadStats, what: str) -> Any:
    """A whole-file JSON value, size-capped; damage counted; None when unusable."""
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            stats.oversized_files += 1
            stats.problems.append(f"{what} larger than {MAX_JSON_BYTES} bytes, not read: {path}")
            return None
        raw = path.read_bytes()
    except OSError:
        stats.unreadable_files += 1
        return None
    counters.bytes += len(raw)
    counters.lines += raw.count(b"\n") + 1
    text = decode_text(raw, counters)
    try:
        return _DECODER.decode(text)
    except RecursionError:
        counters.damaged += 1
        return None
    except ValueError:
        counters.damaged += 1
        return _salvage_messages(text, counters)


def _salvage_messages(text: str, counters: FileCounters) -> dict[str, Any] | None:
    """The header fields and the complete messages of a truncated legacy chat file."""
    index = text.find('"messages"')
    if index < 0:
        return None
    head: dict[str, Any] = {}
    for name in ("sessionId", "projectHash", "startTime", "lastUpdated"):
        match = re.compile(rf'"{name}"\s*:\s*').search(text, 0, index)
        if match:
            try:
                head[name] = _DECODER.raw_decode(text, match.end())[0]
            except (ValueError, RecursionError):
                continue
    start = text.find("[", index)
    messages: list[Any] = []
    position = start + 1
    while start >= 0:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        try:
            value, position = _DECODER.raw_decode(text, position)
        except (ValueError, RecursionError):
            break
        messages.append(value)
    counters.salvaged += len(messages)
    head["messages"] = messages
    return head


def _read_chat(path: Path, chat: _Chat, stats: ReadStats) -> FileCounters:
    counters = FileCounters()
    def take(handle: Callable[[dict[str, Any]], None], value: dict[str, Any], where: int) -> None:
        try:
            handle(value)
        except RECORD_ERRORS as exc:  # a shape no check foresaw: this record only
            counters.damaged += 1
            skipped_record(stats, path, where, exc)

    if path.suffix == ".jsonl":
        try:
            for record in iter_records(path, counters):
                take(chat.record, record, counters.lines)
        except OSError:
            stats.unreadable_files += 1
    else:
        data = _read_json(path, counters, stats, "Gemini CLI chat file")
        if isinstance(data, dict):
            take(chat.meta, data, 0)
            messages = data.get("messages")
            for number, message in enumerate(messages if isinstance(messages, list) else []):
                if isinstance(message, dict):
                    take(chat.upsert, message, number + 1)  # "line": the message's place in the chat
        elif data is not None:
            counters.damaged += 1
    stats.count(counters)
    return counters


# ------------------------------------------------------------------------------ project identity


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _ancestors(path: str, folder: bool) -> list[str]:
    found = [path.rstrip("/\\")] if folder else []
    current = _parent(path)
    while current and current not in ("/",) and not (len(current) <= 3 and current[1:2] == ":"):
        found.append(current)
        current = _parent(current)
    return found


def project_folder(messages: list[_Message], project_hash: str) -> str:
    """The project folder the recorded paths point to ("" when they name none)."""
    anchors = [a for m in messages for a in m.anchors]
    resolved = Counter(r.rstrip("/\\") for m in messages for r in m.resolved)
    counts: Counter[str] = Counter()
    for path, is_folder in anchors:
        counts.update(set(_ancestors(path, is_folder)))
    if project_hash:
        for candidate in [*resolved, *counts]:
            for option in (candidate, candidate + "/"):
                if _sha256(option) == project_hash:
                    return candidate
    if resolved:
        return resolved.most_common(1)[0][0]
    if not counts:
        return ""
    need = (len(anchors) + 1) // 2
    best = [c for c, n in counts.items() if n >= need and c.count("/") + c.count("\\") >= 2]
    return max(best, key=lambda c: (c.count("/") + c.count("\\"), counts[c])) if best else ""


# ------------------------------------------------------------------------------ assembly


@dataclass
class _Figures:
    tool_calls: int = 0
    tools: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    edits: dict[str, None] = field(default_factory=dict)

    def add(self, message: _Message) -> None:
        self.tool_calls += len(message.tools)
        self.tools.update(t for t in message.tools if t)
        self.errors += message.errors
        for path in message.edits:
            if len(self.edits) < MAX_FILES:
                self.edits.setdefault(path, None)


def _session(chat: _Chat, cwd: str, skipped: int, subagents: list[_Chat]) -> Session | None:
    figures = _Figures()
    prompts = PromptTrack()
    times = TimeRange()
    work = WorkLog((chat.session_id or chat.fallback_id)[:8], cwd=cwd)
    first_prompts: list[str] = []
    last_text = ""
    assistant = 0
    for line, message in enumerate(chat.messages.values(), 1):  # the message's place stands for its line
        times.add(message.key)
        figures.add(message)
        for tool in message.calls:
            feed_work(work, line, tool)
        if message.kind == "gemini":
            assistant += 1
            last_text = message.text or last_text
        elif message.kind == "user" and message.prompt:
            prompts.add(message.key, message.prompt)
            work.prompt(line, message.prompt, (message.key or "")[:10])
            if len(first_prompts) < MAX_PROMPTS:
                first_prompts.append(message.prompt[:2000])
    for agent in subagents:
        skipped += agent.skipped
        for message in agent.messages.values():
            figures.add(message)
            for tool in message.calls:
                feed_work(work, 0, tool)
    if assistant == 0 and prompts.count == 0:
        return None  # no conversation (only info or error notes): no session
    times.add(chat.start if times.first is None else None)
    times.add(chat.updated if times.last is None and (chat.until is None or (chat.updated or "") <= chat.until) else None)
    if times.first is None or times.last is None:
        return None
    first = prompts.first[1] if prompts.first else ""
    last = prompts.last[1] if prompts.last else ""
    return Session(
        session_id=one_line(chat.session_id or chat.fallback_id, 128),
        agent=AGENT,
        project=one_line(project_name(cwd)) if cwd else "unknown",
        cwd=one_line(cwd, 1000),
        git_branch="",
        start=from_key(times.first),
        end=from_key(times.last),
        user_turns=prompts.count,
        assistant_turns=assistant,
        tool_calls=figures.tool_calls,
        top_tools=top_tools(figures.tools),
        files_touched=tuple(sorted({one_line(relative_file(p, cwd), 500) for p in figures.edits})),
        first_prompt=clean_prompt(first),
        last_prompt=clean_prompt(last),
        errors=figures.errors,
        joy=prompts.joy,
        compactions=0,
        subagents=len(subagents),
        skipped_lines=skipped,
        title=title_line(chat.summary),
        **work_fields(work, first_prompts, last_text),
    )


def _prompt_log(path: Path, stats: ReadStats) -> dict[str, list[tuple[str | None, str]]]:
    """``logs.json``: session id -> [(time key, prompt)], in file order."""
    counters = FileCounters()
    data = _read_json(path, counters, stats, "Gemini CLI logs.json")
    stats.count(counters)
    found: dict[str, list[tuple[str | None, str]]] = {}
    for entry in data if isinstance(data, list) else data.get("messages", []) if isinstance(data, dict) else []:
        if not isinstance(entry, dict) or entry.get("type", "user") != "user":
            continue
        sid, text = entry.get("sessionId"), entry.get("message")
        if isinstance(sid, str) and sid and isinstance(text, str):
            found.setdefault(sid, []).append((time_key(entry.get("timestamp")), text[:PROMPT_KEEP_CHARS]))
    return found


def _logged_session(sid: str, prompts: list[tuple[str | None, str]], cwd: str) -> Session | None:
    track = PromptTrack()
    times = TimeRange()
    for key, text in prompts:
        times.add(key)
        if text.strip() and not text.lstrip().startswith("/"):
            track.add(key, text)
    if times.first is None or times.last is None:
        return None
    return Session(
        session_id=one_line(sid, 128), agent=AGENT, project=one_line(project_name(cwd)) if cwd else "unknown",
        cwd=one_line(cwd, 1000), git_branch="", start=from_key(times.first), end=from_key(times.last),
        user_turns=track.count, assistant_turns=0, tool_calls=0, top_tools=(), files_touched=(),
        first_prompt=clean_prompt(track.first[1] if track.first else ""),
        last_prompt=clean_prompt(track.last[1] if track.last else ""),
        errors=0, joy=track.joy, compactions=0, subagents=0,
    )


# ------------------------------------------------------------------------------ plan and read


@dataclass
class _ProjectPlan:
    folder: Path
    chats: list[Path]
    subagents: dict[str, list[Path]]  # parent session id -> its subagent chats
    logs: Path | None
    known: set[str] = field(default_factory=set)  # id prefixes of the chat files left unread
    infos: dict[Path, os.stat_result] = field(default_factory=dict)


_NAME_ID = re.compile(r"-([0-9a-f]{8})\.jsonl?$")


class _Lister:
    """Stats the files of one plan: the window and the cursor decide which are read."""

    def __init__(self, since_ts: float | None, stats: ReadStats, cursor: Cursor | None) -> None:
        self.since_ts, self.stats, self.cursor = since_ts, stats, cursor
        self.infos: dict[Path, os.stat_result] = {}

    def wanted(self, entry: os.DirEntry[str]) -> bool:
        try:
            if not entry.is_file(follow_symlinks=False):
                return False
            info = entry.stat(follow_symlinks=False)
        except OSError:
            self.stats.unreadable_files += 1
            return False
        self.stats.files_seen += 1
        if self.since_ts is not None and info.st_mtime < self.since_ts:
            self.stats.files_skipped_by_mtime += 1
            return False
        path = Path(entry.path)
        if self.cursor is not None and self.cursor.is_unchanged(path, info):
            return False
        self.infos[path] = info
        return True


def _is_chat_name(name: str) -> bool:
    return name.startswith("session-") and name.endswith((".json", ".jsonl"))


def _scan(folder: Path) -> list[os.DirEntry[str]]:
    try:
        return sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return []


def _subagent_chats(folder: Path, wanted: Callable[[os.DirEntry[str]], bool]) -> list[Path]:
    """The subagents' chats in ``chats/<session-id>/`` that ``wanted`` takes."""
    return [Path(e.path) for e in _scan(folder) if e.name.endswith(".jsonl") and wanted(e)]


def _subagent_folder(chats: Path, session_id: str) -> Path | None:
    """``chats/<session-id>/``; None for an id that names no folder in ``chats`` (``..``, ``a/b``)
    or a link, which the planner does not follow either."""
    if not session_id.strip(".") or Path(session_id).name != session_id or (chats / session_id).is_symlink():
        return None
    return chats / session_id


def plan(gemini_dir: Path, since_ts: float | None, stats: ReadStats, cursor: Cursor | None = None) -> list[_ProjectPlan]:
    """Project folders with chats in the window (and changed since the cursor, when one is given)."""
    plans: list[_ProjectPlan] = []
    for project in _scan(gemini_dir):
        if not project.is_dir(follow_symlinks=False):
            continue
        folder = Path(project.path)
        lister = _Lister(since_ts, stats, cursor)
        chats: list[Path] = []
        known: set[str] = set()
        subagents: dict[str, list[Path]] = {}
        for entry in _scan(folder / "chats"):
            if entry.is_dir(follow_symlinks=False):
                found = _subagent_chats(Path(entry.path), lister.wanted)
                if found:
                    subagents[entry.name] = found
            elif _is_chat_name(entry.name):
                if lister.wanted(entry):
                    chats.append(Path(entry.path))
                elif match := _NAME_ID.search(entry.name):
                    known.add(match.group(1))  # left out by the window or the cursor: not a prompt-log-only session
        logs = next((Path(e.path) for e in _scan(folder) if e.name == "logs.json" and lister.wanted(e)), None)
        if chats or logs or subagents:
            plans.append(_ProjectPlan(folder, chats, subagents, logs, known, lister.infos))
    return plans


def _project_root(folder: Path) -> str:
    try:
        with open(folder / ".project_root", "rb") as handle:
            return handle.read(4096).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _read_main(path: Path, stats: ReadStats, until: str | None) -> tuple[_Chat, FileCounters]:
    chat = _Chat(fallback_id=path.stem.removeprefix("session-"), until=until)
    return chat, _read_chat(path, chat, stats)


def _read_subagent(path: Path, stats: ReadStats, until: str | None) -> tuple[_Chat, FileCounters]:
    agent = _Chat(fallback_id=path.stem, until=until)
    counters = _read_chat(path, agent, stats)
    agent.skipped = counters.damaged
    stats.subagent_files += 1
    return agent, counters


def _recorded_folder(chat: _Chat, subagents: list[_Chat], folder_hash: str) -> str:
    """The project folder the paths recorded in a chat and its subagents' chats point to."""
    return project_folder([m for c in (chat, *subagents) for m in c.messages.values()],
                          chat.project_hash or folder_hash)


def read(plans: list[_ProjectPlan], stats: ReadStats, progress: Progress | None = None,
         done: int = 0, total: int = 0, *, until: str | None = None, cursor: Cursor | None = None) -> Iterator[Session]:
    """Sessions of the planned project folders, one folder at a time.

    ``until`` (a time key) leaves out the messages stamped later; ``cursor`` records what was read.
    """
    for project in plans:
        read_chats: list[tuple[_Chat, int]] = []
        for path in project.chats:
            chat, counters = _read_main(path, stats, until)
            if cursor is not None and path in project.infos:
                cursor.record(path, project.infos[path], counters.bytes)
            read_chats.append((chat, counters.damaged))
            done += 1
            if progress:
                progress(done, total, stats.bytes_read)
        children: dict[str, list[_Chat]] = {}
        parents = {chat.session_id for chat, _ in read_chats}
        for parent, paths in project.subagents.items():
            if parent not in parents:
                stats.orphan_subagent_files += len(paths)  # its parent's chat is not read: nothing to fold into
                continue
            for path in paths:
                agent, counters = _read_subagent(path, stats, until)
                if cursor is not None and path in project.infos:
                    cursor.record(path, project.infos[path], counters.bytes)
                children.setdefault(parent, []).append(agent)
        root = _project_root(project.folder)
        folder_hash = project.folder.name
        cwds = {id(chat): root or _recorded_folder(chat, children.get(chat.session_id, []), folder_hash)
                for chat, _ in read_chats}
        shared = root or next((c for c in cwds.values() if c), "")
        for chat, skipped in read_chats:
            if chat.kind == "subagent":
                stats.orphan_subagent_files += 1
                continue
            session = _session(chat, cwds[id(chat)] or shared, skipped, children.get(chat.session_id, []))
            if session is None:
                stats.files_without_conversation += 1
                continue
            yield session
        if project.logs is not None:
            if cursor is not None and project.logs in project.infos:
                cursor.record(project.logs, project.infos[project.logs], project.infos[project.logs].st_size)
            for sid, prompts in _prompt_log(project.logs, stats).items():
                if sid in parents or sid[:8] in project.known:
                    continue  # a chat file (read now, or before) says more than the prompt log
                logged = _logged_session(sid, [p for p in prompts if until is None or (p[0] or "") <= until], shared)
                if logged is not None:
                    yield logged


def _is_chat(path: Path) -> bool:
    return path.parent.name == "chats" and _is_chat_name(path.name)


def owns_transcript(path: Path) -> bool:
    """A chat file (``chats/session-*.json[l]``) or a subagent's (``chats/<session-id>/*.jsonl``)."""
    return _is_chat(path) or (path.parent.parent.name == "chats" and path.suffix == ".jsonl")


def read_one(path: Path, *, until: str | None = None, cwd: str | None = None) -> Session | None:
    """One chat file and its subagents' chats (``chats/<session-id>/*.jsonl``), as :func:`read`
    gives its session (messages stamped after ``until`` left out); None when it is not a regular
    file in a ``chats`` folder, is a subagent's chat or holds no conversation. The session-end hook's reader: the
    project's other chats and its prompt log are not read, so the project is the folder's
    ``.project_root``, else ``cwd`` (the hook input's: the chat records none), else the folder
    the recorded paths point to."""
    if not _is_chat(path) or not regular_file(path):
        return None  # never a FIFO, which opening would wait on for a writer
    stats = ReadStats()
    chat, counters = _read_main(path, stats, until)
    if chat.kind == "subagent":
        return None
    folder = _subagent_folder(path.parent, chat.session_id)
    subagents = [_read_subagent(agent, stats, until)[0]
                 for agent in _subagent_chats(folder, lambda e: e.is_file(follow_symlinks=False))] if folder else []
    project = path.parent.parent
    found = _project_root(project) or cwd or _recorded_folder(chat, subagents, project.name)
    return _session(chat, found, counters.damaged, subagents)


register(SessionReader(AGENT, "gemini_dir", "--gemini-dir", "Gemini CLI folder", plan,
                       lambda plans: sum(len(p.chats) for p in plans), read,
                       TranscriptReader(owns_transcript, lambda path, until, cwd: read_one(path, until=until, cwd=cwd))))
