"""The LLM's answer (SPEC §8): one import for its schema, its parsing and its validation.

The work lives in three modules with one job each:

* :mod:`brain.core.answer_schema` — field names, text caps, the JSON schema sent with the request
  and quoted in the prompt;
* :mod:`brain.core.answer_parse` — the answer text parsed once into one JSON object, or an
  :class:`AnswerError` (the tick maps that to exit 4);
* :mod:`brain.core.answer_validate` — every recommendation checked against the vault into
  frozen values (:class:`Validated`), each rejected item with its reason.

This module re-exports their public names, so callers keep one import.
"""

from __future__ import annotations

from brain.core.answer_parse import MAX_ANSWER_CHARS, MAX_NESTING, AnswerError, parse_answer
from brain.core.answer_schema import (
    ANSWER_SCHEMA,
    CHANGE_PRIORITY,
    INTENT_CHARS,
    LESSON_CHARS,
    PREVIEW_CHARS,
    REASON_CHARS,
    RESOLUTION_CHARS,
    SAFE_ID_RE,
    SUMMARY_CHARS,
    SYMMETRIC_EDGE_TYPES,
    SYNTHESIS_LESSONS,
    TITLE_CHARS,
    TOP_LEVEL_KEYS,
    Kind,
    schema_text,
)
from brain.core.answer_validate import (
    ArcView,
    HealthScore,
    Merge,
    NewEdge,
    NewSummary,
    NewSynthesis,
    Redactor,
    Rejection,
    SignalChange,
    SignalView,
    Split,
    SplitPart,
    Validated,
    clean_text,
    validate,
    views_from_notes,
)

__all__ = [
    "ANSWER_SCHEMA",
    "CHANGE_PRIORITY",
    "INTENT_CHARS",
    "LESSON_CHARS",
    "MAX_ANSWER_CHARS",
    "MAX_NESTING",
    "PREVIEW_CHARS",
    "REASON_CHARS",
    "RESOLUTION_CHARS",
    "SAFE_ID_RE",
    "SUMMARY_CHARS",
    "SYMMETRIC_EDGE_TYPES",
    "SYNTHESIS_LESSONS",
    "TITLE_CHARS",
    "TOP_LEVEL_KEYS",
    "AnswerError",
    "ArcView",
    "HealthScore",
    "Kind",
    "Merge",
    "NewEdge",
    "NewSummary",
    "NewSynthesis",
    "Redactor",
    "Rejection",
    "SignalChange",
    "SignalView",
    "Split",
    "SplitPart",
    "Validated",
    "clean_text",
    "parse_answer",
    "schema_text",
    "validate",
    "views_from_notes",
]
