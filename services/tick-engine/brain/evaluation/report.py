"""The evaluation as a human table and as JSON; both byte-identical for the same input."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from brain.evaluation import baselines as bl
from brain.evaluation.evaluate import BRAIN, BRAIN_RECALL, FEEDS, Evaluation
from brain.evaluation.metrics import (
    Aggregate,
    Comparison,
    FeedScore,
    Scored,
    TargetCheck,
    aggregate,
    target_checks,
)
from brain.evaluation.needs import KINDS
from brain.evaluation.replay import format_instant

SHORT = {BRAIN: "brain", BRAIN_RECALL: "+recall", bl.EMPTY: "empty", bl.TITLES: "titles", bl.DIGEST_AT_BRAIN: "dig@bt",
         bl.RECENT_DIGEST: "recent", bl.PROJECT_DIGEST: "proj-dg", bl.ORACLE: "oracle"}


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align_left: int = 1) -> list[str]:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        out = [str(c).ljust(w) if i < align_left else str(c).rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        return "  ".join(out).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def human(evaluation: Evaluation) -> str:
    request = evaluation.request
    profile = request.profile
    projects = sorted({t.session.project for t in evaluation.targets})
    out = [
        f"brain eval feed: profile {profile.name} ({profile.source}), mode {request.mode}",
        f"{evaluation.universe} sessions, {len(evaluation.targets)} targets "
        f"({evaluation.aggregates[BRAIN].scored} with knowable items) in {len(projects)} projects; "
        f"budget {request.budget} tokens",
        "",
        "Per session: R_kn of each feed (knowable items mentioned / knowable items)",
    ]
    header = ["session", "project", "|N|", "|K|", *(SHORT[f] for f in FEEDS), "tokens"]
    rows = []
    for t in evaluation.targets:
        brain = t.scores[BRAIN]
        rows.append([t.session.id[:8], t.session.project[:20], str(brain.needed), str(brain.knowable.total),
                     *(_num(t.scores[f].r_kn) for f in FEEDS), str(brain.tokens)])
    out += _table(header, rows, align_left=2)
    out += ["", "Aggregate (R_kn: per-project macro, session macro, micro; early = first 20 tool calls)"]
    header = ["feed", "R_kn/proj", "R_kn/sess", "micro", "early", *KINDS, "R_all", "proj_hit", "precision",
              "prec/proj", "tokens", "tok/hit", "lucky"]
    rows = []
    for name in FEEDS:
        a = evaluation.aggregates[name]
        rows.append([name, _num(a.r_kn_project), _num(a.r_kn_session), _num(a.r_kn_micro), _num(a.r_kn_early),
                     *(_num(a.per_kind[k]) for k in KINDS), _num(a.r_all), _num(a.project_hit),
                     _num(a.precision), _num(a.precision_project), _num(a.tokens, 0), _num(a.tokens_per_hit, 0),
                     str(a.lucky_hits)])
    out += _table(header, rows)
    out += ["", "Per project (R_kn session macro within the project; brain's project hit, precision over all "
            "targets and over the scored ones, and tokens)"]
    header = ["project", "targets", "scored", *(SHORT[f] for f in FEEDS), "proj_hit", "precision", "prec(K)",
              "tokens"]
    rows = []
    for project, feeds in per_project(evaluation).items():
        ours = feeds[BRAIN]
        rows.append([project[:20], str(ours.targets), str(ours.scored), *(_num(feeds[f].r_kn_session) for f in FEEDS),
                     _num(ours.project_hit), _num(ours.precision), _num(ours.precision_project),
                     _num(ours.tokens, 0)])
    out += _table(header, rows)
    rediscovery = evaluation.aggregates[BRAIN].rediscovery
    terms = ", ".join(f"{SHORT[f]} {_num(evaluation.aggregates[f].terms)}" for f in FEEDS)
    out += ["", f"re-discovery rate |K|/|N|: {_num(rediscovery)}",
            f"diagnostic, not in the headline: R_kn of prompt terms (words of 5+ letters): {terms}", "",
            "Brain - baseline on R_kn (95 % bootstrap CI, 2000 resamples, seed 0)"]
    header = ["baseline", "mean/proj", "CI projects", "mean/sess", "CI sessions", "W/T/L", "verdict"]
    rows = []
    for c in evaluation.comparisons:
        rows.append([c.baseline, _num(c.mean_project), _ci(c.ci_project), _num(c.mean_session), _ci(c.ci_session),
                     f"{c.wins}/{c.ties}/{c.losses}", c.verdict])
    out += _table(header, rows)
    gain = evaluation.recall_gain
    if gain is not None:
        ours, plus = evaluation.aggregates[BRAIN], evaluation.aggregates[BRAIN_RECALL]
        out += ["", "Prompt-time recall: R_kn of the boot feed plus what recall showed at the first "
                "prompts (credited only for items needed from that prompt on and not typed in it) "
                "vs the boot feed alone",
                f"  R_kn/proj {_num(ours.r_kn_project)} -> {_num(plus.r_kn_project)}: "
                f"{_num(gain.mean_project)} CI {_ci(gain.ci_project)}; R_kn/sess {_num(ours.r_kn_session)} -> "
                f"{_num(plus.r_kn_session)}: {_num(gain.mean_session)} CI {_ci(gain.ci_session)}; "
                f"W/T/L {gain.wins}/{gain.ties}/{gain.losses}; +{_num(recall_tokens(evaluation), 0)} tokens a session: "
                f"{'adds recall' if gain.verdict == 'better' else gain.verdict}"]
        alone = evaluation.recall_alone
        if alone is not None:
            out.append(f"  diagnostic: recall alone (no boot feed) carries R_kn/proj {_num(alone.r_kn_project)}, "
                       f"R_kn/sess {_num(alone.r_kn_session)}, precision {_num(alone.precision)}")
    out += ["", "Targets (FEED-METRIC: per project, the ideal profile, real logs)"]
    for check in metric_targets(evaluation):
        state = "-" if check.met is None else "met" if check.met else "not met"
        out.append(f"  {state:<8} {check.target}: {check.value}")
    out += ["", f"Verdict: {evaluation.verdict.line()}"]
    for warning in evaluation.warnings:
        out.append(f"warning: {warning}")
    return "\n".join(out) + "\n"


def metric_targets(evaluation: Evaluation) -> tuple[TargetCheck, ...]:
    """Brain's feed against FEED-METRIC's targets (:func:`~brain.evaluation.metrics.target_checks`)."""
    digest = next((c for c in evaluation.comparisons if c.baseline == bl.RECENT_DIGEST), None)
    return target_checks(evaluation.aggregates[BRAIN], digest)


def recall_tokens(evaluation: Evaluation) -> float | None:
    """Tokens prompt-time recall added per target session, on average."""
    ours, plus = evaluation.aggregates[BRAIN].tokens, evaluation.aggregates[BRAIN_RECALL].tokens
    return None if ours is None or plus is None else plus - ours


def per_project(evaluation: Evaluation) -> dict[str, dict[str, Aggregate]]:
    """Each project's aggregate per feed (FEED-METRIC's targets are per project)."""
    projects = sorted({t.session.project for t in evaluation.targets})
    return {
        project: {
            name: aggregate([Scored(t.session.id, project, t.scores[name]) for t in evaluation.targets
                             if t.session.project == project])
            for name in FEEDS
        }
        for project in projects
    }


def _ci(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _score(score: FeedScore) -> dict[str, Any]:
    return {
        "r_kn": _round(score.r_kn), "r_all": _round(score.r_all), "tokens": score.tokens,
        "knowable_hits": score.knowable.hits, "mentioned": score.mentioned,
        "hits": list(score.hits), "lucky": list(score.lucky),
        "per_kind": {k: {"hits": r.hits, "knowable": r.total} for k, r in score.per_kind.items()},
        "early": {"hits": score.early.hits, "knowable": score.early.total},
        "project_hit": score.project_hit, "lines": score.lines, "useful_lines": score.useful_lines,
        "terms": {"hits": score.terms.hits, "knowable": score.terms.total},
        "precision": _round(score.precision),
    }


def _aggregate(a: Aggregate) -> dict[str, Any]:
    return {
        "targets": a.targets, "scored": a.scored, "r_kn_project": _round(a.r_kn_project),
        "r_kn_session": _round(a.r_kn_session), "r_kn_micro": _round(a.r_kn_micro),
        "r_kn_early": _round(a.r_kn_early), "r_kn_early_project": _round(a.r_kn_early_project),
        "per_kind": {k: _round(v) for k, v in a.per_kind.items()},
        "r_all": _round(a.r_all), "project_hit": _round(a.project_hit), "precision": _round(a.precision),
        "precision_project": _round(a.precision_project), "tokens": _round(a.tokens),
        "tokens_per_hit": _round(a.tokens_per_hit), "lucky_hits": a.lucky_hits,
        "rediscovery": _round(a.rediscovery), "terms_r_kn": _round(a.terms),
    }


def _comparison(c: Comparison) -> dict[str, Any]:
    def ci(value: tuple[float, float] | None) -> list[float] | None:
        return None if value is None else [round(value[0], 4), round(value[1], 4)]

    return {
        "sessions": c.sessions, "projects": c.projects, "mean_session": _round(c.mean_session),
        "ci_session": ci(c.ci_session), "mean_project": _round(c.mean_project), "ci_project": ci(c.ci_project),
        "wins": c.wins, "ties": c.ties, "losses": c.losses, "verdict": c.verdict,
    }


def as_json(evaluation: Evaluation) -> str:
    request = evaluation.request
    data = {
        "version": 1,
        "profile": request.profile.describe(),
        "mode": request.mode,
        "warmup": request.warmup,
        "budget_tokens": request.budget,
        "min_target_turns": request.min_target_turns,
        "universe": evaluation.universe,
        "targets": [
            {
                "session_id": t.session.id, "project": t.session.project, "agent": t.session.agent,
                "cwd": t.session.cwd, "start": format_instant(t.session.start), "cutoff": format_instant(t.cutoff),
                "history_sessions": t.history, "needed": len(t.needed), "knowable": len(t.knowable),
                "needed_items": [{"kind": i.kind, "key": i.key, "label": i.label, "first_call": i.first_call,
                                  "knowable": i.key in t.knowable} for i in t.needed],
                "feeds": {name: _score(t.scores[name]) for name in FEEDS},
            }
            for t in evaluation.targets
        ],
        "aggregate": {name: _aggregate(evaluation.aggregates[name]) for name in FEEDS},
        "projects": {
            project: {"targets": feeds[BRAIN].targets, "scored": feeds[BRAIN].scored,
                      "r_kn": {name: _round(a.r_kn_session) for name, a in feeds.items()},
                      "project_hit": _round(feeds[BRAIN].project_hit), "precision": _round(feeds[BRAIN].precision),
                      "precision_scored": _round(feeds[BRAIN].precision_project),
                      "tokens": _round(feeds[BRAIN].tokens)}
            for project, feeds in per_project(evaluation).items()
        },
        "comparisons": {c.baseline: _comparison(c) for c in evaluation.comparisons},
        "recall_gain": (None if evaluation.recall_gain is None else
                        {**_comparison(evaluation.recall_gain), "tokens_added": _round(recall_tokens(evaluation)),
                         "alone": None if evaluation.recall_alone is None else _aggregate(evaluation.recall_alone)}),
        "metric_targets": [{"target": c.target, "value": c.value, "met": c.met} for c in metric_targets(evaluation)],
        "verdict": {"useless": evaluation.verdict.useless, "against": dict(evaluation.verdict.against),
                    "line": evaluation.verdict.line()},
        "warnings": list(evaluation.warnings),
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
