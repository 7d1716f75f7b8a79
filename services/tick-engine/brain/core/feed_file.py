"""One brain-feed file as values, its rendering, and the budget cut every feed build shares.

A :class:`FeedFile` is a header and ranked :class:`FeedItem` lines, optionally grouped under
``## section`` headings. :func:`fit_budget` cuts items, least important first, until a set of
files fits a token budget; an item that carries a ``short`` form (critical and nuclear signals)
is first shortened to it, and only dropped once every item that can be shortened is. Each file
that lost items says how many, by kind, so an agent knows the vault holds more.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from brain.core.text import cut as cut_text

NEVER = 10_000
#: Ranks: lower is cut first; NEVER is never cut. Shortening comes after every lower rank is cut.
RANK_DIFF, RANK_INTENT, RANK_INJECT, RANK_INFO, RANK_WARNING, RANK_HOT, RANK_CRITICAL = 10, 20, 30, 40, 50, 60, 70
RANK_SHORTEN = RANK_CRITICAL - 1


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def one_line(text: str) -> str:
    return " ".join(text.split())


#: An HTML comment, a marker tag among them: invisible in the vault, so no feed line shows one (a
#: lesson an older version wrote with the next lesson's tags inside it).
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def cut(text: str, limit: int) -> str:
    """``text`` on one line, without HTML comments, at most ``limit`` characters, cut on a word boundary."""
    return cut_text(one_line(_COMMENT.sub(" ", text) if "<!--" in text else text), limit)


def cell(text: str, limit: int) -> str:
    return cut(text, limit).replace("|", "\\|")


@dataclass
class FeedItem:
    text: str
    rank: int = NEVER  # lower is cut first; NEVER is never cut
    short: str | None = None  # a one-line form used before the item is dropped
    label: str = ""  # what a dropped item is called in the file's note ("critical signal")
    section: str = ""  # the ``## section`` heading it sits under (items of a section are contiguous)


def section_heading(section: str) -> str:
    return f"\n## {section}\n\n"


def omitted_note(omitted: Mapping[str, int]) -> str:
    """``_12 more not shown (feed budget); see the vault. 3 more critical signals in the vault._``"""
    if not any(omitted.values()):
        return ""
    parts = []
    plain = omitted.get("", 0)
    if plain:
        parts.append(f"{plain} more not shown (feed budget); see the vault.")
    for label in sorted(k for k, n in omitted.items() if k and n):
        count = omitted[label]
        parts.append(f"{count} more {label}{'s' if count != 1 else ''} in the vault (feed budget).")
    return "\n_" + " ".join(parts) + "_\n"


@dataclass
class FeedFile:
    name: str  # relative to the feed folder; may hold a sub-folder (``projects/<slug>.md``)
    title: str
    priority: int
    severity: str
    date: str
    ttl: int
    header: str
    items: list[FeedItem] = field(default_factory=list)
    omitted: dict[str, int] = field(default_factory=dict)  # label -> items cut by the budget
    raw: str | None = None  # a file that is not markdown (``projects/index.json``): written as is
    budgeted: bool = True  # False: an alternative to the global feed, fitted on its own
    #: A digest of everything the file says is made from (a project file: its arcs, signals,
    #: injects, settings, date and the code that renders it): a later build with the same
    #: digest takes the text written then instead of rendering it again.
    inputs: str | None = None
    #: The same for a file that carries the time it was built (``projects/index.json``): a later
    #: build with the same digest takes the text written then with its own time put in.
    stamped_inputs: str | None = None

    @property
    def feed_id(self) -> str:
        return self.name.removesuffix(".md").replace("/", "-")

    def render(self) -> str:
        if self.raw is not None:
            return self.raw
        # Fixed keys and plain values: no YAML emitter needed (titles and severities are ours).
        front = (
            f"---\nid: {self.feed_id}-{self.date}\ntitle: {self.title}\npriority: {self.priority}\n"
            f"ttl: {self.ttl}\nseverity: {self.severity}\n---\n"
        )
        if not self.items and not any(self.omitted.values()):
            return front  # nothing to say: no header, no filler line (the hook skips an empty body)
        lines = [front, self.header + "\n"]
        section = ""
        for item in self.items:
            if item.section != section:
                if item.section:
                    lines.append(section_heading(item.section))
                section = item.section
            lines.append(item.text.rstrip("\n") + "\n")
        lines.append(omitted_note(self.omitted))
        return "".join(lines)


def _note_growth(label: str, count: int) -> int | None:
    """How many characters :func:`omitted_note` gains when ``label``'s count goes from ``count`` to
    ``count + 1``; None when a new part appears (the note is measured again)."""
    if count == 0:
        return None
    grown = len(str(count + 1)) - len(str(count))
    return grown + 1 if label and count == 1 else grown  # "1 more critical signal" -> "2 more ... signals"


def fit_budget(files: list[FeedFile], fixed_tokens: int, budget: int) -> None:
    """Cut items until ``files`` fit ``budget`` tokens with ``fixed_tokens`` already spent (in place).

    Order: every item below :data:`RANK_SHORTEN`, lowest rank first (the later item of a file
    first within a rank); then items with a ``short`` form are shortened, least important
    first; then the remaining cuttable items (critical signals). Sizes, the token total and the
    omitted notes are tracked incrementally (one render per file at the start), so each cut
    costs the same however many items a file holds.
    """
    sizes = [len(f.render()) for f in files]
    total = fixed_tokens + sum(math.ceil(size / 4) for size in sizes)
    if total <= budget:
        return

    def resize(file_index: int, delta: int) -> None:
        nonlocal total
        old = sizes[file_index]
        sizes[file_index] = old + delta
        total += math.ceil(sizes[file_index] / 4) - math.ceil(old / 4)

    steps: list[tuple[int, int, int, int]] = []  # (rank, -index, file, index)
    for file_index, feed_file in enumerate(files):
        for index, item in enumerate(feed_file.items):
            if item.short is not None:
                steps.append((RANK_SHORTEN, -index, file_index, index))
            if item.rank < NEVER:
                steps.append((item.rank, -index, file_index, index))
    steps.sort()
    lengths = [[len(item.text.rstrip("\n")) + 1 for item in f.items] for f in files]
    shortened: list[set[int]] = [set() for _ in files]
    removed: list[set[int]] = [set() for _ in files]
    omitted: list[dict[str, int]] = [dict(f.omitted) for f in files]
    in_section: list[dict[str, int]] = [{} for _ in files]
    for file_index, feed_file in enumerate(files):
        for item in feed_file.items:
            in_section[file_index][item.section] = in_section[file_index].get(item.section, 0) + 1
    for rank, _, file_index, index in steps:
        if total <= budget:
            break
        item = files[file_index].items[index]
        if index in removed[file_index]:
            continue
        if rank == RANK_SHORTEN and item.short is not None and index not in shortened[file_index]:
            shortened[file_index].add(index)
            new_length = len(item.short) + 1
            resize(file_index, new_length - lengths[file_index][index])
            lengths[file_index][index] = new_length
            continue
        if rank == RANK_SHORTEN:
            continue
        removed[file_index].add(index)
        delta = -lengths[file_index][index]
        counts = in_section[file_index]
        counts[item.section] -= 1
        if item.section and counts[item.section] == 0:
            delta -= len(section_heading(item.section))
        cut_here = omitted[file_index]
        count = cut_here.get(item.label, 0)
        growth = _note_growth(item.label, count)
        if growth is None:
            growth = -len(omitted_note(cut_here))
            cut_here[item.label] = count + 1
            growth += len(omitted_note(cut_here))
        else:
            cut_here[item.label] = count + 1
        resize(file_index, delta + growth)
    for file_index, feed_file in enumerate(files):
        if not removed[file_index] and not shortened[file_index]:
            continue
        kept = []
        for index, item in enumerate(feed_file.items):
            if index in removed[file_index]:
                continue
            if index in shortened[file_index] and item.short is not None:
                item = FeedItem(item.short, item.rank, None, item.label, item.section)
            kept.append(item)
        feed_file.items = kept
        feed_file.omitted = omitted[file_index]
