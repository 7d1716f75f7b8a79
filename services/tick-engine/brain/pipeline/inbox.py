"""Draining ``raw/inbox/`` into arcs (SPEC §15): read what the plan needs, plan, apply safely.

:func:`drain_inbox` reads the inbox notes and their target arcs named by the scan and returns
the plan (:func:`brain.core.inbox.plan_inbox`). :func:`apply_drain` applies it in two steps
(through the tick's transaction, or any apply function):
the arc writes first, then, only when every one of them landed, the inbox deletions, so a
note is never deleted while its block is missing from the arc (the next tick retries; a
block already present is never added twice). :func:`run_drain` does all of it under the
vault lock with a journal, for callers outside the tick (tests, operators).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from brain.core.inbox import arcs_to_read, inbox_paths, plan_inbox
from brain.core.model import Note, Problem
from brain.core.plan import DeleteFile, Plan
from brain.core.project import project_name
from brain.io import writer
from brain.io.transaction import Preview, transaction
from brain.io.vault import ChangedError, read_current
from brain.settings import Settings


def drain_inbox(vault: Path, snapshot_notes: Iterable[Note], now: datetime, settings: Settings) -> tuple[Plan, list[Problem]]:
    """The plan that drains the inbox notes of this scan, and the notes it could not drain."""
    notes = list(snapshot_notes)
    paths = inbox_paths(notes)
    if not paths:
        return Plan(), []
    by_path = {n.path: n for n in notes}
    texts: dict[str, str] = {}
    problems: list[Problem] = []
    for rel in paths:
        note = by_path[rel]
        try:
            texts[rel] = read_current(vault, note)
        except (ChangedError, UnicodeDecodeError):
            if note.parsed:
                problems.append(Problem(rel, None, "inbox note changed since the scan; the next tick drains it"))
    arc_texts: dict[str, str] = {}
    for target in arcs_to_read(notes, texts, settings, project_name):
        try:
            arc_texts[target.path] = read_current(vault, target)
        except (ChangedError, UnicodeDecodeError):
            continue  # plan_inbox reports the notes it could not place
    plan, planned_problems = plan_inbox(notes, texts, now, settings, arc_texts=arc_texts, project_of=project_name)
    return plan, problems + planned_problems


def apply_drain(plan: Plan, apply: Callable[[Plan], writer.ApplyResult]) -> writer.ApplyResult:
    """Apply a drain plan with ``apply`` (the tick's transaction, or the writer): the arc writes,
    then the inbox deletions only if every write landed."""
    writes = Plan([op for op in plan.operations if not isinstance(op, DeleteFile)])
    deletes = Plan([op for op in plan.operations if isinstance(op, DeleteFile)])
    result = apply(writes)
    if result.conflicts or result.problems:
        result.problems.extend(Problem(op.path, None, "inbox note kept: its arc could not be written; "
                                       "the next tick retries") for op in deletes.operations
                               if isinstance(op, DeleteFile))
        return result
    result.merge(apply(deletes))
    return result


def run_drain(settings: Settings, now: datetime, *, dry_run: bool = False) -> tuple[str | None, writer.ApplyResult]:
    """Drain the inbox on its own, under the vault lock, journaled (``brain undo --tick ID`` restores).

    Returns the journal id (None when nothing was written) and what changed.
    """
    from brain.pipeline.tick import new_tick_id
    from brain.search.service import scan_notes

    vault = settings.vault_path
    tick_id = new_tick_id(vault, now, "inbox")
    if dry_run:
        plan, problems = drain_inbox(vault, scan_notes(settings), now, settings)
        result = apply_drain(plan, Preview(vault).apply)
    else:  # the one transaction: recovery first, and the old images swapped out unlinked at its end
        with transaction(vault, "inbox", tick_id, now) as tx:
            plan, problems = drain_inbox(vault, scan_notes(settings), now, settings)
            result = apply_drain(plan, tx.apply)
        problems = tx.recovered + problems + tx.late
    result.problems[:0] = problems
    return (tick_id if result.changed and not dry_run else None), result
