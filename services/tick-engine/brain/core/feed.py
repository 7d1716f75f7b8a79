"""The brain-feed files agents read at session start (SPEC §7, §12), and the per-date dashboards.

:func:`build_feed` is the registry: every file the tick writes to ``brain-feed/`` comes from
it. The global files (``hot-arcs.md``, ``inject.md``, ``signals.md``, ``last-tick-diff.md``,
``intent.md``, ``recent-work.md``) are what a session outside any known project reads; ``projects/<slug>.md``
(see :mod:`brain.core.project_feed`) replace them for a session started in a known project.
A file with nothing to say has an empty body (no filler line); the hook skips it.

Budget: the global files together stay within ``feed_token_budget`` tokens (characters / 4);
each project file stays within it on its own. When over, items are cut in this fixed order
until it fits (each step from the least important item up):

1. ``last-tick-diff.md`` detail lines (newest kept);
2. ``intent.md`` text beyond its first line;
3. ``recent-work.md`` lines (the latest real work across projects), oldest first;
4. ``inject.md`` blocks, oldest first;
5. ``info`` then ``warning`` signals in ``signals.md``;
6. ``hot-arcs.md`` rows below the top 3;
7. critical and nuclear signals are shortened to one line each (text cut to
   :data:`SHORT_SIGNAL_CHARS`), least important first;
8. ``critical`` signals, least recent first.

Nuclear signals, the top 3 hot arcs and every file's header are never cut. Each file that
lost items says how many (``3 more critical signals in the vault``), so an agent knows the
vault holds more.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from brain.core.feed_file import (
    NEVER,
    RANK_CRITICAL,
    RANK_DIFF,
    RANK_HOT,
    RANK_INFO,
    RANK_INJECT,
    RANK_INTENT,
    RANK_WARNING,
    cell,
    cut,
    fit_budget,
    one_line,
)
from brain.core.feed_file import FeedFile as FeedFile  # re-exported: the keeper and amygdala build on them
from brain.core.feed_file import FeedItem as FeedItem
from brain.core.feed_file import tokens as tokens
from brain.core.heat import created_of, last_active_of
from brain.core.keeper import ArcDecision
from brain.core.markers import Marker
from brain.core.model import Note, Problem
from brain.core.project_feed import (
    RECENT_WORK_AGGREGATE,
    Routed,
    is_one_shot,
    latest_by_cwd,
    latest_real_arcs,
    project_arcs,
    project_files,
    recent_work_file,
    shown_arcs,
)
from brain.core.redaction import redact
from brain.core.timeutil import parse_instant
from brain.core.vocab import (
    ALARM_SEVERITIES,
    HOT_ARCS,
    INJECT,
    INTENT,
    LAST_DIFF,
    NO_INJECT_STATUSES,
    SEVERITY_RANK,
    SIGNALS,
)
from brain.settings import Settings

#: Files the keeper rewrites every tick; the others belong to the AI phase or the consumer.
KEEPER_FILES = (HOT_ARCS, INJECT, SIGNALS)
KEEP_TOP_HOT = 3
SIGNAL_CHARS, SHORT_SIGNAL_CHARS, INJECT_LINE_CHARS = 240, 72, 600
#: ``ttl_days`` beyond this (a century) is a typo or an attack, not a lifetime.
MAX_TTL_DAYS = 36_500


@dataclass(frozen=True)
class ArcView:
    """An arc as it stands after this tick's decisions."""

    cluster_id: str
    title: str
    region: str
    status: str
    heat: int
    path: str
    summary: str | None
    last_active: datetime
    scripted: bool = False  # a scripted one-shot run (project_feed.is_one_shot): listed after real work


def arc_view(decision: ArcDecision) -> ArcView:
    arc = decision.note.arc
    assert arc is not None
    last = decision.last_active or last_active_of(decision.note)  # decided already: no second parse
    return ArcView(arc.cluster_id, arc.title, arc.region, decision.status, decision.heat, decision.path,
                   arc.summary, last, is_one_shot(arc, created_of(decision.note), last))


def hottest(decisions: Iterable[ArcDecision], limit: int) -> list[ArcView]:
    """The ``limit`` arcs the hot table lists, in its order: warm, not merged or split; real work
    before scripted runs, then hottest, most recent, by id. Only those become :class:`ArcView`s
    (a table of 20 out of the 1 200 warm arcs of a 10 000-arc vault)."""
    def order(decision: ArcDecision) -> tuple[bool, int, float, str]:
        arc = decision.note.arc
        assert arc is not None
        last = decision.last_active or last_active_of(decision.note)
        return is_one_shot(arc, created_of(decision.note), last), -decision.heat, -last.timestamp(), arc.cluster_id

    warm = (d for d in decisions if d.heat > 0 and d.status not in ("merged", "split"))
    # == sorted(...)[:limit], without sorting every arc
    return [arc_view(d) for d in heapq.nsmallest(max(0, limit), warm, key=order)]


def hot_arcs(ranked: Iterable[ArcView], s: Settings, date: str) -> FeedFile:
    """``hot-arcs.md``: ``ranked`` (:func:`hottest`), the first :data:`KEEP_TOP_HOT` never cut."""
    feed = FeedFile(
        HOT_ARCS, "Active Hot Arcs", 10, "info", date, s.feed_ttl_seconds,
        "# Hot arcs\n\n| Arc | Heat | Region | Status | What |\n|---|---|---|---|---|",
    )
    width = s.feed_cell_chars
    for index, view in enumerate(ranked):
        what = redact(view.summary or view.title)
        row = (
            f"| {cell(f'[[{view.cluster_id}]]', width)} | {view.heat} | {cell(view.region or '-', width)} "
            f"| {cell(view.status or '-', width)} | {cell(what, width)} |"
        )
        feed.items.append(FeedItem(row, NEVER if index < KEEP_TOP_HOT else RANK_HOT))
    return feed


@dataclass(frozen=True)
class SignalView:
    marker: Marker
    origin: str  # cluster_id of the arc, or the note's path
    #: When the arc holding it was last active (POSIX seconds; 0 for an operator note): a fact
    #: of the file, so the order of equally severe signals does not move as heat decays and
    #: the files that list them are not rewritten every tick.
    origin_active: float
    project: str | None = None  # the arc's project; None for an operator note

    @property
    def severity(self) -> str:
        return self.marker.attr("severity") or "info"


def signal_views(notes: Iterable[Note], decisions: Mapping[str, ArcDecision]) -> list[SignalView]:
    out = []
    for note in notes:
        for marker in note.markers:
            if not marker.is_open_signal:
                continue
            if note.arc is not None:
                decision = decisions.get(note.arc.cluster_id)
                active = decision.last_active if decision is not None else None
                out.append(SignalView(marker, note.arc.cluster_id, active.timestamp() if active else 0.0,
                                      note.arc.project))
            else:
                out.append(SignalView(marker, note.path.removesuffix(".md"), 0.0))
    return out


def signal_item(view: SignalView) -> FeedItem:
    """One signal line; critical and nuclear ones carry a short form the budget cut uses first."""
    source = cut(view.marker.attr("source") or "-", 60)
    text = cut(redact(view.marker.text), SIGNAL_CHARS) or "(no text)"
    line = f"- **{view.severity.upper()}** `{source}` in [[{view.origin}]]: {text}"
    ranks = {"nuclear": NEVER, "critical": RANK_CRITICAL, "warning": RANK_WARNING}
    if view.severity not in ALARM_SEVERITIES:
        return FeedItem(line, ranks.get(view.severity, RANK_INFO))
    short = f"- **{view.severity.upper()}** `{cut(source, 30)}`: {cut(text, SHORT_SIGNAL_CHARS)}"
    return FeedItem(line, ranks[view.severity], short=short if len(short) < len(line) else None,
                    label=f"{view.severity} signal")


def signals(views: Iterable[SignalView], s: Settings, date: str) -> tuple[FeedFile, list[Routed]]:
    """``signals.md`` and the lines project files take from it: most severe first, then the
    most recently active arc's (:attr:`SignalView.origin_active`), then by arc and line."""
    ordered = sorted(
        views,
        key=lambda v: (-SEVERITY_RANK.get(v.severity, 1), -v.origin_active, v.origin, v.marker.line),
    )
    top = ordered[0].severity if ordered else "info"
    feed = FeedFile(SIGNALS, "Open Signals", 8, top if top in SEVERITY_RANK else "info", date,
                    s.feed_ttl_seconds, "# Open signals\n")
    routed = []
    for view in ordered:
        item = signal_item(view)
        feed.items.append(item)
        routed.append(Routed(item, view.project, view.severity in ALARM_SEVERITIES, severity=view.severity))
    return feed, routed


@dataclass(frozen=True)
class LiveInject:
    born: datetime
    origin: str
    marker: Marker
    project: str | None  # the arc's project; None for an operator note


def inject_ttl_days(marker: Marker, path: str, s: Settings, problems: list[Problem]) -> int:
    """The block's ``ttl_days``, range-checked: a bad value is reported and the default applies."""
    default = min(max(s.inject_ttl_days, 0), MAX_TTL_DAYS)
    raw = marker.attr("ttl_days")
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        problems.append(Problem(path, marker.line, f"@inject ttl_days={cut(raw, 40)!r} is not a whole number of "
                                                   f"days; the default {default} applies"))
        return default
    if not 0 <= value <= MAX_TTL_DAYS:
        problems.append(Problem(path, marker.line, f"@inject ttl_days={cut(raw, 40)} is out of range "
                                                   f"0..{MAX_TTL_DAYS}; the default {default} applies"))
        return default
    return value


def live_injects(notes: Iterable[Note], decisions: Mapping[str, ArcDecision], now: datetime, s: Settings,
                 problems: list[Problem]) -> list[LiveInject]:
    """Inject blocks still in force, newest first (SPEC §7)."""
    live: list[LiveInject] = []
    for note in notes:
        status = ""
        if note.arc is not None:
            decision = decisions.get(note.arc.cluster_id)
            status = decision.status if decision is not None else note.arc.status
            if status in NO_INJECT_STATUSES:
                continue
        for marker in note.markers:
            if marker.type != "inject" or not marker.text:
                continue
            born = parse_instant(marker.attr("date")) or (
                created_of(note) if note.arc is not None else last_active_of(note)
            )
            ttl = inject_ttl_days(marker, note.path, s, problems)
            if now - born > timedelta(days=ttl):
                continue
            if note.arc is not None:
                live.append(LiveInject(born, note.arc.cluster_id, marker, note.arc.project))
            else:
                live.append(LiveInject(born, note.path.removesuffix(".md"), marker, None))
    live.sort(key=lambda item: (-item.born.timestamp(), item.origin, item.marker.line))
    return live


def inject(live: Iterable[LiveInject], s: Settings, date: str) -> tuple[FeedFile, list[Routed]]:
    feed = FeedFile(INJECT, "Injected Context", 9, "info", date, s.feed_ttl_seconds, "# Injected context\n")
    routed = []
    for block in live:
        target = block.marker.attr("target") or "all"
        body = redact(block.marker.text).replace("\n---", "\n—")
        feed.items.append(FeedItem(f"\n## [[{block.origin}]] → {cut(target, 40)}\n\n{body}", RANK_INJECT))
        # In a project's feed an inject is one list line: the section says what it is.
        compact = FeedItem(f"- {cut(redact(block.marker.text), INJECT_LINE_CHARS)}", RANK_INJECT)
        everywhere = target == "all" or block.project is None
        routed.append(Routed(compact, block.project, everywhere, target=target))
    return feed, routed


_MOVE_LINE = re.compile(r"^(promoted|demoted|graduated) \[\[")
_HEAT_LINE = re.compile(r"^heat changed on (\d+) arcs?$")
_MORE_LINE = re.compile(r"^\d+ more changes not listed \((.*) in all\)$")
_MOVE_COUNT = re.compile(r"(\d+) (promoted|demoted|graduated)")
MOVES = ("promoted", "demoted", "graduated")


def last_tick_diff(lines: list[str], s: Settings, date: str, tick_id: str) -> FeedFile:
    """What the last tick changed; moves and heat changes are one count line, not a line per arc."""
    counts = dict.fromkeys(MOVES, 0)
    in_all: dict[str, int] | None = None
    heat = 0
    kept = []
    for line in lines:
        flat = one_line(line)
        move, heat_line, more = _MOVE_LINE.match(flat), _HEAT_LINE.match(flat), _MORE_LINE.match(flat)
        if move:
            counts[move.group(1)] += 1
        elif heat_line:
            heat += int(heat_line.group(1))
        elif more:
            in_all = {kind: int(n) for n, kind in _MOVE_COUNT.findall(more.group(1))}
        else:
            kept.append(flat)
    counts = in_all if in_all is not None else counts
    parts = [f"{counts[kind]} {kind}" for kind in MOVES if counts.get(kind)]
    summary = ", ".join(parts)
    if heat:
        summary += ("; " if summary else "") + f"heat changed on {heat} arc{'s' if heat != 1 else ''}"
    feed = FeedFile(LAST_DIFF, "Last Tick Diff", 5, "info", date, s.feed_ttl_seconds,
                    f"# What tick {tick_id} changed\n")
    if summary:
        feed.items.append(FeedItem(f"- {summary}", RANK_DIFF))
    feed.items.extend(FeedItem(f"- {redact(line)}", RANK_DIFF) for line in kept)
    return feed


def dashboards(decisions: Mapping[str, ArcDecision]) -> dict[str, str]:
    """``clusters/<date>/_dashboard.md`` -> text, listing each date's arcs wherever they live."""
    by_date: dict[str, list[ArcDecision]] = {}
    for decision in decisions.values():
        day = created_of(decision.note).date().isoformat()
        by_date.setdefault(day, []).append(decision)
    out: dict[str, str] = {}
    for day, group in by_date.items():
        lines = [
            "---",
            "type: dashboard",
            f"date: '{day}'",
            "---",
            f"# Arcs of {day}",
            "",
            "Generated by the brain keeper; edits here are overwritten.",
            "",
        ]
        lines.extend(dashboard_line(decision) for decision in sorted(group, key=lambda d: d.cluster_id))
        out[dashboard_of(day)] = "\n".join(lines) + "\n"
    return out


def dashboard_of(day: str) -> str:
    return f"clusters/{day}/_dashboard.md"


def dashboard_line(decision: ArcDecision) -> str:
    arc = decision.note.arc
    assert arc is not None
    folder = decision.path.rsplit("/", 1)[0] if "/" in decision.path else "."
    title = one_line(arc.title).replace("[", "(").replace("]", ")").replace("|", "/")
    return f"- [[{arc.cluster_id}]] — {title} · {decision.status or '-'} · `{folder}`"


def patch_dashboard(text: str, decisions: Iterable[ArcDecision]) -> str | None:
    """A dashboard :func:`dashboards` wrote, with the lines of ``decisions`` (arcs of its date
    that moved or changed status) rendered again; None when one of them has no line there."""
    lines = text.split("\n")
    at = {line[: line.find("]]") + 2]: i for i, line in enumerate(lines) if line.startswith("- [[")}
    for decision in decisions:
        i = at.get(f"- [[{decision.cluster_id}]]")
        if i is None:
            return None
        lines[i] = dashboard_line(decision)
    return "\n".join(lines)


@dataclass(frozen=True)
class FeedInputs:
    """Everything the feed is built from: the tick's notes and decisions, and its own diff."""

    notes: tuple[Note, ...]
    decisions: Mapping[str, ArcDecision]
    now: datetime
    settings: Settings
    diff_lines: tuple[str, ...] = ()
    tick_id: str = ""
    intent_text: str | None = None
    folder_tokens: Mapping[str, int] = field(default_factory=dict)  # feed files already in the folder
    #: Files as an earlier build wrote them: name -> (:attr:`FeedFile.inputs`, text); one whose
    #: inputs are the same again is taken as it is (:func:`project_files`).
    built_before: Mapping[str, tuple[str, str]] = field(default_factory=dict)


@dataclass
class BuiltFeed:
    files: list[FeedFile]  # global files (``budgeted``), then project files and their index
    signals_active: int = 0
    inject_blocks: int = 0
    fixed_tokens: int = 0  # tokens of the folder's files this build did not produce
    #: The cluster_ids whose arcs this build could read beyond the warm ones (heat above 0) and
    #: those holding signals or injects: each project's latest, each recorded cwd's latest.
    reads: frozenset[str] = frozenset()
    problems: list[Problem] = field(default_factory=list)  # bad values met (reported, never fatal)
    #: The notes holding a signal or an inject (:func:`with_markers`), in their order: what
    #: :func:`brain.core.keeper.valid_until` reads besides the decisions.
    marked: list[Note] = field(default_factory=list)


#: The markers the signals and inject files list: every feed build reads the notes holding one,
#: wherever they are (a quiet tick's view keeps them all).
FEED_MARKERS = frozenset({"signal", "inject"})


def with_markers(notes: Iterable[Note], types: frozenset[str]) -> list[Note]:
    """The notes holding a marker of one of ``types``, in their order."""
    found = []
    for note in notes:
        for marker in note.markers:
            if marker.type in types:
                found.append(note)
                break
    return found


def build_feed(inputs: FeedInputs) -> BuiltFeed:
    """The registry of feed files: every file the tick writes to ``brain-feed/``, within budget."""
    s, now = inputs.settings, inputs.now
    date = now.date().isoformat()
    problems: list[Problem] = []
    marked = with_markers(inputs.notes, FEED_MARKERS)  # one walk over every marker, not one per file
    signal_list = signal_views(marked, inputs.decisions)
    signal_file, routed_signals = signals(signal_list, s, date)
    live = live_injects(marked, inputs.decisions, now, s, problems)
    inject_file, routed_injects = inject(live, s, date)
    by_project = project_arcs(inputs.decisions)
    latest = latest_real_arcs(by_project, RECENT_WORK_AGGREGATE)
    files = [hot_arcs(hottest(inputs.decisions.values(), s.hot_arcs_limit), s, date), inject_file, signal_file,
             recent_work_file(latest, s, date)]
    if inputs.diff_lines:
        files.append(last_tick_diff(list(inputs.diff_lines), s, date, inputs.tick_id or now.isoformat()))
    if inputs.intent_text is not None:
        intent = FeedFile(INTENT, "Operator Intent", 7, "info", date, s.feed_ttl_seconds, "# Operator intent\n")
        first, _, rest = redact(inputs.intent_text).strip().partition("\n")
        intent.items.append(FeedItem(first))
        if rest.strip():
            intent.items.append(FeedItem(rest.strip(), RANK_INTENT))
        files.append(intent)
    produced = {f.name for f in files}
    fixed = sum(n for name, n in inputs.folder_tokens.items() if name not in produced)
    fit_budget(files, fixed, s.feed_token_budget)
    by_cwd = latest_by_cwd(by_project)
    files.extend(project_files(by_project, routed_signals, routed_injects, now, s, date, inputs.built_before,
                               by_cwd=by_cwd))
    return BuiltFeed(files, signals_active=len(signal_list), inject_blocks=len(live), fixed_tokens=fixed,
                     problems=problems, reads=frozenset(shown_arcs(by_project, by_cwd)), marked=marked)
