"""What a tick reports, phase by phase, as typed values; JSON only at the edge (:meth:`TickReport.as_dict`).

Control flow reads fields (``report.ai.apply.ran``), never probes nested dicts. Each phase
report turns into the JSON object ``brain tick --json`` has always printed for it: a phase
that did not run is ``{"skipped": "<why>"}`` (the ``--no-ai`` prompt also carries the
candidate pairs), one that failed carries ``error``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from brain.core.model import Problem
from brain.core.snapshot import ScanDelta
from brain.core.timeutil import iso
from brain.io import writer


@dataclass
class KeeperReport:
    ms: float = 0.0
    files: int = 0
    parsed: int = 0
    cached: int = 0
    scan_ms: float | None = None
    planned: int | None = None
    remembered: int | None = None  # arcs whose heat the memo gave (not recomputed)
    unchanged_since: str | None = None
    amygdala: dict[str, Any] | None = None
    quiet: bool = False  # the notes came from the last tick's view, not a scan of every file

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ms": self.ms, "files": self.files, "parsed": self.parsed, "cached": self.cached}
        if self.quiet:
            data["quiet"] = True
        if self.unchanged_since is not None:
            data["unchanged_since"] = self.unchanged_since
        else:
            data["scan_ms"] = self.scan_ms
            data["planned"] = self.planned
            data["remembered"] = self.remembered
        if self.amygdala is not None:
            data["amygdala"] = self.amygdala
        return data


@dataclass
class PromptReport:
    """Phase 2. ``candidates``: the candidate pairs as the report shows them (the first ones and
    the total, :func:`brain.core.candidates.candidate_summary`), with or without an LLM."""

    skipped: str | None = None
    ms: float | None = None
    tokens: int = 0
    budget: int = 0
    sections: dict[str, Any] = field(default_factory=dict)
    candidates: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        if self.skipped is not None:
            return {"skipped": self.skipped, **self.candidates}
        return {"ms": self.ms, "tokens": self.tokens, "budget": self.budget, "sections": self.sections,
                **self.candidates}


@dataclass
class LLMReport:
    """Phase 3: the one call. ``completion``: :meth:`brain.io.llm.Completion.as_dict` of a call
    that answered; ``error``/``status``/``attempts`` of one that failed; ``answer``: where the
    answer was kept; ``health``: the answer's health row fields (also on a skipped call)."""

    skipped: str | None = None
    ms: float | None = None
    completion: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    status: int | None = None
    attempts: int | None = None
    answer: str | None = None
    health: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any]
        if self.skipped is not None:
            data = {"skipped": self.skipped}
        elif self.error is not None:
            data = {"ms": self.ms, "error": self.error, "status": self.status, "attempts": self.attempts}
        else:
            data = {"ms": self.ms, **self.completion}
            if self.answer is not None:
                data["answer"] = self.answer
        if self.health is not None:
            data["health"] = self.health
        return data


@dataclass
class ApplyReport:
    """Phase 4: what the answer changed (``applied``: per kind), or why nothing was."""

    skipped: str | None = None
    ms: float | None = None
    error: str | None = None
    applied: dict[str, int] = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)
    rejected: int = 0
    read: int = 0
    written: int = 0
    created: int = 0

    @property
    def ran(self) -> bool:
        """The answer was parsed, validated and its plan applied (to the vault or a preview)."""
        return self.skipped is None and self.error is None and self.ms is not None

    def as_dict(self) -> dict[str, Any]:
        if self.skipped is not None:
            return {"skipped": self.skipped}
        if self.error is not None:
            return {"ms": self.ms, "error": self.error}
        return {"ms": self.ms, "applied": self.applied, "changes": self.changes, "rejected": self.rejected,
                "read": self.read, "written": self.written, "created": self.created}


@dataclass
class AIReports:
    """Phases 2-4 as they reported themselves."""

    prompt: PromptReport = field(default_factory=PromptReport)
    llm: LLMReport = field(default_factory=LLMReport)
    apply: ApplyReport = field(default_factory=ApplyReport)

    @classmethod
    def skipped(cls, reason: str, *, prompt: PromptReport | None = None,
                candidates: dict[str, Any] | None = None) -> AIReports:
        """Every AI phase skipped for ``reason``. ``prompt``: the one that did run before the skip;
        else a skipped prompt that still reports ``candidates`` (the ``--no-ai`` report)."""
        asked = prompt or PromptReport(skipped=reason, candidates=candidates or {})
        return cls(asked, LLMReport(skipped=reason), ApplyReport(skipped=reason))

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {"prompt": self.prompt.as_dict(), "llm": self.llm.as_dict(), "apply": self.apply.as_dict()}


@dataclass
class AIOutcome:
    """What the AI phases (prompt, llm, apply) report back to the tick."""

    phases: AIReports
    result: writer.ApplyResult = field(default_factory=writer.ApplyResult)
    diff_lines: list[str] = field(default_factory=list)
    intent: str | None = None
    rejected: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    failed: bool = False
    health: dict[str, Any] = field(default_factory=dict)
    edges_added: int = 0


@dataclass
class VerifyReport:
    ms: float = 0.0
    failures: list[Problem] = field(default_factory=list)
    reread: int = 0
    unchanged_since: str | None = None

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ms": self.ms, "ok": not self.failures,
                                "failures": [f.as_dict() for f in self.failures]}
        if self.unchanged_since is not None:
            data["unchanged_since"] = self.unchanged_since
        else:
            data["reread"] = self.reread
        return data


@dataclass
class TickReport:
    tick_id: str
    now: datetime
    dry_run: bool
    no_ai: bool
    keeper: KeeperReport = field(default_factory=KeeperReport)
    verify: VerifyReport = field(default_factory=VerifyReport)
    #: The AI phases as they reported themselves; skipped ones say why.
    ai: AIReports = field(default_factory=AIReports)
    #: ``brain tick --keeper-only``: the report has no AI phases at all.
    keeper_only: bool = False
    stats: dict[str, int] = field(default_factory=dict)
    result: writer.ApplyResult = field(default_factory=writer.ApplyResult)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    exit_code: int = 0
    health: dict[str, Any] = field(default_factory=dict)
    amygdala_failed: bool = False
    #: What the scan found changed since the last one (post-scan steps such as a search index use it).
    delta: ScanDelta = field(default_factory=ScanDelta)
    feed_rel: str | None = None  # the feed folder inside the vault, if it is there

    @property
    def ai_applied(self) -> bool:
        """An answer was applied this tick (its changes are not the keeper's alone)."""
        return self.ai.apply.ran

    def notes_changed(self) -> ScanDelta:
        """Every note path this tick found or left changed: what the scan saw changed since the
        last one, plus what the tick itself wrote, moved and deleted (feed files excluded)."""
        moved_from = {src for src, _ in self.result.moved}
        feed = f"{self.feed_rel}/" if self.feed_rel else None
        written = {p for p in self.result.written if p.endswith(".md") and not (feed and p.startswith(feed))}
        changed = set(self.delta.changed) | written | {dst for _, dst in self.result.moved}
        removed = (set(self.delta.removed) | moved_from | set(self.result.deleted)) - changed
        return ScanDelta(tuple(sorted(changed - removed)), tuple(sorted(removed)))

    @property
    def phases(self) -> dict[str, dict[str, Any]]:
        ai = {} if self.keeper_only else self.ai.as_dict()
        return {"keeper": self.keeper.as_dict(), **ai, "verify": self.verify.as_dict()}

    def as_dict(self) -> dict[str, Any]:
        seen: set[tuple[str, int | None, str]] = set()
        problems = []
        for p in self.problems:
            key = (p.path, p.line, p.message)
            if key not in seen:
                seen.add(key)
                problems.append(p.as_dict())
        return {
            "tick_id": self.tick_id,
            "now": iso(self.now),
            "dry_run": self.dry_run,
            "no_ai": self.no_ai,
            "phases": self.phases,
            "stats": self.stats,
            "changes": {
                "written": sorted(set(self.result.written)),
                "moved": [list(pair) for pair in self.result.moved],
                "deleted": sorted(set(self.result.deleted)),
            },
            "rejected": self.rejected,
            "problems": problems,
            "exit_code": self.exit_code,
        }
