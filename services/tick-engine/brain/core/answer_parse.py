"""The LLM's answer text (SPEC §8) parsed once into one JSON object, or an :class:`AnswerError`. Pure.

:func:`parse_answer` finds the answer object in the text: bare, fenced, or wrapped in a little
prose; it must hold at least one of the answer's fields. Anything else raises
:class:`AnswerError`, which the tick reports as an AI-phase failure (exit 4) after the keeper's
deterministic write: a text too long, no JSON object, or JSON nested deeper than
:data:`MAX_NESTING` levels (an answer like ``[[[[…`` a hundred thousand times is refused before
the decoder recurses into it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from brain.core.answer_schema import TOP_LEVEL_KEYS

#: Answers longer than this are refused before any parsing (the LLM's own answers are bounded
#: by ``llm_max_output_tokens``; this guards ``brain apply`` on an arbitrary file).
MAX_ANSWER_CHARS = 8_000_000
#: Deepest nesting of arrays and objects an answer may hold (a valid one needs 6).
MAX_NESTING = 64
#: How many ``{`` positions of a prose-wrapped answer are tried as the start of the object.
_MAX_OBJECT_STARTS = 64

class AnswerError(ValueError):
    """The answer is not one JSON object (an AI-phase failure: exit 4)."""


_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)```", re.DOTALL)


def parse_answer(text: str) -> dict[str, Any]:
    """The answer object in ``text``: bare, in a code fence, or wrapped in a little prose.

    Candidates are tried in that order; within prose only outermost objects count (an object
    inside one that decoded is part of it). The first candidate holding at least one of the
    answer's fields wins. A JSON object without any of them (an echoed schema, an example, a
    fragment of a truncated answer) is not an answer: :class:`AnswerError`, like no JSON at all.
    """
    if not isinstance(text, str):
        raise AnswerError("the answer is not text")
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerError(f"the answer is too long ({len(text)} characters, at most {MAX_ANSWER_CHARS})")
    stripped = text.strip()
    if not stripped:
        raise AnswerError("the answer is empty")
    decoded = _loads(stripped)
    if decoded is _TOO_DEEP:
        raise AnswerError(f"the answer's JSON is nested too deeply (more than {MAX_NESTING} levels)")
    if decoded is not _NOTHING and not isinstance(decoded, dict):
        raise AnswerError(f"the answer is JSON but not an object (a {_json_type(decoded)})")
    found_object = isinstance(decoded, dict)
    if isinstance(decoded, dict) and _is_answer(decoded):
        return decoded
    too_deep = False
    if decoded is _NOTHING:
        for match in _FENCE_RE.finditer(stripped):
            fenced = _loads(match.group(1).strip())
            too_deep = too_deep or fenced is _TOO_DEEP
            if isinstance(fenced, dict):
                found_object = True
                if _is_answer(fenced):
                    return fenced
        for embedded in _embedded_objects(stripped):
            if embedded is _TOO_DEEP:
                too_deep = True
                continue
            found_object = True
            if isinstance(embedded, dict) and _is_answer(embedded):
                return embedded
    if found_object:
        raise AnswerError("the JSON object holds none of the answer's fields (" + ", ".join(TOP_LEVEL_KEYS) + ")")
    if too_deep:
        raise AnswerError(f"the answer's JSON is nested too deeply (more than {MAX_NESTING} levels)")
    raise AnswerError("no JSON object found in the answer")


_NOTHING = object()
#: A JSON value nested deeper than MAX_NESTING (or than the decoder could follow).
_TOO_DEEP: Any = object()


def _is_answer(value: dict[str, Any]) -> bool:
    return any(key in value for key in TOP_LEVEL_KEYS)


def _loads(text: str) -> Any:
    try:
        value = json.loads(text)
    except RecursionError:
        return _TOO_DEEP
    except ValueError:
        return _NOTHING
    return value if _within_nesting(value) else _TOO_DEEP


def _within_nesting(value: Any) -> bool:
    """Whether ``value`` nests at most :data:`MAX_NESTING` arrays and objects (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            return False
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return True


def _embedded_objects(text: str) -> Iterator[Any]:
    """The outermost objects in prose, in order (or :data:`_TOO_DEEP` for one nested too deeply);
    an object that decodes is skipped as a whole."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    tries = 0
    while start != -1 and tries < _MAX_OBJECT_STARTS:
        tries += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except RecursionError:
            value, end = _TOO_DEEP, start + 1
        except ValueError:
            value, end = None, start + 1
        if isinstance(value, dict) and not _within_nesting(value):
            value = _TOO_DEEP
        if value is _TOO_DEEP or isinstance(value, dict):
            yield value
        start = text.find("{", end)


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool) or value is None:
        return "literal"
    return "number"


# --- inputs ---------------------------------------------------------------------------------
