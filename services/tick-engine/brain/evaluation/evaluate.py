"""One evaluation run: read the needs, replay the targets, render the baselines, score everything."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from brain.core.feed import tokens
from brain.evaluation import baselines as bl
from brain.evaluation import metrics as m
from brain.evaluation.needs import (
    TERM,
    NeededItem,
    SessionFiles,
    SessionNeeds,
    locate_claude,
    locate_codex,
    read_needs,
)
from brain.evaluation.replay import (
    BrainRunner,
    LogSources,
    Profile,
    Session,
    read_universe,
    replay,
    select_targets,
)

BRAIN = "brain"
#: The boot feed plus what prompt-time recall adds at each of the session's human prompts (SPEC §15).
BRAIN_RECALL = "brain+recall"
FEEDS = (BRAIN, BRAIN_RECALL, *bl.BASELINES)
MODES = ("incremental", "fresh")


@dataclass(frozen=True)
class EvalRequest:
    sources: LogSources
    profile: Profile
    mode: str = "incremental"
    warmup: int = 2
    exclude_targets_from: Path | None = None
    min_target_turns: int = 0
    budget: int = 2000


@dataclass(frozen=True)
class TargetResult:
    session: Session
    cutoff: datetime
    history: int  # sessions Brain's vault had
    needed: tuple[NeededItem, ...]
    knowable: frozenset[str]
    feeds: Mapping[str, str]
    scores: Mapping[str, m.FeedScore]
    recall_alone: m.FeedScore | None = None


@dataclass(frozen=True)
class Evaluation:
    request: EvalRequest
    universe: int
    targets: tuple[TargetResult, ...]
    aggregates: Mapping[str, m.Aggregate]
    comparisons: tuple[m.Comparison, ...]
    verdict: m.Verdict
    warnings: tuple[str, ...]
    #: brain+recall - brain on R_kn: what prompt-time recall adds over the boot feed alone.
    recall_gain: m.Comparison | None = None
    #: Diagnostic: recall's credited items alone, without the boot feed (what recall carries on its own).
    recall_alone: m.Aggregate | None = None


def read_all_needs(sources: LogSources, universe: Sequence[Session]) -> tuple[dict[str, SessionNeeds], dict[str, SessionFiles], list[str]]:
    """Needs of every universe session, read from its raw files by the independent parser."""
    files: dict[str, SessionFiles] = {}
    if sources.projects_dir is not None:
        files.update(locate_claude(sources.projects_dir))
    if sources.codex_dir is not None:
        files.update(locate_codex(sources.codex_dir))
    needs: dict[str, SessionNeeds] = {}
    warnings: list[str] = []
    for session in universe:
        located = files.get(session.id)
        if located is None:
            warnings.append(f"session {session.id}: raw log not found; it counts as needing nothing")
            needs[session.id] = SessionNeeds(session.id, session.agent, (), 0)
            continue
        needs[session.id] = read_needs(located, session.cwd or None)
    return needs, files, warnings


def _excluded(files: Mapping[str, SessionFiles], folder: Path | None) -> set[str]:
    if folder is None:
        return set()
    root = folder.resolve()
    return {sid for sid, f in files.items() if f.main.resolve().is_relative_to(root)}


def evaluate(
    request: EvalRequest, run: BrainRunner, work: Path, *, progress: Callable[[int, int], None] | None = None,
) -> Evaluation:
    extracted: list[str] = []
    universe = read_universe(run, request.sources, extracted)
    needs, files, warnings = read_all_needs(request.sources, universe)
    warnings[:0] = extracted
    targets = select_targets(universe, warmup=request.warmup, excluded=_excluded(files, request.exclude_targets_from),
                             min_turns=request.min_target_turns)
    runs = replay(run, request.sources, request.profile, universe, targets, mode=request.mode, work=work,
                  progress=progress, prompts={t.id: needs[t.id].prompts for t in targets},
                  transcripts={sid: f.main for sid, f in files.items() if f.agent == "claude-code"})
    results = []
    for target_run in runs:
        target = target_run.session
        needed = m.without_project(needs[target.id].headline(), target.project, target.cwd)
        earlier = frozenset(
            item.key for other in universe if other.end < target.start for item in needs[other.id].headline()
        )
        known = m.knowable_keys(needed, earlier)
        terms = tuple(i for i in needs[target.id].items if i.kind == TERM)
        earlier_terms = frozenset(
            item.key for other in universe if other.end < target.start for item in needs[other.id].items
            if item.kind == TERM
        )
        knowable_items = [i for i in needed if i.key in known]
        feeds = {BRAIN: target_run.feed,
                 BRAIN_RECALL: "\n\n".join(t for t in (target_run.feed, target_run.recall) if t)}
        feeds.update(bl.baseline_feeds(target, target_run.history, knowable_items,
                                       brain_tokens=tokens(target_run.feed), budget=request.budget))
        scores = {name: m.score_feed(text, needed, known, target.project, terms, earlier_terms)
                  for name, text in feeds.items() if name != BRAIN_RECALL}
        # Recall is scored per prompt (credited only for what the session needed from then on and
        # the prompt did not name itself), on top of the boot feed it was added to.
        scores[BRAIN_RECALL] = m.score_feed(target_run.feed, needed, known, target.project, terms, earlier_terms,
                                            recall=target_run.recalls, prompt_keys=needs[target.id].prompt_keys)
        alone = m.score_feed("", needed, known, target.project, terms, earlier_terms,
                             recall=target_run.recalls, prompt_keys=needs[target.id].prompt_keys)
        results.append(TargetResult(target, target_run.cutoff, len(target_run.history), needed, known, feeds, scores,
                                    alone))
    rows = {name: [m.Scored(r.session.id, r.session.project, r.scores[name]) for r in results] for name in FEEDS}
    aggregates = {name: m.aggregate(rows[name]) for name in FEEDS}
    comparisons = tuple(m.compare(rows[BRAIN], rows[name], name) for name in bl.BASELINES)
    verdict = m.verdict(aggregates[BRAIN], aggregates[bl.EMPTY], comparisons)
    recall_gain = m.compare(rows[BRAIN_RECALL], rows[BRAIN], BRAIN)
    recall_alone = m.aggregate([m.Scored(r.session.id, r.session.project, r.recall_alone) for r in results
                                if r.recall_alone is not None])
    return Evaluation(request, len(universe), tuple(results), aggregates, comparisons, verdict, tuple(warnings),
                      recall_gain, recall_alone)
