"""Phase 1 as a plan: arc edits and moves, feed files, dashboards — nothing written here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from brain.core import feed, keeper
from brain.core.model import Note, Problem
from brain.core.plan import MoveFile, Plan, WriteFile
from brain.core.redaction import redact
from brain.io.vault import ChangedError, Snapshot, expect_of, feed_relative, read_current
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


def plan_keeper(
    snapshot: Snapshot,
    now: datetime,
    s: Settings,
    *,
    feed_dir: Path,
    extra_diff: list[str] | None = None,
    intent_text: str | None = None,
    tick_id: str = "",
) -> KeeperPlan:
    vault = snapshot.vault
    decisions = keeper.decide(snapshot.notes.values(), now, s)
    plan = Plan()
    out = KeeperPlan(plan, decisions)
    for cluster_id, paths in sorted(decisions.duplicates.items()):
        out.problems.append(
            Problem(paths[0], None, f"cluster_id {cluster_id} is held by {len(paths)} files: {', '.join(paths)}; "
                                    "none is moved or edited until one is removed")
        )
    for decision in decisions.changed():
        note = decision.note
        try:
            text = read_current(vault, note, snapshot)
        except ChangedError:
            out.problems.append(Problem(note.path, None, "changed since the scan; the next tick takes it up"))
            continue
        except UnicodeDecodeError:
            continue
        new = keeper.render(text, decision)
        data = new.encode("utf-8")
        predicted = keeper.predict(note, decision, text, new, data)
        if predicted is not None:
            out.predicted[decision.path] = predicted
        before = text.encode("utf-8")
        if decision.path != note.path:
            plan.add(MoveFile(note.path, decision.path, expect_of(note), data if new != text else None,
                              reason=decision.move or "move", before=before))
        elif new != text:
            plan.add(WriteFile(note.path, data, expect_of(note), reason="heat/status", before=before))

    # Feed: keeper files, plus the AI-owned ones when this tick produced them.
    date = now.date().isoformat()
    views = feed.arc_views(decisions.arcs)
    signal_views = feed.signal_views(snapshot.notes.values(), decisions.arcs)
    files = [
        feed.hot_arcs(views, s, date),
        feed.inject(snapshot.notes.values(), decisions.arcs, now, s, date),
        feed.signals(signal_views, s, date),
    ]
    out.signals_active = len(signal_views)
    diff = _merge_heat_lines(describe_moves(decisions) + list(extra_diff or []))
    out.diff_lines = diff
    if diff:
        files.append(feed.last_tick_diff(diff, s, date, tick_id or now.isoformat()))
    if intent_text is not None:
        intent = feed.FeedFile(feed.INTENT, "Operator Intent", 7, "info", date, s.feed_ttl_seconds,
                               "# Operator intent\n")
        first, _, rest = redact(intent_text).strip().partition("\n")
        intent.items.append(feed.FeedItem(first))
        if rest.strip():
            intent.items.append(feed.FeedItem(rest.strip(), feed.RANK_INTENT))
        files.append(intent)
    produced = {f.name for f in files}
    fixed = 0
    if feed_dir.is_dir():
        for other in sorted(feed_dir.glob("*.md")):
            if other.name not in produced:
                try:
                    fixed += feed.tokens(other.read_text(encoding="utf-8", errors="replace"))
                except OSError:
                    continue
    feed.fit_budget(files, fixed, s.feed_token_budget)
    out.inject_blocks = len(files[1].items)
    rel = feed_relative(vault, feed_dir)
    for feed_file in files:
        text = feed_file.render()
        out.feed_files[feed_file.name] = text
        out.feed_tokens += feed.tokens(text)
        if rel is not None:
            plan.add(WriteFile(f"{rel}/{feed_file.name}", text.encode("utf-8"), owned=True, reason="feed"))
    out.feed_tokens += fixed

    for path, text in sorted(feed.dashboards(decisions.arcs).items()):
        plan.add(WriteFile(path, text.encode("utf-8"), owned=True, reason="dashboard"))
    return out


def write_external_feed(feed_dir: Path, files: dict[str, str], *, dry_run: bool) -> list[str]:
    """Feed folder outside the vault (``--brain-feed`` elsewhere): atomic writes, no journal."""
    from brain.io.atomic import atomic_write

    written = []
    for name, text in files.items():
        target = feed_dir / name
        data = text.encode("utf-8")
        try:
            if target.read_bytes() == data:
                continue
        except OSError:
            pass
        if not dry_run:
            atomic_write(target, data)
        written.append(str(target))
    return written
