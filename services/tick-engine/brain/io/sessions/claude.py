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
  ``[Request interrupted by user``, "This session is being continued…", ``Warmup`` …),
  except a slash command of the project's own or a prompt command (``/fix-issue 123``,
  ``/review``; not Claude Code's ``/clear``, ``/model`` …): the operator typed it, its prompt is
  ``/name args`` (a loop of ``claude -p "/work-story …"`` runs is work, not nothing).
  IDE context blocks (``<ide_selection>``, ``<ide_opened_file>``) are dropped from the text;
  the file each names is one the operator had in front of them, counted as read, like the
  files an ``attachment`` record carries (2.1.x: an ``@file`` mention's ``file``, and the
  ``compact_file_reference`` of a file in context before a compaction).
- The session's title is the one Claude Code records (2.1.x): the operator's ``custom-title``
  (``/rename``) over the generated ``ai-title``, the last of each.
- Records are counted once per ``uuid`` within a project folder (resume and compaction
  repeat them); files are read oldest mtime first, so a resumed file only adds what is new.
- Assistant turns are distinct ``message.id`` values (one API response is split over
  several records); ``<synthetic>`` and API-error records are not turns. ``errors`` counts
  tool results with ``is_error: true`` and API-error records.
- ``compactions`` counts ``compact_boundary`` records, or ``isCompactSummary`` messages in
  versions without a boundary record.
- Times are the minimum and maximum ``timestamp`` of the user, assistant and system records.
- Where the session stopped (``last_state``) is the agent's last text, or the recap Claude Code
  writes while the operator is away (2.1.x ``system`` ``away_summary``: what was done, what is
  next) when that came later.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain.core.session import MAX_PROMPTS, Session
from brain.core.timeutil import parse_instant
from brain.core.worklog import WorkLog
from brain.io.sessions import (
    DETACHED_HEAD,
    MAX_FILES,
    FileCounters,
    Progress,
    PromptTrack,
    ReadStats,
    SessionReader,
    TimeRange,
    TranscriptReader,
    clean_prompt,
    from_key,
    inside,
    one_line,
    project_name,
    register,
    regular_file,
    relative_file,
    session_cwd,
    time_key,
    title_line,
    top_tools,
)
from brain.io.sessions.incremental import Cursor, read_numbered

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
    # A background shell's end, as older versions deliver it (later, a <task-notification>).
    "<bash-notification>",
    "<user-prompt-submit-hook>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "[Request interrupted by user",
    "This session is being continued from a previous conversation",
    # What Claude Code writes as the user's turn when a typed slash command names no skill (`/btw`).
    "Unknown skill: ",
    "Unknown slash command: ",
    # ... and, after a local command's caveat, when what was typed is no command at all (xuwentao).
    "Commands are in the form `/command [args]`",
)
_IDE_PREFIXES = ("<ide_selection>", "<ide_opened_file>", "<ide_diagnostics>")
_INLINE_MARKUP = re.compile(r"<(system-reminder|ide_selection|ide_opened_file)>.*?</\1>", re.DOTALL)
#: The file an IDE context block names: "The user opened the file <path> in the IDE." and
#: "The user selected the lines 3 to 9 from <path>:" (then the lines).
_IDE_FILE = re.compile(r"<ide_opened_file>The user opened the file (.{1,1000}?) in the IDE\."
                       r"|<ide_selection>The user selected the lines? \d+(?: to \d+)? from (.{1,1000}?):\r?\n")
#: Attachment types (2.1.x) whose ``filename`` is a file in the session's context.
_ATTACHED_FILES = frozenset({"file", "compact_file_reference"})
#: What Claude Code appends to the recap it writes while the operator is away (``away_summary``).
_RECAP_HINT = re.compile(r"\s*\(disable recaps in /config\)\s*$")
#: Title records (2.1.x) and the field holding the title; a custom title wins over the AI one.
_TITLE_FIELDS = {"custom-title": "customTitle", "ai-title": "aiTitle"}
_EDIT_TOOLS = {"Edit": "file_path", "MultiEdit": "file_path", "Write": "file_path", "NotebookEdit": "notebook_path"}
#: Claude Code run from Zed (the Agent Client Protocol) calls its own tools through an MCP server
#: named ``acp``: ``mcp__acp__Read``, ``mcp__acp__Edit``, ``mcp__acp__Bash`` take the inputs Read,
#: Edit and Bash take, and are read as them.
_ACP_PREFIX = "mcp__acp__"


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


def ide_files(content: Any) -> list[str]:
    """The files the IDE context blocks of a user message's content name, in order."""
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        texts = [block["text"] for block in content
                 if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)]
    else:
        return []
    return [opened or selected for text in texts if "<ide_" in text for opened, selected in _IDE_FILE.findall(text)]


_SLASH_NAME = re.compile(r"<command-name>\s*/?([^<>\s]{1,80})\s*</command-name>")
_SLASH_ARGS = re.compile(r"<command-args>(.*?)</command-args>", re.DOTALL)
#: Claude Code's own commands that act on the session or the setup, not on the work (``/clear``,
#: ``/model``): their envelope is no prompt. Any other (``/review``, a project's own
#: ``/fix-issue 123``) is what the operator asked for.
LOCAL_COMMANDS = frozenset({
    "add-dir", "agents", "allowed-tools", "approved-tools", "bashes", "btw", "bug", "clear", "compact", "config",
    "context", "continue", "cost", "doctor", "exit", "export", "extra-usage", "fast", "feedback", "help", "hooks", "ide",
    "install-github-app", "install-slack-app", "keybindings", "login", "logout", "mcp", "memory", "migrate-installer",
    "mobile", "model", "output-style", "permissions", "plugin", "plugins", "privacy-settings", "quit",
    "rate-limit-options", "release-notes", "reload-plugins", "remote-env", "resume", "rewind", "sandbox", "stats",
    "status", "statusline", "tasks", "terminal-setup", "theme", "todos", "upgrade", "usage", "vim", "voice",
})


def slash_prompt(text: str) -> str | None:
    """The prompt a slash command's envelope stands for (``/flow-work-story docs/prd.json US-006``):
    the operator typed it, and the command's own text follows as a meta message. None for
    Claude Code's own commands (:data:`LOCAL_COMMANDS`) and any other harness text."""
    if not text.lstrip().startswith(("<command-name>", "<command-message>")):
        return None
    found = _SLASH_NAME.search(text[:4000])
    if found is None or found.group(1).lower() in LOCAL_COMMANDS:
        return None
    args = _SLASH_ARGS.search(text[:4000])
    return f"/{found.group(1)} {args.group(1).strip() if args else ''}".strip()


def is_harness(text: str) -> bool:
    stripped = text.lstrip()
    return stripped.startswith(HARNESS_PREFIXES) or stripped == "Warmup"


_READ_TOOLS = {"Read": "file_path", "NotebookRead": "notebook_path"}
#: Tools that run a shell line; PowerShell is Claude Code's shell tool on Windows.
_SHELL_TOOLS = ("Bash", "BashOutput", "PowerShell")
_TODO_STATUSES = ("pending", "in_progress", "completed")


def _result_text(content: Any) -> str:
    """The text of a ``tool_result`` block (a string or a list of text blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content[:20]:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
    return "\n".join(parts)


@dataclass
class _Figures:
    """Tool activity shared by main transcripts and subagent transcripts."""

    tool_calls: int = 0
    tools: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    files: dict[str, None] = field(default_factory=dict)

    def tool_use(self, block: dict[str, Any], cwd: str, work: WorkLog, line: int, shell_cwd: str = "") -> None:
        """``cwd``: the session's folder, which paths are made relative to; ``shell_cwd``: the
        folder the record says the shell was in (after a ``cd``), where a command's relative
        file arguments are."""
        name = block.get("name")
        self.tool_calls += 1
        if not isinstance(name, str) or not name:
            return
        name = name.removeprefix(_ACP_PREFIX) or name
        self.tools[name] += 1
        data = block.get("input")
        if not isinstance(data, dict):
            return
        raw_id = block.get("id")
        call_id = raw_id if isinstance(raw_id, str) else ""
        work.cwd = cwd
        key = _EDIT_TOOLS.get(name)
        if key:
            path = data.get(key)
            if isinstance(path, str) and path:
                if len(self.files) < MAX_FILES:
                    self.files.setdefault(relative_file(path, cwd), None)
                old, new = _edit_strings(name, data)
                work.file_edited(path, line, old, new)
                work.tool(call_id, line, name, path)
            return
        key = _READ_TOOLS.get(name)
        if key:
            path = data.get(key)
            if isinstance(path, str) and path:
                work.file_read(path)
                work.tool(call_id, line, name, path)
            return
        if name in _SHELL_TOOLS and isinstance(data.get("command"), str):
            work.shell(call_id, line, data["command"], powershell=name == "PowerShell", workdir=shell_cwd or cwd)
            return
        if name == "TodoWrite" and isinstance(data.get("todos"), list):
            items = [(t.get("status") if t.get("status") in _TODO_STATUSES else "pending", t.get("content"))
                     for t in data["todos"][:40] if isinstance(t, dict) and isinstance(t.get("content"), str)]
            work.todos([(str(status), one_line(text, 300)) for status, text in items])
        work.tool(call_id, line, name)

    def tool_results(self, content: Any, work: WorkLog | None, line: int) -> bool:
        """Count errors among the tool results; True when the message holds any result."""
        if not isinstance(content, list):
            return False
        found = False
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                found = True
                failed = block.get("is_error") is True
                if failed:
                    self.errors += 1
                if work is not None and isinstance(block.get("tool_use_id"), str):
                    work.result(block["tool_use_id"], line, failed, _result_text(block.get("content")) if failed else "")
        return found


def _edit_strings(name: str, data: dict[str, Any]) -> tuple[str, str]:
    """(old, new) text of an edit, for revert detection; empty for writes."""
    if name == "Edit":
        old, new = data.get("old_string"), data.get("new_string")
        return (old, new) if isinstance(old, str) and isinstance(new, str) else ("", "")
    if name == "MultiEdit" and isinstance(data.get("edits"), list):
        pairs = [(e.get("old_string"), e.get("new_string")) for e in data["edits"] if isinstance(e, dict)]
        if pairs and all(isinstance(o, str) and isinstance(n, str) for o, n in pairs):
            return "\0".join(str(o) for o, _ in pairs), "\0".join(str(n) for _, n in pairs)
    return "", ""


@dataclass
class _MainSession:
    session_id: str
    figures: _Figures = field(default_factory=_Figures)
    cwds: Counter[str] = field(default_factory=Counter)
    branch: str = ""
    times: TimeRange = field(default_factory=TimeRange)
    prompts: PromptTrack = field(default_factory=PromptTrack)
    first_prompts: list[str] = field(default_factory=list)
    message_ids: set[int] = field(default_factory=set)
    conversation: int = 0
    boundaries: int = 0
    summaries: int = 0
    subagents: int = 0
    skipped_lines: int = 0
    continued_from: str = ""  # the session whose records this file replays or links to (a resume)
    agent_refs: set[str] = field(default_factory=set)
    cwd: str = ""
    last_text: str = ""
    entrypoint: str = ""
    first_type: str = ""
    titles: dict[str, str] = field(default_factory=dict)  # record type -> its latest title
    work: WorkLog = field(init=False)

    def __post_init__(self) -> None:
        self.work = WorkLog(self.session_id[:8])

    def add(self, record: dict[str, Any], line: int = 0) -> None:
        kind = record.get("type")
        if not self.first_type and isinstance(kind, str):
            self.first_type = f"{kind}:{record.get('operation', '')}"
        if kind == "progress":
            data = record.get("data")
            if isinstance(data, dict) and isinstance(data.get("agentId"), str):
                self.agent_refs.add(data["agentId"])
            return
        if isinstance(kind, str) and kind in _TITLE_FIELDS:
            title = record.get(_TITLE_FIELDS[kind])
            if isinstance(title, str) and title.strip():
                self.titles[kind] = title[:1000]
            return
        if kind == "attachment":
            self._attachment(record, line)
            return
        if kind not in ("user", "assistant", "system"):
            return  # summary, file-history-snapshot, queue-operation, unknown: metadata
        self.times.add(time_key(record.get("timestamp")))
        cwd = record.get("cwd")
        if isinstance(cwd, str) and cwd:
            self.cwds[cwd] += 1
            if not self.cwd or not inside(cwd, self.cwd):  # after ``cd test`` paths stay repo-relative
                self.cwd = cwd
        branch = record.get("gitBranch")
        if isinstance(branch, str) and branch and branch != DETACHED_HEAD:
            self.branch = branch  # where the session stopped, not where it started
        entry = record.get("entrypoint")
        if isinstance(entry, str) and entry and not self.entrypoint:
            self.entrypoint = entry
        if kind == "system":
            subtype, content = record.get("subtype"), record.get("content")
            if subtype == "compact_boundary":
                self.boundaries += 1
            elif subtype == "away_summary" and isinstance(content, str) and record.get("isSidechain") is not True:
                recap = _RECAP_HINT.sub("", content[:4000]).strip()
                self.last_text = recap or self.last_text  # the agent's own recap of where things stand
            return
        self.conversation += 1
        message = record.get("message")
        if not isinstance(message, dict):
            return
        sidechain = record.get("isSidechain") is True
        if kind == "assistant":
            self._assistant(record, message, sidechain, line)
        else:
            self._user(record, message, sidechain, line)

    def _attachment(self, record: dict[str, Any], line: int) -> None:
        attachment = record.get("attachment")
        if not isinstance(attachment, dict) or record.get("isSidechain") is True:
            return
        kind = attachment.get("type")
        if kind == "queued_command":
            # A prompt typed while the agent worked, delivered when it was taken from the queue
            # (2.1.x): the operator's turn like any other; a ``!`` shell line typed there is not.
            if attachment.get("commandMode") in (None, "prompt"):
                self._prompt(record, line, *prompt_text(attachment.get("prompt")))
            return
        if not isinstance(kind, str) or kind not in _ATTACHED_FILES:
            return
        path = attachment.get("filename")
        if isinstance(path, str) and path:
            cwd = record.get("cwd")
            self.work.cwd = cwd if isinstance(cwd, str) and cwd else self.cwd
            self.work.file_read(path)

    def _assistant(self, record: dict[str, Any], message: dict[str, Any], sidechain: bool, line: int) -> None:
        if record.get("isApiErrorMessage") is True:
            self.figures.errors += 1
            return
        content = message.get("content")
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    shell_cwd = record.get("cwd")
                    self.figures.tool_use(block, self.cwd, self.work, line,
                                          shell_cwd if isinstance(shell_cwd, str) else "")
                elif (block.get("type") == "text" and not sidechain and isinstance(block.get("text"), str)
                      and block["text"].strip()):
                    self.last_text = block["text"][:4000]
        if sidechain or message.get("model") == "<synthetic>":
            return
        mid = message.get("id")
        key = hash(mid) if isinstance(mid, str) else hash(record.get("uuid"))
        self.message_ids.add(key)

    def _user(self, record: dict[str, Any], message: dict[str, Any], sidechain: bool, line: int) -> None:
        content = message.get("content")
        has_results = self.figures.tool_results(content, None if sidechain else self.work, line)
        result = record.get("toolUseResult")
        if isinstance(result, dict) and isinstance(result.get("agentId"), str):
            self.agent_refs.add(result["agentId"])
        if record.get("isCompactSummary") is True:
            self.summaries += 1
            return
        if sidechain or has_results or record.get("isMeta") is True:
            return
        files = ide_files(content)
        if files:
            self.work.cwd = self.cwd
        for path in files:
            self.work.file_read(path)
        self._prompt(record, line, *prompt_text(content))

    def _prompt(self, record: dict[str, Any], line: int, text: str, images: bool) -> None:
        """A human prompt (a user record's text, or a queued one), unless it is harness text."""
        if not text and not images:
            return
        if text and is_harness(text):
            text = slash_prompt(text) or ""  # a project's own command is the operator's prompt
            if not text:
                return
        stamp = time_key(record.get("timestamp"))
        self.prompts.add(stamp, text or "[image]")
        if text:
            self.work.prompt(line, text, stamp[:10] if stamp else "")
            if len(self.first_prompts) < MAX_PROMPTS:
                self.first_prompts.append(text[:2000])

    def fold(self, agent: _Subagent) -> None:
        self.figures.tool_calls += agent.figures.tool_calls
        self.figures.tools.update(agent.figures.tools)
        self.figures.errors += agent.figures.errors
        for path in agent.figures.files:
            if len(self.figures.files) >= MAX_FILES:
                break
            self.figures.files.setdefault(path, None)
        # What a subagent read or ran was read or run for this session.
        self.work.read.update(agent.work.read)
        self.work.edited.update(agent.work.edited)
        self.work.commands.update(agent.work.commands)
        self.skipped_lines += agent.skipped_lines
        if not agent.warmup and not agent.compaction_helper:
            self.subagents += 1

    @property
    def headless(self) -> bool:
        """A scripted run: an SDK entrypoint, or (older versions) one prompt taken from the queue."""
        if self.entrypoint:
            return self.entrypoint.startswith("sdk")
        return self.first_type == "queue-operation:dequeue" and self.prompts.count <= 1

    def session(self) -> Session | None:
        if self.conversation == 0 or self.times.first is None or self.times.last is None:
            return None
        cwd = session_cwd(self.cwds)
        first = self.prompts.first[1] if self.prompts.first else ""
        last = self.prompts.last[1] if self.prompts.last else ""
        work = self.work
        return Session(
            session_id=self.session_id,
            agent=AGENT,
            project=one_line(project_name(cwd)) if cwd else "unknown",
            cwd=one_line(cwd, 1000),
            git_branch=one_line(self.branch, 200),
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
            continues=self.continued_from,
            files_edited=tuple((one_line(p, 500), n) for p, n in work.files_edited()),
            files_read=tuple((one_line(p, 500), n) for p, n in work.files_read()),
            commands=tuple((one_line(c, 120), n) for c, n in work.ranked_commands()),
            failures=work.failures(),
            identifiers=tuple(one_line(i, 120) for i in work.identifier_list()),
            prompts=tuple(one_line(clean_prompt(p), 300) for p in self.first_prompts),
            last_state=one_line(clean_prompt(self.last_text), 300),
            todos=work.todo_list(),
            lessons=work.lessons(),
            headless=self.headless,
            title=title_line(self.titles.get("custom-title") or self.titles.get("ai-title") or ""),
        )


@dataclass
class _Subagent:
    session_id: str | None = None
    figures: _Figures = field(default_factory=_Figures)
    warmup: bool = False
    compaction_helper: bool = False
    skipped_lines: int = 0
    seen_user: bool = False
    work: WorkLog = field(default_factory=lambda: WorkLog("agent"))

    def add(self, record: dict[str, Any], line: int = 0) -> None:
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
                        self.figures.tool_use(block, str(cwd), self.work, line)
            return
        self.figures.tool_results(content, None, line)
        if not self.seen_user and record.get("isMeta") is not True:
            self.seen_user = True
            text, _ = prompt_text(content)
            self.warmup = text == "Warmup"


def _skipped_links(stats: ReadStats, paths: list[str]) -> None:
    """Logs are read where they are: a symbolic link (to a folder or a log) is not followed, and said so."""
    stats.problems.extend(f"{path}: a symbolic link, not followed (copy the logs in to read them)" for path in sorted(paths))


@dataclass
class _FolderPlan:
    folder: Path
    mains: list[tuple[float, Path]]  # (mtime, path), oldest first by their last record (:func:`_last_stamp`)
    flat_agents: list[tuple[float, Path]]
    since_ts: float | None
    stats: dict[Path, os.stat_result] = field(default_factory=dict)


def plan(projects_dir: Path, since_ts: float | None, stats: ReadStats, cursor: Cursor | None = None) -> list[_FolderPlan]:
    """List and stat every transcript; decide which main sessions are read (mtime window, cursor)."""
    plans: list[_FolderPlan] = []
    try:
        listed = list(os.scandir(projects_dir))
    except OSError:
        return plans
    folders = sorted(entry.path for entry in listed if entry.is_dir(follow_symlinks=False))
    _skipped_links(stats, [entry.path for entry in listed if entry.is_symlink()])
    for folder_name in folders:
        folder = Path(folder_name)
        mains: list[tuple[float, Path]] = []
        unchanged: list[tuple[float, Path]] = []
        agents: list[tuple[float, Path]] = []
        infos: dict[Path, os.stat_result] = {}
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
                    if entry.is_symlink():
                        _skipped_links(stats, [entry.path])
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
            infos[Path(entry.path)] = info
            if cursor is not None and cursor.is_unchanged(Path(entry.path), info):
                unchanged.append((info.st_mtime, Path(entry.path)))
                continue
            mains.append((info.st_mtime, Path(entry.path)))
        if mains:
            # A changed file of a folder is read with the folder's other files in the window, so a
            # resumed session's copied records are still counted once (the uuid set is per folder).
            mains.extend(unchanged)
            if cursor is not None:
                cursor.unchanged -= len(unchanged)  # opened after all
        if mains or agents:
            # Oldest first by what the files say, not their mtimes: a copy or a git checkout
            # stamps files in name order, and a resumed session read before the one it replays
            # would take that one's records (and the original would vanish).
            mains.sort(key=lambda item: (_last_stamp(item[1], item[0]), item[1].name))
            plans.append(_FolderPlan(folder, mains, agents, since_ts, infos))
    return plans


#: How much of a transcript's end :func:`_last_stamp` reads, and the stamp it looks for (a
#: quote inside a message is escaped in JSON, so text a prompt holds never matches).
_TAIL_BYTES = 64 * 1024
_STAMP = re.compile(rb'"timestamp"\s*:\s*"([^"]{10,40})"')


def _last_stamp(path: Path, mtime: float) -> float:
    """When a transcript's last stamped record was written (epoch seconds), read from its end;
    ``mtime`` when it has none there or cannot be read (what the file system says instead)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read(_TAIL_BYTES)
    except OSError:
        return mtime
    for found in reversed(_STAMP.findall(tail)):
        instant = parse_instant(found.decode("ascii", "replace"))
        if instant is not None:
            return instant.timestamp()
    return mtime


def _read(path: Path, sink: _MainSession | _Subagent, seen: dict[int, str], stats: ReadStats,
          until: str | None) -> FileCounters:
    """Stream one file into ``sink``; ``seen`` maps each uuid read in this folder to its session.

    A resumed session (``--resume`` / ``--continue`` writes a new file) replays the records of
    the one it continues, or links its first record to them by ``parentUuid``, or carries
    their ``sessionId``: those records are counted once, in the older session, and the newer
    one ``continues`` the session that owned the last such record (in a chain A, B, C, C
    continues B).
    """
    main = sink if isinstance(sink, _MainSession) else None
    owner_id = main.session_id if main is not None else ""

    def handle(record: dict[str, Any], line: int) -> None:
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            key = hash(uuid)
            owner = seen.get(key)
            if owner is not None:
                stats.duplicate_records += 1
                if main is not None and owner and owner != owner_id:
                    main.continued_from = owner
                return
            seen[key] = owner_id
        if main is not None:
            sid = record.get("sessionId")
            if isinstance(sid, str) and sid and sid != owner_id and record.get("isSidechain") is not True:
                stats.duplicate_records += 1  # a record of another session replayed here
                main.continued_from = sid
                return
            parent = record.get("parentUuid")
            if isinstance(parent, str) and not main.conversation:
                owner = seen.get(hash(parent))
                if owner and owner != owner_id:
                    main.continued_from = owner
        sink.add(record, line)

    return read_numbered(path, handle, stats, until)


def _subagent_files(session_dir: Path) -> list[Path]:
    """``<session>/subagents/**/agent-*.jsonl`` (workflow agents included), sorted."""
    root = session_dir / "subagents"
    if not root.is_dir() or root.is_symlink():
        return []
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        found.extend(Path(dirpath) / name for name in sorted(filenames)
                     if name.startswith("agent-") and name.endswith(".jsonl") and regular_file(Path(dirpath) / name))
    return found


def read(plans: list[_FolderPlan], stats: ReadStats, progress: Progress | None = None,
         done: int = 0, total: int = 0, *, until: str | None = None, cursor: Cursor | None = None) -> Iterator[Session]:
    """Sessions of the planned folders, one folder at a time (memory: one folder's window).

    ``until`` (a time key) drops every record stamped later; ``cursor`` records what was read.
    """
    for folder in plans:
        seen: dict[int, str] = {}
        sessions: dict[str, _MainSession] = {}
        for _mtime, path in folder.mains:
            main = _MainSession(session_id=path.stem)
            counters = _read(path, main, seen, stats, until)
            main.skipped_lines += counters.damaged
            sessions[path.stem] = main
            for agent_path in _subagent_files(path.with_suffix("")):
                _fold(agent_path, sessions, seen, stats, default_parent=path.stem, until=until)
            info = folder.stats.get(path)
            if cursor is not None and info is not None:
                cursor.record(path, info, counters.bytes)
            done += 1
            if progress:
                progress(done, total, stats.bytes_read)
        # Flat 2.0.x agent files: read when recent, or when a session being read names them
        # (a long session's early subagents can be older than the window).
        referenced = {ref for main in sessions.values() for ref in main.agent_refs}
        for mtime, agent_path in folder.flat_agents:
            recent = folder.since_ts is None or mtime >= folder.since_ts
            if sessions and (recent or agent_path.stem.removeprefix("agent-") in referenced):
                _fold(agent_path, sessions, seen, stats, default_parent=None, until=until)
            elif recent and cursor is None:
                stats.orphan_subagent_files += 1  # no session of this folder is read: nothing to fold into
            elif not recent:
                stats.files_skipped_by_mtime += 1
        for main in sessions.values():
            session = main.session()
            if session is None:
                stats.files_without_conversation += 1
                continue
            yield session


def read_one(path: Path, *, until: str | None = None) -> Session | None:
    """One main transcript and its subagent transcripts, as :func:`read` gives a session (records
    stamped after ``until`` dropped); None when it is not a regular file or holds no conversation.
    The session-end hook's reader: the folder's other files are not read, so the records a
    resumed session replays from the one it continues are not told apart."""
    if not regular_file(path):
        return None
    stats = ReadStats()
    main = _MainSession(session_id=path.stem)
    seen: dict[int, str] = {}
    main.skipped_lines += _read(path, main, seen, stats, until).damaged
    sessions = {path.stem: main}
    for agent_path in _subagent_files(path.with_suffix("")):
        _fold(agent_path, sessions, seen, stats, default_parent=path.stem, until=until)
    return main.session()


def _fold(path: Path, sessions: dict[str, _MainSession], seen: dict[int, str], stats: ReadStats,
          *, default_parent: str | None, until: str | None = None) -> None:
    agent = _Subagent(compaction_helper=path.name.startswith("agent-acompact"))
    counters = _read(path, agent, seen, stats, until)
    agent.skipped_lines = counters.damaged
    parent = sessions.get(agent.session_id or "") or (sessions.get(default_parent) if default_parent else None)
    if parent is None:
        stats.orphan_subagent_files += 1
        return
    stats.subagent_files += 1
    parent.fold(agent)


def owns_transcript(path: Path) -> bool:
    """A ``.jsonl`` log outside a ``chats`` folder: Claude Code names its project folders after
    the project's path (``-home-me-app``), and ``chats`` holds Gemini CLI's chat logs."""
    return path.suffix == ".jsonl" and "chats" not in path.parts[-3:-1]


register(SessionReader(AGENT, "projects_dir", "--projects-dir", "Claude Code projects folder", plan,
                       lambda plans: sum(len(folder.mains) for folder in plans), read,
                       TranscriptReader(owns_transcript, lambda path, until, _cwd: read_one(path, until=until))))
