"""An arc's work keys (files, commands, errors, identifiers) read as the plain definition reads them.

``model._lines`` inlines ``_line`` and remembers the lines seen in a dict; it must give what the
definition gives: each item but booleans through ``_line``, blanks and repeats dropped, at most
``WORK_LIST_ITEMS`` lines.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.core import model

#: Items around every rule of a one-line string: white space of every kind, at either end or
#: doubled, blanks, line breaks, the length bound, duplicates, and values that are not strings.
_ITEMS = [
    "src/core/models/gateway_31.py", "pytest tests/unit", "git status", "git  status", " git status", "git status ",
    "git\tstatus", "git\nstatus", "git\r\nstatus", "a\x0bb", "a\x0cb", "a\x1cb", "a\x1fb", "a\x85b", "a\xa0b",
    "a\u2003b", "a\u2028b", "a\u3000b", "a\u200bb", "a\ufeffb", "ümlaut", "😀 x", "", " ", "\n", "\t", "x",
    "x" * 299, "x" * 300, "x" * 301, "y " * 160, "ab " * 100 + "c", "dup", "dup", "ECONNREFUSED",
    "'ECONNREFUSED: gateway step 4 failed'", 0, 1, -3, 1.5, float("nan"), float("inf"), 10**30, True, False, None,
    [], ["a"], {}, {"a": 1}, b"bytes",
]


def _by_definition(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        return ()
    out: list[str] = []
    for item in value:
        if isinstance(item, bool):
            continue
        line = model._line(item, model.WORK_ITEM_CHARS)
        if line is not None and line not in out:
            out.append(line)
            if len(out) == model.WORK_LIST_ITEMS:
                break
    return tuple(out)


def _same(value: object) -> None:
    assert repr(model._lines(value)) == repr(_by_definition(value)), value


@settings(max_examples=800, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_ITEMS), st.text(alphabet=" \t\n\xa0ab-/.", max_size=8)), max_size=70))
def test_a_work_list_reads_as_the_definition_reads_it(items: list[object]) -> None:
    _same(items)
    _same(tuple(items))
    _same(items * 3)  # repeats, and past the bound


def test_a_long_work_list_keeps_the_first_distinct_items_up_to_the_bound() -> None:
    items = [f"src/f_{i % 90}.py" for i in range(200)]
    assert model._lines(items) == tuple(items[:model.WORK_LIST_ITEMS])
    _same(items)
    _same(["a", "b", "a", "c"])
    _same([])
    for value in (None, "a", 1, {"a": "b"}, ("a", "a")):
        _same(value)


def test_every_white_space_character_in_an_item_reads_as_the_definition_reads_it() -> None:
    """No character str.split splits on (U+0085, U+2028, U+3000 ...) is read otherwise."""
    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if char.isspace():
            for items in ([f"a{char}b"], [char], ["a", f"{char}b"], [f"a{char}", "b"]):
                _same(items)


def test_replaced_is_dataclasses_replace_for_plain_frozen_dataclasses() -> None:
    import dataclasses

    import pytest

    from brain.core.heat import HeatInputs
    from brain.core.model import Problem, replaced

    problem = Problem("a.md", 3, "bad")
    assert replaced(problem, path="b.md") == dataclasses.replace(problem, path="b.md") == Problem("b.md", 3, "bad")
    assert problem.path == "a.md"  # the original is left as it was
    inputs = HeatInputs(datetime(2026, 1, 1, tzinfo=UTC), 1, 2, "active", 0, False, None)
    assert replaced(inputs, status="graduated") == dataclasses.replace(inputs, status="graduated")
    assert hash(replaced(inputs, status="graduated")) == hash(dataclasses.replace(inputs, status="graduated"))
    with pytest.raises(TypeError, match="no field 'stauts'"):
        replaced(inputs, stauts="graduated")
