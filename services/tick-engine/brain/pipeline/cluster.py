"""Phase 0, part 2: a session bundle -> arc files in ``--out-dir`` (SPEC §4, §5).

With a vault (``--vault``, or inferred when ``--out-dir`` is ``<V>/clusters/<date>`` and
``<V>/clusters`` exists) the run takes the vault lock, rolls back a crashed journal, scans
the whole vault with the one scanner, so a session already in an arc anywhere (conscious,
graduated …) updates that arc, and applies one plan through the one writer under a journal
``<timestamp>-cluster`` that ``brain undo`` can restore.

Without a vault, ``--out-dir`` stands alone: the arcs already in that folder are the only
ones known, files are written with the same atomic primitive, and there is no journal.

Dry run computes the same plan and reports it; nothing is written anywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from brain.core.arc_text import RenderedArc, render_new_arc, update_arc_text
from brain.core.frontmatter import FrontmatterError
from brain.core.grouping import ArcUpdate, ExistingArc, assign
from brain.core.model import Note, Problem
from brain.core.plan import Expect, Plan, WriteFile
from brain.core.session import Session, parse_bundle
from brain.settings import Settings


class ClusterError(ValueError):
    """A bad request (out-dir outside the vault, unreadable bundle): a usage error."""


@dataclass
class ClusterReport:
    out_dir: str
    vault: str | None
    mode: str  # "vault" | "standalone"
    dry_run: bool
    tick_id: str | None = None
    sessions: int = 0
    created: list[dict[str, Any]] = field(default_factory=list)
    updated: list[dict[str, Any]] = field(default_factory=list)
    unchanged: int = 0
    written: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "out_dir": self.out_dir,
            "vault": self.vault,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "tick_id": self.tick_id,
            "sessions": self.sessions,
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "written": sorted(self.written),
            "problems": [p.as_dict() for p in self.problems],
        }


@dataclass
class ClusterPlan:
    plan: Plan
    created: list[dict[str, Any]]
    updated: list[dict[str, Any]]
    unchanged: int
    problems: list[Problem]


def resolve_target(out_dir: Path, vault: Path | None) -> tuple[Path | None, str | None]:
    """(vault, out-dir relative to it) or (None, None) for a standalone out-dir."""
    if vault is not None:
        root = vault.resolve()
        target = out_dir if out_dir.is_absolute() else Path.cwd() / out_dir
        try:
            rel = _resolve_parents(target).relative_to(root)
        except ValueError:
            raise ClusterError(f"--out-dir {out_dir} is not inside --vault {vault}") from None
        if not rel.parts or rel.parts[0].startswith("."):
            raise ClusterError(f"--out-dir {out_dir} must be a folder of the vault such as clusters/<date>")
        return root, rel.as_posix()
    target = _resolve_parents(out_dir if out_dir.is_absolute() else Path.cwd() / out_dir)
    clusters = target.parent
    if clusters.name == "clusters" and clusters.is_dir():
        return clusters.parent, f"clusters/{target.name}"
    return None, None


def _resolve_parents(path: Path) -> Path:
    """``path`` with its existing part resolved (symlinks, ``..``), the rest appended."""
    missing: list[str] = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe.name)
        probe = probe.parent
    resolved = probe.resolve()
    for name in reversed(missing):
        if name in ("", ".", ".."):
            raise ClusterError(f"--out-dir {path} is not a plain folder path")
        resolved = resolved / name
    return resolved


def plan_cluster(
    sessions: list[Session],
    arcs: list[tuple[Note, ExistingArc]],
    read_text: Any,
    *,
    out_rel: str,
    settings: Settings,
    now: datetime,
) -> ClusterPlan:
    """The writes that fold ``sessions`` into the arcs: pure apart from ``read_text(note)``."""
    plan = Plan()
    created: list[dict[str, Any]] = []
    updated: list[dict[str, Any]] = []
    problems: list[Problem] = []
    unchanged = 0
    notes = {existing.path: note for note, existing in arcs}
    by_id: dict[str, ExistingArc] = {}
    for _note, existing in sorted(arcs, key=lambda pair: pair[1].path):
        by_id.setdefault(existing.info.cluster_id, existing)
    assignment = assign(sessions, [existing for _note, existing in arcs], settings)
    problems.extend(Problem("<bundle>", None, message) for message in assignment.problems)

    updates = list(assignment.updates)
    for group in assignment.new:
        rendered: RenderedArc = render_new_arc(group, now, settings)
        same = by_id.get(rendered.cluster_id)
        if same is not None:
            # The arc exists (its source_sessions were edited by hand): fold into it, never duplicate.
            listed = set(same.info.source_sessions)
            joined = tuple(s.session_id for s in group.sessions if s.session_id not in listed)
            updates.append(ArcUpdate(same, group.sessions, joined))
            continue
        path = f"{out_rel}/{rendered.cluster_id}.md"
        plan.add(WriteFile(path, rendered.text.encode("utf-8"), expect=None, reason="new arc"))
        created.append({"path": path, "cluster_id": rendered.cluster_id, "title": rendered.title,
                        "sessions": list(rendered.sessions)})

    for update in updates:
        note = notes[update.arc.path]
        try:
            text = read_text(note)
        except Exception as exc:  # ChangedError / OSError / UnicodeDecodeError: report, never guess
            problems.append(Problem(note.path, None, f"not updated: {exc}"))
            continue
        try:
            new_text = update_arc_text(text, update)
        except FrontmatterError as exc:
            problems.append(Problem(note.path, exc.line, f"not updated: {exc.message}"))
            continue
        if new_text == text:
            unchanged += 1
            continue
        plan.add(WriteFile(note.path, new_text.encode("utf-8"), expect=Expect(note.size, note.mtime_ns, note.sha1),
                           reason="arc updated from sessions"))
        updated.append({"path": note.path, "cluster_id": update.arc.info.cluster_id,
                        "sessions": [s.session_id for s in update.sessions], "joined": list(update.joined)})
    return ClusterPlan(plan, created, updated, unchanged, problems)


def run_cluster(
    settings: Settings,
    now: datetime,
    *,
    bundle: Any,
    out_dir: Path,
    vault: Path | None,
    dry_run: bool,
) -> ClusterReport:
    """Fold a parsed bundle into the vault (or a standalone folder) and report what changed."""
    sessions, bundle_problems = parse_bundle(bundle)
    root, out_rel = resolve_target(out_dir, vault)
    if root is not None and out_rel is not None:
        report = ClusterReport(out_rel, str(root), "vault", dry_run, sessions=len(sessions))
        report.problems.extend(Problem("<bundle>", None, m) for m in bundle_problems)
        _run_in_vault(report, settings.replace(vault=root), now, sessions, root, out_rel, dry_run)
    else:
        report = ClusterReport(str(out_dir), None, "standalone", dry_run, sessions=len(sessions))
        report.problems.extend(Problem("<bundle>", None, m) for m in bundle_problems)
        _run_standalone(report, settings, now, sessions, out_dir, dry_run)
    return report


def _run_in_vault(report: ClusterReport, settings: Settings, now: datetime, sessions: list[Session],
                  root: Path, out_rel: str, dry_run: bool) -> None:
    from brain.io.transaction import preview, transaction
    from brain.io.vault import read_current, scan
    from brain.pipeline.tick import new_tick_id

    def planned_for() -> ClusterPlan:
        snapshot = scan(root, feed_dir=settings.feed_dir, max_note_bytes=settings.max_note_bytes,
                        write_cache=not dry_run)
        arcs = [(note, ExistingArc(note.path, note.arc)) for note in snapshot.notes.values()
                if note.arc is not None and note.parsed]
        planned = plan_cluster(sessions, arcs, lambda note: read_current(root, note),
                               out_rel=out_rel, settings=settings, now=now)
        report.created, report.updated, report.unchanged = planned.created, planned.updated, planned.unchanged
        report.problems.extend(planned.problems)
        return planned

    if dry_run:
        result = preview(root, planned_for().plan)
    else:
        tick_id = new_tick_id(root, now, "cluster")
        with transaction(root, "cluster", tick_id, now) as tx:
            report.problems.extend(tx.recovered)
            planned = planned_for()
            result = tx.apply(planned.plan)
            if planned.plan:
                report.tick_id = tick_id
    report.written = list(result.written)
    report.problems.extend(result.problems)


def _run_standalone(report: ClusterReport, settings: Settings, now: datetime, sessions: list[Session],
                    out_dir: Path, dry_run: bool) -> None:
    """A folder outside any vault: its top-level arcs, the one scanner and writer, no lock or journal."""
    from brain.io import writer
    from brain.io.vault import read_current, scan

    listing = []
    if out_dir.is_dir():
        with os.scandir(out_dir) as entries:
            listing = [
                (entry.name, entry.stat(follow_symlinks=False))
                for entry in entries
                if entry.name.endswith(".md") and not entry.name.startswith(".")
                and entry.is_file(follow_symlinks=False)
            ]
    snapshot = scan(out_dir, feed_dir=out_dir / "brain-feed", max_note_bytes=settings.max_note_bytes,
                    write_cache=False, listing=sorted(listing, key=lambda item: item[0]), arcs_anywhere=True)
    arcs = [(note, ExistingArc(note.path, note.arc)) for note in snapshot.notes.values()
            if note.arc is not None and note.parsed]
    planned = plan_cluster(sessions, arcs, lambda note: read_current(out_dir, note), out_rel=".",
                           settings=settings, now=now)
    report.created, report.updated, report.unchanged = planned.created, planned.updated, planned.unchanged
    for item in report.created:
        item["path"] = item["path"].removeprefix("./")
    report.problems.extend(planned.problems)
    if not dry_run:
        out_dir.mkdir(parents=True, exist_ok=True)
    result = writer.apply_plan(out_dir, planned.plan, journal=None, dry_run=dry_run)
    report.written = [path.removeprefix("./") for path in result.written]
    report.problems.extend(result.problems)


def summary_line(report: ClusterReport) -> str:
    verb = "would write" if report.dry_run else "wrote"
    where = report.vault or report.out_dir
    return (f"cluster{' (dry run)' if report.dry_run else ''}: {report.sessions} sessions → "
            f"{len(report.created)} new arcs, {len(report.updated)} updated, {report.unchanged} unchanged; "
            f"{verb} {len(report.written)} files in {where}" + (f" (journal {report.tick_id})" if report.tick_id else ""))

