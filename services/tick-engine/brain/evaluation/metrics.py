"""Scoring feeds against what sessions needed, and comparing Brain with the baselines (FEED-METRIC §3).

Pure functions over values: no files, no clock. The bootstrap uses its own seeded generator,
so the same scores give the same intervals.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from brain.core.feed import tokens
from brain.evaluation.needs import KINDS, TERM, NeededItem, normalise

#: Items first needed within this many tool calls count for R_kn(early).
EARLY_CALLS = 20
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0
#: Brain is USELESS when it scores at most this much above the empty feed.
USELESS_MARGIN = 0.01


def _padded(text: str) -> str:
    return f" {normalise(text)} "


def mentions(text: str, form: str) -> bool:
    """Whole-word phrase match of a normalised ``form`` in ``text`` (``converter.py`` is not in
    ``converter_py2``)."""
    form = normalise(form)
    return bool(form) and f" {form} " in _padded(text)


def _mentioned(padded: str, item: NeededItem) -> bool:
    return any(f" {form} " in padded for form in item.forms)


_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def content_lines(text: str) -> list[str]:
    """Feed lines that carry content: no blank lines, headings, table separators or table header rows."""
    lines = text.splitlines()
    kept = []
    for index, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or _SEPARATOR.match(stripped):
            continue
        following = lines[index + 1].strip() if index + 1 < len(lines) else ""
        if stripped.startswith("|") and _SEPARATOR.match(following):
            continue  # a table's header row
        kept.append(line)
    return kept


@dataclass(frozen=True)
class Ratio:
    hits: int
    total: int

    @property
    def value(self) -> float | None:
        return self.hits / self.total if self.total else None


@dataclass(frozen=True)
class FeedScore:
    """One feed for one target session."""

    tokens: int
    needed: int
    knowable: Ratio  # knowable items mentioned / knowable items
    mentioned: int  # needed items mentioned (knowable or not)
    lucky: tuple[str, ...]  # labels of mentioned items that were not knowable
    hits: tuple[str, ...]  # labels of mentioned knowable items
    per_kind: Mapping[str, Ratio]
    early: Ratio
    project_hit: bool
    lines: int
    useful_lines: int
    #: Diagnostic only (not in the headline): knowable prompt terms mentioned / knowable terms.
    terms: Ratio = Ratio(0, 0)

    @property
    def r_kn(self) -> float | None:
        return self.knowable.value

    @property
    def r_all(self) -> float | None:
        return self.mentioned / self.needed if self.needed else None

    @property
    def precision(self) -> float | None:
        return self.useful_lines / self.lines if self.lines else None


def recall_credit(
    recall: Sequence[tuple[int, str]], items: Iterable[NeededItem], prompt_keys: Sequence[frozenset[str]],
) -> frozenset[tuple[str, str]]:
    """(kind, key) of the items prompt-time recall may be credited for (docs/eval.md).

    Recall shown at prompt k counts for an item it mentions only when the session first needed
    the item in turn k or later (an item needed before prompt k was already found without it)
    and the operator did not type the item in prompt k itself (showing it back is an echo, not
    memory). A prompt term always comes from a prompt, so only a later prompt's term counts.
    """
    credited: set[tuple[str, str]] = set()
    pool = list(items)
    for k, text in recall:
        padded = _padded(text)
        typed = prompt_keys[k] if 0 <= k < len(prompt_keys) else frozenset()
        for item in pool:
            if (item.kind, item.key) in credited or item.key in typed:
                continue
            later = item.first_turn > k if item.kind == TERM else item.first_turn >= k
            if later and _mentioned(padded, item):
                credited.add((item.kind, item.key))
    return frozenset(credited)


def score_feed(
    text: str, needed: Sequence[NeededItem], knowable_keys: frozenset[str], project: str,
    terms: Sequence[NeededItem] = (), knowable_terms: frozenset[str] = frozenset(),
    recall: Sequence[tuple[int, str]] = (), prompt_keys: Sequence[frozenset[str]] = (),
) -> FeedScore:
    """How much of what the session needed (and could have known) the feed carries.

    ``recall`` (prompt index, text) is what prompt-time recall added during the session: its
    mentions count by :func:`recall_credit`, its lines and tokens count like the feed's.
    """
    padded = _padded(text)
    term_pool = [t for t in terms if t.key in knowable_terms]
    credit = recall_credit(recall, (*needed, *term_pool), prompt_keys) if recall else frozenset()
    mentioned = [item for item in needed if (item.kind, item.key) in credit or _mentioned(padded, item)]
    knowable = [item for item in needed if item.key in knowable_keys]
    hit_set = {(i.kind, i.key) for i in mentioned}
    hits = [i for i in knowable if (i.kind, i.key) in hit_set]
    per_kind = {
        kind: Ratio(sum(1 for i in hits if i.kind == kind), sum(1 for i in knowable if i.kind == kind)) for kind in KINDS
    }
    early_items = [i for i in knowable if i.first_call < EARLY_CALLS]
    early = Ratio(sum(1 for i in early_items if (i.kind, i.key) in hit_set), len(early_items))
    lines = content_lines(text)
    useful = sum(1 for line in lines if any(_mentioned(_padded(line), item) for item in needed))
    credited_items = [i for i in needed if (i.kind, i.key) in credit]
    for _, block in recall:  # a recall line is useful only for what it may be credited with
        for line in content_lines(block):
            lines.append(line)
            useful += any(_mentioned(_padded(line), item) for item in credited_items)
    shown = "\n\n".join((text, *(block for _, block in recall))) if recall else text
    return FeedScore(
        tokens=tokens(shown),
        needed=len(needed),
        knowable=Ratio(len(hits), len(knowable)),
        mentioned=len(mentioned),
        lucky=tuple(i.label for i in mentioned if i.key not in knowable_keys),
        hits=tuple(i.label for i in hits),
        per_kind=per_kind,
        early=early,
        project_hit=bool(project) and mentions(text, project),
        lines=len(lines),
        useful_lines=useful,
        terms=Ratio(sum(1 for t in term_pool if (t.kind, t.key) in credit or _mentioned(padded, t)), len(term_pool)),
    )


def without_project(items: Iterable[NeededItem], project: str, cwd: str) -> tuple[NeededItem, ...]:
    """The items minus the project's own name (``deep-manifest`` run in /src/deep-manifest): the
    project is not a needed item, the agent knows its cwd (FEED-METRIC §2)."""
    names = {normalise(project), normalise(cwd.rstrip("/").rsplit("/", 1)[-1])} - {""}
    return tuple(i for i in items if normalise(i.key) not in names)


def knowable_keys(needed: Iterable[NeededItem], earlier_keys: frozenset[str]) -> frozenset[str]:
    """Keys of the session's items that some earlier session had among its items."""
    return frozenset(i.key for i in needed if i.key in earlier_keys)


# --- aggregates ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scored:
    """One target's score for one feed, with what the averages group by."""

    session_id: str
    project: str
    score: FeedScore


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def project_macro(rows: Sequence[Scored], value: Callable[[FeedScore], float | None] = lambda s: s.r_kn,
                  ) -> float | None:
    """Mean over projects of the mean ``value`` (R_kn unless given) of their targets, each
    project weighing the same; a target whose value is None does not count."""
    by_project: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        number = value(row.score)
        if number is not None:
            by_project[row.project].append(number)
    return _mean(sum(v) / len(v) for _, v in sorted(by_project.items()))


def scored_precision(score: FeedScore) -> float | None:
    """Precision of a target R_kn scores (knowable items exist); None otherwise: where no
    earlier session had any of the items, every feed's lines score 0 (the oracle has none),
    which says something about the logs, not about the feed."""
    return score.precision if score.r_kn is not None else None


@dataclass(frozen=True)
class Aggregate:
    targets: int
    scored: int  # targets with knowable items
    r_kn_project: float | None
    r_kn_session: float | None
    r_kn_micro: float | None
    r_kn_early: float | None
    per_kind: Mapping[str, float | None]
    r_all: float | None
    project_hit: float | None
    precision: float | None  # session mean over every target
    precision_project: float | None  # per-project macro over the targets R_kn scores
    tokens: float | None
    tokens_per_hit: float | None
    lucky_hits: int
    rediscovery: float | None
    terms: float | None = None
    r_kn_early_project: float | None = None  # per-project macro of R_kn(early), as FEED-METRIC's target reads


def aggregate(rows: Sequence[Scored]) -> Aggregate:
    scores = [r.score for r in rows]
    hits = sum(s.knowable.hits for s in scores)
    total = sum(s.knowable.total for s in scores)
    token_sum = sum(s.tokens for s in scores)
    return Aggregate(
        targets=len(scores),
        scored=sum(1 for s in scores if s.r_kn is not None),
        r_kn_project=project_macro(rows),
        r_kn_session=_mean(s.r_kn for s in scores),
        r_kn_micro=hits / total if total else None,
        r_kn_early=_mean(s.early.value for s in scores),
        per_kind={kind: _mean(s.per_kind[kind].value for s in scores) for kind in KINDS},
        r_all=_mean(s.r_all for s in scores),
        project_hit=_mean(1.0 if s.project_hit else 0.0 for s in scores),
        precision=_mean(s.precision for s in scores),
        precision_project=project_macro(rows, scored_precision),
        tokens=_mean(float(s.tokens) for s in scores),
        tokens_per_hit=token_sum / hits if hits else None,
        lucky_hits=sum(len(s.lucky) for s in scores),
        rediscovery=_mean(s.knowable.total / s.needed if s.needed else None for s in scores),
        terms=_mean(s.terms.value for s in scores),
        r_kn_early_project=project_macro(rows, lambda s: s.early.value),
    )


# --- paired comparison -----------------------------------------------------------------------------


def bootstrap_ci(
    values: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """95 % percentile interval of the mean, resampling ``values`` with replacement."""
    if not values:
        return None
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    low = means[int(0.025 * resamples)]
    high = means[min(resamples - 1, int(0.975 * resamples))]
    return low, high


@dataclass(frozen=True)
class Comparison:
    """Brain − baseline on R_kn, paired by target session."""

    baseline: str
    sessions: int
    projects: int
    mean_session: float | None
    ci_session: tuple[float, float] | None
    mean_project: float | None
    ci_project: tuple[float, float] | None
    wins: int
    ties: int
    losses: int

    @property
    def verdict(self) -> str:
        ci = self.ci_project
        if ci is None:
            return "indistinguishable"
        if ci[0] > 0:
            return "better"
        if ci[1] < 0:
            return "worse"
        return "indistinguishable"


def compare(brain: Sequence[Scored], baseline: Sequence[Scored], name: str) -> Comparison:
    other = {row.session_id: row.score.r_kn for row in baseline}
    deltas: list[tuple[str, float]] = []
    for row in brain:
        theirs = other.get(row.session_id)
        if row.score.r_kn is not None and theirs is not None:
            deltas.append((row.project, row.score.r_kn - theirs))
    by_project: dict[str, list[float]] = defaultdict(list)
    for project, delta in deltas:
        by_project[project].append(delta)
    project_deltas = [sum(v) / len(v) for _, v in sorted(by_project.items())]
    session_deltas = [d for _, d in deltas]
    eps = 1e-12
    return Comparison(
        baseline=name,
        sessions=len(session_deltas),
        projects=len(project_deltas),
        mean_session=_mean(session_deltas),
        ci_session=bootstrap_ci(session_deltas),
        mean_project=_mean(project_deltas),
        ci_project=bootstrap_ci(project_deltas),
        wins=sum(1 for d in session_deltas if d > eps),
        ties=sum(1 for d in session_deltas if abs(d) <= eps),
        losses=sum(1 for d in session_deltas if d < -eps),
    )


@dataclass(frozen=True)
class Verdict:
    useless: bool
    against: Mapping[str, str] = field(default_factory=dict)

    def line(self) -> str:
        if self.useless:
            return "USELESS: Brain's feed carries no more of what sessions needed than an empty feed"
        parts = [f"{verdict} {'from' if verdict == 'indistinguishable' else 'than'} {name}"
                 for name, verdict in self.against.items()]
        return "Brain is " + "; ".join(parts)


def verdict(brain: Aggregate, empty: Aggregate, comparisons: Sequence[Comparison]) -> Verdict:
    """``USELESS`` when Brain ≤ empty + 0.01 (per-project R_kn); else better / worse /
    indistinguishable against each baseline by the per-project 95 % interval."""
    ours = brain.r_kn_project or 0.0
    floor = empty.r_kn_project or 0.0
    if ours <= floor + USELESS_MARGIN:
        return Verdict(True, {c.baseline: c.verdict for c in comparisons})
    return Verdict(False, {c.baseline: c.verdict for c in comparisons})


#: FEED-METRIC's targets for the boot feed (per project, the ideal profile, real logs).
R_KN_TARGET, EARLY_TARGET, PROJECT_HIT_TARGET, PRECISION_TARGET = 0.5, 0.5, 0.8, 0.3


@dataclass(frozen=True)
class TargetCheck:
    """One of FEED-METRIC's targets as this run measured it."""

    target: str
    value: str  # the figure, as printed
    met: bool | None  # None: this run cannot tell


def target_checks(brain: Aggregate, digest: Comparison | None) -> tuple[TargetCheck, ...]:
    """Brain's feed against FEED-METRIC's targets: knowable-item recall per project and early,
    above the recent digest at the full budget by a per-project interval that excludes 0, the
    project named, precision per project over the scored targets. The production profile's
    distance to the ideal one takes two runs: it is listed, never judged here."""

    def at_least(label: str, value: float | None, threshold: float) -> TargetCheck:
        shown = "-" if value is None else f"{value:.2f}"
        return TargetCheck(f"{label} >= {threshold:.2f}", shown, None if value is None else value >= threshold)

    ci = digest.ci_project if digest is not None else None
    return (
        at_least("R_kn per project", brain.r_kn_project, R_KN_TARGET),
        at_least("R_kn early per project (first 20 tool calls)", brain.r_kn_early_project, EARLY_TARGET),
        TargetCheck("above the recent digest at the full budget: per-project 95 % CI excludes 0",
                    "-" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]", None if ci is None else ci[0] > 0),
        at_least("project named in the feed", brain.project_hit, PROJECT_HIT_TARGET),
        at_least("precision per project (scored targets)", brain.precision_project, PRECISION_TARGET),
        TargetCheck("production profile within 0.10 of ideal (R_kn per project)",
                    "run both profiles and compare", None),
    )
