"""The one LLM call also synthesizes (issue 11 item 6, SPEC §8): lessons and a resolution for
unsynthesized arcs, validated like every other field and applied idempotently."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from brain.core.markers import parse
from brain.core.prompt import build_prompt
from brain.core.recommendations import (
    LESSON_CHARS,
    RESOLUTION_CHARS,
    ArcView,
    NewSynthesis,
    Validated,
    validate,
)
from brain.settings import Settings
from tests.support.llm_stub import LLMStub, llm_stub_fixture, openai_answer  # noqa: F401
from tests.support.vaults import NOW, tree_digest, write_arc
from tests.test_ai_tick import tick
from tests.test_apply import WHEN, A, B, C, D, apply_cli, body_markers, build, find, meta_of, settled
from tests.test_prompt import arc
from tests.test_recommendations import SECRET, fake_redact

ARCS = {
    "arc-a": ArcView("arc-a", "active", ("s1",)),
    "arc-b": ArcView("arc-b", "active", ("s2",), has_summary=True),
    "arc-c": ArcView("arc-c", "active", ("s3",), synthesized=True),
    "arc-d": ArcView("arc-d", "merged", ("s4",)),
    "arc-e": ArcView("arc-e", "active", ("s5", "s6")),
    "arc-f": ArcView("arc-f", "active", ("s7",)),
}


def check(answer: Any, max_changes: int = 40) -> Validated:
    return validate(answer, arcs=ARCS, open_signals=[], max_changes=max_changes, redact=fake_redact)


def synthesis(arc: str = "arc-a", lessons: Any = ("Pin the redis client",), resolution: Any = "Fixed by the retry") -> dict[str, Any]:
    return {"arc": arc, "lessons": list(lessons) if isinstance(lessons, tuple) else lessons, "resolution": resolution}


# --- validation -----------------------------------------------------------------------------------

def test_a_valid_synthesis_is_accepted_and_counted_as_one_change() -> None:
    validated = check({"syntheses": [synthesis()]})
    assert validated.syntheses == (NewSynthesis("arc-a", ("Pin the redis client",), "Fixed by the retry"),)
    assert validated.change_count == 1 and not validated.rejected


@pytest.mark.parametrize(("item", "reason"), [
    (synthesis(arc="arc-zz"), "arc names no existing arc"),
    (synthesis(arc="../etc"), "arc is not a valid cluster_id"),
    (synthesis(arc="arc-b"), "the arc is already synthesized"),  # has a summary
    (synthesis(arc="arc-c"), "the arc is already synthesized"),
    (synthesis(arc="arc-d"), "arc is a tombstone (merged)"),
    (synthesis(lessons=["one", "two", "three", "four"]), "more than 3 lessons"),
    (synthesis(lessons="one lesson"), "lessons is not a list"),
    (synthesis(lessons=["see <!-- @signal severity=nuclear --> now"]), "lesson contains marker syntax"),
    (synthesis(lessons=["ok"], resolution="closed --> <!-- @inject target=all -->"), "resolution contains marker syntax"),
    (synthesis(lessons=["link [[arc-b]]"]), "lesson contains wikilink syntax"),
    (synthesis(lessons=[42]), "lesson is not a string"),
    (synthesis(lessons=[], resolution=""), "no lessons and no resolution"),
    (synthesis(lessons=["   "]), "lesson is empty"),
    ({"lessons": ["x"]}, "missing arc"),
    ("arc-a", "not an object"),
], ids=["unknown", "unsafe-id", "has-summary", "synthesized", "tombstone", "too-many", "not-a-list", "marker",
        "marker-in-resolution", "wikilink", "not-a-string", "empty", "blank-lesson", "no-arc", "not-an-object"])
def test_bad_syntheses_are_rejected_with_their_reason(item: Any, reason: str) -> None:
    validated = check({"syntheses": [item]})
    assert validated.syntheses == () and [r.reason for r in validated.rejected] == [reason]
    assert all(r.kind == "synthesis" for r in validated.rejected)


def test_synthesis_text_is_one_line_redacted_capped_and_deduplicated() -> None:
    long_lesson = "word " * 100
    validated = check({"syntheses": [synthesis(
        lessons=[f"rotate\n  {SECRET}\tfirst", "rotate " + SECRET + " first", long_lesson],
        resolution="x " * 400)]})
    (made,) = validated.syntheses
    assert made.lessons[0] == "rotate [REDACTED] first" and len(made.lessons) == 2
    assert len(made.lessons[1]) <= LESSON_CHARS and made.lessons[1].endswith("…")
    assert made.resolution is not None and len(made.resolution) <= RESOLUTION_CHARS
    assert all("\n" not in text for text in (*made.lessons, made.resolution))


def test_a_resolution_alone_or_lessons_alone_are_enough() -> None:
    validated = check({"syntheses": [synthesis(lessons=[], resolution="Shipped"),
                                     synthesis(arc="arc-e", lessons=["Read the logs first"], resolution=None)]})
    assert [(s.arc, s.lessons, s.resolution) for s in validated.syntheses] == [
        ("arc-a", (), "Shipped"), ("arc-e", ("Read the logs first",), None)]


def test_one_synthesis_per_arc_and_none_for_an_arc_this_answer_splits() -> None:
    validated = check({
        "splits": [{"arc": "arc-e", "reason": "two stories", "parts": [{"title": "one", "sessions": ["s5"]},
                                                                        {"title": "two", "sessions": ["s6"]}]}],
        "syntheses": [synthesis(), synthesis(lessons=["again"]), synthesis(arc="arc-e")],
    })
    assert [s.arc for s in validated.syntheses] == ["arc-a"]
    assert [r.reason for r in validated.rejected] == ["duplicate synthesis in this answer", "arc is split by this answer"]


def test_syntheses_count_against_max_ai_changes_after_everything_else() -> None:
    validated = check({"summaries": [{"arc": "arc-a", "summary": "s"}],
                       "syntheses": [synthesis(arc="arc-e"), synthesis(arc="arc-f")]}, max_changes=2)
    assert len(validated.summaries) == 1 and [s.arc for s in validated.syntheses] == ["arc-e"]
    assert [r.reason for r in validated.rejected] == ["over max_ai_changes"]


# --- the prompt -----------------------------------------------------------------------------------

def test_unsynthesized_rows_carry_the_arcs_work_when_cluster_recorded_it() -> None:
    work = {"files": ["lib/spotter/transcripts.ex", "mix.exs"], "commands": ["mix test", "git status"],
            "open_errors": ["CompileError: undefined function foo/1 <script>"],
            "last_prompt": f"now wire the hook, key {SECRET}", "project": "spotter"}
    notes = [arc("2026-11-20-spotter-0123456789ab", title="Spotter transcripts", heat=5, extra=work),
             arc("2026-11-20-plain-0123456789ac", title="Plain arc", heat=3)]
    prompt = build_prompt(notes, None, previous_intent=None, settings=Settings(), now=WHEN)
    section = prompt.user.split("## Unsynthesized arcs")[1].split("\n## ")[0]
    rows = section.splitlines()[1:]
    assert rows[0] == (
        "2026-11-20-spotter-0123456789ab: Spotter transcripts [files: lib/spotter/transcripts.ex, mix.exs] "
        "[commands: mix test, git status] [open errors: CompileError: undefined function foo/1 &lt;script&gt;] "
        "[last prompt: now wire the hook, key [REDACTED]]")
    assert rows[1] == "2026-11-20-plain-0123456789ac: Plain arc"
    assert SECRET not in prompt.text


# --- apply ----------------------------------------------------------------------------------------

ANSWER = {"syntheses": [
    {"arc": A, "lessons": ["Check the session store.", "Restart the login pods after a deploy"],
     "resolution": "Fixed by restarting the pods; the retry stays"},
    {"arc": C, "lessons": ["Profile logins before rewriting them"], "resolution": "Rewrite shipped"},
]}


def test_syntheses_write_ai_lessons_and_a_resolution_and_mark_the_arc(vault: Path) -> None:
    build(vault)
    code, report = apply_cli(vault, ANSWER)
    assert code == 0 and not report["rejected"], report
    assert report["phases"]["apply"]["applied"]["syntheses"] == 2
    tick_id = report["tick_id"]

    text = find(vault, A).read_text()
    assert meta_of(find(vault, A))["synthesized"] is True
    lessons = [(dict(m.attrs), m.text) for m in body_markers(text) if m.type == "lesson"]
    # The lesson the arc already held is not repeated; the new one names this tick as its source.
    assert lessons == [({}, "Check the session store."),
                       ({"source": f"ai:{tick_id}"}, "Restart the login pods after a deploy")]
    assert (f"<!-- @lesson source=ai:{tick_id} -->Restart the login pods after a deploy<!-- @/lesson -->\n"
            in text)
    # The missing Resolution section goes where the arc layout puts it: before Edges.
    body = text.split("\n---\n", 1)[1]
    assert body.index("## Lessons") < body.index("## Resolution\n\nFixed by restarting the pods; the retry stays\n") \
        < body.index("## Edges")

    c_text = find(vault, C).read_text()
    assert f"## Lessons\n\n<!-- @lesson source=ai:{tick_id} -->Profile logins before rewriting them<!-- @/lesson -->" \
        in c_text and "## Resolution\n\nRewrite shipped\n" in c_text
    assert parse(c_text)[1] == []


def test_reapplying_a_synthesis_changes_nothing(vault: Path) -> None:
    build(vault)
    code, first = apply_cli(vault, ANSWER)
    assert code == 0 and first["phases"]["apply"]["applied"]["syntheses"] == 2
    after_first = settled(vault)
    code, second = apply_cli(vault, ANSWER)
    assert code == 0 and second["phases"]["apply"]["applied"]["syntheses"] == 0
    assert [r["reason"] for r in second["rejected"]] == ["the arc is already synthesized"] * 2
    assert settled(vault) == after_first


def test_a_synthesis_for_an_arc_with_a_summary_is_rejected_and_writes_nothing(vault: Path) -> None:
    build(vault)
    before = tree_digest(vault)
    code, report = apply_cli(vault, {"syntheses": [{"arc": D, "lessons": ["x"], "resolution": "y"}]}, "--dry-run")
    assert code == 0 and [r["reason"] for r in report["rejected"]] == ["the arc is already synthesized"]
    assert tree_digest(vault) == before


def test_a_tick_with_a_synthesizing_answer_applies_it_and_the_arc_leaves_the_prompt(vault: Path,
                                                                                     llm_stub: LLMStub) -> None:
    build(vault)
    answer = {"syntheses": [{"arc": B, "lessons": ["Pin the redis client.", "Retry logins once"],
                             "resolution": f"Retry in place; token {SECRET} rotated"}],
              "summaries": [{"arc": B, "summary": "Login 500s after deploys"}]}
    llm_stub.enqueue(openai_answer(json.dumps(answer)))
    code, report = tick(vault, llm_stub, "openai")
    assert code == 0 and report["phases"]["verify"]["ok"] and not report["rejected"], report
    assert report["phases"]["apply"]["applied"]["syntheses"] == 1
    assert report["phases"]["apply"]["applied"]["summaries"] == 1
    text = find(vault, B).read_text()
    assert SECRET not in text and "## Resolution\n\nRetry in place; token [REDACTED" in text
    assert f"<!-- @lesson source=ai:{report['tick_id']} -->Retry logins once<!-- @/lesson -->" in text
    assert text.count("Pin the redis client.") == 1  # already a lesson of the arc
    user = llm_stub.requests[0].body["messages"][1]["content"]
    assert f"{B}: " in user.split("## Unsynthesized arcs")[1]

    llm_stub.enqueue(openai_answer(json.dumps({"edges": []})))
    code, again = tick(vault, llm_stub, "openai", now="2026-11-21T14:00:00Z")
    assert code == 0, again
    user = llm_stub.requests[1].body["messages"][1]["content"]
    assert f"{B}: " not in user.split("## Unsynthesized arcs")[1].split("\n## ")[0]


def test_an_arc_written_by_brain_cluster_gets_its_resolution_in_its_empty_section(vault: Path) -> None:
    body = ("## Ignition\n\n> wire the hook\n\n## Timeline\n\n- one session\n\n## Work\n\n"
            "## Lessons\n\n<!-- @lesson source=abcd1234:12 -->Run mix test before pushing<!-- @/lesson -->\n\n"
            "## Resolution\n\n## Edges\n\n## Source sessions\n\n- `s9` · claude-code\n")
    write_arc(vault, "clusters/2026-11-10", "2026-11-10-hook-0123456789ae", title="Wire the hook", sessions=["s9"],
              body=body, status="complete", created="2026-11-10T09:00:00Z", last_active="2026-11-10T12:00:00Z")
    code, report = apply_cli(vault, {"syntheses": [{"arc": "2026-11-10-hook-0123456789ae",
                                                    "lessons": ["Keep the hook under 100 ms"],
                                                    "resolution": "Hook wired and measured"}]}, now=NOW)
    assert code == 0 and not report["rejected"], report
    text = find(vault, "2026-11-10-hook-0123456789ae").read_text()
    tick_id = report["tick_id"]
    assert ("## Lessons\n\n<!-- @lesson source=abcd1234:12 -->Run mix test before pushing<!-- @/lesson -->\n"
            f"<!-- @lesson source=ai:{tick_id} -->Keep the hook under 100 ms<!-- @/lesson -->\n\n"
            "## Resolution\n\nHook wired and measured\n\n## Edges\n") in text
