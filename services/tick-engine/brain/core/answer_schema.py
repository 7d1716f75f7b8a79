"""The LLM answer's shape (SPEC §8): field names, text caps and the JSON schema. Pure.

The schema is sent as the request's structured-output format and quoted in the prompt; it
promises nothing :mod:`brain.core.answer_validate` relies on (every cap is enforced there).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Literal

from brain.core.vocab import EDGE_TYPES, SEVERITIES

#: Arc ids and signal sources: a letter or digit, then letters, digits, ``.``, ``_``, ``-``.
SAFE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\Z")

REASON_CHARS = 200
TITLE_CHARS = 120
SUMMARY_CHARS = 300
INTENT_CHARS = 500
PREVIEW_CHARS = 200
#: Lessons one synthesis may carry (one line each), and their caps.
SYNTHESIS_LESSONS = 3
LESSON_CHARS = 200
RESOLUTION_CHARS = 300

SYMMETRIC_EDGE_TYPES = frozenset({"sibling", "related"})
#: Order in which changes are counted against ``max_changes``.
CHANGE_PRIORITY = ("merges", "splits", "signals", "edges", "summaries", "syntheses")

Kind = Literal["answer", "edge", "merge", "split", "signal", "summary", "synthesis", "intent", "health"]

TOP_LEVEL_KEYS = ("edges", "merges", "splits", "signals", "intent", "health", "summaries", "syntheses")


def _object(properties: dict[str, Any], required: Iterable[str], description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": list(required),
        "additionalProperties": False,
    }
    if description:
        schema["description"] = description
    return schema


def _string(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _array(items: dict[str, Any], description: str) -> dict[str, Any]:
    return {"type": "array", "items": items, "description": description}


_REASON = _string(f"why, one line, at most {REASON_CHARS} characters")

#: JSON schema of the answer, sent as the request's structured-output format and quoted in the
#: prompt. It avoids keywords some providers refuse in output schemas (``minimum``,
#: ``maxLength``, ``minItems``...): ranges and caps are stated in descriptions and enforced by
#: :func:`validate`, which trusts nothing the schema promises.
ANSWER_SCHEMA: dict[str, Any] = _object(
    {
        "edges": _array(
            _object(
                {
                    "source": _string("cluster_id of an existing arc"),
                    "target": _string("cluster_id of another existing arc"),
                    "type": {"type": "string", "enum": list(EDGE_TYPES)},
                    "reason": _REASON,
                },
                ("source", "target", "type", "reason"),
            ),
            "new links between arcs; never one that already exists",
        ),
        "merges": _array(
            _object(
                {
                    "keep": _string("cluster_id of the arc that stays"),
                    "absorb": _string("cluster_id of the duplicate arc merged into it"),
                    "title": _string(f"title of the merged arc, at most {TITLE_CHARS} characters"),
                    "reason": _REASON,
                },
                ("keep", "absorb", "title", "reason"),
            ),
            "arcs that tell the same story",
        ),
        "splits": _array(
            _object(
                {
                    "arc": _string("cluster_id of the arc to split"),
                    "parts": _array(
                        _object(
                            {
                                "title": _string(f"title of the part, at most {TITLE_CHARS} characters"),
                                "sessions": _array({"type": "string"}, "session ids of this part"),
                            },
                            ("title", "sessions"),
                        ),
                        "two or more parts that together hold each session of the arc exactly once",
                    ),
                    "reason": _REASON,
                },
                ("arc", "parts", "reason"),
            ),
            "arcs that mix unrelated stories",
        ),
        "signals": _array(
            _object(
                {
                    "arc": _string("cluster_id of the arc holding the open signal"),
                    "source": _string("the signal's source attribute, exactly"),
                    "action": {"type": "string", "enum": ["escalate", "clear"]},
                    "severity": {
                        "type": "string",
                        "enum": [s for s in SEVERITIES if s != "resolved"],
                        "description": "escalate only: the new, more severe severity",
                    },
                    "reason": _REASON,
                },
                ("arc", "source", "action", "reason"),
            ),
            "changes to open signals",
        ),
        "intent": _string(f"what the operator is working towards, one line, at most {INTENT_CHARS} characters"),
        "health": _object(
            {
                "score": {"type": "number", "description": "0 (failing) to 10 (excellent)"},
                "reason": _REASON,
            },
            ("score", "reason"),
            "overall health of the work in the vault",
        ),
        "summaries": _array(
            _object(
                {
                    "arc": _string("cluster_id of an arc that has no summary yet"),
                    "summary": _string(f"one line, at most {SUMMARY_CHARS} characters"),
                },
                ("arc", "summary"),
            ),
            "one-line summaries of unsynthesized arcs",
        ),
        "syntheses": _array(
            _object(
                {
                    "arc": _string("cluster_id of an arc listed as unsynthesized"),
                    "lessons": _array(
                        _string(f"one line, at most {LESSON_CHARS} characters"),
                        f"at most {SYNTHESIS_LESSONS}, most useful first",
                    ),
                    "resolution": _string(f"how the work ended, one line, at most {RESOLUTION_CHARS} characters"),
                },
                ("arc", "lessons", "resolution"),
            ),
            "lessons and a resolution for unsynthesized arcs",
        ),
    },
    TOP_LEVEL_KEYS,
)


def schema_text() -> str:
    """The schema as compact, stable JSON, for the prompt."""
    return json.dumps(ANSWER_SCHEMA, separators=(",", ":"), ensure_ascii=False)

