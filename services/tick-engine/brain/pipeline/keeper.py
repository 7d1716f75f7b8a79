"""Phase 1 as a plan: arc edits and moves, feed files, dashboards — nothing read or written here.

The tick decides (:func:`brain.core.keeper.decide`), reads the texts of the arcs whose file
changes (checked against the scan, :func:`brain.io.vault.read_texts`), and hands both here.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from brain.core import feed, keeper
from brain.core.model import Note, Problem
from brain.core.plan import Expect, MoveFile, Plan, WriteFile
from brain.core.progress import Step, counted
from brain.core.snapshot import Snapshot
from brain.io.atomic import read_regular
from brain.settings import Settings


@dataclass
class KeeperPlan:
    plan: Plan
    decisions: keeper.KeeperDecisions
    feed_files: dict[str, str] = field(default_factory=dict)  # feed name -> text
    feed_tokens: int = 0
    diff_lines: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    inject_blocks: int = 0
    signals_active: int = 0
    predicted: dict[str, Note] = field(default_factory=dict)  # path after this tick -> its note
    feed_reads: frozenset[str] = frozenset()  # :attr:`brain.core.feed.BuiltFeed.reads`
    feed_inputs: dict[str, str] = field(default_factory=dict)  # feed name -> its inputs (or stamped) digest
    feed_marked: list[Note] | None = None  # :attr:`brain.core.feed.BuiltFeed.marked`


MAX_DIFF_LINES = 200


def describe_moves(decisions: keeper.KeeperDecisions) -> list[str]:
    lines: list[str] = []
    changed = sorted(decisions.changed(), key=lambda d: d.cluster_id)
    shown = [d for d in changed if d.move or d.drop_signals]
    if len(shown) > MAX_DIFF_LINES:
        counts = {m: sum(1 for d in shown if d.move == m) for m in ("promoted", "demoted", "graduated")}
        lines.append(f"{len(shown) - MAX_DIFF_LINES} more changes not listed (" +
                     ", ".join(f"{n} {m}" for m, n in counts.items() if n) + " in all)")
    for decision in shown[:MAX_DIFF_LINES]:
        if decision.move:
            lines.append(f"{decision.move} [[{decision.cluster_id}]] → {decision.path.rsplit('/', 1)[0]}/")
        for marker in decision.drop_signals:
            lines.append(f"removed cleared signal `{marker.attr('source') or '-'}` from [[{decision.cluster_id}]]")
    heat = decisions.heat_changed
    if heat:
        lines.append(f"heat changed on {heat} arc{'s' if heat != 1 else ''}")
    return lines


_HEAT_LINE = re.compile(r"^heat changed on (\d+) arcs?$")


def _merge_heat_lines(lines: list[str]) -> list[str]:
    """One "heat changed on N arcs" line for the whole tick (keeper passes before and after apply)."""
    total = 0
    kept = []
    for line in lines:
        match = _HEAT_LINE.match(line)
        if match:
            total += int(match.group(1))
        else:
            kept.append(line)
    if total:
        kept.append(f"heat changed on {total} arc{'s' if total != 1 else ''}")
    return kept


#: What :func:`plan_keeper` counts for its ``progress``.
PLANNED = "arcs planned"


def plan_keeper(
    snapshot: Snapshot,
    decisions: keeper.KeeperDecisions,
    texts: Mapping[str, str],
    now: datetime,
    s: Settings,
    *,
    feed_rel: str | None,
    folder_tokens: Mapping[str, int],
    extra_diff: list[str] | None = None,
    intent_text: str | None = None,
    tick_id: str = "",
    dashboards: bool = True,
    dashboard_texts: Mapping[str, str] | None = None,
    feed_before: Mapping[str, tuple[str, str]] | None = None,
    progress: Step | None = None,
) -> KeeperPlan:
    """The keeper's plan for ``decisions`` over ``snapshot``.

    ``texts`` holds the current text of every arc whose file changes (an arc missing from it
    changed since the scan and is left for the next tick); ``feed_rel`` is the feed folder
    inside the vault (None: elsewhere, written by the tick itself); ``folder_tokens`` the
    tokens of the feed files already there. ``dashboards`` False leaves them out when the
    caller knows their inputs did not change; ``dashboard_texts`` are dashboards the caller
    rendered itself (a quiet tick patches the lines of the arcs it moves), written instead;
    ``feed_before`` the feed files the last tick wrote (:attr:`brain.core.feed.FeedInputs.built_before`);
    ``progress`` hears of the arcs planned.
    """
    plan = Plan()
    out = KeeperPlan(plan, decisions)
    out.problems.extend(decisions.problems)
    for cluster_id, paths in sorted(decisions.duplicates.items()):
        out.problems.append(
            Problem(paths[0], None, f"cluster_id {cluster_id} is held by {len(paths)} files: {', '.join(paths)}; "
                                    "none is moved or edited until one is removed")
        )
    for decision in counted(decisions.changed(), progress, PLANNED):
        note = decision.note
        text = texts.get(note.path)
        if text is None:
            continue
        new = keeper.render(text, decision)
        data = new.encode("utf-8")
        predicted = keeper.predict(note, decision, text, new, data)
        if predicted is not None:
            out.predicted[decision.path] = predicted
        # The scan's own bytes when it kept them; else the writer reads the file as it checks it (a
        # cold tick holds no copy of every old arc beside the new ones).
        kept = snapshot.raw.get(note.path)
        before = kept if kept is not None and len(kept) == note.size else None
        expect = Expect(note.size, note.mtime_ns, note.sha1)
        if decision.path != note.path:
            plan.add(MoveFile(note.path, decision.path, expect, data if new != text else None,
                              reason=decision.move or "move", before=before))
        elif new != text:
            plan.add(WriteFile(note.path, data, expect, reason="heat/status", before=before))

    # Feed: every file comes from core/feed.py's registry; the planner only writes them.
    diff = _merge_heat_lines(describe_moves(decisions) + list(extra_diff or []))
    out.diff_lines = diff
    built = feed.build_feed(
        feed.FeedInputs(
            notes=tuple(snapshot.notes.values()), decisions=decisions.arcs, now=now, settings=s,
            diff_lines=tuple(diff), tick_id=tick_id or now.isoformat(), intent_text=intent_text,
            folder_tokens=dict(folder_tokens), built_before=dict(feed_before or {}),
        )
    )
    out.signals_active = built.signals_active
    out.inject_blocks = built.inject_blocks
    out.feed_reads = built.reads
    out.feed_marked = built.marked
    out.problems.extend(built.problems)
    for feed_file in built.files:
        text = feed_file.render()
        out.feed_files[feed_file.name] = text
        digest = feed_file.inputs if feed_file.inputs is not None else feed_file.stamped_inputs
        if digest is not None:
            out.feed_inputs[feed_file.name] = digest
        if feed_file.budgeted:  # a project file replaces the global feed for its session: not summed
            out.feed_tokens += feed.tokens(text)
        if feed_rel is not None:
            plan.add(WriteFile(f"{feed_rel}/{feed_file.name}", text.encode("utf-8"), owned=True, reason="feed"))
    out.feed_tokens += built.fixed_tokens

    if dashboards or dashboard_texts:
        texts_out = feed.dashboards(decisions.arcs) if dashboards else dict(dashboard_texts or {})
        for path, text in sorted(texts_out.items()):
            data = text.encode("utf-8")
            known = snapshot.notes.get(path)  # dashboards are notes the scan hashed: unchanged ones are no-ops
            if known is None or known.size != len(data) or known.sha1 != hashlib.sha1(data, usedforsecurity=False).hexdigest():
                plan.add(WriteFile(path, data, owned=True, reason="dashboard"))
    return out


def external_feed_changes(feed_dir: Path, files: dict[str, str]) -> dict[Path, bytes]:
    """The files of a feed folder outside the vault (``--brain-feed`` elsewhere) whose bytes differ
    from what is there; the run's target writes them (:meth:`brain.io.transaction.Transaction.write_outside`)."""
    changed: dict[Path, bytes] = {}
    for name, text in files.items():
        target = feed_dir / name
        data = text.encode("utf-8")
        try:
            if read_regular(target) == data:
                continue
        except OSError:
            pass
        changed[target] = data
    return changed
