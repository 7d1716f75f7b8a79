"""Parsing and validation of the LLM's answer (SPEC §8): the applier trusts nothing."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brain.core.model import parse_note
from brain.core.recommendations import (
    ANSWER_SCHEMA,
    INTENT_CHARS,
    MAX_ANSWER_CHARS,
    PREVIEW_CHARS,
    REASON_CHARS,
    SAFE_ID_RE,
    SUMMARY_CHARS,
    TITLE_CHARS,
    AnswerError,
    ArcView,
    SignalView,
    Validated,
    parse_answer,
    schema_text,
    validate,
    views_from_notes,
)
from brain.core.vocab import EDGE_TYPES, SEVERITY_RANK

SECRET = "sk-live0123456789abcdefXYZ"


def fake_redact(text: str) -> str:
    """Stands in for brain.core.redaction so these tests pin this module's own behaviour."""
    return re.sub(r"sk-[A-Za-z0-9]{10,}", "[REDACTED]", text)


ARCS = {
    "arc-a": ArcView("arc-a", "active", ("s1", "s2", "s3"), False, frozenset({"arc-b"})),
    "arc-b": ArcView("arc-b", "active", ("s4",), True, frozenset()),
    "arc-c": ArcView("arc-c", "stalled", ("s5", "s6"), False, frozenset()),
    "arc-d": ArcView("arc-d", "merged", ("s7",), False, frozenset()),
    "arc-e": ArcView("arc-e", "split", ("s8", "s9"), False, frozenset()),
    "arc-f": ArcView("arc-f", "complete", ("s10",), False, frozenset()),
}
SIGNALS = [
    SignalView("arc-a", "ci-build", "warning"),
    SignalView("arc-a", "ci-build", "info"),
    SignalView("arc-b", "deploy", "critical"),
    SignalView("arc-c", "old-alarm", "resolved"),
]


def check(answer: Any, *, max_changes: int = 40, arcs: dict[str, ArcView] | None = None) -> Validated:
    return validate(
        answer,
        arcs=ARCS if arcs is None else arcs,
        open_signals=SIGNALS,
        max_changes=max_changes,
        redact=fake_redact,
    )


def reasons(validated: Validated) -> list[str]:
    return [r.reason for r in validated.rejected]


def edge(source: str = "arc-a", target: str = "arc-c", type: str = "related", reason: str = "same bug") -> dict[str, Any]:
    return {"source": source, "target": target, "type": type, "reason": reason}


# --- parsing ------------------------------------------------------------------------------------


OBJECT = {"edges": [edge()], "intent": "ship it"}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(OBJECT),
        "\n  " + json.dumps(OBJECT, indent=2) + "\n",
        "```json\n" + json.dumps(OBJECT, indent=2) + "\n```",
        "```\n" + json.dumps(OBJECT) + "\n```",
        "Here are my recommendations:\n\n```json\n" + json.dumps(OBJECT) + "\n```\nHope this helps!",
        "Sure! " + json.dumps(OBJECT) + " Let me know.",
        "Use {braces} wisely: " + json.dumps(OBJECT) + "\n(end)",
        "```python\nprint('no')\n```\n```json\n" + json.dumps(OBJECT) + "\n```",
    ],
    ids=["bare", "whitespace", "fenced-json", "fenced-plain", "fenced-in-prose", "prose", "braces-before",
         "second-fence"],
)
def test_accepted_answer_shapes(text: str) -> None:
    assert parse_answer(text) == OBJECT


def test_example_objects_before_the_answer_are_skipped() -> None:
    text = 'An edge looks like {"source": "a", "target": "b"}. My answer:\n' + json.dumps(OBJECT)
    assert parse_answer(text) == OBJECT


def test_outermost_object_wins() -> None:
    assert parse_answer('Note: {"health": {"score": 5, "reason": "ok"}, "intent": "x"} done') == {
        "health": {"score": 5, "reason": "ok"},
        "intent": "x",
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "I have no recommendations today.",
        '{"edges": [',
        "{'edges': []}",
        '```json\n{"edges": [}\n```',
        "[]",
        '[{"edges": []}]',
        '"just a string"',
        "42",
        "null",
        "[" * 100_000 + "]" * 100_000,
        "{" * 5000,
        "{}",
        '{"answer": {"edges": []}}',
        '```json\n{"type": "object", "properties": {"edges": {"type": "array"}}}\n```',
        'Here: {"type": "object", "properties": {"edges": {"type": "array"}}}',
        '{"edges": [{"source": "arc-a", "target": "arc-c", "type": "related", "reason": "x"}, {"sou',
    ],
    ids=["empty", "blank", "prose-only", "truncated", "python-dict", "broken-fence", "list", "list-of-object",
         "string", "number", "null", "deep-nesting", "open-braces", "empty-object", "no-answer-field",
         "echoed-schema-fenced", "echoed-schema-prose", "truncated-with-complete-inner-objects"],
)
def test_unusable_answers_are_answer_errors(text: str) -> None:
    with pytest.raises(AnswerError):
        parse_answer(text)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        "[" * 100_000 + "]" * 100_000,
        '{"edges": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"edges": ' + "[" * 100 + "]" * 100 + "}",  # decodes, but deeper than any answer
        "My answer:\n```json\n{\"edges\": " + "[" * 5_000 + "]" * 5_000 + "}\n```",
        'Here: {"edges": ' + "[" * 100 + "]" * 100 + "} done",
    ],
    ids=["open-brackets", "balanced", "in-an-object", "decodable-but-deep", "fenced", "in-prose"],
)
def test_deeply_nested_answers_are_refused_as_nested_too_deeply(text: str) -> None:
    with pytest.raises(AnswerError, match="nested too deeply"):
        parse_answer(text)


def test_a_deep_object_in_prose_does_not_hide_the_answer_after_it() -> None:
    text = 'Draft: {"edges": ' + "[" * 100_000 + "]" * 100_000 + '} Final: {"intent": "ship"}'
    assert parse_answer(text) == {"intent": "ship"}


def test_oversized_text_is_refused_before_parsing() -> None:
    with pytest.raises(AnswerError, match="too long"):
        parse_answer(" " * (MAX_ANSWER_CHARS + 1))


def test_validate_refuses_a_non_object() -> None:
    with pytest.raises(AnswerError):
        check(["edges"])


# --- the schema -------------------------------------------------------------------------------


def test_schema_covers_every_answer_field_and_is_strict() -> None:
    assert set(ANSWER_SCHEMA["properties"]) == {"edges", "merges", "splits", "signals", "intent", "health", "summaries",
                                                "syntheses"}

    def objects(node: Any) -> list[dict[str, Any]]:
        found = []
        if isinstance(node, dict):
            if node.get("type") == "object":
                found.append(node)
            for value in node.values():
                found.extend(objects(value))
        elif isinstance(node, list):
            for value in node:
                found.extend(objects(value))
        return found

    for node in objects(ANSWER_SCHEMA):
        assert node["additionalProperties"] is False
        assert set(node["required"]) <= set(node["properties"])
    assert ANSWER_SCHEMA["properties"]["edges"]["items"]["properties"]["type"]["enum"] == list(EDGE_TYPES)
    # Keywords some providers refuse in output schemas stay out (ranges live in descriptions).
    for keyword in ("minimum", "maximum", "maxLength", "minLength", "minItems", "maxItems", "pattern"):
        assert f'"{keyword}"' not in schema_text()
    assert json.loads(schema_text()) == ANSWER_SCHEMA


# --- a complete valid answer ------------------------------------------------------------------------


def test_valid_answer_is_accepted_whole() -> None:
    answer = {
        "edges": [edge("arc-c", "arc-f", "unblocks", "C unblocks F")],
        "merges": [{"keep": "arc-a", "absorb": "arc-f", "title": "Login work", "reason": "duplicates"}],
        "splits": [
            {
                "arc": "arc-c",
                "parts": [{"title": "Part one", "sessions": ["s5"]}, {"title": "Part two", "sessions": ["s6"]}],
                "reason": "two stories",
            }
        ],
        "signals": [
            {"arc": "arc-a", "source": "ci-build", "action": "escalate", "severity": "critical", "reason": "red again"},
            {"arc": "arc-b", "source": "deploy", "action": "clear", "reason": "fixed in prod"},
        ],
        "intent": "Finish the login rewrite",
        "health": {"score": 7, "reason": "steady"},
        "summaries": [{"arc": "arc-a", "summary": "Rewrote the login flow."}],
    }
    validated = check(answer)
    # The edge touches arc-c (split here) and arc-f (absorbed here): rejected for that reason.
    assert reasons(validated) == ["source is split by this answer"]
    assert [(m.keep, m.absorb, m.title) for m in validated.merges] == [("arc-a", "arc-f", "Login work")]
    assert [(s.arc, [(p.title, p.sessions) for p in s.parts]) for s in validated.splits] == [
        ("arc-c", [("Part one", ("s5",)), ("Part two", ("s6",))])
    ]
    assert [(s.arc, s.source, s.action, s.severity, s.previous_severity) for s in validated.signals] == [
        ("arc-a", "ci-build", "escalate", "critical", "warning"),
        ("arc-b", "deploy", "clear", "resolved", "critical"),
    ]
    assert [(s.arc, s.summary) for s in validated.summaries] == [("arc-a", "Rewrote the login flow.")]
    assert validated.intent == "Finish the login rewrite"
    assert validated.health is not None and (validated.health.score, validated.health.reason) == (7.0, "steady")
    assert validated.change_count == 5


def test_empty_object_is_a_valid_empty_answer() -> None:
    validated = check({})
    assert validated == Validated()


def test_nulls_mean_nothing_proposed() -> None:
    validated = check({k: None for k in ANSWER_SCHEMA["properties"]})
    assert validated == Validated()


# --- ids -----------------------------------------------------------------------------------------


HOSTILE_IDS = [
    "../../etc/passwd",
    "arc-a/../arc-b",
    "arc a",
    "",
    "<!-- @hot heat=10 -->",
    "arc-a-->",
    "[[arc-a]]|x",
    "arc-a\n<!-- @signal -->",
    ".hidden",
    "-dash-first",
    "x" * 201,
    42,
    None,
    ["arc-a"],
]


@pytest.mark.parametrize("bad", HOSTILE_IDS, ids=[f"id{n}" for n in range(len(HOSTILE_IDS))])
def test_hostile_ids_are_rejected_everywhere(bad: Any) -> None:
    answer = {
        "edges": [edge(source=bad), edge(target=bad)],
        "merges": [{"keep": bad, "absorb": "arc-c", "title": "t", "reason": "r"}],
        "splits": [{"arc": bad, "parts": [{"title": "a", "sessions": ["s1"]}], "reason": "r"}],
        "signals": [{"arc": bad, "source": "ci-build", "action": "clear", "reason": "r"},
                    {"arc": "arc-a", "source": bad, "action": "clear", "reason": "r"}],
        "summaries": [{"arc": bad, "summary": "s"}],
    }
    validated = check(answer)
    assert validated.change_count == 0
    assert len(validated.rejected) == 7
    for rejection in validated.rejected:
        assert "<!--" not in rejection.item and "-->" not in rejection.item
        assert "\n" not in rejection.item
        # Our reasons never quote the model's text.
        if isinstance(bad, str) and bad:
            assert bad not in rejection.reason


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"edges": [edge(source="arc-zz")]}, "source names no existing arc"),
        ({"edges": [edge(target="arc-d")]}, "target is a tombstone (merged)"),
        ({"edges": [edge(target="arc-e")]}, "target is a tombstone (split)"),
        ({"summaries": [{"arc": "nope", "summary": "x"}]}, "arc names no existing arc"),
    ],
)
def test_unknown_ids_and_tombstones(answer: dict[str, Any], reason: str) -> None:
    assert reasons(check(answer)) == [reason]


def test_closed_but_live_arcs_are_fine() -> None:
    validated = check({"edges": [edge("arc-f", "arc-c", "related")]})
    assert len(validated.edges) == 1


# --- edges -------------------------------------------------------------------------------------------


def test_self_loop_is_rejected() -> None:
    assert reasons(check({"edges": [edge("arc-c", "arc-c")]})) == ["self-loop"]


@pytest.mark.parametrize("edge_type", ["friend", "PARENT", "", None, 3])
def test_edge_type_comes_from_the_vocabulary(edge_type: Any) -> None:
    assert reasons(check({"edges": [edge(type=edge_type)]})) == ["type is not an edge type"]


def test_existing_edge_is_rejected_in_its_direction() -> None:
    for edge_type in EDGE_TYPES:
        assert reasons(check({"edges": [edge("arc-a", "arc-b", edge_type)]})) == ["already exists"]


def test_reverse_of_an_existing_edge_depends_on_symmetry() -> None:
    # arc-a stores an edge to arc-b; a directed edge back is a new statement ...
    assert len(check({"edges": [edge("arc-b", "arc-a", "unblocks")]}).edges) == 1
    # ... a symmetric one says nothing the stored edge does not.
    assert reasons(check({"edges": [edge("arc-b", "arc-a", "related")]})) == ["already exists"]
    assert reasons(check({"edges": [edge("arc-b", "arc-a", "sibling")]})) == ["already exists"]


def test_duplicate_edges_within_one_answer() -> None:
    validated = check(
        {
            "edges": [
                edge("arc-a", "arc-c", "related"),
                edge("arc-a", "arc-c", "parent"),
                edge("arc-c", "arc-a", "sibling"),
                edge("arc-c", "arc-f", "parent"),
                edge("arc-f", "arc-c", "child"),
            ]
        }
    )
    assert [(e.source, e.target, e.type) for e in validated.edges] == [
        ("arc-a", "arc-c", "related"),
        ("arc-c", "arc-f", "parent"),
        ("arc-f", "arc-c", "child"),
    ]
    assert reasons(validated) == ["duplicate edge in this answer"] * 2


def test_reapplying_an_applied_edge_changes_nothing() -> None:
    first = check({"edges": [edge("arc-c", "arc-f", "unblocks")]})
    assert len(first.edges) == 1
    after = dict(ARCS)
    after["arc-c"] = ArcView("arc-c", "stalled", ("s5", "s6"), False, frozenset({"arc-f"}))
    again = check({"edges": [edge("arc-c", "arc-f", "unblocks")]}, arcs=after)
    assert again.edges == () and reasons(again) == ["already exists"]


# --- text fields --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "see <!-- @hot heat=10 --> here",
        "closing --> only",
        "opening <!-- only",
        "<!-- @/signal -->",
        "link [[arc-b]]|evil",
        "half ]] bracket",
    ],
)
def test_marker_and_wikilink_injection_through_text(text: str) -> None:
    validated = check(
        {
            "edges": [edge(reason=text)],
            "merges": [{"keep": "arc-c", "absorb": "arc-f", "title": text, "reason": "r"}],
            "summaries": [{"arc": "arc-a", "summary": text}],
            "intent": text,
            "health": {"score": 5, "reason": text},
            "signals": [{"arc": "arc-a", "source": "ci-build", "action": "clear", "reason": text}],
        }
    )
    assert validated.change_count == 0
    assert validated.intent is None and validated.health is None
    assert len(validated.rejected) == 6
    assert all("syntax" in r for r in reasons(validated))
    for rejection in validated.rejected:
        assert "<!--" not in rejection.item and "-->" not in rejection.item


def test_multiline_text_collapses_to_one_line() -> None:
    validated = check(
        {
            "edges": [edge(reason="first line\nsecond\r\n\tthird  \u2028 fourth")],
            "intent": "\n\n  do\nthis  \n",
        }
    )
    assert validated.edges[0].reason == "first line second third fourth"
    assert validated.intent == "do this"


def test_unprintable_characters_are_dropped_and_backticks_neutralised() -> None:
    validated = check({"summaries": [{"arc": "arc-a", "summary": "a\x00b\x07c \ud800d \ufffe `code` e"}]})
    assert validated.summaries[0].summary == "abc d 'code' e"
    json.dumps(validated.summaries[0].summary).encode("utf-8")  # storable


@pytest.mark.parametrize(
    ("field", "cap"),
    [("reason", REASON_CHARS), ("summary", SUMMARY_CHARS), ("title", TITLE_CHARS), ("intent", INTENT_CHARS)],
)
def test_text_is_capped_on_a_word_boundary(field: str, cap: int) -> None:
    long = " ".join(["word"] * 400)
    answer: dict[str, Any] = {
        "reason": {"edges": [edge(reason=long)]},
        "summary": {"summaries": [{"arc": "arc-a", "summary": long}]},
        "title": {"merges": [{"keep": "arc-c", "absorb": "arc-f", "title": long, "reason": "r"}]},
        "intent": {"intent": long},
    }[field]
    validated = check(answer)
    value = {
        "reason": lambda: validated.edges[0].reason,
        "summary": lambda: validated.summaries[0].summary,
        "title": lambda: validated.merges[0].title,
        "intent": lambda: validated.intent,
    }[field]()
    assert value is not None
    assert len(value) <= cap
    assert value.endswith("word…")


@pytest.mark.parametrize("reason", ["", "   \n ", None, 5, ["r"]])
def test_reason_is_required(reason: Any) -> None:
    validated = check({"edges": [edge(reason=reason)]})
    assert validated.edges == ()
    assert len(validated.rejected) == 1


def test_missing_fields_are_named() -> None:
    validated = check({"edges": [{"source": "arc-a"}]})
    assert reasons(validated) == ["missing target, type, reason"]


def test_persisted_text_is_redacted() -> None:
    validated = check(
        {
            "edges": [edge(reason=f"key {SECRET} leaked")],
            "summaries": [{"arc": "arc-a", "summary": f"uses {SECRET}"}],
            "intent": f"rotate {SECRET}",
            "health": {"score": 3, "reason": f"{SECRET} exposed"},
        }
    )
    persisted = [validated.edges[0].reason, validated.summaries[0].summary, validated.intent,
                 validated.health.reason if validated.health else ""]
    assert all(SECRET not in text and "[REDACTED]" in text for text in persisted if text)


def test_rejected_previews_are_redacted_single_line_and_capped() -> None:
    validated = check(
        {
            "edges": [
                {"source": "nope", "target": "arc-a", "type": "related", "reason": f"{SECRET}\n" + "x" * 5000},
                {"source": "<!-- @hot heat=9 -->", "target": "arc-a", "type": "related", "reason": "r"},
            ]
        }
    )
    assert len(validated.rejected) == 2
    for rejection in validated.rejected:
        assert SECRET not in rejection.item
        assert "\n" not in rejection.item
        assert len(rejection.item) <= PREVIEW_CHARS
        assert "<" not in rejection.item and ">" not in rejection.item
    assert validated.rejected[0].as_dict()["kind"] == "edge"


def test_secret_cut_by_the_preview_is_still_redacted() -> None:
    """The preview cuts long strings; redaction must happen before the cut."""
    text = "x" * (PREVIEW_CHARS * 2 - 10) + SECRET
    validated = check({"edges": [edge(source="nope", reason=text)]})
    assert "sk-live" not in validated.rejected[0].item


def test_redaction_cannot_smuggle_a_wikilink() -> None:
    validated = check({"intent": f"key [{SECRET}] here"})
    assert validated.intent is None
    assert reasons(validated) == ["intent contains wikilink syntax"]


def test_real_redaction_is_the_default() -> None:
    redaction = pytest.importorskip("brain.core.redaction")
    key = "sk-ant-api03-" + "A" * 40
    assert key not in redaction.redact(key)
    validated = validate({"intent": f"rotate {key}"}, arcs=ARCS, open_signals=[], max_changes=40)
    assert validated.intent is not None and key not in validated.intent


# --- merges ------------------------------------------------------------------------------------------------


def merge(keep: str = "arc-a", absorb: str = "arc-c", **extra: Any) -> dict[str, Any]:
    return {"keep": keep, "absorb": absorb, "title": "Merged", "reason": "dupes", **extra}


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (merge("arc-a", "arc-a"), "keep and absorb are the same arc"),
        (merge("arc-a", "arc-d"), "absorb is a tombstone (merged)"),
        (merge("arc-e", "arc-a"), "keep is a tombstone (split)"),
        (merge("arc-a", "ghost"), "absorb names no existing arc"),
        ({"keep": "arc-a", "absorb": "arc-c"}, "missing reason"),
        ("arc-a into arc-c", "not an object"),
    ],
)
def test_merge_checks(item: Any, reason: str) -> None:
    assert reasons(check({"merges": [item]})) == [reason]


def test_merge_title_is_optional() -> None:
    validated = check({"merges": [merge(title=""), merge("arc-b", "arc-f", title=None)]})
    assert [m.title for m in validated.merges] == [None, None]
    validated = check({"merges": [{"keep": "arc-a", "absorb": "arc-c", "reason": "r"}]})
    assert validated.merges[0].title is None


def test_an_arc_takes_part_in_one_structural_change() -> None:
    validated = check(
        {
            "merges": [merge("arc-a", "arc-c"), merge("arc-b", "arc-c"), merge("arc-c", "arc-f")],
            "splits": [{"arc": "arc-a", "parts": [{"title": "x", "sessions": ["s1"]},
                                                   {"title": "y", "sessions": ["s2", "s3"]}], "reason": "r"}],
        }
    )
    assert [(m.keep, m.absorb) for m in validated.merges] == [("arc-a", "arc-c")]
    assert reasons(validated) == ["arc already in another merge or split of this answer"] * 3


def test_changes_to_absorbed_or_split_arcs_are_rejected_but_the_kept_arc_is_live() -> None:
    validated = check(
        {
            "merges": [merge("arc-a", "arc-f")],
            "edges": [edge("arc-c", "arc-f", "related"), edge("arc-a", "arc-c", "related")],
            "summaries": [{"arc": "arc-f", "summary": "gone"}, {"arc": "arc-a", "summary": "kept"}],
        }
    )
    assert [(e.source, e.target) for e in validated.edges] == [("arc-a", "arc-c")]
    assert [s.arc for s in validated.summaries] == ["arc-a"]
    assert reasons(validated) == ["target is absorbed by this answer", "arc is absorbed by this answer"]


def test_reapplying_a_merge_changes_nothing() -> None:
    after = dict(ARCS)
    after["arc-c"] = ArcView("arc-c", "merged", ("s5", "s6"))
    assert reasons(check({"merges": [merge("arc-a", "arc-c")]}, arcs=after)) == ["absorb is a tombstone (merged)"]


# --- splits -----------------------------------------------------------------------------------------------


def split(*parts: Any, arc: str = "arc-a") -> dict[str, Any]:
    return {"arc": arc, "parts": list(parts), "reason": "two stories"}


def part(title: str, *sessions: str) -> dict[str, Any]:
    return {"title": title, "sessions": list(sessions)}


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (split(part("all", "s1", "s2", "s3")), "a split needs at least two parts"),
        (split(), "a split needs at least two parts"),
        (split(part("a", "s1", "s2"), part("b")), "a part has no sessions"),
        (split(part("a", "s1"), part("b", "s2")), "the parts leave sessions of the arc out"),
        (split(part("a", "s1", "s2"), part("b", "s3", "s4")), "a part names a session that is not the arc's"),
        (split(part("a", "s1", "s2"), part("b", "s2", "s3")), "a session is in more than one part"),
        (split(part("a", "s1", "s1"), part("b", "s2", "s3")), "a session is in more than one part"),
        (split(part("a", "s1"), {"title": "b", "sessions": "s2 s3"}), "a part has no sessions"),
        (split(part("a", "s1"), "s2"), "not an object"),
        (split(part("a", "s1"), {"sessions": ["s2", "s3"]}), "missing title"),
        (split(part("a", "s1"), part("<!-- x -->", "s2", "s3")), "part title contains marker syntax"),
        (split(part("a", "s1"), part("b", "s2"), arc="arc-e"), "arc is a tombstone (split)"),
        ({"arc": "arc-a", "parts": {"a": ["s1"]}, "reason": "r"}, "parts is not a list"),
    ],
)
def test_split_checks(item: Any, reason: str) -> None:
    assert reasons(check({"splits": [item]})) == [reason]


def test_valid_split_partitions_the_sessions() -> None:
    validated = check({"splits": [split(part("Auth", "s3", "s1"), part("UI", "s2"))]})
    (accepted,) = validated.splits
    assert [(p.title, p.sessions) for p in accepted.parts] == [("Auth", ("s3", "s1")), ("UI", ("s2",))]
    assert accepted.reason == "two stories"


# --- signals ---------------------------------------------------------------------------------------------------


def signal(action: str, source: str = "ci-build", arc: str = "arc-a", **extra: Any) -> dict[str, Any]:
    return {"arc": arc, "source": source, "action": action, "reason": "because", **extra}


@pytest.mark.parametrize(
    ("item", "reason"),
    [
        (signal("clear", source="ci"), "no open signal with this source in the arc"),
        (signal("clear", source="CI-BUILD"), "no open signal with this source in the arc"),
        (signal("clear", source="old-alarm", arc="arc-c"), "no open signal with this source in the arc"),
        (signal("clear", source="deploy"), "no open signal with this source in the arc"),
        (signal("escalate"), "escalate needs a severity from the vocabulary"),
        (signal("escalate", severity="apocalyptic"), "escalate needs a severity from the vocabulary"),
        (signal("escalate", severity="resolved"), "escalate needs a severity from the vocabulary"),
        (signal("escalate", severity="warning"), "escalate needs a severity above the current one"),
        (signal("escalate", severity="info"), "escalate needs a severity above the current one"),
        (signal("escalate", source="deploy", arc="arc-b", severity="critical"),
         "escalate needs a severity above the current one"),
        (signal("delete"), "action is not escalate or clear"),
        (signal("clear", source="ci/build"), "source is not a valid signal source"),
        (signal("clear", source="<!--x-->"), "source is not a valid signal source"),
        (signal("clear", arc="arc-d"), "arc is a tombstone (merged)"),
    ],
)
def test_signal_checks(item: dict[str, Any], reason: str) -> None:
    assert reasons(check({"signals": [item]})) == [reason]


def test_signal_escalate_and_clear() -> None:
    validated = check(
        {
            "signals": [
                signal("escalate", severity="nuclear"),
                signal("clear", source="deploy", arc="arc-b", severity="info"),
            ]
        }
    )
    assert [(s.action, s.severity, s.previous_severity) for s in validated.signals] == [
        ("escalate", "nuclear", "warning"),
        ("clear", "resolved", "critical"),
    ]
    assert validated.rejected == ()


def test_one_change_per_signal_per_answer() -> None:
    validated = check({"signals": [signal("escalate", severity="critical"), signal("clear")]})
    assert [s.action for s in validated.signals] == ["escalate"]
    assert reasons(validated) == ["duplicate signal change in this answer"]


def test_reapplying_a_clear_changes_nothing() -> None:
    cleared = [SignalView("arc-b", "deploy", "resolved")]
    validated = validate(
        {"signals": [signal("clear", source="deploy", arc="arc-b")]},
        arcs=ARCS, open_signals=cleared, max_changes=40, redact=fake_redact,
    )
    assert reasons(validated) == ["no open signal with this source in the arc"]


# --- summaries, intent, health ---------------------------------------------------------------------------------


def test_summaries_never_overwrite() -> None:
    validated = check(
        {
            "summaries": [
                {"arc": "arc-b", "summary": "replacement"},
                {"arc": "arc-a", "summary": "first"},
                {"arc": "arc-a", "summary": "second"},
                {"arc": "arc-c", "summary": "   "},
            ]
        }
    )
    assert [(s.arc, s.summary) for s in validated.summaries] == [("arc-a", "first")]
    assert reasons(validated) == [
        "the arc already has a summary (never overwritten)",
        "duplicate summary in this answer",
        "summary is empty",
    ]


@pytest.mark.parametrize(
    ("health", "reason"),
    [
        ({"score": 11, "reason": "r"}, "score is outside 0-10"),
        ({"score": -0.5, "reason": "r"}, "score is outside 0-10"),
        ({"score": "7", "reason": "r"}, "score is not a number"),
        ({"score": True, "reason": "r"}, "score is not a number"),
        ({"score": float("nan"), "reason": "r"}, "score is not a number"),
        ({"score": 10**400, "reason": "r"}, "score is outside 0-10"),
        ({"score": 5}, "missing reason"),
        (7, "not an object"),
    ],
)
def test_health_checks(health: Any, reason: str) -> None:
    validated = check({"health": health})
    assert validated.health is None
    assert reasons(validated) == [reason]


@pytest.mark.parametrize("score", [0, 10, 6.5, 0.0])
def test_health_accepts_the_bounds_and_fractions(score: float) -> None:
    health = check({"health": {"score": score, "reason": "fine"}}).health
    assert health is not None and health.score == float(score) and health.reason == "fine"


@pytest.mark.parametrize("intent", [42, ["x"], {"text": "x"}])
def test_intent_must_be_text(intent: Any) -> None:
    validated = check({"intent": intent})
    assert validated.intent is None
    assert reasons(validated) == ["intent is not a string"]


def test_intent_and_health_are_not_changes() -> None:
    validated = check({"intent": "x", "health": {"score": 1, "reason": "r"}}, max_changes=0)
    assert validated.intent == "x" and validated.health is not None


# --- shape --------------------------------------------------------------------------------------------------------


def test_wrong_containers_are_rejected_not_fatal() -> None:
    validated = check({"edges": "arc-a -> arc-b", "merges": {"keep": "arc-a"}, "summaries": 3,
                       "signals": [None, 1, "x"], "frobnicate": [1]})
    assert [(r.kind, r.reason) for r in validated.rejected] == [
        ("answer", "unknown field 'frobnicate'"),
        ("merge", "merges is not a list"),
        ("signal", "not an object"),
        ("signal", "not an object"),
        ("signal", "not an object"),
        ("edge", "edges is not a list"),
        ("summary", "summaries is not a list"),
    ]


def test_extra_fields_in_items_are_ignored() -> None:
    validated = check({"edges": [{**edge(), "confidence": 0.9}]})
    assert len(validated.edges) == 1


# --- max_ai_changes --------------------------------------------------------------------------------------------------


def many_arcs(count: int) -> dict[str, ArcView]:
    return {f"arc-{n:04d}": ArcView(f"arc-{n:04d}", "active", (f"s{n}",)) for n in range(count)}


def test_ten_thousand_edges_are_capped() -> None:
    arcs = many_arcs(150)
    ids = sorted(arcs)
    edges = [edge(a, b, "related" if (i + j) % 2 else "unblocks", "r")
             for i, a in enumerate(ids) for j, b in enumerate(ids) if i < j][:10_000]
    assert len(edges) == 10_000
    validated = check({"edges": edges}, max_changes=40, arcs=arcs)
    assert len(validated.edges) == 40
    assert [(e.source, e.target) for e in validated.edges] == [(e["source"], e["target"]) for e in edges[:40]]
    assert len(validated.rejected) == len(edges) - 40
    assert set(reasons(validated)) == {"over max_ai_changes"}


def test_priority_order_of_the_cap() -> None:
    answer = {
        "summaries": [{"arc": "arc-a", "summary": "s"}],
        "edges": [edge("arc-f", "arc-c", "related")],
        "signals": [signal("clear")],
        "merges": [merge("arc-b", "arc-c")],
    }
    validated = check(answer, max_changes=2)
    assert (len(validated.merges), len(validated.signals), len(validated.edges), len(validated.summaries)) == (1, 1, 0, 0)
    assert [(r.kind, r.reason) for r in validated.rejected] == [
        ("edge", "target is absorbed by this answer"),  # its own reason wins over the cap
        ("summary", "over max_ai_changes"),
    ]


def test_invalid_items_keep_their_own_reason_past_the_cap() -> None:
    validated = check({"edges": [edge("arc-a", "arc-c"), edge("arc-c", "arc-c"), edge("arc-c", "arc-f")]},
                      max_changes=1)
    assert reasons(validated) == ["self-loop", "over max_ai_changes"]


def test_negative_cap_accepts_nothing() -> None:
    assert check({"edges": [edge()]}, max_changes=-3).edges == ()


# --- views from the scanner's notes --------------------------------------------------------------------------------------


def note(path: str, text: str) -> Any:
    data = text.encode()
    return parse_note(path, data, size=len(data), mtime_ns=0, sha1="0" * 40)


def test_views_from_notes() -> None:
    arc_a = note(
        "clusters/2026-01-01/arc-a.md",
        "---\ncluster_id: arc-a\nstatus: active\nsource_sessions: [s1, s2]\nsummary: done\n---\n# A\n"
        "<!-- @edge type=related target=arc-b --> [[arc-b]]\n"
        "<!-- @signal severity=warning source=ci -->\nred\n<!-- @/signal -->\n"
        "<!-- @signal severity=resolved source=old -->\nok (CLEARED: fixed)\n<!-- @/signal -->\n",
    )
    arc_b = note("clusters/2026-01-01/arc-b.md", "---\ncluster_id: arc-b\nstatus: merged\n---\n# B\n")
    dup_1 = note("x/arc-x.md", "---\ncluster_id: arc-x\nstatus: active\n---\n")
    dup_2 = note("y/arc-x.md", "---\ncluster_id: arc-x\nstatus: active\n---\n<!-- @signal severity=info source=s -->\nx\n<!-- @/signal -->\n")
    operator = note("daily/2026-01-01.md", "# notes\n<!-- @signal severity=critical source=ops -->\nx\n<!-- @/signal -->\n")
    views, signals = views_from_notes([arc_a, arc_b, dup_1, dup_2, operator])
    assert views == {
        "arc-a": ArcView("arc-a", "active", ("s1", "s2"), True, frozenset({"arc-b"})),
        "arc-b": ArcView("arc-b", "merged", (), False, frozenset()),
    }
    assert signals == [SignalView("arc-a", "ci", "warning"), SignalView("arc-a", "old", "resolved")]
    validated = validate(
        {"signals": [signal("escalate", source="ci", severity="critical"), signal("clear", source="old")]},
        arcs=views, open_signals=signals, max_changes=40, redact=fake_redact,
    )
    assert [s.source for s in validated.signals] == ["ci"]


# --- properties -------------------------------------------------------------------------------------------------------------


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5),
    max_leaves=30,
)

IDS = [*ARCS, "ghost", "../x", "<!--", "[[arc-a]]|", ""]
TEXTS = ["ok", "two\nlines", "<!-- @hot -->", "a --> b", "[[x]]", SECRET, "`tick`", "x" * 600, "", " "]
SESSIONS = ["s1", "s2", "s3", "s5", "s6", "s8", "zz"]

ids = st.sampled_from(IDS)
texts = st.sampled_from(TEXTS) | st.text(max_size=40)
maybe = st.one_of(st.none(), json_values)

plausible_edges = st.fixed_dictionaries(
    {"source": ids, "target": ids, "type": st.sampled_from([*EDGE_TYPES, "friend"]), "reason": texts}
)
plausible_merges = st.fixed_dictionaries({"keep": ids, "absorb": ids, "reason": texts}, optional={"title": texts})
plausible_parts = st.lists(
    st.fixed_dictionaries({"title": texts, "sessions": st.lists(st.sampled_from(SESSIONS), max_size=4)}), max_size=4
)


@st.composite
def partitions(draw: st.DrawFn) -> dict[str, Any]:
    """Splits that are mostly real partitions of an arc's sessions."""
    arc = draw(st.sampled_from(sorted(ARCS)))
    sessions = list(draw(st.permutations(ARCS[arc].source_sessions)))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(sessions) - 1)), max_size=3)))
    parts = [sessions[a:b] for a, b in zip([0, *cuts], [*cuts, len(sessions)], strict=True)]
    return {"arc": arc, "parts": [{"title": draw(texts), "sessions": p} for p in parts], "reason": draw(texts)}


plausible_splits = st.fixed_dictionaries({"arc": ids, "parts": plausible_parts, "reason": texts}) | partitions()
signal_targets = st.sampled_from([(s.arc, s.source) for s in SIGNALS] + [("arc-a", "nope"), ("arc-b", "a/b")])
plausible_signals = st.builds(
    lambda target, action, reason, severity: {
        "arc": target[0], "source": target[1], "action": action, "reason": reason,
        **({} if severity is None else {"severity": severity}),
    },
    signal_targets,
    st.sampled_from(["escalate", "clear", "delete"]),
    texts,
    st.none() | st.sampled_from([*SEVERITY_RANK, "huge"]),
)
plausible_summaries = st.fixed_dictionaries({"arc": ids, "summary": texts})
plausible_answers = st.fixed_dictionaries(
    {},
    optional={
        "edges": st.lists(plausible_edges | json_values, max_size=8),
        "merges": st.lists(plausible_merges | json_values, max_size=4),
        "splits": st.lists(plausible_splits | json_values, max_size=3),
        "signals": st.lists(plausible_signals | json_values, max_size=5),
        "summaries": st.lists(plausible_summaries | json_values, max_size=5),
        "intent": texts | json_values,
        "health": st.fixed_dictionaries({"score": json_values | st.integers(-2, 12), "reason": texts}) | json_values,
        "extra": json_values,
    },
)


def assert_sound(validated: Validated, max_changes: int) -> None:
    """Every accepted item obeys the rules of SPEC §8."""
    open_now = {}
    for s in SIGNALS:
        if s.severity != "resolved":
            key = (s.arc, s.source)
            if key not in open_now or SEVERITY_RANK[s.severity] > SEVERITY_RANK[open_now[key]]:
                open_now[key] = s.severity

    def live(arc_id: str) -> None:
        assert SAFE_ID_RE.match(arc_id)
        assert arc_id in ARCS and not ARCS[arc_id].is_tombstone

    def text_ok(value: str, cap: int) -> None:
        assert value and len(value) <= cap
        assert "\n" not in value and "\r" not in value and value == value.strip()
        assert "<!--" not in value and "-->" not in value and "[[" not in value and "]]" not in value
        assert "`" not in value and SECRET not in value
        value.encode("utf-8")

    assert validated.change_count <= max(0, max_changes)
    structural: list[str] = []
    gone: set[str] = set()
    for m in validated.merges:
        live(m.keep)
        live(m.absorb)
        assert m.keep != m.absorb
        structural += [m.keep, m.absorb]
        gone.add(m.absorb)
        if m.title is not None:
            text_ok(m.title, TITLE_CHARS)
        text_ok(m.reason, REASON_CHARS)
    for s in validated.splits:
        live(s.arc)
        structural.append(s.arc)
        gone.add(s.arc)
        assert len(s.parts) >= 2 and all(p.sessions for p in s.parts)
        flat = [x for p in s.parts for x in p.sessions]
        assert sorted(flat) == sorted(set(ARCS[s.arc].source_sessions))
        for p in s.parts:
            text_ok(p.title, TITLE_CHARS)
    assert len(structural) == len(set(structural))
    keys = set()
    for c in validated.signals:
        live(c.arc)
        assert c.arc not in gone
        assert (c.arc, c.source) in open_now and (c.arc, c.source) not in keys
        keys.add((c.arc, c.source))
        assert c.previous_severity == open_now[(c.arc, c.source)]
        if c.action == "clear":
            assert c.severity == "resolved"
        else:
            assert SEVERITY_RANK[c.severity] > SEVERITY_RANK[c.previous_severity]
        text_ok(c.reason, REASON_CHARS)
    pairs = set()
    for e in validated.edges:
        live(e.source)
        live(e.target)
        assert e.source != e.target and e.type in EDGE_TYPES
        assert e.source not in gone and e.target not in gone
        assert e.target not in ARCS[e.source].existing_edge_targets
        assert (e.source, e.target) not in pairs
        pairs.add((e.source, e.target))
        text_ok(e.reason, REASON_CHARS)
    summarised = set()
    for n in validated.summaries:
        live(n.arc)
        assert n.arc not in gone and not ARCS[n.arc].has_summary and n.arc not in summarised
        summarised.add(n.arc)
        text_ok(n.summary, SUMMARY_CHARS)
    if validated.intent is not None:
        text_ok(validated.intent, INTENT_CHARS)
    if validated.health is not None:
        assert 0 <= validated.health.score <= 10
        text_ok(validated.health.reason, REASON_CHARS)
    for r in validated.rejected:
        assert len(r.item) <= PREVIEW_CHARS and "\n" not in r.item and "<" not in r.item
        assert SECRET not in r.item


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=plausible_answers, max_changes=st.integers(-1, 6))
def test_property_plausible_answers_are_validated_soundly(answer: dict[str, Any], max_changes: int) -> None:
    text = json.dumps(answer)
    if any(key in answer for key in ANSWER_SCHEMA["properties"]):
        assert json.dumps(parse_answer(text)) == text
    else:
        with pytest.raises(AnswerError):
            parse_answer(text)
    validated = check(json.loads(text), max_changes=max_changes)
    assert_sound(validated, max_changes)
    proposed = sum(len(v) for k, v in answer.items() if k in ("edges", "merges", "splits", "signals", "summaries")
                   and isinstance(v, list))
    assert validated.change_count + sum(r.kind not in ("answer", "intent", "health") for r in validated.rejected) \
        == proposed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answer=plausible_answers)
def test_property_sound_with_the_real_redaction(answer: dict[str, Any]) -> None:
    validated = validate(answer, arcs=ARCS, open_signals=SIGNALS, max_changes=40)
    assert_sound(validated, 40)


@settings(max_examples=300, deadline=None)
@given(value=json_values, wrap=st.sampled_from(["@@", "```json\n@@\n```", "Sure: @@ ok", "@@ @@"]))
def test_property_arbitrary_json_gives_validated_or_answer_error(value: Any, wrap: str) -> None:
    text = wrap.replace("@@", json.dumps(value))
    try:
        parsed = parse_answer(text)
    except AnswerError:
        return
    assert isinstance(parsed, dict)
    assert_sound(check(parsed, max_changes=3), 3)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_property_arbitrary_text_gives_object_or_answer_error(text: str) -> None:
    try:
        parsed = parse_answer(text)
    except AnswerError:
        return
    assert isinstance(parsed, dict)
    assert_sound(check(parsed), 40)
