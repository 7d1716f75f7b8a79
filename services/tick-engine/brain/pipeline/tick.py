"""The tick: keeper → prompt → llm → apply → verify, under the vault lock (SPEC §1, §2, §9)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from brain import __version__
from brain.core import feed
from brain.core.keeper import KeeperDecisions, in_conscious, valid_until
from brain.core.model import Note, Problem
from brain.core.prompt import candidate_report
from brain.core.timeutil import iso, parse_instant
from brain.core.vocab import TOMBSTONE_STATUSES
from brain.io import writer
from brain.io.atomic import append_line, atomic_write
from brain.io.vault import Snapshot, feed_relative, listing_of, save_cache, scan
from brain.pipeline.keeper import KeeperPlan, plan_keeper, write_external_feed
from brain.settings import Settings

EXIT_OK, EXIT_VERIFY, EXIT_LOCKED, EXIT_AI = 0, 1, 3, 4


@dataclass
class AIOutcome:
    """What the AI phases (prompt, llm, apply) report back to the tick."""

    phases: dict[str, dict[str, Any]]
    result: writer.ApplyResult = field(default_factory=writer.ApplyResult)
    diff_lines: list[str] = field(default_factory=list)
    intent: str | None = None
    rejected: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    failed: bool = False
    health: dict[str, Any] = field(default_factory=dict)
    edges_added: int = 0


#: (settings, snapshot, keeper plan, now, journal, dry_run) -> AIOutcome
AIPhase = Callable[[Settings, Snapshot, KeeperPlan, datetime, "writer.Journal | None", bool], AIOutcome]


@dataclass
class TickReport:
    tick_id: str
    now: datetime
    dry_run: bool
    no_ai: bool
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)
    stats: dict[str, int] = field(default_factory=dict)
    result: writer.ApplyResult = field(default_factory=writer.ApplyResult)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    exit_code: int = EXIT_OK
    health: dict[str, Any] = field(default_factory=dict)
    amygdala_failed: bool = False

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


def new_tick_id(vault: Path, now: datetime, kind: str = "tick") -> str:
    base = now.strftime("%Y%m%dT%H%M%SZ") + f"-{kind}"
    root = vault / writer.JOURNAL_DIR
    candidate, n = base, 1
    while (root / candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


STATE_FILE = ".brain/tick-state.json"


def fingerprint(s: Settings, listing: list[tuple[str, os.stat_result]], feed_dir: Path) -> str:
    """Everything a deterministic plan depends on, except the clock: files, settings, code."""
    digest = hashlib.sha1(usedforsecurity=False)
    tunables = {k: str(v) for k, v in dataclasses.asdict(s).items() if k not in ("now", "llm_api_key", "redis_url")}
    digest.update(json.dumps([__version__, tunables], sort_keys=True).encode())
    for rel, st in sorted(listing, key=lambda item: item[0]):
        digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    if feed_dir.is_dir():
        for path in sorted(feed_dir.glob("*.md")):
            st = path.stat()
            digest.update(f"feed:{path.name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _load_state(vault: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((vault / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


def run_tick(
    s: Settings,
    now: datetime,
    *,
    no_ai: bool,
    dry_run: bool,
    ai_phase: AIPhase | None = None,
    ai_skip_reason: str | None = None,
    keeper_only: bool = False,
) -> TickReport:
    vault = s.vault_path
    feed_dir = s.feed_dir
    tick_id = new_tick_id(vault, now)
    report = TickReport(tick_id, now, dry_run, no_ai or ai_phase is None)
    started = time.perf_counter()
    if dry_run:
        _run_locked(report, s, now, vault, feed_dir, ai_phase, ai_skip_reason, keeper_only)
    else:
        with writer.vault_lock(vault, "keeper" if keeper_only else "tick"):
            _run_locked(report, s, now, vault, feed_dir, ai_phase, ai_skip_reason, keeper_only)
    duration = _ms(started)
    report.health = {
        "timestamp": iso(now),
        "tick_id": tick_id,
        "arcs": report.stats.get("arcs", 0),
        "signals": report.stats.get("signals_active", 0),
        "lessons": report.stats.get("lessons", 0),
        "edges": report.stats.get("edges", 0),
        "conscious": report.stats.get("conscious", 0),
        "feed_tokens": report.stats.get("feed_tokens", 0),
        "duration_ms": duration,
        "changes": len(report.result.written) + len(report.result.moved) + len(report.result.deleted),
        "problems": len(report.problems),
        "exit_code": report.exit_code,
        "score": None,
        "reason": None,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
    }
    report.health.update(report.phases.get("llm", {}).get("health", {}))
    if not dry_run and not keeper_only:
        append_line(feed_dir / "health.jsonl", json.dumps(report.health, sort_keys=False))
    return report


def _run_locked(
    report: TickReport,
    s: Settings,
    now: datetime,
    vault: Path,
    feed_dir: Path,
    ai_phase: AIPhase | None,
    ai_skip_reason: str | None,
    keeper_only: bool,
) -> None:
    dry_run = report.dry_run
    if not dry_run:
        for recovered in writer.recover(vault):
            report.problems.append(Problem(
                f"{writer.JOURNAL_DIR}/{recovered.tick_id}", None,
                f"rolled back an interrupted tick ({len(recovered.restored)} files restored"
                + (f"; kept edits made since in {', '.join(recovered.conflicts)}" if recovered.conflicts else "")
                + ")",
            ))
    journal = None if dry_run else writer.Journal(vault, report.tick_id, now)

    # Phase 1: keeper. An unchanged vault inside the last plan's validity window plans nothing:
    # stop after listing the files (SPEC §14, steady state).
    t = time.perf_counter()
    listing = listing_of(vault, feed_dir)
    if (
        ai_phase is None
        and not keeper_only
        and not report.problems
        and _fast_path(report, s, now, vault, feed_dir, listing, t, ai_skip_reason or "--no-ai")
    ):
        return
    snapshot = scan(vault, feed_dir=feed_dir, max_note_bytes=s.max_note_bytes, write_cache=False,
                    listing=listing, keep_bytes=not dry_run)
    report.problems.extend(snapshot.problems)
    kplan = plan_keeper(snapshot, now, s, feed_dir=feed_dir, tick_id=report.tick_id)
    report.problems.extend(kplan.problems)
    result = writer.apply_plan(vault, kplan.plan, journal=journal, dry_run=dry_run)
    _external_feed(report, vault, feed_dir, kplan, dry_run)
    report.result.merge(result)
    report.problems.extend(result.problems)
    decisions = kplan.decisions
    report.phases["keeper"] = {
        "ms": _ms(t),
        "files": snapshot.stats.files,
        "parsed": snapshot.stats.parsed,
        "cached": snapshot.stats.cached,
        "scan_ms": round(snapshot.stats.ms, 2),
        "planned": len(kplan.plan.operations),
    }
    final_plan = kplan

    # Phases 2-4: the AI layer.
    if keeper_only:
        pass
    elif ai_phase is None:
        reason = ai_skip_reason or "--no-ai"
        for name in ("prompt", "llm", "apply"):
            report.phases[name] = {"skipped": reason}
        report.phases["prompt"].update(candidate_report(snapshot.notes.values()))
    else:
        snapshot = scan(vault, feed_dir=feed_dir, max_note_bytes=s.max_note_bytes, write_cache=False,
                        known=kplan.predicted)
        outcome = ai_phase(s, snapshot, kplan, now, journal, dry_run)
        report.phases.update(outcome.phases)
        report.result.merge(outcome.result)
        report.rejected.extend(outcome.rejected)
        report.problems.extend(outcome.problems)
        if outcome.failed:
            report.exit_code = EXIT_AI
        if outcome.result.changed or outcome.intent is not None or outcome.diff_lines:
            # Re-run the keeper so arcs changed by apply get their heat and place in this same tick.
            t = time.perf_counter()
            snapshot = scan(vault, feed_dir=feed_dir, max_note_bytes=s.max_note_bytes, write_cache=False)
            final_plan = plan_keeper(
                snapshot, now, s, feed_dir=feed_dir, tick_id=report.tick_id,
                extra_diff=kplan.diff_lines + outcome.diff_lines, intent_text=outcome.intent,
            )
            result = writer.apply_plan(vault, final_plan.plan, journal=journal, dry_run=dry_run)
            _external_feed(report, vault, feed_dir, final_plan, dry_run)
            report.result.merge(result)
            report.problems.extend(result.problems + final_plan.problems)
            decisions = final_plan.decisions
            report.phases["keeper"]["ms"] += _ms(t)
        report.phases.setdefault("llm", {})["health"] = outcome.health
        report.stats["edges_added"] = outcome.edges_added
    if journal is not None:
        journal.complete()

    # Phase 5: verify (a tick that wrote nothing verified the very snapshot it planned from).
    t = time.perf_counter()
    if report.result.changed or dry_run:
        failures = verify_vault(s, now, vault, feed_dir, report.result, dry_run=dry_run, known=final_plan.predicted)
    else:
        failures = _duplicate_failures(snapshot)
        if not dry_run:
            save_cache(snapshot)
    report.phases["verify"] = {"ms": _ms(t), "ok": not failures, "failures": [f.as_dict() for f in failures]}
    if failures:
        report.problems.extend(failures)
        report.exit_code = EXIT_VERIFY

    _publish_alarms(report, s, now, vault, snapshot)

    markers_all = [m for note in snapshot.notes.values() for m in note.markers]
    report.stats.update({
        "arcs": len(decisions.arcs) + sum(len(p) for p in decisions.duplicates.values()),
        "promoted": kplan.decisions.count("promoted"),
        "demoted": kplan.decisions.count("demoted"),
        "graduated": kplan.decisions.count("graduated"),
        "heat_changed": kplan.decisions.heat_changed,
        "signals_active": final_plan.signals_active,
        "inject_blocks": final_plan.inject_blocks,
        "lessons": sum(1 for m in markers_all if m.type == "lesson"),
        "edges": sum(1 for m in markers_all if m.type == "edge"),
        "conscious": _conscious(decisions),
        "feed_tokens": final_plan.feed_tokens,
    })
    if not dry_run:
        writer.prune_journals(vault, s.journal_keep)
        _save_state(report, s, now, vault, feed_dir, decisions)


def _publish_alarms(report: TickReport, s: Settings, now: datetime, vault: Path, snapshot: Snapshot) -> None:
    """Critical and nuclear signals reach the fleet over Redis, once per state change (SPEC §11)."""
    if not s.redis_url:
        return
    from brain.core.amygdala import PublishedSignal
    from brain.core.redaction import redact
    from brain.core.vocab import ALARM_SEVERITIES
    from brain.io.amygdala import publish_signal_changes

    alarms = [
        PublishedSignal(
            arc=note.arc.cluster_id if note.arc is not None else note.path.removesuffix(".md"),
            source=marker.attr("source") or "",
            severity=marker.attr("severity") or "",
            text=redact(" ".join(marker.text.split())),
        )
        for note in snapshot.notes.values()
        if not (note.path.startswith("amygdala/"))  # alarms the consumer wrote are not re-published
        for marker in note.markers
        if marker.type == "signal" and marker.attr("severity") in ALARM_SEVERITIES
    ]
    published = publish_signal_changes(s, vault, alarms, report.tick_id, now, dry_run=report.dry_run)
    report.phases["keeper"]["amygdala"] = published.as_dict()
    if published.error:
        report.amygdala_failed = True
        report.problems.append(Problem(".brain/amygdala-published.json", None,
                                       f"amygdala publish failed ({published.error}); the next tick publishes"))


def _fast_path(report: TickReport, s: Settings, now: datetime, vault: Path, feed_dir: Path,
               listing: list[tuple[str, os.stat_result]], started: float, skip_reason: str) -> bool:
    state = _load_state(vault)
    if state is None or state.get("fingerprint") != fingerprint(s, listing, feed_dir):
        return False
    since, until = parse_instant(state.get("now")), parse_instant(state.get("valid_until"))
    if since is None or until is None or not since <= now <= until:
        return False
    report.stats = dict(state.get("stats", {}))
    report.problems = [Problem(**p) for p in state.get("problems", [])]
    report.phases["keeper"] = {"ms": _ms(started), "files": len(listing), "parsed": 0, "cached": 0,
                               "unchanged_since": state.get("tick_id")}
    for name in ("prompt", "llm", "apply"):
        report.phases[name] = {"skipped": skip_reason}
    report.phases["prompt"].update(state.get("candidates", {}))
    report.phases["verify"] = {"ms": 0.0, "ok": True, "failures": [],
                               "unchanged_since": state.get("tick_id")}
    return True


def _save_state(report: TickReport, s: Settings, now: datetime, vault: Path, feed_dir: Path,
                decisions: KeeperDecisions) -> None:
    """Remember this verified outcome so an unchanged vault can skip the work next time."""
    path = vault / STATE_FILE
    if (
        report.exit_code != 0
        or report.result.conflicts
        or report.amygdala_failed
        or report.phases.get("apply", {}).get("ms") is not None
    ):
        path.unlink(missing_ok=True)
        return
    state = {
        "tick_id": report.tick_id,
        "now": iso(now),
        "valid_until": iso(valid_until(decisions, now, s)),
        "fingerprint": fingerprint(s, listing_of(vault, feed_dir), feed_dir),
        "stats": report.stats,
        "problems": [p.as_dict() for p in report.problems],
        "candidates": {k: v for k, v in report.phases.get("prompt", {}).items() if k.startswith("candidates")},
    }
    atomic_write(path, json.dumps(state).encode())


def _duplicate_failures(snapshot: Snapshot) -> list[Problem]:
    return [
        Problem(notes[0].path, None, f"verify: cluster_id {cid} is in {len(notes)} files: "
                + ", ".join(sorted(n.path for n in notes)))
        for cid, notes in sorted(snapshot.arcs_by_id().items())
        if len(notes) > 1
    ]


def _conscious(decisions: KeeperDecisions) -> int:
    """Live arcs in conscious (tombstones never move, so they do not count against the cap)."""
    return sum(1 for d in decisions.arcs.values() if in_conscious(d.path) and d.status not in TOMBSTONE_STATUSES)


def _external_feed(report: TickReport, vault: Path, feed_dir: Path, kplan: KeeperPlan, dry_run: bool) -> None:
    if feed_relative(vault, feed_dir) is None:
        report.result.written.extend(write_external_feed(feed_dir, kplan.feed_files, dry_run=dry_run))


def verify_vault(
    s: Settings,
    now: datetime,
    vault: Path,
    feed_dir: Path,
    result: writer.ApplyResult,
    *,
    dry_run: bool,
    known: dict[str, Note] | None = None,
) -> list[Problem]:
    """SPEC §9 invariants on the vault as it is now; returns the failures.

    It re-scans the vault. ``known`` are the notes the keeper predicted for the files it
    wrote: a file whose bytes hash to its prediction is not parsed again (the prediction is
    exact; tests compare it with a real parse), any other file is.
    """
    failures: list[Problem] = []
    snapshot = scan(vault, feed_dir=feed_dir, max_note_bytes=s.max_note_bytes, write_cache=not dry_run,
                    known=known)
    failures.extend(_duplicate_failures(snapshot))
    written = set(result.written) | {dst for _, dst in result.moved}
    rel = feed_relative(vault, feed_dir)
    for path in sorted(written):
        note = snapshot.notes.get(path)
        if path.endswith(".md") and (rel is None or not path.startswith(rel + "/")) and note is not None and not note.parsed:
            failures.append(Problem(path, None, "verify: a file this tick wrote does not parse"))
    if dry_run:
        return failures
    check = plan_keeper(snapshot, now, s, feed_dir=feed_dir)
    conscious = _conscious(check.decisions)
    if conscious > s.conscious_cap:
        failures.append(Problem("frontal-lobe/conscious", None,
                                f"verify: {conscious} arcs in conscious, cap is {s.conscious_cap}"))
    # Feed budget: may only be exceeded by what is never cut (nuclear signals, top hot arcs, headers);
    # the keeper's own re-plan tells how small the feed can get.
    if feed_dir.is_dir():
        total = sum(feed.tokens(p.read_text(encoding="utf-8", errors="replace")) for p in feed_dir.glob("*.md"))
        if total > max(s.feed_token_budget, check.feed_tokens):
            failures.append(Problem(rel or str(feed_dir), None,
                                    f"verify: feed is {total} tokens, budget {s.feed_token_budget}"))
    second = writer.apply_plan(vault, _without_owned_feed(check, rel), journal=None, dry_run=True)
    pending = [p for p in second.written + [f"{a} → {b}" for a, b in second.moved]
               if not any(p.startswith(c) for c in result.conflicts)]  # files left for the next tick
    if pending:
        failures.append(Problem(pending[0], None,
                                f"verify: a second pass would still change {len(pending)} files: "
                                + ", ".join(pending[:5])))
    return failures


def _without_owned_feed(check: KeeperPlan, rel: str | None) -> Any:
    """The second-pass plan minus AI-owned feed files the keeper alone would not produce."""
    from brain.core.plan import Plan, WriteFile

    plan = Plan()
    for op in check.plan.operations:
        if isinstance(op, WriteFile) and rel is not None and op.path in (
            f"{rel}/{feed.LAST_DIFF}", f"{rel}/{feed.INTENT}"
        ):
            continue
        plan.add(op)
    return plan
