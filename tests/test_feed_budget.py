"""The feed budget cut: its incremental bookkeeping against a cut that renders the files anew at
every step (the definition), on random files; and the order it cuts in."""

from __future__ import annotations

import copy
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.core.feed_file import NEVER, RANK_SHORTEN, FeedFile, FeedItem, fit_budget, omitted_note

LABELS = ("", "critical signal", "hot arc", "lesson")
SECTIONS = ("", "Signals", "Hot arcs", "Lessons")


def rendered_tokens(files: list[FeedFile], fixed: int) -> int:
    return fixed + sum(math.ceil(len(f.render()) / 4) for f in files)


def reference_fit(files: list[FeedFile], fixed: int, budget: int) -> None:
    """The rule of :func:`fit_budget`, measuring every step by rendering the files."""
    steps = sorted(
        step
        for file_index, feed_file in enumerate(files)
        for index, item in enumerate(feed_file.items)
        for step in (((RANK_SHORTEN, -index, file_index, index),) if item.short is not None else ())
        + (((item.rank, -index, file_index, index),) if item.rank < NEVER else ())
    )
    originals = [list(f.items) for f in files]
    removed: list[set[int]] = [set() for _ in files]
    shortened: list[set[int]] = [set() for _ in files]

    def shown(item: FeedItem, short: bool) -> FeedItem:
        return FeedItem(item.short, item.rank, None, item.label, item.section) if short and item.short is not None else item

    def apply() -> None:
        for f, feed_file in enumerate(files):
            feed_file.items = [shown(item, i in shortened[f]) for i, item in enumerate(originals[f])
                               if i not in removed[f]]

    for rank, _, file_index, index in steps:
        if rendered_tokens(files, fixed) <= budget:
            return
        item = originals[file_index][index]
        if index in removed[file_index]:
            continue
        if rank == RANK_SHORTEN:
            if item.short is not None and index not in shortened[file_index]:
                shortened[file_index].add(index)
                apply()
            continue
        removed[file_index].add(index)
        files[file_index].omitted[item.label] = files[file_index].omitted.get(item.label, 0) + 1
        apply()


def item_strategy() -> st.SearchStrategy[FeedItem]:
    return st.builds(
        FeedItem,
        text=st.text(alphabet="abc xyz|", min_size=1, max_size=40).map(lambda t: "- " + t),
        rank=st.sampled_from([10, 20, 30, 40, 50, 60, 70, NEVER]),
        short=st.one_of(st.none(), st.text(alphabet="ab ", min_size=1, max_size=8)),
        label=st.sampled_from(LABELS),
        section=st.sampled_from(SECTIONS),
    )


def file_strategy(name: str) -> st.SearchStrategy[FeedFile]:
    def make(items: list[FeedItem], omitted: dict[str, int]) -> FeedFile:
        items.sort(key=lambda item: SECTIONS.index(item.section))  # a section's items are contiguous
        return FeedFile(name, "T", 1, "info", "2026-11-26", 3600, "# header\n", items, omitted)

    return st.builds(make, st.lists(item_strategy(), max_size=40),
                     st.dictionaries(st.sampled_from(LABELS), st.integers(0, 12), max_size=2))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["a.md", "b.md", "c.md"]), min_size=1, max_size=3, unique=True).flatmap(
    lambda names: st.tuples(*(file_strategy(n) for n in names))),
       st.integers(0, 30), st.integers(0, 600))
def test_the_cut_matches_rendering_the_files_at_every_step(files: tuple[FeedFile, ...], fixed: int,
                                                          budget: int) -> None:
    fast, slow = copy.deepcopy(list(files)), copy.deepcopy(list(files))
    fit_budget(fast, fixed, budget)
    reference_fit(slow, fixed, budget)
    assert [f.render() for f in fast] == [f.render() for f in slow]
    assert [f.omitted for f in fast] == [f.omitted for f in slow]


def test_counts_cross_a_digit_and_a_plural() -> None:
    """Nine then ten cut items, one then two of a label: the note's length steps that the
    bookkeeping follows without rendering it again."""
    items = [FeedItem(f"- item {i:02d} with some words", rank=10, label="critical signal" if i >= 12 else "")
             for i in range(14)]
    feed = FeedFile("x.md", "T", 1, "info", "2026-11-26", 3600, "# h\n", items)
    fit_budget([feed], 0, 55)
    assert rendered_tokens([feed], 0) <= 55
    assert feed.omitted == {"critical signal": 2, "": 11}
    assert "2 more critical signals in the vault" in omitted_note(feed.omitted)
    # The latest item of the lowest rank goes first: what is kept is the start of the list.
    assert [item.text for item in feed.items] == [item.text for item in items[: len(feed.items)]]


def test_every_budget_across_a_digit_and_a_plural() -> None:
    """At every budget, with item lengths of every remainder mod 4 (a token is 4 characters, so
    a note one character off shows at some budget), the cut is the one rendering gives."""
    for pad in range(4):
        items = [FeedItem(f"- item {i:02d} {'x' * (pad + i % 3)}", rank=10 + 10 * (i % 2),
                          label=("critical signal", "", "lesson")[i % 3]) for i in range(36)]
        full = FeedFile("x.md", "T", 1, "info", "2026-11-26", 3600, "# h\n", items, {"lesson": 1})
        for budget in range(rendered_tokens([full], 0) + 1):
            fast, slow = copy.deepcopy(full), copy.deepcopy(full)
            fit_budget([fast], 0, budget)
            reference_fit([slow], 0, budget)
            assert (fast.render(), fast.omitted) == (slow.render(), slow.omitted), (pad, budget)
