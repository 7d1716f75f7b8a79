"""Claude Code transcripts: ``<projects-dir>/<encoded cwd>/<session-uuid>.jsonl``.

Rules (``reference/session-formats.md`` §1):

- A session is a ``*.jsonl`` directly in a project folder whose name does not start with
  ``agent-``; its id is the file name. A file without any ``user`` or ``assistant`` record
  (empty, summary-only, file-history-only) is no session.
- The project comes from the records' ``cwd`` (the most frequent one; ties go to the first
  seen), never from the lossy folder name.
- Subagent transcripts (``agent-*.jsonl`` beside the sessions, 2.0.x, and
  ``<session>/subagents/**/agent-*.jsonl``, 2.1.2+) are folded into the parent session
  named by their ``sessionId``: their tool calls, tool errors and damaged lines count toward
  the parent. ``subagents`` counts them, leaving out 2.0.x "Warmup" pings and the
  compaction helper (``agent-acompact-*``). A flat agent file whose parent is not read is an
  orphan: counted in the stats, never a session.
- A human turn is a ``user`` record that is not ``isMeta``, not ``isCompactSummary``, not a
  sidechain, carries no ``tool_result`` and does not start with harness markup
  (``<command-name>``, ``<local-command-stdout>``, ``<system-reminder>``, ``Caveat:``,
  ``[Request interrupted by user``, "This session is being continued…", ``Warmup`` …).
  IDE context blocks (``<ide_selection>``, ``<ide_opened_file>``) are dropped from the text.
- Records are counted once per ``uuid`` within a project folder (resume and compaction
  repeat them); files are read oldest mtime first, so a resumed file only adds what is new.
- Assistant turns are distinct ``message.id`` values (one API response is split over
  several records); ``<synthetic>`` and API-error records are not turns. ``errors`` counts
  tool results with ``is_error: true`` and API-error records.
- ``compactions`` counts ``compact_boundary`` records, or ``isCompactSummary`` messages in
  versions without a boundary record.
- Times are the minimum and maximum ``timestamp`` of the user, assistant and system records.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain.io.sessions import (
    MAX_FILES,
    FileCounters,
    Progress,
    PromptTrack,
    ReadStats,
    Session,
    TimeRange,
    clean_prompt,
    SessionReader,
    from_key,
    most_common,
    one_line,
    project_name,
    read_file,
    relative_file,
    time_key,
    register,
    top_tools,
)

AGENT = "claude-code"

#: User text that the harness wrote, not the human (session-formats.md §1.6).
HARNESS_PREFIXES = (
    "Caveat: The messages below were generated",
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<command-stdout>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<system-reminder>",
    "<task-notification>",
    "<user-prompt-submit-hook>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[Request interrupted by user",
    "This session is being continued from a previous conversation",
)
_IDE_PREFIXES = ("<ide_selection>", "<ide_opened_file>", "<ide_diagnostics>")
_INLINE_MARKUP = re.compile(r"<(system-reminder|ide_selection|ide_opened_file)>.*?</\1>", re.DOTALL)
_EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path"}


def prompt_text(content: Any) -> tuple[str, bool]:
    """(human text, has an image) of a user message's content."""
    images = False
    parts: list[str] = []
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        for block in content:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                text = block["text"]
                if not text.lstrip().startswith(_IDE_PREFIXES):
                    parts.append(text)
            elif kind in ("image", "document"):
                images = True
    text = "\n".join(parts)
    if "</" in text:
        text = _INLINE_MARKUP.sub("", text)
    return text.strip(), images


def is_harness(text: str) -> bool:
    stripped = text.lstrip()
    return stripped.startswith(HARNESS_PREFIXES) or stripped == "Warmup"


@dataclass
class _Figures:
    """Tool activity shared by main transcripts and subagent transcripts."""

    tool_calls: int = 0
    tools: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    files: dict[str, None] = field(default_factory=dict)

    def tool_use(self, block: dict[str, Any], cwd: str) -> None:
        name = block.get("name")
        self.tool_calls += 1
        if isinstance(name, str) and name:
            self.tools[name] += 1
            key = _EDIT_TOOLS.get(name)
            data = block.get("input")
            if key and isinstance(data, dict) and len(self.files) < MAX_FILES:
                path = data.get(key)
                if isinstance(path, str) and path:
                    self.files.setdefault(relative_file(path, cwd), None)

    def tool_results(self, content: Any) -> bool:
        """Count errors among the tool results; True when the message holds any result."""
        if not isinstance(content, list):
            return False
        found = False
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found = True
                if block.get("is_error") is True:
                    self.errors += 1
        return found


@dataclass
class _MainSession:
    session_id: str
    figures: _Figures = field(default_factory=_Figures)
    cwds: Counter[str] = field(default_factory=Counter)
    branches: Counter[str] = field(default_factory=Counter)
    times: TimeRange = field(default_factory=TimeRange)
    prompts: PromptTrack = field(default_factory=PromptTrack)
    message_ids: set[int] = field(default_factory=set)
    conversation: int = 0
    boundaries: int = 0
    summaries: int = 0
    subagents: int = 0
    skipped_lines: int = 0
    agent_refs: set[str] = field(default_factory=set)
    cwd: str = ""

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        if kind == "progress":
            data = record.get("data")
            if isinstance(data, dict) and isinstance(data.get("agentId"), str):
                self.agent_refs.add(data["agentId"])
            return
        if kind not in ("user", "assistant", "system"):
            return  # summary, file-history-snapshot, queue-operation, attachment, unknown: metadata
        self.times.add(time_key(record.get("timestamp")))
        cwd = record.get("cwd")
        if isinstance(cwd, str) and cwd:
            self.cwds[cwd] += 1
            self.cwd = cwd
        branch = record.get("gitBranch")
        if isinstance(branch, str) and branch:
            self.branches[branch] += 1
        if kind == "system":
            if record.get("subtype") == "compact_boundary":
                self.boundaries += 1
            return
        self.conversation += 1
        message = record.get("message")
        if not isinstance(message, dict):
            return
        sidechain = record.get("isSidechain") is True
        if kind == "assistant":
            self._assistant(record, message, sidechain)
        else:
            self._user(record, message, sidechain)

    def _assistant(self, record: dict[str, Any], message: dict[str, Any], sidechain: bool) -> None:
        if record.get("isApiErrorMessage") is True:
            self.figures.errors += 1
            return
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    self.figures.tool_use(block, self.cwd)
        if sidechain or message.get("model") == "<synthetic>":
            return
        mid = message.get("id")
        key = hash(mid) if isinstance(mid, str) else hash(record.get("uuid"))
        self.message_ids.add(key)

    def _user(self, record: dict[str, Any], message: dict[str, Any], sidechain: bool) -> None:
        content = message.get("content")
        has_results = self.figures.tool_results(content)
        result = record.get("toolUseResult")
        if isinstance(result, dict) and isinstance(result.get("agentId"), str):
            self.agent_refs.add(result["agentId"])
        if record.get("isCompactSummary") is True:
            self.summaries += 1
            return
        if sidechain or has_results or record.get("isMeta") is True:
            return
        text, images = prompt_text(content)
        if not text and not images:
            return
        if text and is_harness(text):
            return
        self.prompts.add(time_key(record.get("timestamp")), text or "[image]")

    def fold(self, agent: _Subagent) -> None:
        self.figures.tool_calls += agent.figures.tool_calls
        self.figures.tools.update(agent.figures.tools)
        self.figures.errors += agent.figures.errors
        for path in agent.figures.files:
            if len(self.figures.files) >= MAX_FILES:
                break
            self.figures.files.setdefault(path, None)
        self.skipped_lines += agent.skipped_lines
        if not agent.warmup and not agent.compaction_helper:
            self.subagents += 1

    def session(self) -> Session | None:
        if self.conversation == 0 or self.times.first is None or self.times.last is None:
            return None
        cwd = most_common(self.cwds)
        first = self.prompts.first[1] if self.prompts.first else ""
        last = self.prompts.last[1] if self.prompts.last else ""
        return Session(
            session_id=self.session_id,
            agent=AGENT,
            project=one_line(project_name(cwd)) if cwd else "unknown",
            cwd=one_line(cwd, 1000),
            git_branch=one_line(most_common(self.branches), 200),
            start=from_key(self.times.first),
            end=from_key(self.times.last),
            user_turns=self.prompts.count,
            assistant_turns=len(self.message_ids),
            tool_calls=self.figures.tool_calls,
            top_tools=top_tools(self.figures.tools),
            files_touched=tuple(sorted(one_line(p, 500) for p in self.figures.files)),
            first_prompt=clean_prompt(first),
            last_prompt=clean_prompt(last),
            errors=self.figures.errors,
            joy=self.prompts.joy,
            compactions=max(self.boundaries, self.summaries),
            subagents=self.subagents,
            skipped_lines=self.skipped_lines,
        )


@dataclass
class _Subagent:
    session_id: str | None = None
    figures: _Figures = field(default_factory=_Figures)
    warmup: bool = False
    compaction_helper: bool = False
    skipped_lines: int = 0
    seen_user: bool = False

    def add(self, record: dict[str, Any]) -> None:
        if self.session_id is None and isinstance(record.get("sessionId"), str):
            self.session_id = record["sessionId"]
        kind = record.get("type")
        message = record.get("message")
        if kind not in ("user", "assistant") or not isinstance(message, dict):
            return
        content = message.get("content")
        cwd = record.get("cwd") if isinstance(record.get("cwd"), str) else ""
        if kind == "assistant":
            if record.get("isApiErrorMessage") is True:
                self.figures.errors += 1
            elif isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        self.figures.tool_use(block, str(cwd))
            return
        self.figures.tool_results(content)
        if not self.seen_user and record.get("isMeta") is not True:
            self.seen_user = True
            text, _ = prompt_text(content)
            self.warmup = text == "Warmup"


@dataclass
class _FolderPlan:
    folder: Path
    mains: list[tuple[float, Path]]  # (mtime, path), oldest first
    flat_agents: list[tuple[float, Path]]
    since_ts: float | None


def plan(projects_dir: Path, since_ts: float | None, stats: ReadStats) -> list[_FolderPlan]:
    """List and stat every transcript; decide which main sessions are read (mtime window)."""
    plans: list[_FolderPlan] = []
    try:
        folders = sorted(entry.path for entry in os.scandir(projects_dir) if entry.is_dir(follow_symlinks=False))
    except OSError:
        return plans
    for folder_name in folders:
        folder = Path(folder_name)
        mains: list[tuple[float, Path]] = []
        agents: list[tuple[float, Path]] = []
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            stats.unreadable_files += 1
            continue
        for entry in entries:
            if not entry.name.endswith(".jsonl"):
                if entry.name.endswith(".jsonl.zst"):
                    stats.unsupported_files += 1
                continue
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                stats.unreadable_files += 1
                continue
            stats.files_seen += 1
            if entry.name.startswith("agent-"):
                agents.append((info.st_mtime, Path(entry.path)))
                continue
            if since_ts is not None and info.st_mtime < since_ts:
                stats.files_skipped_by_mtime += 1
                continue
            mains.append((info.st_mtime, Path(entry.path)))
        if mains or agents:
            mains.sort(key=lambda item: (item[0], item[1].name))
            plans.append(_FolderPlan(folder, mains, agents, since_ts))
    return plans


def _read(path: Path, sink: _MainSession | _Subagent, seen: set[int], stats: ReadStats) -> FileCounters:
    def handle(record: dict[str, Any]) -> None:
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            key = hash(uuid)
            if key in seen:
                stats.duplicate_records += 1
                return
            seen.add(key)
        sink.add(record)

    return read_file(path, handle, stats)


def _subagent_files(session_dir: Path) -> list[Path]:
    """``<session>/subagents/**/agent-*.jsonl`` (workflow agents included), sorted."""
    root = session_dir / "subagents"
    if not root.is_dir() or root.is_symlink():
        return []
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        found.extend(Path(dirpath) / name for name in sorted(filenames)
                     if name.startswith("agent-") and name.endswith(".jsonl"))
    return found


def read(plans: list[_FolderPlan], stats: ReadStats, progress: Progress | None = None,
         done: int = 0, total: int = 0) -> Iterator[Session]:
    """Sessions of the planned folders, one folder at a time (memory: one folder's window)."""
    for folder in plans:
        seen: set[int] = set()
        sessions: dict[str, _MainSession] = {}
        for _mtime, path in folder.mains:
            main = _MainSession(session_id=path.stem)
            counters = _read(path, main, seen, stats)
            main.skipped_lines += counters.damaged
            sessions[path.stem] = main
            for agent_path in _subagent_files(path.with_suffix("")):
                _fold(agent_path, sessions, seen, stats, default_parent=path.stem)
            done += 1
            if progress:
                progress(done, total, stats.bytes_read)
        # Flat 2.0.x agent files: read when recent, or when a session being read names them
        # (a long session's early subagents can be older than the window).
        referenced = {ref for main in sessions.values() for ref in main.agent_refs}
        for mtime, agent_path in folder.flat_agents:
            recent = folder.since_ts is None or mtime >= folder.since_ts
            if sessions and (recent or agent_path.stem.removeprefix("agent-") in referenced):
                _fold(agent_path, sessions, seen, stats, default_parent=None)
            elif recent:
                stats.orphan_subagent_files += 1  # no session of this folder is read: nothing to fold into
            else:
                stats.files_skipped_by_mtime += 1
        for main in sessions.values():
            session = main.session()
            if session is None:
                stats.files_without_conversation += 1
                continue
            yield session


def _fold(path: Path, sessions: dict[str, _MainSession], seen: set[int], stats: ReadStats,
          *, default_parent: str | None) -> None:
    agent = _Subagent(compaction_helper=path.name.startswith("agent-acompact"))
    counters = _read(path, agent, seen, stats)
    agent.skipped_lines = counters.damaged
    parent = sessions.get(agent.session_id or "") or (sessions.get(default_parent) if default_parent else None)
    if parent is None:
        stats.orphan_subagent_files += 1
        return
    stats.subagent_files += 1
    parent.fold(agent)


register(SessionReader(AGENT, "projects_dir", "--projects-dir", "Claude Code projects folder", plan,
                       lambda plans: sum(len(folder.mains) for folder in plans), read))
