"""``brain mcp``: a stdio MCP server agents call mid-session (SPEC §15), on the official SDK.

Tools: ``search``, ``get_arc``, ``feed``, ``status``; with writes enabled (setting
``mcp_writes``, env ``BRAIN_MCP_WRITES``, off by default) also ``remember`` and
``raise_signal``, which write one note into ``raw/inbox/`` through the writer (redacted,
marker syntax removed, length-capped, at most ``mcp_writes_per_session`` per server process,
which is one agent session over stdio). The next tick drains the inbox into arcs.

Every failure a caller can cause (a bad argument, an unknown arc, the write limit) is a tool
error the model reads; nothing it sends can crash the server or write outside the vault.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from brain import __version__
from brain.core import inbox
from brain.core.model import CLUSTER_ID_RE, parse_text
from brain.core.redaction import redact, redact_obj
from brain.core.sections import headings
from brain.core.vocab import INBOX
from brain.io.atomic import read_regular
from brain.search import index
from brain.search.query import KINDS
from brain.search.service import Syncer
from brain.settings import Settings

SERVER_NAME = "brain"
MAX_LIMIT = 50
#: How long a write waits for a tick holding the vault lock before the tool says "try again".
LOCK_WAIT_SECONDS = 10.0
ARC_FOLDERS = ("clusters", "frontal-lobe", "amygdala", "pineal", "left", "right")
INSTRUCTIONS = (
    "Brain is the shared memory of this fleet of coding agents: arcs (one per stretch of work) with "
    "lessons, decisions, signals and todos. Call `search` before repeating an investigation, `get_arc` "
    "to read one arc, `feed` for the context a session in a folder starts with."
)

SEARCH_DOC = """Full-text search over the team's memory: arcs and their lessons, decisions, signals, todos, injects.
Returns {"hits": [...]}, best first; each hit has cluster_id, path, line, kind, project, title, a
snippet of the matching text, score, heat and last_active. A merged or split arc lists its successors:
read those instead. Use a few specific words ("webhook retry jitter"), optionally kind (arc, lesson,
decision, signal, todo, inject), project (exact name) and limit (1-50, default 10)."""

GET_ARC_DOC = """One arc by cluster_id (as a search hit names it): {"path", "frontmatter", "sections":
[{"heading", "text"}], "markers": [{"type", "attrs", "text", "line"}], "edges": [{"type", "target"}]}.
Tombstones (status merged or split) name their successors in merged_into / split_into."""

FEED_DOC = """The boot context a session started in `cwd` receives: that project's handoff (where work
stopped), open signals, recent arcs, lessons, decisions and injected notes, as markdown within the feed
budget. Omit cwd for the folder this server runs in. Empty text: no feed yet (the tick has not run)."""

STATUS_DOC = """Health of the memory: {"last_tick": the last tick's row (time, arcs, signals, lessons,
feed tokens, duration, exit code, health score), "indexed": searchable items per kind, "alarms":
active critical/nuclear alarms, "inbox_pending": notes waiting for the next tick, "writes_enabled"}."""

REMEMBER_DOC = """Leave a note for future sessions: kind lesson (what you learned), decision (what was
decided and why) or todo (what is left to do), and the text (one short paragraph). It lands in the
inbox and the next tick adds it to the project's current arc and feed. project: the project name, or
cwd: its folder (default: this server's folder). Returns {"written": inbox path, "journal": the
write's journal id (an operator's `brain undo --tick` takes it back), "remaining": writes left this
session}. Secrets are redacted; do not rely on it."""

RAISE_SIGNAL_DOC = """Report a problem other sessions must know about: severity (info, warning, critical,
nuclear), source (a short slug like ci or billing-webhook) and text. Critical and nuclear signals reach
every session's feed and the on-call alarm stream after the next tick. project / cwd as for remember.
Returns {"written": inbox path, "journal": its journal id, "remaining": writes left this session}."""


@dataclass
class WriteBudget:
    """Per-session write limit: one stdio server process serves one agent session."""

    limit: int
    session: str = field(default_factory=lambda: secrets.token_hex(4))
    used: int = 0

    def take(self) -> int:
        if self.used >= self.limit:
            raise ToolError(f"write limit reached: {self.limit} notes per session (setting mcp_writes_per_session)")
        self.used += 1
        return self.used


def _limit(value: int) -> int:
    if not 1 <= value <= MAX_LIMIT:
        raise ToolError(f"limit must be between 1 and {MAX_LIMIT}")
    return value


def _kind(value: str | None) -> str | None:
    if value is not None and value not in KINDS:
        raise ToolError(f"kind must be one of {', '.join(KINDS)}")
    return value


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class BrainTools:
    """The tools' bodies, independent of the transport (the SDK only registers them)."""

    def __init__(self, settings: Settings, *, clock: Callable[[], datetime], cwd: str | None):
        self.settings = settings
        self.vault = settings.vault_path
        self.clock = clock
        self.cwd = cwd
        self.sync = Syncer(settings)
        self.budget = WriteBudget(settings.mcp_writes_per_session)

    # --- reading --------------------------------------------------------------------------

    def search(self, query: str, kind: str | None = None, project: str | None = None, limit: int = 10) -> dict[str, Any]:
        kind, limit = _kind(kind), _limit(limit)
        try:
            self.sync()
        except (OSError, sqlite3.Error) as exc:  # an index a bit behind beats no answer
            print(f"brain mcp: index sync failed: {exc}", file=sys.stderr)
        try:
            hits = index.search(self.vault, query, project=project, kind=kind, limit=limit)
        except index.SearchIndexError as exc:
            raise ToolError(f"the search index is not available: {exc}") from None
        except sqlite3.OperationalError as exc:
            raise ToolError(f"the search index is busy ({exc}); try again in a moment") from None
        return {"hits": [h.as_dict() for h in hits]}

    def _arc_file(self, cluster_id: str) -> Path:
        if not CLUSTER_ID_RE.match(cluster_id):
            raise ToolError("cluster_id is not a valid arc id (letters, digits, '.', '_', '-')")
        candidates = []
        name = f"{cluster_id}.md"
        rel = index.arc_path(self.vault, cluster_id)
        if rel is not None and rel.rsplit("/", 1)[-1] == name:
            candidates.append(self.vault / rel)
        for top in ARC_FOLDERS:
            root = self.vault / top
            if root.is_dir():
                candidates.extend(p for p in root.rglob(name) if not p.is_symlink())
        base = self.vault.resolve()
        for path in candidates:
            try:
                if path.is_file() and path.resolve().is_relative_to(base):
                    return path
            except OSError:
                continue
        raise ToolError(f"no arc {cluster_id} in the vault (search first: ids come from hits)")

    def get_arc(self, cluster_id: str) -> dict[str, Any]:
        path = self._arc_file(cluster_id.strip())
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ToolError(f"cannot read the arc: {exc}") from None
        parsed = parse_text(text)
        if parsed.document is None:
            raise ToolError("the arc's frontmatter does not parse; an operator has to fix the file")
        body = parsed.document.body
        lines = body.split("\n")
        sections = []
        marks = headings(lines)
        for n, (at, heading) in enumerate(marks):
            end = marks[n + 1][0] if n + 1 < len(marks) else len(lines)
            sections.append({"heading": heading, "text": redact("\n".join(lines[at + 1:end]).strip())})
        markers = [
            {"type": m.type, "attrs": dict(m.attrs), "text": redact(m.text), "line": m.line}
            for m in parsed.markers
        ]
        edges = [{"type": m.attr("type"), "target": m.attr("target")} for m in parsed.markers if m.type == "edge"]
        return {
            "path": path.relative_to(self.vault).as_posix(),
            "frontmatter": _jsonable(redact_obj(parsed.meta or {})),
            "sections": sections,
            "markers": markers,
            "edges": edges,
        }

    def feed(self, cwd: str | None = None) -> str:
        return boot_feed(self.settings, cwd or self.cwd, self.clock())

    def status(self) -> dict[str, Any]:
        health = self.settings.feed_dir / "health.jsonl"
        last: dict[str, Any] | None = None
        try:
            tail = read_regular(health, 65536, tail=True).decode("utf-8", "replace").strip().splitlines()
            for line in reversed(tail):
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    last = row
                    break
        except OSError:
            last = None
        alarms = []
        folder = self.vault / "amygdala"
        if folder.is_dir():
            alarms = sorted(p.stem for p in folder.glob("*.md") if not p.is_symlink())
        pending = self.vault / INBOX
        return {
            "last_tick": last,
            "indexed": index.counts(self.vault),
            "alarms": alarms,
            "alarm_feed_active": (self.settings.feed_dir / "amygdala-active.md").is_file(),
            "inbox_pending": len(list(pending.glob("*.md"))) if pending.is_dir() else 0,
            "writes_enabled": self.settings.mcp_writes,
        }

    # --- writing (only registered when enabled) ------------------------------------------------

    def _project(self, project: str | None, cwd: str | None) -> str:
        if project is not None and project.strip():
            return project
        folder = cwd or self.cwd
        if not folder:
            raise ToolError("pass project (a name) or cwd (the project's folder)")
        from brain.core.project import project_name

        return project_name(folder)

    def _write(self, kind: str, text: str, project: str, *, severity: str | None = None,
               source: str | None = None) -> dict[str, Any]:
        from brain.core.plan import Plan, WriteFile
        from brain.io.transaction import transaction
        from brain.io.writer import LockHeld
        from brain.pipeline.tick import new_tick_id

        now = self.clock()
        try:
            content = inbox.render_note(kind, text, project=project, created=now,
                                        max_chars=self.settings.mcp_write_max_chars, severity=severity,
                                        source=source, session=self.budget.session)
        except inbox.InboxError as exc:
            raise ToolError(str(exc)) from None
        n = self.budget.take()
        rel = f"{INBOX}/{now.strftime('%Y%m%dT%H%M%SZ')}-{self.budget.session}-{n}.md"
        # A new file, never a replacement, in a journaled transaction of its own (`brain undo --tick ID`
        # removes it); a tick holding the vault lock is waited for, briefly.
        journal = new_tick_id(self.vault, now, "mcp")
        try:
            with transaction(self.vault, "mcp", journal, now, recover=False, wait_seconds=LOCK_WAIT_SECONDS) as tx:
                result = tx.apply(Plan([WriteFile(rel, content.encode("utf-8"), reason=f"mcp {kind}")]))
        except (LockHeld, OSError) as exc:
            raise ToolError(f"could not write the note now ({exc}); try again in a minute") from None
        if rel not in result.written:
            why = "; ".join(p.message for p in result.problems) or "not written"
            raise ToolError(f"could not write the note: {why}")
        return {"written": rel, "journal": journal, "remaining": self.budget.limit - self.budget.used,
                "next": "the next tick adds it to the project's arc and feed"}

    def remember(self, kind: str, text: str, project: str | None = None, cwd: str | None = None) -> dict[str, Any]:
        if kind not in ("lesson", "decision", "todo"):
            raise ToolError("kind must be lesson, decision or todo (use raise_signal for problems)")
        return self._write(kind, text, self._project(project, cwd))

    def raise_signal(self, severity: str, source: str, text: str, project: str | None = None,
                     cwd: str | None = None) -> dict[str, Any]:
        return self._write("signal", text, self._project(project, cwd), severity=severity, source=source)


def boot_feed(settings: Settings, cwd: str | None, now: datetime) -> str:
    """The session-start context for ``cwd``: the one call into the hook's feed builder."""
    from brain.pipeline.hook import context_for

    return context_for(settings, cwd, now).text


def build_server(settings: Settings, *, clock: Callable[[], datetime], cwd: str | None) -> MCPServer[Any]:
    tools = BrainTools(settings, clock=clock, cwd=cwd)
    server: MCPServer[Any] = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, version=__version__,
                                       log_level="WARNING")
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writing = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                              open_world_hint=False)
    server.add_tool(tools.search, name="search", description=SEARCH_DOC, annotations=reading)
    server.add_tool(tools.get_arc, name="get_arc", description=GET_ARC_DOC, annotations=reading)
    server.add_tool(tools.feed, name="feed", description=FEED_DOC, annotations=reading)
    server.add_tool(tools.status, name="status", description=STATUS_DOC, annotations=reading)
    if settings.mcp_writes:
        server.add_tool(tools.remember, name="remember", description=REMEMBER_DOC, annotations=writing)
        server.add_tool(tools.raise_signal, name="raise_signal", description=RAISE_SIGNAL_DOC, annotations=writing)
    return server


def serve(settings: Settings, *, clock: Callable[[], datetime], cwd: str | None) -> None:
    """Serve over stdio until the client closes the connection."""
    build_server(settings, clock=clock, cwd=cwd).run("stdio")
