"""Codex CLI rollouts: ``<codex-dir>/YYYY/MM/DD/rollout-*.jsonl`` (``reference/session-formats.md`` §2).

Rules:

- One file is one session; its id is ``session_meta.id`` (else the uuid at the end of the
  file name), its project the last component of ``session_meta.cwd`` (else the most frequent
  ``turn_context.cwd``), its branch ``session_meta.git.branch``. Except a subagent thread
  (``session_meta.source.subagent.thread_spawn``): folded into the thread that spawned it, whose
  ``subagents`` counts it; an orphan (its parent not read) is counted, never a session.
- Commands a session on a Windows drive ran as one line (``shell_command``) are PowerShell.
- Both layouts are read: the ``{timestamp, type, payload}`` envelope and the older bare
  ``SessionMeta`` / ``ResponseItem`` lines (``{"record_type": "state"}`` lines are skipped).
- Human prompts come from ``event_msg/user_message`` (what the TUI showed) when the file has
  any; otherwise from ``response_item/message`` with ``role: user`` (newer CLIs write only
  those). Each prompt is logged in both places, so only one source is counted. Scaffolding
  injected as user text (``<environment_context>``, ``# AGENTS.md instructions for``,
  ``<permissions instructions>`` …) is never a human turn.
- Tool calls are ``function_call``, ``custom_tool_call``, ``local_shell_call`` and
  ``web_search_call`` items. Errors are failed commands and patches: ``exec_command_end``
  with a non-zero ``exit_code`` or ``patch_apply_end`` with ``success: false``, or, in files
  without those events, tool outputs reporting a non-zero exit code.
- ``compactions`` counts ``compacted`` records (or ``context_compacted`` events).
- Times are the minimum and maximum record ``timestamp`` (UTC), never the local-time file
  name. Zstd-compressed rollouts (``.jsonl.zst``) are counted as unsupported.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brain.core.worklog import WorkLog
from brain.core.workpaths import DRIVE_PATH
from brain.io.sessions import (
    DETACHED_HEAD,
    MAX_FILES,
    Progress,
    PromptTrack,
    ReadStats,
    Session,
    SessionReader,
    TimeRange,
    clean_prompt,
    from_key,
    one_line,
    project_name,
    register,
    relative_file,
    session_cwd,
    time_key,
    top_tools,
    work_fields,
)
from brain.io.sessions.incremental import Cursor, read_numbered

AGENT = "codex"

#: User / developer text that the harness injected (session-formats.md §2).
SCAFFOLDING_PREFIXES = (
    "<permissions instructions>",
    "<collaboration_mode>",
    "<skills_instructions>",
    "<plugins_instructions>",
    "<environment_context>",
    "<user_instructions>",
    "<user_shell_command>",
    "<turn_aborted>",
    "# AGENTS.md instructions for",
)
_TOOL_ITEMS = {"function_call": None, "custom_tool_call": None, "local_shell_call": "local_shell",
               "web_search_call": "web_search"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)
_MOVE_TO = re.compile(r"^\*\*\* Move to: (.+)$", re.MULTILINE)
_EXIT_TEXT = re.compile(r"(?:Process exited with code|Exit code:?)\s*(-?\d+)")
_EXIT_JSON = re.compile(r'"exit_code"\s*:\s*(-?\d+)')
_REQUEST = "## My request for Codex:"
_ROLLOUT_ID = re.compile(r"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$")


def is_scaffolding(text: str) -> bool:
    return text.lstrip().startswith(SCAFFOLDING_PREFIXES)


def human_text(text: str) -> str:
    """The request part of a prompt that Codex Desktop prefixed with mentioned files."""
    index = text.find(_REQUEST)
    return text[index + len(_REQUEST) :].strip() if index != -1 else text.strip()


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") in ("input_text", "text", "output_text"):
                value = block.get("text")
                if isinstance(value, str):
                    parts.append(value)
    return "\n".join(parts)


@dataclass
class _Rollout:
    fallback_id: str
    session_id: str = ""
    meta_cwd: str = ""
    branch: str = ""
    cwds: Counter[str] = field(default_factory=Counter)
    times: TimeRange = field(default_factory=TimeRange)
    events: PromptTrack = field(default_factory=PromptTrack)  # event_msg/user_message
    items: PromptTrack = field(default_factory=PromptTrack)  # response_item/message role=user
    assistant_items: int = 0
    agent_events: int = 0
    tool_calls: int = 0
    tools: Counter[str] = field(default_factory=Counter)
    files: dict[str, None] = field(default_factory=dict)
    event_errors: int = 0
    exec_events: int = 0
    output_errors: int = 0
    compacted: int = 0
    compact_events: int = 0
    records: int = 0
    headless: bool = False
    last_text: str = ""
    line: int = 0
    #: (line, text, day) of the human prompts of each source, for identifiers and lessons.
    event_prompts: list[tuple[int, str, str]] = field(default_factory=list)
    item_prompts: list[tuple[int, str, str]] = field(default_factory=list)
    #: A fork or resume names the rollout it continues (``forked_from_id``); the records it
    #: replays from that rollout (same call ids, same messages) are counted there, not here.
    continues: str = ""
    marks: dict[int, str] | None = None  # fingerprint -> rollout id, shared by one run
    keep_marks: bool = False  # another rollout of this run continues this one
    replayed: int = 0
    subagents: int = 0  # subagent threads folded into this one (:meth:`fold`)
    work: WorkLog = field(init=False)

    def __post_init__(self) -> None:
        self.work = WorkLog(self.fallback_id[:8])

    def add(self, record: dict[str, Any], line: int = 0) -> None:
        self.line = line
        if "payload" in record and isinstance(record.get("type"), str):
            kind, payload = record["type"], record["payload"]
        elif "record_type" in record:
            return
        elif isinstance(record.get("type"), str):
            kind, payload = "response_item", record  # bare ResponseItem (pre-envelope rollouts)
        elif "id" in record and ("instructions" in record or "cwd" in record or "timestamp" in record):
            kind, payload = "session_meta", record  # bare SessionMeta
        else:
            return
        if not isinstance(payload, dict):
            return
        if self.marks is not None and kind in ("response_item", "event_msg") and self._replayed(kind, payload):
            return
        self.records += 1
        key = time_key(record.get("timestamp"))
        if kind == "session_meta":
            key = key or time_key(payload.get("timestamp"))
        self.times.add(key)
        if kind == "session_meta":
            self._meta(payload)
        elif kind == "turn_context":
            cwd = payload.get("cwd")
            if isinstance(cwd, str) and cwd:
                self.cwds[cwd] += 1
        elif kind == "response_item":
            self._item(payload, key)
        elif kind == "event_msg":
            self._event(payload, key)
        elif kind == "compacted":
            self.compacted += 1

    def _replayed(self, kind: str, payload: dict[str, Any]) -> bool:
        mark = _fingerprint(kind, payload)
        if mark is None:
            return False
        owner = self.marks.get(mark) if self.marks is not None else None
        if owner is not None and self.continues and owner == self.continues:
            self.replayed += 1
            return True
        if self.keep_marks and self.marks is not None:
            self.marks.setdefault(mark, self.session_id or self.fallback_id)
        return False

    def _meta(self, payload: dict[str, Any]) -> None:
        own = self.session_id or self.fallback_id
        pid = payload.get("id")
        source = payload.get("source")
        subagent = isinstance(source, dict) and "subagent" in source  # a subagent's forked_from_id is its parent
        forked = payload.get("forked_from_id")
        if not self.continues and not subagent and isinstance(forked, str) and forked and forked != own:
            self.continues = forked
        elif not self.continues and self.session_id and isinstance(pid, str) and pid and pid != self.session_id:
            self.continues = pid  # the history of an earlier rollout repeated in this one
        if not self.session_id and isinstance(payload.get("id"), str):
            self.session_id = payload["id"]
            self.work.session_key = self.work.miner.session_key = self.session_id[:8]
        if not self.meta_cwd and isinstance(payload.get("cwd"), str):
            self.meta_cwd = payload["cwd"]
            self.work.cwd = self.meta_cwd
        # `codex exec` is a scripted run (originator codex_exec, source exec).
        if payload.get("originator") == "codex_exec" or payload.get("source") == "exec":
            self.headless = True
        git = payload.get("git")
        if (not self.branch and isinstance(git, dict) and isinstance(git.get("branch"), str)
                and git["branch"] != DETACHED_HEAD):
            self.branch = git["branch"]

    def _item(self, payload: dict[str, Any], key: str | None) -> None:
        kind = payload.get("type")
        if not isinstance(kind, str):
            return  # a damaged item: nothing in it can be told apart
        if kind == "message":
            role = payload.get("role")
            if role == "user":
                text = _content_text(payload.get("content"))
                images = isinstance(payload.get("content"), list) and any(
                    isinstance(b, dict) and b.get("type") == "input_image" for b in payload["content"]
                )
                if (text.strip() or images) and not is_scaffolding(text):
                    self.items.add(key, human_text(text) or "[image]")
                    self._prompt(self.item_prompts, human_text(text), key)
            elif role == "assistant":
                self.assistant_items += 1
                text = _content_text(payload.get("content"))
                if text.strip():
                    self.last_text = text[:4000]
        elif kind in _TOOL_ITEMS:
            self.tool_calls += 1
            name = _TOOL_ITEMS[kind] or payload.get("name")
            if isinstance(name, str) and name:
                self.tools[name] += 1
            patch = payload.get("input") if kind == "custom_tool_call" else payload.get("arguments")
            raw_id = payload.get("call_id")
            call_id = raw_id if isinstance(raw_id, str) else ""
            patched: list[str] = []
            if isinstance(patch, str) and "*** " in patch and "File: " in patch:
                for match in _PATCH_FILE.finditer(patch):
                    self._file(match.group(1))
                    patched.append(match.group(1).strip())
                for match in _MOVE_TO.finditer(patch):
                    self._file(match.group(1))
                    patched.append(match.group(1).strip())
            self._work_call(str(name or ""), call_id, payload, patched)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = payload.get("output")
            if isinstance(output, dict):
                output = output.get("content") if isinstance(output.get("content"), str) else str(output)
            if isinstance(output, str):
                code = _EXIT_TEXT.search(output[:400]) or _EXIT_JSON.search(output[-400:])
                if code and code.group(1) != "0":
                    self.output_errors += 1
                answered = payload.get("call_id")
                if code and isinstance(answered, str):
                    self.work.result(answered, self.line, code.group(1) != "0", output[:6000])

    def _event(self, payload: dict[str, Any], key: str | None) -> None:
        kind = payload.get("type")
        if not isinstance(kind, str):
            return
        if kind == "user_message":
            text = payload.get("message")
            images = bool(payload.get("images")) or bool(payload.get("local_images"))
            if isinstance(text, str) and (text.strip() or images) and not is_scaffolding(text):
                self.events.add(key, human_text(text) or "[image]")
                self._prompt(self.event_prompts, human_text(text), key)
        elif kind == "agent_message":
            self.agent_events += 1
            if isinstance(payload.get("message"), str) and payload["message"].strip():
                self.last_text = payload["message"][:4000]
        elif kind == "exec_command_end":
            self.exec_events += 1
            code = payload.get("exit_code")
            if isinstance(code, int) and not isinstance(code, bool) and code != 0:
                self.event_errors += 1
            if isinstance(code, int) and isinstance(payload.get("call_id"), str):
                output = payload.get("aggregated_output") or payload.get("stderr") or ""
                self.work.result(payload["call_id"], self.line, code != 0, str(output)[:6000])
        elif kind == "patch_apply_end":
            self.exec_events += 1
            if payload.get("success") is False:
                self.event_errors += 1
            if isinstance(payload.get("success"), bool) and isinstance(payload.get("call_id"), str):
                self.work.result(payload["call_id"], self.line, not payload["success"],
                                 str(payload.get("stderr") or "patch failed")[:6000])
            changes = payload.get("changes")
            if isinstance(changes, dict):
                for path in changes:
                    if isinstance(path, str):
                        self._file(path)
        elif kind == "context_compacted":
            self.compact_events += 1

    def _file(self, path: str) -> None:
        if len(self.files) < MAX_FILES:
            self.files.setdefault(path.strip(), None)

    def _prompt(self, track: list[tuple[int, str, str]], text: str, key: str | None) -> None:
        if text.strip() and len(track) < 400:
            track.append((self.line, text[:4000], key[:10] if key and key[0] != "~" else ""))

    def _work_call(self, name: str, call_id: str, payload: dict[str, Any], patched: list[str]) -> None:
        """Files, commands and plans of one tool call (``exec_command``, ``shell``, ``apply_patch`` …)."""
        if patched:
            for path in patched:
                self.work.file_edited(path, self.line)
            self.work.tool(call_id, self.line, "apply_patch", patched[0])
            return
        raw = payload.get("arguments")
        args: Any = None
        if isinstance(raw, str) and raw.lstrip().startswith("{"):
            try:
                args = json.loads(raw)
            except ValueError:
                args = None
        elif isinstance(raw, dict):
            args = raw
        if payload.get("type") == "local_shell_call" and isinstance(payload.get("action"), dict):
            args = payload["action"]
        if not isinstance(args, dict):
            self.work.tool(call_id, self.line, name)
            return
        command = args.get("cmd") if isinstance(args.get("cmd"), str) else args.get("command")
        # A command line on its own runs in the user's shell: PowerShell where the session works
        # on a Windows drive (``continue } elseif (…)`` are no programs there).
        cwd = (self.meta_cwd or self.work.cwd or "").replace("\\", "/")
        powershell = isinstance(command, str) and DRIVE_PATH.match(cwd) is not None
        if isinstance(command, list) and command and all(isinstance(part, str) for part in command):
            # ["bash", "-lc", "uv run pytest"]: the script; otherwise the argv joined.
            command = command[-1] if len(command) >= 3 and command[1] in ("-lc", "-c") else " ".join(command)
        if isinstance(command, str) and command.strip():
            workdir = args.get("workdir")
            self.work.shell(call_id, self.line, command, powershell=powershell,
                            workdir=workdir if isinstance(workdir, str) and workdir else cwd)
            return
        if name == "update_plan" and isinstance(args.get("plan"), list):
            items = [(str(step.get("status") or "pending"), one_line(step.get("step"), 300))
                     for step in args["plan"][:40] if isinstance(step, dict) and isinstance(step.get("step"), str)]
            self.work.todos([(status if status in ("pending", "in_progress", "completed") else "pending", text)
                             for status, text in items])
        self.work.tool(call_id, self.line, name)

    def fold(self, agent: _Rollout) -> None:
        """A subagent thread this one spawned (``spawn_agent``): what it read, edited and ran was
        read, edited and run for this session; its prompt is this session's agent's, not a human's."""
        self.tool_calls += agent.tool_calls
        self.tools.update(agent.tools)
        self.output_errors += agent.output_errors
        self.event_errors += agent.event_errors
        for path in agent.files:
            self._file(path)
        self.work.read.update(agent.work.read)
        self.work.edited.update(agent.work.edited)
        self.work.commands.update(agent.work.commands)
        self.subagents += 1

    def session(self, skipped_lines: int) -> Session | None:
        if self.records == 0 or self.times.first is None or self.times.last is None:
            return None
        prompts = self.events if self.events.count else self.items
        cwd = self.meta_cwd or session_cwd(self.cwds)
        first = prompts.first[1] if prompts.first else ""
        last = prompts.last[1] if prompts.last else ""
        files = {relative_file(path, cwd) for path in self.files}
        return Session(
            session_id=one_line(self.session_id or self.fallback_id, 128),
            agent=AGENT,
            project=one_line(project_name(cwd)) if cwd else "unknown",
            cwd=one_line(cwd, 1000),
            git_branch=one_line(self.branch, 200),
            start=from_key(self.times.first),
            end=from_key(self.times.last),
            user_turns=prompts.count,
            assistant_turns=max(self.assistant_items, self.agent_events),
            tool_calls=self.tool_calls,
            top_tools=top_tools(self.tools),
            files_touched=tuple(sorted(one_line(p, 500) for p in files)),
            first_prompt=clean_prompt(first),
            last_prompt=clean_prompt(last),
            errors=self.event_errors if self.exec_events else self.output_errors,
            joy=prompts.joy,
            compactions=max(self.compacted, self.compact_events),
            subagents=self.subagents,
            skipped_lines=skipped_lines,
            continues=one_line(self.continues, 128),
            **self._work_fields(prompts is self.events, cwd),
        )

    def _work_fields(self, from_events: bool, cwd: str) -> dict[str, Any]:
        work = self.work
        work.cwd = cwd
        prompts = self.event_prompts if from_events else self.item_prompts
        for line, text, day in prompts:
            work.prompt(line, text, day)
        return {
            **work_fields(work, [text for _line, text, _day in prompts], self.last_text),
            "headless": self.headless,
        }


def plan(codex_dir: Path, since_ts: float | None, stats: ReadStats, cursor: Cursor | None = None) -> list[Path]:
    """Rollout files in the window and changed since the cursor, by path (``YYYY/MM/DD`` folders, plus flat ones)."""
    found: list[Path] = []
    stack = [codex_dir]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    if folder == codex_dir or entry.name.isdigit():
                        stack.append(Path(entry.path))
                    continue
                if not entry.name.startswith("rollout-"):
                    continue
                if entry.name.endswith(".jsonl.zst"):
                    stats.unsupported_files += 1
                    continue
                if not entry.name.endswith(".jsonl") or not entry.is_file(follow_symlinks=False):
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                stats.unreadable_files += 1
                continue
            stats.files_seen += 1
            if since_ts is not None and info.st_mtime < since_ts:
                stats.files_skipped_by_mtime += 1
                continue
            if cursor is not None and cursor.is_unchanged(Path(entry.path), info):
                continue
            found.append(Path(entry.path))
    return sorted(found)


def read(paths: list[Path], stats: ReadStats, progress: Progress | None = None,
         done: int = 0, total: int = 0, *, until: str | None = None, cursor: Cursor | None = None) -> Iterator[Session]:
    """Sessions of the rollouts; ``until`` (a time key) drops every record stamped later.

    A subagent thread (``session_meta.source.subagent.thread_spawn``, Codex's ``spawn_agent``) is
    folded into the thread that spawned it, like Claude Code's subagent transcripts: the parent
    is held until its subagents of this run are read. One whose parent is not read is an orphan:
    counted, never a session (its prompt is an agent's, not a human's)."""
    continued, forks, parents, present = _forks(paths)
    waiting = Counter(parents.values())  # parent thread id -> its subagent files still to read
    held: dict[str, tuple[_Rollout, int]] = {}  # parent thread id -> (its rollout, damaged lines)
    early: dict[str, list[_Rollout]] = {}  # parent thread id -> subagents read before it
    marks: dict[int, str] = {}
    for path in paths:
        match = _ROLLOUT_ID.search(path.name[: -len(".jsonl")])
        rollout = _Rollout(fallback_id=match.group(1) if match else path.stem)
        rollout.keep_marks = rollout.fallback_id in continued
        if rollout.keep_marks or path in forks:
            rollout.marks = marks  # only forks and what they fork pay for fingerprints
        try:
            info = os.stat(path)  # before reading: a file that grows meanwhile is read again next time
        except OSError:
            info = None
        counters = read_numbered(path, rollout.add, stats, until)
        if cursor is not None and info is not None:
            cursor.record(path, info, counters.bytes)
        done += 1
        if progress:
            progress(done, total, stats.bytes_read)
        stats.duplicate_records += rollout.replayed
        parent = parents.get(path)
        if parent is not None:
            waiting[parent] -= 1
            if parent not in present:
                stats.orphan_subagent_files += 1  # its parent is not read in this run: nothing to fold into
                continue
            if parent not in held:
                early.setdefault(parent, []).append(rollout)
                continue
            held[parent][0].fold(rollout)
            if waiting[parent] > 0:
                continue
            rollout, damaged = held.pop(parent)
        else:
            damaged = counters.damaged
            own = rollout.session_id or rollout.fallback_id
            for agent in early.pop(own, ()):
                rollout.fold(agent)
            if waiting.get(own, 0) > 0:
                held[own] = (rollout, damaged)  # its subagents come later in the run
                continue
        session = _session_of(rollout, damaged, stats)
        if session is not None:
            yield session
    for rollout, damaged in held.values():  # subagent files that could not be read
        session = _session_of(rollout, damaged, stats)
        if session is not None:
            yield session
    stats.orphan_subagent_files += sum(len(agents) for agents in early.values())  # a parent with no session_meta


def _session_of(rollout: _Rollout, damaged: int, stats: ReadStats) -> Session | None:
    """The rollout's session; None (counted) when it holds no conversation."""
    session = rollout.session(damaged)
    if session is None:
        stats.files_without_conversation += 1
    return session


def _fingerprint(kind: str, payload: dict[str, Any]) -> int | None:
    """What identifies a replayed record: a call id, or a message's role and text."""
    item = payload.get("type")
    call_id = payload.get("call_id")
    if isinstance(call_id, str) and call_id:
        return hash((kind, item, call_id))
    if kind == "response_item" and item == "message":
        return hash((item, payload.get("role"), _content_text(payload.get("content"))[:2000]))
    if kind == "event_msg" and item in ("user_message", "agent_message") and isinstance(payload.get("message"), str):
        return hash((item, payload["message"][:2000]))
    return None


def _forks(paths: list[Path]) -> tuple[set[str], set[Path], dict[Path, str], set[str]]:
    """(rollout ids named as ``forked_from_id`` by a planned rollout, the rollouts naming one, each
    subagent thread's rollout -> the first thread above it that is no subagent, and the thread ids
    of the rollouts), from each file's first line."""
    found: set[str] = set()
    forks: set[Path] = set()
    spawned: dict[Path, tuple[str, str]] = {}  # subagent rollout -> (its thread id, its parent's)
    present: set[str] = set()
    for path in paths:
        try:
            with open(path, "rb") as handle:
                first = handle.readline(1 << 20)
            data = json.loads(first)
        except (OSError, ValueError, RecursionError):
            continue
        payload = data.get("payload", data) if isinstance(data, dict) else None
        if not isinstance(payload, dict):
            continue
        if isinstance(payload.get("forked_from_id"), str):
            found.add(payload["forked_from_id"])
            forks.add(path)
        own = str(payload["id"]) if isinstance(payload.get("id"), str) else ""
        present.add(own)
        parent = _spawned_by(payload.get("source"))
        if parent and parent != own:
            spawned[path] = (own, parent)
    above = {own: parent for own, parent in spawned.values() if own}
    parents: dict[Path, str] = {}
    for path, (_own, parent) in spawned.items():
        seen = {parent}
        while parent in above and above[parent] not in seen:  # a subagent's subagent: to the top
            parent = above[parent]
            seen.add(parent)
        parents[path] = parent
    return found, forks, parents, present


def _spawned_by(source: Any) -> str | None:
    """The thread id a subagent thread's ``session_meta.source`` names as its parent."""
    if not isinstance(source, dict):
        return None
    subagent = source.get("subagent")
    spawn = subagent.get("thread_spawn") if isinstance(subagent, dict) else None
    parent = spawn.get("parent_thread_id") if isinstance(spawn, dict) else None
    return parent if isinstance(parent, str) and parent else None


register(SessionReader(AGENT, "codex_dir", "--codex-dir", "Codex sessions folder", plan, len, read))
