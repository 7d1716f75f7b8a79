"""Marker grammar (SPEC §6)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.core import markers
from brain.core.vocab import MARKER_TYPES


def test_every_type_parses_with_any_attribute_order() -> None:
    text = (
        "<!-- @hot heat=9 -->\n"
        "<!-- @lesson -->\nAlways fsync.\n<!-- @/lesson -->\n"
        "<!-- @signal source=auth-broker severity=critical -->\nBan rate up.\n<!-- @/signal -->\n"
        "<!-- @decision date=2026-04-10 -->\nDeterministic parsers.\n<!-- @/decision -->\n"
        "<!-- @edge target=2026-04-09-x type=parent --> [[2026-04-09-x]]\n"
        "<!-- @inject ttl_days=3 target=claude.md -->\nTop priority.\n<!-- @/inject -->\n"
        "<!-- @todo priority=1 -->\nFirst run.\n<!-- @/todo -->\n"
        "<!-- @milestone -->\n"
    )
    found, problems = markers.parse(text)
    assert problems == []
    assert sorted(m.type for m in found) == sorted(MARKER_TYPES)
    signal = next(m for m in found if m.type == "signal")
    assert signal.attr("severity") == "critical" and signal.attr("source") == "auth-broker"
    assert signal.text == "Ban rate up." and signal.line == 5
    edge = next(m for m in found if m.type == "edge")
    assert edge.content is None and edge.attr("target") == "2026-04-09-x"


def test_quoted_values_and_escapes() -> None:
    found, problems = markers.parse('<!-- @todo priority="1 \\"a\\" b" note=\'x y\' -->\ngo\n<!-- @/todo -->')
    assert problems == []
    assert found[0].attr("priority") == '1 "a" b' and found[0].attr("note") == "x y"


def test_markers_in_fenced_code_and_inline_code_are_documentation() -> None:
    text = (
        "```\n<!-- @signal severity=critical source=x -->\nnot real\n<!-- @/signal -->\n```\n"
        "~~~md\n<!-- @lesson -->\n~~~\n"
        "Write `<!-- @edge type=parent target=a -->` to link.\n"
        "<!-- @lesson -->\nreal\n<!-- @/lesson -->\n"
    )
    found, problems = markers.parse(text)
    assert [m.type for m in found] == ["lesson"] and found[0].text == "real"
    assert problems == []


def test_unterminated_block_is_reported_with_line_and_nothing_is_lost() -> None:
    text = "intro\n<!-- @signal severity=critical source=a -->\nnever closed\n<!-- @lesson -->\nkept\n<!-- @/lesson -->\n"
    found, problems = markers.parse(text)
    assert [m.type for m in found] == ["lesson"]
    assert len(problems) == 1 and problems[0].line == 2 and "unterminated @signal" in problems[0].message


def test_malformed_markers_are_reported() -> None:
    cases = {
        "<!-- @signal severity=critical source=\"open -->\nx\n<!-- @/signal -->": "malformed attributes",
        "<!-- @frobnicate a=1 -->": "unknown marker type",
        "<!-- @/lesson -->": "without an opening",
        "<!-- @edge type=parent type=child -->": "malformed attributes",
        "text <!-- @lesson\nno end of comment": "unterminated marker tag",
    }
    for text, expected in cases.items():
        _, problems = markers.parse(text)
        assert problems and expected in problems[0].message, (text, problems)


def test_plain_comments_are_not_markers() -> None:
    assert markers.parse("<!-- just a note -->\n<!-- TODO later -->") == ([], [])


def test_remove_takes_the_whole_block_and_its_line() -> None:
    text = "a\n<!-- @signal severity=resolved source=x -->\nfixed (CLEARED: done)\n<!-- @/signal -->\nb\n"
    found, _ = markers.parse(text)
    assert markers.remove(text, found[0]) == "a\nb\n"


def test_replace_keeps_other_attributes_in_place() -> None:
    text = "x <!-- @signal source=a severity=warning owner=\"ops team\" -->\nslow\n<!-- @/signal --> y"
    marker = markers.parse(text)[0][0]
    new = markers.replace_block(text, marker, markers.with_attrs(marker, {"severity": "critical"}), "\nslower\n")
    again = markers.parse(new)[0][0]
    assert again.attrs == (("source", "a"), ("severity", "critical"), ("owner", "ops team"))
    assert again.text == "slower" and new.startswith("x ") and new.endswith(" y")


def test_extraction_is_well_under_a_millisecond_on_an_ordinary_arc() -> None:
    body = "# Arc\n\n" + "Some prose about the work.\n" * 40
    body += "<!-- @lesson -->\nA lesson.\n<!-- @/lesson -->\n" * 5 + "<!-- @edge type=related target=b --> [[b]]\n" * 5
    markers.parse(body)
    start = time.perf_counter()
    for _ in range(200):
        markers.parse(body)
    per_call = (time.perf_counter() - start) / 200
    assert per_call < 0.005  # generous bound for loaded CI machines; the bench reports the real figure


_values = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=0, max_size=30).filter(
    lambda v: "-->" not in v and "<!--" not in v
)
_keys = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(sorted(set(MARKER_TYPES) - {"edge"})),
    attrs=st.dictionaries(_keys, _values, max_size=4),
    content=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80).filter(
        lambda c: "<!--" not in c and "-->" not in c and "`" not in c and "~~~" not in c
    ),
)
def test_render_then_parse_round_trips(kind: str, attrs: dict[str, str], content: str) -> None:
    text = "before\n" + markers.render_block(kind, attrs.items(), content or "x") + "\nafter\n"
    found, problems = markers.parse(text)
    assert problems == []
    assert len(found) == 1
    assert dict(found[0].attrs) == attrs
    assert found[0].text == (content or "x").strip()


# --- hostile inputs (issue 12 items 9, 10, 14) ------------------------------------------


def test_unclosed_todo_does_not_swallow_the_critical_signal_after_it() -> None:
    text = (
        "intro\n<!-- @todo priority=1\nforgot to close the tag\n"
        "<!-- @signal severity=critical source=db -->\nprimary down\n<!-- @/signal -->\n"
    )
    found, problems = markers.parse(text)
    assert [(m.type, m.attr("severity"), m.text) for m in found] == [("signal", "critical", "primary down")]
    assert len(problems) == 1 and problems[0].line == 2
    assert "unterminated marker" in problems[0].message and "@todo" in problems[0].message
    assert "malformed attributes" not in problems[0].message


def test_a_code_span_opening_a_comment_does_not_hide_the_marker_after_it() -> None:
    text = "Type `<!--` to start a comment.\n<!-- @signal severity=critical source=x -->\nreal\n<!-- @/signal -->\n"
    found, problems = markers.parse(text)
    assert [m.type for m in found] == ["signal"] and problems == []


@pytest.mark.timeout(60)  # linear: about a second; the quadratic parser took hours on this input
def test_two_megabytes_of_unclosed_comments_parse_and_each_is_reported() -> None:
    unit = "<!-- @todo priority=1\n"
    count = 2_000_000 // len(unit)
    text = "text <!-- never closed\n" * 1000 + unit * count
    text += "<!-- @signal severity=critical source=x -->\nboom\n<!-- @/signal -->\n"
    found, problems = markers.parse(text)
    assert [m.type for m in found] == ["signal"]
    assert len(problems) == count and all("unterminated marker" in p.message for p in problems)


@pytest.mark.timeout(60)
def test_a_marker_with_a_huge_attribute_list_parses() -> None:
    attrs = " ".join(f"k{i}=v{i}" for i in range(150_000))
    found, problems = markers.parse(f"<!-- @todo {attrs} -->\nx\n<!-- @/todo -->\n")
    assert problems == [] and len(found[0].attrs) == 150_000


@pytest.mark.timeout(60)
def test_many_open_blocks_and_stray_closers_parse() -> None:
    text = "<!-- @lesson -->\n" * 50_000 + "<!-- @/todo -->\n" * 50_000
    found, problems = markers.parse(text)
    assert found == [] and len(problems) == 100_000


def test_a_five_megabyte_arc_of_pasted_logs_stays_an_arc(vault: Path) -> None:
    from tests.support.vaults import run_tick_json, write_arc

    log = "2026-11-20T10:00:00Z ERROR <!-- request 42 --> retry `pool` exhausted\n" * 75_000
    path = write_arc(vault, "clusters/2026-11-20", "2026-11-20-big-0123456789ab",
                     body=log + "<!-- @signal severity=critical source=pool -->\npool exhausted\n<!-- @/signal -->\n")
    assert path.stat().st_size > 5_000_000
    code, report = run_tick_json(vault)
    assert code == 0, report
    assert not [p for p in report.get("problems", []) if "too large" in str(p)]
    signals = (vault / "brain-feed" / "signals.md").read_text(encoding="utf-8")
    assert "pool exhausted" in signals


def test_is_open_signal_is_the_one_definition() -> None:
    text = (
        "<!-- @signal severity=critical source=a -->\nopen\n<!-- @/signal -->\n"
        "<!-- @signal source=b -->\nopen, info by default\n<!-- @/signal -->\n"
        "<!-- @signal severity=resolved source=c -->\nfixed\n<!-- @/signal -->\n"
        "<!-- @signal severity=critical source=d cleared_at=2026-11-20T00:00:00Z -->\ncleared\n<!-- @/signal -->\n"
        "<!-- @lesson severity=critical -->\nnot a signal\n<!-- @/lesson -->\n"
    )
    found, _ = markers.parse(text)
    assert [m.attr("source") for m in found if m.is_open_signal] == ["a", "b"]


CODE_TEXTS = [
    "`a` and `b", "``x` y``", "no ticks", "`Bun not found…", "a `b` c `d` e `", "note:\n```python\nprint(1)\n",
    "x\n```\ncode ` here\n```\nafter ` tick", "~~~\nopen tilde", "`a\n\nb` `c`", "````", "`",
]


HIDING = ["`a` and `b", "`Bun not found…", "a `b` c `d` e `", "note:\n```python\nprint(1)\n", "~~~\nopen tilde"]


@pytest.mark.parametrize("text", CODE_TEXTS)
def test_code_closed_content_keeps_its_code_to_its_own_block(text: str) -> None:
    """Each text, made block content with :func:`code_closed`, parses back as that content, and
    the block after it is still found: no code span or fence runs past its closing marker."""
    closed = markers.code_closed(text)
    document = markers.render_block("lesson", (), closed) + "\n" + markers.render_block("todo", (), "next `one`") + "\n"
    found, problems = markers.parse(document)
    assert [(m.type, m.content) for m in found] == [("lesson", f"\n{closed.strip()}\n"), ("todo", "\nnext `one`\n")]
    assert not problems
    if text in HIDING:  # without it, the stray backtick or the open fence hides the closing marker
        raw = markers.render_block("lesson", (), text) + "\n" + markers.render_block("todo", (), "next `one`") + "\n"
        assert [m.type for m in markers.parse(raw)[0]] != ["lesson", "todo"]


def test_code_closed_leaves_text_whose_code_is_closed_as_it_is() -> None:
    for text in ("plain", "`a` b `c`", "``x` y``", "```\ncode\n```\nafter", "a ' quote"):
        assert markers.code_closed(text) == text


@given(st.text(alphabet="`~ab \n", max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_text_made_code_closed_stays_in_its_block(text: str) -> None:
    closed = markers.code_closed(text)
    document = markers.render_block("lesson", (), closed) + "\n" + markers.render_block("todo", (), "next `one`") + "\n"
    found, _ = markers.parse(document)
    assert [m.type for m in found] == ["lesson", "todo"]
    assert found[1].content == "\nnext `one`\n"
