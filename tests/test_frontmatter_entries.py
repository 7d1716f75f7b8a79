"""The frontmatter entry reader (``fast_load``) reads exactly what the line by line reader reads.

``fast_load`` reads an arc's frontmatter an entry at a time with one regex and hands any other
text to ``_lines_load``; a block list of plain strings is cut by ``str.split``, not resolved item
by item. These tests hold it to the line reader's values (types included: ``1``, ``True`` and
``"1"`` differ), on arcs as brain cluster writes them and on hostile text.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.core import frontmatter as fm


def _same(text: str) -> None:
    fast, lines = fm.fast_load(text), fm._lines_load(text)
    assert repr(fast) == repr(lines), text  # repr: True, 1 and "1" are told apart


#: Scalars that resolve to every type the loader knows, or make it decline, or sit on a rule's edge.
_SCALARS = [
    "complete", "left-hemisphere", "src/core/models/gateway_31.py", "/home/dev/work/gateway", "pytest tests/unit",
    "python -m gateway", "gh pr create", "_private", "a:b", "a::b", "a:#b", "a#b", "a  b", "x-", "x.y",
    "00001f5b-0000-4000-8000-1caed4a1bcdb", "2026-11-21", "2026-11-21T12:00:00Z", "12abc", "1e3", "1e+5", "0x1F",
    "0b101", "0o7", "007", "0", "-0", "10", "-3", "+1", "1_000", "1.5", ".5", ".inf", "-.nan", "12:30", "1:2:3",
    "190:20:30.15", "12 abc", "1-", "1#", "12 #x", "true", "True", "TRUE", "false", "False", "FALSE", "null", "Null",
    "NULL", "~", "yes", "No", "on", "OFF", "y", "n", "trueish", "nullable", "Truely", "a: b", "a #c", "#c", "x:",
    "-x", "- x", "--", "[a]", "{a: 1}", "&anchor", "*ref", "!tag x", "|", ">", "%x", "@x", "`x", "=", "<<", "?x",
    ",x", "'q''uote'", "'single'", "'a: b'", "''", "'unterminated", "'a'b'", '"dq"', '"esc\\n"', '""', '"a"b"',
    "a\tb", "a\rb", "ümlaut", "a\xa0", "\xa0a", "\u2003x", "x\u3000", "a\x0bb", "a\x85b", "a\u2028b", "😀",
    "multi: colon: here", "very " * 200 + "long",
]
_KEYS = ["cluster_id", "title", "status", "heat", "files", "commands", "activity", "a", "_k", "k-1", "K9", "files"]


@st.composite
def _entry(draw: st.DrawFn) -> str:
    key = draw(st.sampled_from(_KEYS))
    scalar = st.sampled_from(_SCALARS)
    kind = draw(st.sampled_from(["scalar", "list", "nested", "empty"]))
    gap = draw(st.sampled_from([" ", " ", " ", "  ", " \t", ""]))
    tail = draw(st.sampled_from(["", "", "", " ", "\t", "\r"]))
    if kind == "scalar":
        return f"{key}:{gap}{draw(scalar)}{tail}"
    if kind == "empty":
        return f"{key}:{tail}"
    values = draw(st.lists(scalar, min_size=1, max_size=6))
    if kind == "list":
        lead = draw(st.sampled_from(["- ", "- ", "-  ", "-\t", "-"]))
        return "\n".join([f"{key}:{tail}", *(f"{lead}{v}" for v in values)])
    subs = draw(st.lists(st.sampled_from(["sessions", "joy", "a", "a", "_x", "b-c"]), min_size=1, max_size=6))
    indent = draw(st.sampled_from(["  ", "  ", "   ", " ", "\t", "  - "]))
    return "\n".join([f"{key}:{tail}", *(f"{indent}{s}:{gap}{v}" for s, v in zip(subs, values, strict=False))])


_NOISE = st.sampled_from(["", " ", "\t", "# comment", "  # indented comment", "---", "...", "- stray", "  stray",
                          "\r", "key", ":", "a: &x 1", "b: *x", "c: [1, 2]", "d: |", "  block text"])


@settings(max_examples=600, deadline=None)
@given(st.lists(st.one_of(_entry(), _entry(), _entry(), _NOISE), max_size=10), st.booleans(), st.booleans())
def test_the_entry_reader_reads_what_the_line_reader_reads(parts: list[str], final_newline: bool, crlf: bool) -> None:
    text = "\n".join(parts) + ("\n" if final_newline else "")
    _same(text.replace("\n", "\r\n") if crlf else text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab:-_ #'\"\t\r\n1.x/", max_size=40))
def test_the_entry_reader_reads_what_the_line_reader_reads_on_any_text(text: str) -> None:
    _same(text)


def _arc(files: list[str], commands: list[str], errors: list[str]) -> str:
    """An arc's frontmatter as brain cluster writes it (tests/support/vaults.py and scripts/bench.py)."""
    return "".join([
        "cluster_id: 2026-09-20-gateway-work-08027-000003c9eff5\ntitle: Gateway work 8027\nregion: left-hemisphere\n",
        "status: complete\nheat: 0\ncreated: '2026-09-20T09:00:00Z'\nlast_active: '2026-09-20T15:40:00Z'\n",
        "project: gateway\nagents:\n- claude-code\nsource_sessions:\n- 00001f5b-0000-4000-8000-1caed4a1bcdb\n",
        "activity:\n  sessions: 3\n  user_turns: 20\n  tool_calls: 260\n  errors: 1\n  joy: 1\n  compactions: 0\n",
        "synthesized: false\ncwd: /home/dev/work/gateway\nbranch: 'main'\n",
        "files:\n", *(f"- {f}\n" for f in files), "commands:\n", *(f"- {c}\n" for c in commands),
        "open_errors:\n", *(f"- '{e}: gateway step 4 failed'\n" for e in errors[:1]),
        "errors_met:\n", *(f"- {e}\n" for e in errors),
        "identifiers:\n- gateway_budget\n- gateway_queue\nlast_prompt: run the gateway tests again\n",
        "last_state: 'The gateway tests pass; the retry budget is now read from settings.'\n",
    ])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SCALARS), max_size=8), st.lists(st.sampled_from(_SCALARS), max_size=8),
       st.lists(st.sampled_from(["ECONNREFUSED", "KeyError", "TS2345", "true", "0"]), max_size=3))
def test_an_arc_is_read_whole_by_the_entry_reader_and_as_the_line_reader_reads_it(
    files: list[str], commands: list[str], errors: list[str]
) -> None:
    text = _arc(files, commands, errors)
    _same(text)
    plain = _arc(["src/a.py", "web/pages/b_2.py"], ["git status", "make lint"], ["KeyError"])
    assert fm.fast_load(plain) is not None
    assert fm.fast_load(plain) == fm.load(plain)


def test_a_repeated_key_a_blank_line_or_a_comment_gives_the_line_readers_answer() -> None:
    for text in ("a: 1\na: 2\n", "a:\n  x: 1\n  x: 2\n", "a: 1\n\nb:\n- x\n\n- y\n", "a: 1\n# c\nb: 2\n",
                 "a:\n- x\nb: 1\na:\n- y\n", "a: 1", "a:\n- x", "a:\n- x\n  y\n", "a:\n  x: 1\n- y\n", ""):
        _same(text)


#: Every character class edge of the plain-string pattern, and the characters around it.
_ALPHABET = "aAzZ_/09x b.:#-+'\"\t!~`@[{|"


def test_every_plain_string_the_pattern_takes_resolves_to_itself() -> None:
    """The list items cut by str.split, never resolved: each must be the string _resolved gives."""
    plain = re.compile(fm._PLAIN_STR + r"\n")
    taken = 0
    candidates = itertools.chain(
        ("".join(chars) for size in range(1, 4) for chars in itertools.product(_ALPHABET, repeat=size)),
        _SCALARS,
        (f"{a}{b}" for a in _SCALARS for b in ("", " x", ":y", " #z", ".1", "_2")),
    )
    for text in candidates:
        if plain.fullmatch(text + "\n"):
            taken += 1
            assert fm._resolved(text) == text, text
    assert taken > 1000  # the pattern is not vacuous
