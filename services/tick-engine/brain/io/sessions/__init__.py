"""Streaming readers of agent session logs (Claude Code, Codex CLI, Gemini CLI, OpenCode) -> :class:`Session`.

Every reader works line by line in binary and never holds a whole file: memory depends on
the longest line and the number of distinct records, not on the file size. A line that is
not one JSON object (truncated by a crash, two records glued together, non-UTF-8 bytes) is
counted in :class:`ReadStats` and skipped; complete records glued onto it are salvaged.
Files whose mtime is older than the window are never opened (one ``os.stat`` each).

Each agent format is one module (``claude``, ``codex``, ``gemini``, ``opencode``) that
registers a :class:`SessionReader` (its name, the setting and flag of its log folder, its
``plan`` / ``read`` functions and, for an agent with a session-end hook, the
:class:`TranscriptReader` of one session's log); ``AGENTS``, ``brain extract --agent`` and ``all`` come from
:data:`READERS`, so a new format is one module plus one line in the import list at the end
of this file. This module holds what the formats share: the registry, line decoding, prompt
cleaning, joy detection, statistics.
"""

from __future__ import annotations

import json
import os
import re
import stat
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from brain.core.project import project_name
from brain.core.redaction import clean_text, redact
from brain.core.session import MAX_PROMPTS, SESSION_TITLE_CHARS, Session, is_joyful
from brain.core.text import strip_ansi
from brain.core.timeutil import parse_instant
from brain.core.worklog import WorkLog

__all__ = [
    "AGENTS",
    "READERS",
    "FileCounters",
    "Progress",
    "ReadStats",
    "Session",
    "SessionReader",
    "TimeRange",
    "TranscriptReader",
    "clean_prompt",
    "is_joyful",
    "iter_records",
    "project_name",
    "read_file",
    "read_transcript",
    "regular_file",
    "relative_file",
    "top_tools",
]

#: Lines longer than this are drained in chunks, counted as damaged and skipped.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: First / last prompts are kept this long in the bundle (after redaction).
PROMPT_CHARS = 600
#: Raw prompt text kept while reading: redaction runs on this much before the cut, so a
#: secret is never cut in half before it is recognised.
PROMPT_KEEP_CHARS = 20_000
#: ``files_touched`` lists at most this many paths per session.
MAX_FILES = 100
#: ``top_tools`` lists at most this many tools per session.
TOP_TOOLS = 8

Progress = Callable[[int, int, int], None]
"""``progress(files_done, files_total, bytes_done)``; called after each file."""


@dataclass
class ReadStats:
    """What the readers saw; printed in the bundle's ``stats``."""

    files_seen: int = 0
    files_skipped_by_mtime: int = 0
    files_read: int = 0
    bytes_read: int = 0
    lines_read: int = 0
    damaged_lines: int = 0
    salvaged_records: int = 0
    repaired_lines: int = 0
    duplicate_records: int = 0
    skipped_records: int = 0  # records a reader could not take (a value of an unexpected shape)
    files_without_conversation: int = 0
    unreadable_files: int = 0
    subagent_files: int = 0
    orphan_subagent_files: int = 0
    unsupported_files: int = 0
    oversized_files: int = 0
    #: One line per problem worth a warning in the bundle (a file over a size cap, an unreadable database).
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "problems"}

    def count(self, counters: FileCounters, files: int = 1) -> None:
        """Fold what reading ``files`` file(s) saw into the run's figures."""
        self.files_read += files
        self.bytes_read += counters.bytes
        self.lines_read += counters.lines
        self.damaged_lines += counters.damaged
        self.salvaged_records += counters.salvaged
        self.repaired_lines += counters.repaired


@dataclass
class FileCounters:
    """Per-file damage, folded into the session and the run's :class:`ReadStats`."""

    lines: int = 0
    damaged: int = 0
    salvaged: int = 0
    repaired: int = 0
    bytes: int = 0


# ---------------------------------------------------------------------------------- lines

# An unescaped '{"' that does not follow ':' ',' '[' '{' or whitespace cannot sit inside a
# valid record: it is the start of a second record glued onto a truncated one.
_GLUE = re.compile(r'(?<=[^\s:,\[{])\{"')
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_DECODER = json.JSONDecoder()


#: The ``gitBranch`` (Claude Code) or ``git.branch`` (Codex) of a detached HEAD: no branch at all.
DETACHED_HEAD = "HEAD"

#: What a record of a shape no reader expected can raise in a handler: that record is skipped
#: and reported, the rest of the file and of the run go on.
RECORD_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError)
#: Skipped records reported by name in one run (the rest are counted in ``damaged_lines``).
MAX_SKIPPED_REPORTS = 20


def skipped_record(stats: ReadStats, path: str | Path, line: int, exc: BaseException) -> None:
    """One warning for a record a handler could not take, with where the reader stopped (so
    the operator can report it); beyond :data:`MAX_SKIPPED_REPORTS`, counted only."""
    stats.skipped_records += 1
    if stats.skipped_records > MAX_SKIPPED_REPORTS:
        return
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ is not None else None
    where = f" in {os.path.basename(frame.filename)}:{frame.lineno}" if frame is not None else ""
    stats.problems.append(f"{path}:{line}: record skipped, a value of an unexpected shape "
                          f"({type(exc).__name__}{where}: {str(exc)[:120]})")


def _lines(handle: IO[bytes], counters: FileCounters) -> Iterator[bytes | None]:
    """Raw lines; ``None`` for a line longer than MAX_LINE_BYTES (drained, never held)."""
    while True:
        line = handle.readline(MAX_LINE_BYTES)
        if not line:
            return
        counters.bytes += len(line)
        if len(line) == MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:
                more = handle.readline(MAX_LINE_BYTES)
                counters.bytes += len(more)
                if not more or more.endswith(b"\n"):
                    break
            yield None
            continue
        yield line


def _salvage(text: str, counters: FileCounters) -> list[dict[str, Any]]:
    """Complete records inside a damaged line: a record followed by junk, or glued ones."""
    found: list[dict[str, Any]] = []
    starts = [0, *[m.start() for m in _GLUE.finditer(text, 1)][:16]]
    consumed = 0
    for start in starts:
        if start < consumed:
            continue
        try:
            value, end = _DECODER.raw_decode(text, start)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            found.append(value)
            consumed = end
    counters.salvaged += len(found)
    return found


def decode_text(raw: bytes, counters: FileCounters) -> str:
    """UTF-8 text; bytes that are not UTF-8 become U+FFFD and the repair is counted."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        counters.repaired += 1
        return raw.decode("utf-8", "replace")


def decode_line(raw: bytes, counters: FileCounters) -> list[dict[str, Any]]:
    """The JSON object(s) of one line; damage is counted, never raised."""
    counters.lines += 1
    text = decode_text(raw, counters)
    try:
        value = _DECODER.decode(text)  # no strip(): the decoder skips whitespace without copying the line
    except RecursionError:
        counters.damaged += 1  # nested deeper than the interpreter's stack: a damaged line, not a crash
        return []
    except ValueError:
        if not text.strip():
            return []
        counters.damaged += 1
        return _salvage(text.strip(), counters)
    if not isinstance(value, dict):
        counters.damaged += 1
        return []
    if (b"\\ud" in raw or b"\\uD" in raw) and _LONE_SURROGATE.search(raw):
        counters.repaired += 1  # the strings are sanitised by clean_text() when they leave
    return [value]


def iter_records(path: Path, counters: FileCounters) -> Iterator[dict[str, Any]]:
    """Stream the JSON objects of a JSONL file; OSError propagates to the caller."""
    with open(path, "rb", buffering=1 << 20) as handle:
        for raw in _lines(handle, counters):
            if raw is None:
                counters.lines += 1
                counters.damaged += 1
                continue
            yield from decode_line(raw, counters)


def read_file(path: Path, handle: Callable[[dict[str, Any]], None], stats: ReadStats) -> FileCounters:
    """Stream ``path`` into ``handle`` record by record; damage and size go into ``stats``."""
    counters = FileCounters()
    try:
        for record in iter_records(path, counters):
            handle(record)
    except OSError:
        stats.unreadable_files += 1
    stats.count(counters)
    return counters


# ---------------------------------------------------------------------------------- time


def time_key(value: Any) -> str | None:
    """A record timestamp as a sortable UTC string ``YYYY-MM-DDTHH:MM:SS.mmmZ``; None if unreadable."""
    if isinstance(value, str):
        if len(value) == 24 and value[23] == "Z" and value[10] == "T" and value[19] == ".":
            return value  # the common case, already canonical: no parsing
        parsed = parse_instant(value)
    elif isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        seconds = value / 1000 if value > 1e11 else value
        try:
            parsed = datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    else:
        return None
    if parsed is None or not 1990 <= parsed.year <= 2200:
        return None
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.") + f"{parsed.microsecond // 1000:03d}Z"


def from_key(key: str) -> datetime:
    parsed = parse_instant(key)
    assert parsed is not None
    return parsed


@dataclass
class TimeRange:
    first: str | None = None
    last: str | None = None

    def add(self, key: str | None) -> None:
        if key is None:
            return
        if self.first is None or key < self.first:
            self.first = key
        if self.last is None or key > self.last:
            self.last = key


@dataclass
class PromptTrack:
    """Human prompts of one session: count, joy, and the earliest / latest text."""

    count: int = 0
    joy: int = 0
    first: tuple[str, str] | None = None  # (time key, raw text)
    last: tuple[str, str] | None = None
    _order: int = 0

    def add(self, key: str | None, text: str) -> None:
        self.count += 1
        if is_joyful(text):
            self.joy += 1
        # Without a timestamp, file order decides (a key that sorts after every real one).
        self._order += 1
        sort_key = key or f"~{self._order:012d}"
        kept = text[:PROMPT_KEEP_CHARS]
        if self.first is None or sort_key < self.first[0]:
            self.first = (sort_key, kept)
        if self.last is None or sort_key >= self.last[0]:
            self.last = (sort_key, kept)


# ---------------------------------------------------------------------------------- text

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_BLANK_RUN = re.compile(r"\n\s*\n(?:\s*\n)+")

def clean_prompt(text: str) -> str:
    """Prompt text for the bundle: sanitised, redacted, control codes gone, cut to PROMPT_CHARS."""
    text = clean_text(text[:PROMPT_KEEP_CHARS])
    text = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").replace("\t", " ")
    text = _CONTROL.sub("", text)
    text = redact(text)
    text = _BLANK_RUN.sub("\n\n", text).strip()
    if len(text) > PROMPT_CHARS:
        cut = text[:PROMPT_CHARS]
        space = cut.rfind(" ", PROMPT_CHARS - 80)
        text = (cut[:space] if space > 0 else cut).rstrip() + " …"
    return text


def one_line(value: Any, limit: int = 300) -> str:
    """A short single-line string field (cwd, branch, tool name) made safe for the bundle."""
    if not isinstance(value, str):
        return ""
    text = _CONTROL.sub("", strip_ansi(clean_text(value))).replace("\n", " ").strip()
    return redact(text[:limit])


def title_line(title: str) -> str:
    """A title the agent recorded for a session, made safe for the bundle like a prompt, on one line."""
    return one_line(clean_prompt(title), SESSION_TITLE_CHARS)


def relative_file(path: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it lies inside it."""
    if cwd and path.startswith(cwd.rstrip("/") + "/"):
        return path[len(cwd.rstrip("/")) + 1 :]
    return path


def top_tools(counts: Counter[str]) -> tuple[tuple[str, int], ...]:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return tuple((one_line(name, 80), count) for name, count in ranked[:TOP_TOOLS] if name)


@dataclass(frozen=True)
class ToolCall:
    """One tool call as a session's work log needs it (readers that must buffer calls keep these)."""

    name: str
    call_id: str
    edit: str = ""
    read: tuple[str, ...] = ()
    command: str = ""
    todos: tuple[tuple[str, str], ...] | None = None
    error: bool = False
    output: str = ""  # kept only for a failed call (its error signature)


def feed_work(work: WorkLog, line: int, tool: ToolCall) -> None:
    """One tool call into the session's work log (then its result, which the call carries)."""
    if tool.edit:
        work.file_edited(tool.edit, line)
        work.tool(tool.call_id, line, tool.name, tool.edit)
    elif tool.read:
        for path in tool.read:
            work.file_read(path)
        work.tool(tool.call_id, line, tool.name, tool.read[0] if len(tool.read) == 1 else "")
    elif tool.command:
        work.shell(tool.call_id, line, tool.command)
    else:
        if tool.todos is not None:
            work.todos(list(tool.todos))
        work.tool(tool.call_id, line, tool.name)
    work.result(tool.call_id, line, tool.error, tool.output)


def work_fields(work: WorkLog, prompts: list[str], last_text: str) -> dict[str, Any]:
    """The work items a :class:`Session` carries, redacted: what ``work`` saw, the first
    human prompts (at most ``MAX_PROMPTS``, in order) and the last assistant text."""
    return {
        "files_edited": tuple((one_line(p, 500), n) for p, n in work.files_edited()),
        "files_read": tuple((one_line(p, 500), n) for p, n in work.files_read()),
        "commands": tuple((one_line(c, 120), n) for c, n in work.ranked_commands()),
        "failures": work.failures(),
        "identifiers": tuple(one_line(i, 120) for i in work.identifier_list()),
        "prompts": tuple(one_line(clean_prompt(text), 300) for text in prompts[:MAX_PROMPTS]),
        "last_state": one_line(clean_prompt(last_text), 300),
        "todos": work.todo_list(),
        "lessons": work.lessons(),
    }


def most_common(counts: Counter[str]) -> str:
    """The most frequent value; ties go to the one seen first."""
    if not counts:
        return ""
    return counts.most_common(1)[0][0]


def inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies under it (Windows separators understood)."""
    path, folder = path.replace("\\", "/").rstrip("/"), folder.replace("\\", "/").rstrip("/")
    return bool(folder) and (path == folder or path.startswith(folder + "/"))


def session_cwd(counts: Counter[str]) -> str:
    """The session's working directory from the ones its records carry: the most frequent,
    unless the session also worked in a folder that holds it (started in the repository,
    then ran ``cd test``): the outermost such folder, where the session started its work."""
    cwd = most_common(counts)
    outer = [c for c in counts if c != cwd and inside(cwd, c)]
    return min(outer, key=len) if outer else cwd


# ---------------------------------------------------------------------------------- registry


@dataclass(frozen=True)
class TranscriptReader:
    """One session's log as ``brain hook session-end`` reads it, named by the hook input.

    ``owns(path)`` tells this format's transcripts from the others' by place and name alone
    (the hook input does not say which agent sent it; no file is opened), so the formats'
    predicates accept disjoint paths. ``read(path, until, cwd)`` is the session in it,
    records stamped after ``until`` left out; ``cwd`` is the hook input's, for a format whose
    log records none.
    """

    owns: Callable[[Path], bool]
    read: Callable[[Path, str | None, str | None], Session | None]


@dataclass(frozen=True)
class SessionReader:
    """One agent log format, as ``brain extract`` drives it.

    ``plan(folder, since_ts, stats)`` lists and stats the logs under ``folder`` (opening none
    older than ``since_ts``) and returns a plan; ``units(plan)`` is how many progress steps
    reading it takes; ``read(plan, stats, progress, done, total)`` streams its sessions.
    """

    agent: str
    setting: str  #: the :class:`~brain.settings.Settings` field holding the log folder
    flag: str  #: the ``brain extract`` option that sets it
    label: str  #: what the folder is, for warnings: "Gemini CLI folder"
    plan: Callable[[Path, float | None, ReadStats], Any]
    units: Callable[[Any], int]
    read: Callable[[Any, ReadStats, Progress | None, int, int], Iterator[Session]]
    #: How ``brain hook session-end`` reads this format's transcripts; None: its agent has no such hook.
    transcript: TranscriptReader | None = None


READERS: dict[str, SessionReader] = {}


def register(reader: SessionReader) -> SessionReader:
    """Add a format to the registry (each format module calls this once, at import)."""
    READERS[reader.agent] = reader
    return reader


def regular_file(path: Path) -> bool:
    """A regular file, not a link: never a FIFO, which opening would wait on for a writer."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def read_transcript(path: Path, until: str | None, cwd: str | None) -> Session | None:
    """The session in the transcript a session-end hook names, read by the format that owns
    it; None when no format does, or it holds no conversation."""
    for reader in READERS.values():
        if reader.transcript is not None and reader.transcript.owns(path):
            return reader.transcript.read(path, until, cwd)
    return None


# One line per format: importing the module registers it (order = order in the bundle's "agents").
from brain.io.sessions import claude, codex, gemini, opencode  # noqa: E402

AGENTS: tuple[str, ...] = tuple(READERS)
__all__ += ["claude", "codex", "gemini", "opencode", "register"]
