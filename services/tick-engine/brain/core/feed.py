"""The brain-feed files agents read at session start (SPEC §7), and the per-date dashboards.

Budget: the whole feed stays within ``feed_token_budget`` tokens (characters / 4). When it is
over, items are cut in this fixed order until it fits (each step from the least important
item up):

1. ``last-tick-diff.md`` detail lines (newest kept);
2. ``intent.md`` text beyond its first line;
3. ``inject.md`` blocks, oldest first;
4. ``info`` then ``warning`` signals in ``signals.md``;
5. ``hot-arcs.md`` rows below the top 3;
6. ``critical`` signals, least recent first.

Nuclear signals, the top 3 hot arcs and every file's header are never cut. Each file that
lost items says how many, so an agent knows the vault holds more.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from brain.core.heat import created_of, last_active_of
from brain.core.keeper import ArcDecision
from brain.core.markers import Marker
from brain.core.model import Note
from brain.core.redaction import redact
from brain.core.text import cut as cut_text
from brain.core.timeutil import parse_instant
from brain.core.vocab import NO_INJECT_STATUSES, SEVERITY_RANK
from brain.settings import Settings

HOT_ARCS, SIGNALS, INJECT, INTENT, LAST_DIFF, AMYGDALA_ACTIVE = (
    "hot-arcs.md",
    "signals.md",
    "inject.md",
    "intent.md",
    "last-tick-diff.md",
    "amygdala-active.md",
)
#: Files the keeper rewrites every tick; the others belong to the AI phase or the consumer.
KEEPER_FILES = (HOT_ARCS, INJECT, SIGNALS)
KEEP_TOP_HOT = 3
NEVER = 10_000

RANK_DIFF, RANK_INTENT, RANK_INJECT, RANK_INFO, RANK_WARNING, RANK_HOT, RANK_CRITICAL = 10, 20, 30, 40, 50, 60, 70


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def one_line(text: str) -> str:
    return " ".join(text.split())


def cut(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, cut on a word boundary."""
    return cut_text(one_line(text), limit)


def cell(text: str, limit: int) -> str:
    return cut(text, limit).replace("|", "\\|")


@dataclass
class FeedItem:
    text: str
    rank: int = NEVER  # lower is cut first; NEVER is never cut


@dataclass
class FeedFile:
    name: str
    title: str
    priority: int
    severity: str
    date: str
    ttl: int
    header: str
    items: list[FeedItem] = field(default_factory=list)
    empty: str = ""
    omitted: int = 0

    def render(self) -> str:
        # Fixed keys and plain values: no YAML emitter needed (titles and severities are ours).
        front = (
            f"id: {self.name.removesuffix('.md')}-{self.date}\ntitle: {self.title}\npriority: {self.priority}\n"
            f"ttl: {self.ttl}\nseverity: {self.severity}\n"
        )
        lines = [f"---\n{front}---\n", self.header + "\n"]
        if self.items:
            lines.extend(item.text.rstrip("\n") + "\n" for item in self.items)
        elif self.empty:
            lines.append(self.empty + "\n")
        if self.omitted:
            lines.append(f"\n_{self.omitted} more not shown (feed budget); see the vault._\n")
        return "".join(lines)


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


def arc_views(decisions: Mapping[str, ArcDecision]) -> list[ArcView]:
    views = []
    for decision in decisions.values():
        arc = decision.note.arc
        assert arc is not None
        views.append(
            ArcView(arc.cluster_id, arc.title, arc.region, decision.status, decision.heat, decision.path,
                    arc.summary, last_active_of(decision.note))
        )
    return views


def hot_arcs(views: Iterable[ArcView], s: Settings, date: str) -> FeedFile:
    ranked = sorted(
        (v for v in views if v.status not in ("merged", "split") and v.heat > 0),
        key=lambda v: (-v.heat, -v.last_active.timestamp(), v.cluster_id),
    )[: s.hot_arcs_limit]
    feed = FeedFile(
        HOT_ARCS, "Active Hot Arcs", 10, "info", date, s.feed_ttl_seconds,
        "# Hot arcs\n\n| Arc | Heat | Region | Status | What |\n|---|---|---|---|---|",
        empty="| (no arcs yet) | | | | |",
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
    origin_heat: int

    @property
    def severity(self) -> str:
        return self.marker.attr("severity") or "info"


def signal_views(notes: Iterable[Note], decisions: Mapping[str, ArcDecision]) -> list[SignalView]:
    out = []
    for note in notes:
        for marker in note.markers:
            if marker.type != "signal" or (marker.attr("severity") or "info") == "resolved":
                continue
            if note.arc is not None:
                decision = decisions.get(note.arc.cluster_id)
                heat = decision.heat if decision is not None else (note.arc.heat or 0)
                out.append(SignalView(marker, note.arc.cluster_id, heat))
            else:
                out.append(SignalView(marker, note.path.removesuffix(".md"), 0))
    return out


def signals(views: Iterable[SignalView], s: Settings, date: str) -> FeedFile:
    ordered = sorted(
        views,
        key=lambda v: (-SEVERITY_RANK.get(v.severity, 1), -v.origin_heat, v.origin, v.marker.line),
    )
    top = ordered[0].severity if ordered else "info"
    feed = FeedFile(SIGNALS, "Open Signals", 8, top if top in SEVERITY_RANK else "info", date,
                    s.feed_ttl_seconds, "# Open signals\n", empty="No open signals.")
    ranks = {"nuclear": NEVER, "critical": RANK_CRITICAL, "warning": RANK_WARNING}
    for view in ordered:
        source = view.marker.attr("source") or "-"
        text = cut(redact(view.marker.text), 240) or "(no text)"
        line = f"- **{view.severity.upper()}** `{cut(source, 60)}` in [[{view.origin}]]: {text}"
        feed.items.append(FeedItem(line, ranks.get(view.severity, RANK_INFO)))
    return feed


def inject(notes: Iterable[Note], decisions: Mapping[str, ArcDecision], now: datetime, s: Settings,
           date: str) -> FeedFile:
    live: list[tuple[datetime, str, Marker]] = []
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
            try:
                ttl = int(marker.attr("ttl_days") or s.inject_ttl_days)
            except ValueError:
                ttl = s.inject_ttl_days
            if now - born > timedelta(days=ttl):
                continue
            origin = note.arc.cluster_id if note.arc is not None else note.path.removesuffix(".md")
            live.append((born, origin, marker))
    live.sort(key=lambda item: (-item[0].timestamp(), item[1], item[2].line))
    feed = FeedFile(INJECT, "Injected Context", 9, "info", date, s.feed_ttl_seconds, "# Injected context\n",
                    empty="Nothing to inject.")
    for _, origin, marker in live:
        target = marker.attr("target") or "all"
        body = redact(marker.text).replace("\n---", "\n—")
        feed.items.append(FeedItem(f"\n## [[{origin}]] → {cut(target, 40)}\n\n{body}", RANK_INJECT))
    return feed


def last_tick_diff(lines: list[str], s: Settings, date: str, tick_id: str) -> FeedFile:
    feed = FeedFile(LAST_DIFF, "Last Tick Diff", 5, "info", date, s.feed_ttl_seconds,
                    f"# What tick {tick_id} changed\n", empty="Nothing changed.")
    feed.items = [FeedItem(f"- {redact(one_line(line))}", RANK_DIFF) for line in lines]
    return feed


def fit_budget(files: list[FeedFile], fixed_tokens: int, budget: int) -> None:
    """Cut items in the documented order until the feed fits ``budget`` (in place).

    Sizes are tracked incrementally (one render per file at the start), so cutting is linear.
    """
    sizes = [len(f.render()) for f in files]

    def total() -> int:
        return fixed_tokens + sum(math.ceil(size / 4) for size in sizes)

    if total() <= budget:
        return
    cuttable = [
        (item.rank, -index, feed_index, index)
        for feed_index, feed in enumerate(files)
        for index, item in enumerate(feed.items)
        if item.rank < NEVER
    ]
    cuttable.sort()
    removed: list[set[int]] = [set() for _ in files]
    for _, _, feed_index, index in cuttable:
        if total() <= budget:
            break
        feed = files[feed_index]
        removed[feed_index].add(index)
        sizes[feed_index] -= len(feed.items[index].text.rstrip("\n")) + 1
        if len(removed[feed_index]) == len(feed.items) and feed.empty:
            sizes[feed_index] += len(feed.empty) + 1
        sizes[feed_index] += _omitted_len(len(removed[feed_index])) - _omitted_len(len(removed[feed_index]) - 1)
    for feed_index, feed in enumerate(files):
        if removed[feed_index]:
            feed.items = [item for index, item in enumerate(feed.items) if index not in removed[feed_index]]
            feed.omitted += len(removed[feed_index])


def _omitted_len(count: int) -> int:
    return len(f"\n_{count} more not shown (feed budget); see the vault._\n") if count else 0


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
        for decision in sorted(group, key=lambda d: d.cluster_id):
            arc = decision.note.arc
            assert arc is not None
            folder = decision.path.rsplit("/", 1)[0] if "/" in decision.path else "."
            title = one_line(arc.title).replace("[", "(").replace("]", ")").replace("|", "/")
            lines.append(f"- [[{arc.cluster_id}]] — {title} · {decision.status or '-'} · `{folder}`")
        out[f"clusters/{day}/_dashboard.md"] = "\n".join(lines) + "\n"
    return out


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


@dataclass
class BuiltFeed:
    files: list[FeedFile]
    signals_active: int = 0
    inject_blocks: int = 0
    fixed_tokens: int = 0  # tokens of the folder's files this build did not produce


def build_feed(inputs: FeedInputs) -> BuiltFeed:
    """The registry of feed files: every file the tick writes to ``brain-feed/``, within budget."""
    s, now = inputs.settings, inputs.now
    date = now.date().isoformat()
    views = arc_views(inputs.decisions)
    signal_list = signal_views(inputs.notes, inputs.decisions)
    injected = inject(inputs.notes, inputs.decisions, now, s, date)
    files = [hot_arcs(views, s, date), injected, signals(signal_list, s, date)]
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
    return BuiltFeed(files, signals_active=len(signal_list), inject_blocks=len(injected.items), fixed_tokens=fixed)
