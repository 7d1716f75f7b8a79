"""The tick: keeper → prompt → llm → apply → verify, as one unit of work (SPEC §1, §2, §9).

One listing, one scan into a frozen :class:`~brain.core.snapshot.Snapshot`, plans applied to
it in memory (keeper → AI → keeper without re-walking the vault), one transaction that
journals every write, and verify as the one independent re-read — of the files this tick
wrote. Work is proportional to change:

* an unchanged vault inside the last plan's validity window stops after the listing (the
  window ends at the first instant any arc's heat can change, :func:`brain.core.heat.next_change`);
* an unchanged vault past that window is a *quiet* tick: it reads only the notes the last tick
  kept in its view (``.brain/tick-view``: every arc whose heat is above 0 or can still change,
  every note with signals, injects or problems, what the feed can list) and decides, writes and
  verifies those; an arc that moves gets its dashboard line patched (a dashboard it cannot
  patch sends the tick back to the full scan); on a large vault a forked child lists the files
  while the tick loads the view and decides on it, and the listing then confirms those decisions
  (:func:`_left_by_last`);
* the parse cache loads without parsing JSON, files are re-parsed only when their size or
  mtime changed, and only the arcs whose file changes are read;
* dashboards are rendered only when what they list changed; the ``--no-ai`` candidate
  report is recomputed only when the arcs changed.

Dry run builds the same plans and previews them; nothing is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from brain.core import feed
from brain.core.heat import created_of, forget_inputs
from brain.core.keeper import (
    ArcDecision,
    KeeperDecisions,
    decide,
    valid_until,
)
from brain.core.model import Note, Problem
from brain.core.plan import MoveFile, Plan, WriteFile
from brain.core.progress import Step
from brain.core.snapshot import ScanDelta, ScanStats, Snapshot, vault_note
from brain.core.timeutil import iso, parse_instant
from brain.core.vocab import INBOX
from brain.io import precreate, writer
from brain.io.atomic import ConfinementError, append_line, atomic_write, confined
from brain.io.background import Forked, reap_children
from brain.io.transaction import Preview, Target, Transaction, transaction
from brain.io.vault import (
    Listed,
    LoadedView,
    cache_stamp,
    cached_notes,
    drop_view,
    feed_relative,
    forget_loaded,
    found_listing,
    listing_beside,
    load_view,
    parse_files,
    read_file,
    read_texts,
    read_view,
    save_cache,
    save_view,
    scan,
    stat_listing,
)
from brain.pipeline.keeper import KeeperPlan, external_feed_changes, plan_keeper
from brain.pipeline.reports import (
    AIOutcome,
    AIReports,
    KeeperReport,
    TickReport,
    VerifyReport,
)
from brain.pipeline.tick_state import (
    STATE_FILE,
    Listing,
    MemoRows,
    arcs_key,
    cached_candidates,
    dashboards_key,
    dashboards_key_after,
    feed_before,
    fingerprint,
    listed_files,
    listing_changes,
    listing_tag,
    load_listing,
    load_memo,
    load_saved_listing,
    load_state,
    same_standing,
    save_listing,
    save_memo,
    view_notes,
)
from brain.pipeline.verify import conscious_count, folder_tokens, reread, static_failures, verify_written
from brain.settings import Settings

EXIT_OK, EXIT_VERIFY, EXIT_AI = 0, 1, 4
#: The steps of a tick that count nothing, as its ``progress`` hears of them.
ASKING, VERIFYING, INDEXING = "asking the model", "verifying what was written", "waiting for the search index"


#: (settings, snapshot, keeper plan, now, where its plans go) -> AIOutcome. A dry run's target is a
#: Preview: the phase plans, applies to it and reports alike, and nothing is written.
AIPhase = Callable[[Settings, Snapshot, KeeperPlan, datetime, Target], AIOutcome]


def new_tick_id(vault: Path, now: datetime, kind: str = "tick") -> str:
    base = now.strftime("%Y%m%dT%H%M%SZ") + f"-{kind}"
    root = vault / writer.JOURNAL_DIR
    candidate, n = base, 1
    while (root / candidate).exists():
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


# --- the tick --------------------------------------------------------------------------------------

@dataclass
class _Tick:
    """What one tick carries from phase to phase."""

    s: Settings
    now: datetime
    report: TickReport
    feed_dir: Path
    feed_rel: str | None
    ai_phase: AIPhase | None
    skip_reason: str
    keeper_only: bool
    #: Where plans go: the run's transaction, or a Preview in a dry run.
    target: Target
    #: The snapshot holds only the notes of the last tick's view (a quiet tick): nothing that
    #: needs every note (parse cache, dashboards, the index's full sync) runs on it.
    partial: bool = False
    candidates_key: str | None = None  # what the --no-ai candidate report was computed from
    #: The search index is the file the last clean tick left (same size and mtime): it needs only
    #: what changed since (the scan's delta against the parse cache that tick saved) and what
    #: this tick changed.
    index_in_sync: bool = False
    index_stat: list[int] | None = None  # the index file after this tick's refresh (for the state)
    #: Arcs the keeper rewrote in place touching only heat and status: path -> sha1 before, after.
    retagged: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Arcs the keeper moved, rewriting at most their heat and status: new path -> old path, sha1 before, after.
    retagged_moves: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    #: What the files a quiet tick took up since the last tick add to the whole vault's stats.
    counted: dict[str, int] = field(default_factory=dict)
    #: Feed files the last tick wrote and that are still its bytes: name -> (inputs, text).
    feed_before: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: The child building the search index while the writer commits (:func:`_index_alongside`).
    index_child: Forked | None = None
    #: Hears what a long tick is doing (a bar on a terminal; :mod:`brain.core.progress`).
    progress: Step | None = None
    #: The process leaves once the report is out (:func:`run_tick`).
    process_ends: bool = False

    def step(self, name: str) -> None:
        """A step that counts nothing (verifying, waiting for the index or the model)."""
        if self.progress is not None:
            self.progress(name, 0, 0)

    @property
    def vault(self) -> Path:
        return self.s.vault_path

    def apply(self, plan: Plan) -> writer.ApplyResult:
        return self.target.apply(plan)


def run_tick(
    s: Settings,
    now: datetime,
    *,
    no_ai: bool,
    dry_run: bool,
    ai_phase: AIPhase | None = None,
    ai_skip_reason: str | None = None,
    keeper_only: bool = False,
    progress: Step | None = None,
    process_ends: bool = False,
) -> TickReport:
    """One tick at ``now`` (SPEC §9); ``progress`` hears what it is doing as it goes.

    ``process_ends``: the process leaves as soon as the report is out (``brain tick`` does,
    :func:`brain.launcher.leave`), so the caches the tick filled are not emptied and the garbage
    collector stays off: freeing them object by object would be the last thing it did (5-8 ms of
    a 2-hourly tick on 10 000 arcs, 24 ms on 50 000), and the exit frees nothing."""
    vault = s.vault_path
    feed_dir = s.feed_dir
    tick_id = new_tick_id(vault, now)
    report = TickReport(tick_id, now, dry_run, no_ai or ai_phase is None, keeper_only=keeper_only)
    report.feed_rel = feed_relative(vault, feed_dir)
    tick = _Tick(s, now, report, feed_dir, report.feed_rel, ai_phase, ai_skip_reason or "--no-ai", keeper_only,
                 Preview(vault), progress=progress, process_ends=process_ends)
    started = time.perf_counter()
    collecting = gc.isenabled()
    gc.disable()  # a tick allocates a few objects per note and frees them by reference counting
    try:
        if dry_run:
            _run(tick)
        else:
            with transaction(vault, "keeper" if keeper_only else "tick", tick_id, now) as tx:
                report.problems.extend(tx.recovered)
                tx.progress = progress
                tick.target = tx
                _run(tick)
            report.problems.extend(tx.late)
    finally:
        if tick.index_child is not None:  # the run failed before it needed the index
            _cancel_index(tick.vault, tick.index_child)
        precreate.cancel()  # made ahead for a plan the run did not stage
        reap_children(wait=not process_ends)  # the children that said they were done, gone since
        # The heat inputs memo holds every note the tick decided, the scanner's caches every row
        # it loaded: let them go before the collector is back, or its first pass walks them all
        # (0.1 s after a cold tick, 66 ms after a +2 h one on 50 000 arcs).
        if not process_ends:
            forget_inputs()
            forget_loaded()
            if collecting:
                gc.enable()
    report.health = _health_row(report, _ms(started))
    if not dry_run and not keeper_only:
        _append_health(tick, json.dumps(report.health, sort_keys=False))
    return report


def _health_row(report: TickReport, duration: float) -> dict[str, Any]:
    row: dict[str, Any] = {
        "timestamp": iso(report.now),
        "tick_id": report.tick_id,
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
    row.update(report.ai.llm.health or {})
    return row


def _append_health(tick: _Tick, line: str) -> None:
    """``health.jsonl`` is confined like every other write: never through a symlink out of the vault."""
    try:
        if tick.feed_rel is not None:
            target = confined(tick.vault, f"{tick.feed_rel}/health.jsonl")
        else:
            target = tick.feed_dir / "health.jsonl"
        append_line(target, line)
    except (ConfinementError, OSError) as exc:
        tick.report.problems.append(Problem(f"{tick.feed_rel or tick.feed_dir}/health.jsonl", None,
                                            f"health row not written: {exc}"))


def _run(tick: _Tick) -> None:
    report, s, now, vault = tick.report, tick.s, tick.now, tick.vault
    dry_run = report.dry_run

    # Phase 1: keeper. An unchanged vault inside the last plan's validity window plans nothing.
    t = time.perf_counter()
    state = load_state(vault)
    fast = tick.ai_phase is None and not tick.keeper_only and not report.problems
    # Past that window, a child lists a large vault while this process loads what the last tick
    # left, the saved listing included; the child compares the two and hands back only news.
    tag, listed, saved, child = listing_tag(s, state), listed_files(state), None, None
    if tag is not None:
        counted_first = listed is None  # a state from before the count was kept: its listing is read to count it
        if counted_first:
            saved = load_listing(vault, tag)
        count = len(saved or ()) if listed is None else listed
        if s.fork_children and count >= LIST_BESIDE_FILES and not (fast and _in_window(tick, state)):
            child = listing_beside(vault, tick.feed_dir, lambda: load_saved_listing(vault, tag))
        if not counted_first:
            saved = load_listing(vault, tag)
    left = _left_by_last(tick, state, beside=child) if child is not None else None
    if child is not None and not dry_run:
        writer.load_renameat2()  # what the commits need, while the child lists
    listing, same = found_listing(child, vault, tick.feed_dir, saved) if child is not None \
        else (stat_listing(vault, tick.feed_dir), False)
    same = same or listing is saved or saved == listing
    if fast and _fast_path(tick, state, same, len(listing), t):
        return
    left = left or _left_by_last(tick, state)
    tick.index_in_sync = state.get("index") is not None and state.get("index") == left.index
    memo = left.memo
    quiet = _quiet_view(tick, state, saved, listing, left.view, same=same)
    patched: dict[str, str] | None = None
    ahead = left.ahead if left.ahead is not None and quiet is not None and left.ahead.holds(quiet) else None
    if quiet is not None:
        decided = ahead.decided if ahead is not None else _decide_quiet(tick, quiet, memo)
        if decided is None:
            quiet = None  # a dashboard line it cannot patch: dashboards list every arc, so scan them all
        else:
            decisions, patched = decided
    if quiet is not None:
        tick.partial = True
        snapshot = quiet
        report.problems.extend(snapshot.problems)
        report.delta = snapshot.delta  # the files edited since the last tick (a quiet tick with changes)
    else:
        snapshot = scan(vault, feed_dir=tick.feed_dir, max_note_bytes=s.max_note_bytes, write_cache=False,
                        listing=[(rel, Listed(size, mtime)) for rel, (size, mtime) in listing.items()],
                        keep_bytes=not dry_run, fork=s.fork_children, progress=tick.progress)
        report.problems.extend(snapshot.problems)
        report.delta = snapshot.delta
        _after_scan(tick, snapshot)
        snapshot = _drain_inbox(tick, snapshot)
        decisions = decide(snapshot.notes.values(), now, s, horizon=True, memo=memo)
        if not dry_run and s.fork_children:  # many rewrites (a cold tick): their temp files made while it plans
            rewrites = [d.path for d in decisions.changed() if d.rewrites]
            precreate.start(vault, rewrites[:writer.first_wave(vault, len(rewrites))])
    saved_key = state.get("dashboards")
    if tick.partial:
        # Not every arc is here to key or render the dashboards: the lines of the arcs that move
        # are patched, and their rows in the key replaced.
        listed_key = dashboards_key_after(saved_key if isinstance(saved_key, str) else None,
                                           decisions.changed()) if patched else saved_key
    elif same and isinstance(saved_key, str) and not any(d.relists for d in decisions.changed()):
        # The very files the last tick left, and no arc moves or changes status: the same dashboards.
        listed_key = saved_key
    else:
        listed_key = dashboards_key(decisions)
    # Dashboards: rendered when what they list changed, or someone edited or deleted one.
    touched = any(p.endswith("/_dashboard.md") for p in (*snapshot.delta.changed, *snapshot.delta.removed))
    report.keeper = KeeperReport(ms=0.0, files=snapshot.stats.files, parsed=snapshot.stats.parsed,
                                 cached=snapshot.stats.cached, scan_ms=round(snapshot.stats.ms, 2), planned=0,
                                 remembered=decisions.remembered, quiet=tick.partial)
    kplan, snapshot = _keeper_pass(tick, snapshot, decisions, dashboard_texts=patched,
                                   dashboards=not tick.partial and (touched or listed_key != saved_key),
                                   planned=ahead.planned if ahead is not None else None)
    final_plan = kplan
    report.keeper.ms = _ms(t)

    # Phases 2-4: the AI layer, on the snapshot as the keeper left it.
    if tick.keeper_only:
        pass
    elif tick.ai_phase is None:
        # A quiet tick's arcs are the last tick's by construction (changed files keep their standing).
        tick.candidates_key, candidates = cached_candidates(snapshot, state, same_files=same or tick.partial)
        report.ai = AIReports.skipped(tick.skip_reason, candidates=candidates)
    else:
        tick.step(ASKING)
        outcome = tick.ai_phase(s, snapshot, kplan, now, tick.target)
        report.ai = outcome.phases
        report.result.merge(outcome.result)
        report.rejected.extend(outcome.rejected)
        report.problems.extend(outcome.problems)
        if outcome.failed:
            report.exit_code = EXIT_AI
        if outcome.result.changed or outcome.intent is not None or outcome.diff_lines:
            # The keeper again, so arcs changed by apply get their heat and place in this same tick.
            t = time.perf_counter()
            snapshot = reread(snapshot, outcome.result)
            decisions = decide(snapshot.notes.values(), now, s, horizon=True, memo=memo)
            final_plan, snapshot = _keeper_pass(
                tick, snapshot, decisions, dashboards=True,
                extra_diff=kplan.diff_lines + outcome.diff_lines, intent_text=outcome.intent,
            )
            report.keeper.ms += _ms(t)
        report.ai.llm.health = outcome.health
        report.stats["edges_added"] = outcome.edges_added
    if isinstance(tick.target, Transaction):
        tick.target.journal.complete()  # every write is done: a crash from here on rolls nothing back

    # Phase 5: verify — re-read what this tick wrote; the invariants on the snapshot it leads to.
    view: list[Note] | None = None  # the notes the next quiet tick runs on (a run that wrote)
    if dry_run:  # nothing was written: the invariants that hold whatever the clock, on the vault as it is
        t = time.perf_counter()
        _verify_report(report, VerifyReport(ms=0.0, failures=static_failures(snapshot), reread=0))
        report.verify.ms = _ms(t)
    else:
        tick.step(VERIFYING)
        snapshot, view = _verified(tick, snapshot, final_plan, memo)

    _publish_alarms(tick, snapshot)

    kinds = Counter(m.type for note in snapshot.notes.values() if note.markers for m in note.markers)
    moves = Counter(d.move for d in kplan.decisions.changed())
    final = final_plan.decisions
    report.stats.update({
        "arcs": len(final.arcs) + sum(len(p) for p in final.duplicates.values()),
        "promoted": moves["promoted"],
        "demoted": moves["demoted"],
        "graduated": moves["graduated"],
        "heat_changed": kplan.decisions.heat_changed,
        "signals_active": final_plan.signals_active,
        "inject_blocks": final_plan.inject_blocks,
        "lessons": kinds["lesson"],
        "edges": kinds["edge"],
        "conscious": conscious_count(final),
        "feed_tokens": final_plan.feed_tokens,
    })
    if tick.partial:  # counted over every note: a quiet tick's edits (heat, status, cleared signals) keep them
        whole = state.get("stats", {})
        report.stats.update({key: int(whole.get(key, 0)) + tick.counted.get(key, 0)
                             for key in ("arcs", "lessons", "edges")})
    if tick.index_child is not None:  # built beside the writes (:func:`_index_alongside`)
        _refresh_index(tick, snapshot)
    if not dry_run:  # what the next tick reads, as this one verified it
        writer.prune_journals(vault, s.journal_keep)
        _save_state(tick, listing, snapshot, final,
                    listed_key if final is kplan.decisions else dashboards_key(final),
                    {name: [inputs, writer.sha1_bytes(final_plan.feed_files[name].encode("utf-8"))]
                     for name, inputs in final_plan.feed_inputs.items()},
                    view=view, same=same, marked=final_plan.feed_marked)
    if tick.process_ends:  # the listing, the view's notes, the plans: freed by the exit, not one by one here
        _KEPT_TO_EXIT.append(locals())


#: What the runs of a process that leaves once the report is out keep until then (:func:`_run`):
#: freeing it as ``_run`` returns took 10-20 ms of a +2 h tick on 50 000 arcs.
_KEPT_TO_EXIT: list[dict[str, Any]] = []


def _verified(tick: _Tick, snapshot: Snapshot, final_plan: KeeperPlan,
              memo: MemoRows) -> tuple[Snapshot, list[Note] | None]:
    """Phase 5 of a run that wrote (:func:`verify_written`); then the search index, the parse cache
    and the heat memo follow the files as verify read them. Returns the snapshot verify leads to,
    and the notes the next quiet tick runs on (:func:`view_notes`; None: no quiet tick)."""
    report, s, vault = tick.report, tick.s, tick.vault
    t = time.perf_counter()
    # An index built beside the writes is waited for last (:func:`_run`), when the tick has
    # nothing else to do; it was built from the plan's bytes, so verify keeps none for it.
    alongside = tick.index_child is not None
    snapshot, reread, failures = verify_written(s, tick.now, snapshot, report.result, tick.feed_rel,
                                                feed_tokens=final_plan.feed_tokens, decided=final_plan.decisions,
                                                keep_bytes=not alongside)
    _verify_report(report, VerifyReport(ms=0.0, failures=failures, reread=reread))
    indexing = 0.0
    if not alongside:
        # The index first, while the snapshot holds the bytes verify read (a cold tick indexes every
        # arc without reading it a third time); then they go, before the cache is saved. Its time is
        # not verify's (the report's phases stay what they were).
        started = time.perf_counter()
        _refresh_index(tick, snapshot)
        indexing = _ms(started)
    snapshot = dataclasses.replace(snapshot, raw={})
    if not tick.partial and (snapshot.delta or report.result.changed or not snapshot.stats.cached
                             or snapshot.stats.from_view):
        save_cache(vault, snapshot.notes)  # a quiet tick's writes reach it from the view, at the next full scan
    view = list(snapshot.notes.values()) if tick.partial else view_notes(snapshot, final_plan.decisions,
                                                                          final_plan.feed_reads)
    save_memo(vault, s, final_plan.decisions, snapshot, tick.now, memo, partial=tick.partial,
              view=() if view is None else [note.path for note in view])
    report.verify.ms = round(_ms(t) - indexing, 2)
    return snapshot, view


def _verify_report(report: TickReport, verified: VerifyReport) -> None:
    report.verify = verified
    if verified.failures:
        report.problems.extend(verified.failures)
        report.exit_code = EXIT_VERIFY


def _after_scan(tick: _Tick, snapshot: Snapshot) -> None:
    """Post-scan steps: each gets the snapshot and ``tick.report.delta`` (what changed since the
    last scan). Steps that keep their own view of the vault (a search index) are wired here, or,
    to also see what this tick wrote, after the run with ``report.notes_changed()``."""


def _drain_inbox(tick: _Tick, snapshot: Snapshot) -> Snapshot:
    """Notes agents and operators left in raw/inbox/ become blocks in their project's arc (SPEC §15)."""
    from brain.pipeline.inbox import apply_drain, drain_inbox

    plan, problems = drain_inbox(tick.vault, snapshot.notes.values(), tick.now, tick.s)
    tick.report.problems.extend(problems)
    if not plan:
        return snapshot
    result = apply_drain(plan, tick.apply)
    tick.report.result.merge(result)
    tick.report.problems.extend(result.problems)
    if tick.report.dry_run:
        return snapshot
    return fold(snapshot, plan, result, {}, tick.feed_rel)


def _index_stat(vault: Path) -> list[int] | None:
    from brain.search.index import DB_FILE

    try:
        st = os.stat(os.path.join(vault, DB_FILE))
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _refresh_index(tick: _Tick, snapshot: Snapshot) -> None:
    """The search index follows the vault: files whose content changed are read again, nothing else.

    When the index is the one the last clean tick left and the scan had that tick's parse cache
    (so its delta is everything changed since), only the delta and this tick's own changes are
    looked at (no pass over every indexed path); anything else compares every note's hash with
    the index's (:func:`brain.search.index.sync`)."""
    import sqlite3

    from brain.search.index import SearchIndexError, refresh, sync

    if tick.index_child is not None:  # built alongside the writes: the sync below finds what differs
        tick.step(INDEXING)
        tick.index_child.wait()
        tick.index_child = None
    try:
        if tick.index_in_sync and (tick.partial or snapshot.stats.cached):
            changed = tick.report.notes_changed()
            refresh(tick.vault, snapshot.notes.values(), changed.changed, changed.removed,
                    max_bytes=tick.s.max_note_bytes, raw=snapshot.raw, partial=tick.partial,
                    retagged=tick.retagged, moved=tick.retagged_moves)
        else:
            sync(tick.vault, snapshot.notes.values(), max_bytes=tick.s.max_note_bytes, raw=snapshot.raw)
    except (OSError, sqlite3.Error, SearchIndexError) as exc:
        tick.report.problems.append(Problem(".brain/search.sqlite", None, f"search index not updated: {exc}"))
        return
    tick.index_stat = _index_stat(tick.vault)


#: A vault at least this large with no search index has it built alongside the writes (on the
#: bench's 1 000 arcs, a cold tick 1.46 -> 1.24 s; on 300, no faster than building it after them).
INDEX_ALONGSIDE_NOTES = 1000


def _index_alongside(tick: _Tick, snapshot: Snapshot, kplan: KeeperPlan) -> None:
    """When there is no search index yet and the vault is large (a cold tick), a forked child
    builds it from the notes and bytes the keeper's plan will leave, while this process writes
    them (10 000 arcs: ~3 s of indexing beside ~4 s of commits). :func:`_refresh_index` waits for
    it, then brings it in line with what verify read (a conflict, the AI's edits) like after any
    rebuild; a child that failed, or could not start, leaves the whole build to that refresh."""
    from brain.search.index import db_path, rebuild

    if (not tick.s.fork_children or tick.report.dry_run or tick.partial or tick.index_child is not None
            or len(snapshot.notes) < INDEX_ALONGSIDE_NOTES or os.path.lexists(db_path(tick.vault))):
        return
    plan = kplan.plan

    def build() -> bytes | None:
        expected = fold(snapshot, plan, writer.planned_result(plan), kplan.predicted, tick.feed_rel)
        raw = dict(expected.raw)
        for op in plan.operations:
            if isinstance(op, MoveFile):
                data = op.content if op.content is not None else snapshot.raw.get(op.src)
                if data is not None:
                    raw[op.dst] = data
            elif isinstance(op, WriteFile):
                raw[op.path] = op.content
        rebuild(tick.vault, expected.notes.values(), max_bytes=tick.s.max_note_bytes, raw=raw)
        return None

    tick.index_child = Forked.start(build)


def _cancel_index(vault: Path, child: Forked) -> None:
    """End an index child the run no longer waits for, and remove the file it was building."""
    from brain.search.index import rebuild_temp

    child.cancel()
    with contextlib.suppress(OSError):
        os.unlink(rebuild_temp(vault, child.pid))


#: A keeper pass's plan, and the problems of the arcs it could not read (:func:`_keeper_plan`).
KeeperPlanned = tuple[KeeperPlan, list[Problem]]


def _keeper_plan(tick: _Tick, snapshot: Snapshot, decisions: KeeperDecisions, *, dashboards: bool,
                 extra_diff: list[str] | None = None, intent_text: str | None = None,
                 dashboard_texts: Mapping[str, str] | None = None) -> KeeperPlanned:
    """Read the arcs that change and plan (:func:`brain.pipeline.keeper.plan_keeper`); nothing
    is applied or reported yet."""
    texts = read_texts(snapshot, [d.note for d in decisions.changed()])  # read as the planner asks
    kplan = plan_keeper(snapshot, decisions, texts, tick.now, tick.s, feed_rel=tick.feed_rel,
                        folder_tokens=folder_tokens(tick.feed_dir), extra_diff=extra_diff,
                        intent_text=intent_text, tick_id=tick.report.tick_id, dashboards=dashboards,
                        dashboard_texts=dashboard_texts, feed_before=tick.feed_before, progress=tick.progress)
    return kplan, texts.problems


def _keeper_pass(tick: _Tick, snapshot: Snapshot, decisions: KeeperDecisions, *, dashboards: bool,
                 extra_diff: list[str] | None = None, intent_text: str | None = None,
                 dashboard_texts: Mapping[str, str] | None = None,
                 planned: KeeperPlanned | None = None) -> tuple[KeeperPlan, Snapshot]:
    """Read the arcs that change, plan, apply; returns the plan and the snapshot it leads to.
    ``planned``: the plan of these very arguments, made ahead (:func:`_left_by_last`)."""
    report = tick.report
    kplan, unread = planned or _keeper_plan(tick, snapshot, decisions, dashboards=dashboards, extra_diff=extra_diff,
                                            intent_text=intent_text, dashboard_texts=dashboard_texts)
    report.problems.extend(unread)
    report.result.conflicts.update(p.path for p in unread)  # left for the next tick, like a writer conflict
    _index_alongside(tick, snapshot, kplan)
    report.problems.extend(kplan.problems)
    report.keeper.planned = (report.keeper.planned or 0) + len(kplan.plan.operations)
    result = tick.apply(kplan.plan)
    if tick.feed_rel is None:
        report.result.written.extend(tick.target.write_outside(external_feed_changes(tick.feed_dir, kplan.feed_files)))
    report.result.merge(result)
    report.problems.extend(result.problems)
    if report.dry_run:
        return kplan, snapshot  # nothing moved on disk: later phases read the files where they are
    folded = fold(snapshot, kplan.plan, result, kplan.predicted, tick.feed_rel)
    written, moved = set(result.written), set(result.moved)
    for d in decisions.changed():
        predicted = kplan.predicted.get(d.path)
        if predicted is None:
            continue
        if d.path == d.note.path and d.path in written:
            tick.retagged[d.path] = (d.note.sha1, predicted.sha1)
        elif (d.note.path, d.path) in moved:
            tick.retagged_moves[d.path] = (d.note.path, d.note.sha1, predicted.sha1)
    kplan.plan.operations.clear()  # carried out and folded in: its bytes are not needed any more
    return kplan, folded


def fold(snapshot: Snapshot, plan: Plan, result: writer.ApplyResult, predicted: Mapping[str, Note],
         feed_rel: str | None) -> Snapshot:
    """``snapshot`` with the operations of ``plan`` that ``result`` says were carried out.

    A written arc's note is the keeper's prediction when it made one (exact; property-tested),
    else a parse of the bytes written. mtimes are unknown (0) until verify stats the files.
    """
    done_writes = set(result.written)
    done_moves = set(result.moved)
    written: dict[str, Note] = {}
    moved: list[tuple[str, str]] = []
    for op in plan.operations:
        if isinstance(op, MoveFile):
            if (op.src, op.dst) not in done_moves:
                continue
            moved.append((op.src, op.dst))
            if op.content is not None and op.dst not in result.conflicts:
                written[op.dst] = predicted.get(op.dst) or vault_note(op.dst, op.content, mtime_ns=0)
        elif isinstance(op, WriteFile) and op.path in done_writes and op.path.endswith(".md"):
            written[op.path] = predicted.get(op.path) or vault_note(op.path, op.content, mtime_ns=0)
    # The scanner never lists the feed folder or dot-folders: neither does the folded snapshot.
    written = {path: note for path, note in written.items()
               if not (feed_rel is not None and path.startswith(feed_rel + "/"))
               and not any(part.startswith(".") for part in path.split("/"))}
    return snapshot.with_changes(written, moved=moved, deleted=result.deleted)


# --- alarms, the fast path, the state ----------------------------------------------------------------

def _publish_alarms(tick: _Tick, snapshot: Snapshot) -> None:
    """Critical and nuclear signals reach the fleet over Redis, once per state change (SPEC §11)."""
    s, report = tick.s, tick.report
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
        if marker.is_open_signal and marker.attr("severity") in ALARM_SEVERITIES
    ]
    published = publish_signal_changes(s, tick.vault, alarms, report.tick_id, tick.now, dry_run=report.dry_run)
    report.keeper.amygdala = published.as_dict()
    if published.error:
        report.amygdala_failed = True
        report.problems.append(Problem(".brain/amygdala-published.json", None,
                                       f"amygdala publish failed ({published.error}); the next tick publishes"))


def _in_window(tick: _Tick, state: Mapping[str, Any]) -> bool:
    """This tick falls inside the last one's validity window: unchanged files need no work."""
    since, until = parse_instant(state.get("now")), parse_instant(state.get("valid_until"))
    return since is not None and until is not None and since <= tick.now <= until


def _fast_path(tick: _Tick, state: Mapping[str, Any], same: bool, files: int, started: float) -> bool:
    report = tick.report
    if not same or not _in_window(tick, state):
        return False
    report.stats = dict(state.get("stats", {}))
    report.problems = [Problem(**p) for p in state.get("problems", [])]
    report.keeper = KeeperReport(ms=_ms(started), files=files, unchanged_since=state.get("tick_id"))
    candidates = state.get("candidates")
    saved = candidates.get("report") if isinstance(candidates, dict) else None
    report.ai = AIReports.skipped(tick.skip_reason, candidates=dict(saved) if isinstance(saved, dict) else None)
    report.verify = VerifyReport(unchanged_since=state.get("tick_id"))
    return True


#: A vault the last tick listed with at least this many files is listed by a child (:func:`_run`).
LIST_BESIDE_FILES = 2000


#: A quiet tick's decisions and patched dashboards (:func:`_decide_quiet`).
QuietDecided = tuple[KeeperDecisions, dict[str, str]]


@dataclass
class _Ahead:
    """A quiet tick decided, and perhaps planned, on the view before the listing said whether
    the view holds."""

    notes: list[Note]  # the view's notes, in order
    decided: QuietDecided
    planned: KeeperPlanned | None = None  # its keeper plan (:func:`_keeper_plan`), made while the child listed

    def holds(self, quiet: Snapshot) -> bool:
        """``quiet`` holds these very notes (the view held, nothing edited)."""
        return len(quiet.notes) == len(self.notes) and all(a is b for a, b in zip(quiet.notes.values(), self.notes,
                                                                                   strict=True))


@dataclass
class _LeftByLast:
    """What the last tick left that this one reads besides the listing (and the feed files it
    wrote, which go to :attr:`_Tick.feed_before`)."""

    memo: MemoRows
    index: list[int] | None  # the search index's size and mtime (:func:`_index_stat`)
    view: LoadedView | None  # its view, read ahead for a quiet tick (else :func:`load_view` reads it)
    ahead: _Ahead | None = None


def _left_by_last(tick: _Tick, state: Mapping[str, Any], *, beside: Forked | None = None) -> _LeftByLast:
    """``beside``: the child listing the vault meanwhile. Then the view is read now too, and a
    quiet tick decided on it when one could use it (:func:`_quiet_view`), and planned while the
    child is still listing (the time would be spent waiting); the listing later tells whether
    those decisions and that plan stand."""
    ahead = beside is not None and tick.ai_phase is None and not tick.keeper_only and not tick.report.dry_run \
        and isinstance(state.get("tick_id"), str)
    tick.feed_before = feed_before(tick.feed_dir, state)
    left = _LeftByLast(load_memo(tick.vault, tick.s), _index_stat(tick.vault), read_view(tick.vault) if ahead else None)
    if left.view is not None and left.view[0] == state.get("tick_id"):
        notes = [note for note, _row, _written in left.view[1]]
        snapshot = Snapshot(tick.vault, {note.path: note for note in notes}, (), ScanStats(len(notes), 0, len(notes), 0.0),
                            ScanDelta())
        decided = _decide_quiet(tick, snapshot, left.memo)
        if decided is not None:
            left.ahead = _Ahead(notes, decided)
            if beside is not None and not beside.said_done():
                decisions, patched = decided
                left.ahead.planned = _keeper_plan(tick, snapshot, decisions, dashboards=False, dashboard_texts=patched)
    return left


def _decide_quiet(tick: _Tick, snapshot: Snapshot, memo: MemoRows) -> QuietDecided | None:
    """The decisions of a quiet tick, and its dashboards with the lines of the arcs that move
    patched; None when it cannot be quiet (duplicate arcs, a dashboard it cannot patch)."""
    decisions = decide(snapshot.notes.values(), tick.now, tick.s, horizon=True, memo=memo)
    patched = None if decisions.duplicates else _patched_dashboards(snapshot, decisions)
    return None if patched is None else (decisions, patched)


def _save_state(tick: _Tick, listing: Listing, snapshot: Snapshot, decisions: KeeperDecisions,
                dashboards: str | None, feed_inputs: Mapping[str, list[str]], *,
                view: Iterable[Note] | None = None, same: bool = False, marked: list[Note] | None = None) -> None:
    """Remember this verified outcome so an unchanged vault can skip the work next time.

    ``feed_inputs``: feed name -> its inputs digest and the hash of the text written
    (:func:`feed_before`); ``view``: the notes a quiet tick on these very files needs
    (:func:`view_notes`); ``same``: ``listing`` holds the files the last tick left (:func:`save_listing`);
    ``marked``: the notes holding a signal or an inject, as the feed found them (:func:`valid_until`)."""
    try:
        _write_state(tick, listing, snapshot, decisions, dashboards, feed_inputs, view, same, marked)
    except OSError as exc:  # a folder or a read-only file where the state goes: the next tick does it all
        named = exc.filename2 or exc.filename  # a rename's target, not the temp file it came from
        where = os.path.relpath(named, tick.vault) if isinstance(named, str) else STATE_FILE
        tick.report.problems.append(Problem(where, None, f"tick state not saved ({exc.strerror or exc}); "
                                                         "the next tick does the whole work"))


def _write_state(tick: _Tick, listing: Listing, snapshot: Snapshot, decisions: KeeperDecisions,
                 dashboards: str | None, feed_inputs: Mapping[str, list[str]], view: Iterable[Note] | None,
                 same: bool, marked: list[Note] | None) -> None:
    report, vault = tick.report, tick.vault
    path = vault / STATE_FILE
    if report.exit_code != 0 or report.result.conflicts or report.amygdala_failed or report.ai_applied:
        path.unlink(missing_ok=True)
        drop_view(vault)
        return
    if view is None:
        drop_view(vault)
    else:
        save_view(vault, report.tick_id, view)
    files = save_listing(vault, report.tick_id, listing, listing_changes(listing, snapshot, report.result), same=same)
    key = tick.candidates_key or arcs_key(snapshot)
    state = {
        "tick_id": report.tick_id,
        "now": iso(tick.now),
        # The feed's index says when it was generated: refresh it before the hook would call it stale.
        "valid_until": iso(min(valid_until(decisions, tick.now, tick.s, marked=marked),
                               tick.now + timedelta(seconds=tick.s.feed_ttl_seconds / 2))),
        "fingerprint": fingerprint(tick.s, tick.feed_dir),
        "stats": report.stats,
        "problems": [p.as_dict() for p in report.problems],
        "candidates": {"key": key, "report": report.ai.prompt.candidates},
        "dashboards": dashboards,
        "index": tick.index_stat,
        "cache": cache_stamp(vault),
        "feed_inputs": feed_inputs,
        "files": files,  # whether the next tick lists beside its loading (:data:`LIST_BESIDE_FILES`)
    }
    atomic_write(path, json.dumps(state).encode(), durable=False)


def _patched_dashboards(snapshot: Snapshot, decisions: KeeperDecisions) -> dict[str, str] | None:
    """The dashboards of the dates whose arcs move or change status, each with those lines
    rendered again (the rest of a dashboard lists arcs that did not change); None when one
    cannot be read or lacks a line (the full tick renders them all)."""
    by_path: dict[str, list[ArcDecision]] = {}
    for d in decisions.changed():
        if d.relists:
            by_path.setdefault(feed.dashboard_of(created_of(d.note).date().isoformat()), []).append(d)
    out: dict[str, str] = {}
    for path, group in sorted(by_path.items()):
        try:
            text = read_file(os.path.join(snapshot.vault, path)).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        patched = feed.patch_dashboard(text, group)
        if patched is None:
            return None
        out[path] = patched
    return out


def _quiet_view(tick: _Tick, state: Mapping[str, Any], saved: Listing | None, listing: Listing,
                view: LoadedView | None, *, same: bool) -> Snapshot | None:
    """The last tick's view as a snapshot, when this tick may run on it: the files are the ones
    the last tick left (:func:`load_listing`; ``same``: ``listing`` holds the entries of
    ``saved``) or few of them changed (:func:`_delta_view`), no AI, no inbox notes to drain
    (their target is the hottest arc of all), the search index as it was left, and the view
    intact."""
    if tick.ai_phase is not None or tick.keeper_only or tick.report.dry_run or tick.report.problems:
        return None
    since = parse_instant(state.get("now"))
    candidates = state.get("candidates")
    if (saved is None or not tick.index_in_sync or since is None or tick.now < since
            or not isinstance(state.get("stats"), dict)
            or not (isinstance(candidates, dict) and isinstance(candidates.get("report"), dict))):
        return None
    if _inbox_holds_any(tick.vault) and any(rel.startswith(INBOX + "/") for rel in listing):
        return None
    started = time.perf_counter()
    key = str(state.get("tick_id"))
    if not same:
        # Old versions of edited files come from the parse cache: it must be the one the last tick left.
        if state.get("cache") != cache_stamp(tick.vault):
            return None
        return _delta_view(tick, key, saved, listing, started, view)
    notes = load_view(tick.vault, key, listing, loaded=view)
    if notes is None:
        return None
    return Snapshot(tick.vault, notes, tuple(p for note in notes.values() for p in note.problems),
                    ScanStats(len(listing), 0, len(notes), (time.perf_counter() - started) * 1000), ScanDelta())


def _inbox_holds_any(vault: Path) -> bool:
    """The inbox folder holds an entry the listing may have listed; False saves looking for one
    among every listed path (3.7 ms on 50 000 files). An entry put there after the listing may
    say True: then the listing is looked through as before."""
    try:
        with os.scandir(os.path.join(vault, INBOX)) as entries:
            return any(not entry.name.startswith(".") for entry in entries)
    except OSError:  # no inbox folder (or not one the walk could list): nothing of it was listed
        return False


#: A quiet tick takes up files edited since the last tick while they are at most this share of
#: the vault (or :data:`DELTA_MIN` files); beyond, the full scan is the cheaper path.
DELTA_SHARE, DELTA_MIN = 0.05, 64


def _delta_view(tick: _Tick, key: str, saved: Listing, listing: Listing, started: float,
                view: LoadedView | None) -> Snapshot | None:
    """The last tick's view with the files edited, added or deleted since folded in, when none of
    those edits can reach beyond its own note (:func:`same_standing`): the dashboards, the
    candidate pairs and every feed ranking stay what they were, and the notes outside the view
    keep heat 0 and their place. Only the edited files are parsed; their old versions come from
    the view or the parse cache (what the last full tick saw: a later tick rewrote only notes of
    its view). The lessons and edges they add or drop go to :attr:`_Tick.counted`."""
    changed = {rel: stat for rel, stat in listing.items() if saved.get(rel) != stat}
    removed = [rel for rel in saved if rel not in listing]
    if len(changed) + len(removed) > max(DELTA_MIN, int(len(listing) * DELTA_SHARE)):
        return None
    gone = frozenset(changed).union(removed)
    if any(rel.endswith("/_dashboard.md") for rel in gone):
        return None  # the full tick renders dashboards an operator edited or deleted
    before: dict[str, Note] = {}
    notes = load_view(tick.vault, key, listing, changed=gone, before=before, loaded=view)
    if notes is None:
        return None
    older = {rel: saved[rel] for rel in gone if rel in saved and rel not in before}
    if older:
        cached = cached_notes(tick.vault, older)
        if cached is None:
            return None
        before.update(cached)
    raw: dict[str, bytes] = {}
    fresh = parse_files(tick.vault, changed, tick.s.max_note_bytes, raw)
    counted = Counter[str]()
    for rel in gone:
        old, new = before.get(rel), fresh.get(rel)
        if not same_standing(old, new):
            return None
        for note, sign in ((old, -1), (new, 1)):
            for marker in note.markers if note is not None else ():
                if marker.type in ("lesson", "edge"):
                    counted[f"{marker.type}s"] += sign
    tick.counted = dict(counted)
    notes.update(fresh)
    ordered = {rel: notes[rel] for rel in listing if rel in notes}  # the scan's order
    return Snapshot(tick.vault, ordered, tuple(p for note in ordered.values() for p in note.problems),
                    ScanStats(len(listing), len(fresh), len(listing) - len(fresh),  # the rest stand as parsed
                              (time.perf_counter() - started) * 1000),
                    ScanDelta(tuple(sorted(changed)), tuple(sorted(removed))), raw)

