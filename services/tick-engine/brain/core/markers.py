"""The marker grammar (SPEC §6): HTML comments invisible in Obsidian.

    inline:  <!-- @TYPE key=value key="quoted value" -->
    block:   <!-- @TYPE attrs --> content <!-- @/TYPE -->

Markers inside fenced code blocks and inline code spans are documentation and ignored.
A malformed or unterminated marker becomes a :class:`MarkerProblem` and is left alone;
parsing never fails. Offsets index the text that was parsed, so edits can splice the
original text without re-rendering anything around the marker.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from brain.core.vocab import BLOCK_ONLY_TYPES, INLINE_ONLY_TYPES, MARKER_TYPES

_COMMENT = re.compile(r"<!--(.*?)-->", re.DOTALL)
_OPEN_HEAD = re.compile(r"\s*@([A-Za-z][A-Za-z0-9_-]*)(?=\s|$)(.*)\Z", re.DOTALL)
_CLOSE = re.compile(r"\s*@/([A-Za-z][A-Za-z0-9_-]*)\s*\Z")
_ATTR = re.compile(r"""\s*([A-Za-z_][A-Za-z0-9_.-]*)=(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([^\s"'=]+))""")
_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")
_BARE_VALUE = re.compile(r"^[^\s\"'=<>`]+$")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_UNCLOSED_HEAD = re.compile(r"\s*@([^\s>]{0,40})")
_BLANK_TAIL = re.compile(r"\s*\Z")


@dataclass(frozen=True)
class Marker:
    type: str
    attrs: tuple[tuple[str, str], ...]
    content: str | None  # None for an inline marker
    line: int  # 1-based line of the opening tag
    start: int  # offset of the opening tag
    open_end: int  # offset just after the opening tag
    end: int  # offset just after the closing tag (== open_end when inline)

    def attr(self, key: str, default: str | None = None) -> str | None:
        for name, value in self.attrs:
            if name == key:
                return value
        return default

    @property
    def text(self) -> str:
        return (self.content or "").strip()

    @property
    def is_block(self) -> bool:
        return self.content is not None

    @property
    def is_open_signal(self) -> bool:
        """A ``@signal`` still in force: its severity (``info`` when absent) is not ``resolved``
        and it carries no ``cleared_at`` (set when the AI layer clears it). The one definition."""
        return self.type == "signal" and (self.attr("severity") or "info") != "resolved" and self.attr("cleared_at") is None


@dataclass(frozen=True)
class MarkerProblem:
    line: int
    message: str


def _code_ranges(text: str) -> list[tuple[int, int]]:
    """Character ranges of fenced code blocks and inline code spans."""
    if "`" not in text and "~~~" not in text:
        return []
    ranges: list[tuple[int, int]] = []
    pos = 0
    fence: str | None = None
    fence_start = 0
    prose_start = 0
    for line in text.splitlines(keepends=True):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                ranges.extend(_inline_spans(text, prose_start, pos))
                fence, fence_start = match.group(1), pos
        elif _closes(fence, line, match):
            ranges.append((fence_start, pos + len(line)))
            fence = None
            prose_start = pos + len(line)
        pos += len(line)
    if fence is not None:
        ranges.append((fence_start, len(text)))
    else:
        ranges.extend(_inline_spans(text, prose_start, len(text)))
    ranges.sort()
    return ranges


def _closes(fence: str, line: str, match: re.Match[str] | None) -> bool:
    """``line`` (its :data:`_FENCE` match) closes a code block opened by ``fence``."""
    return match is not None and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
        and not line.strip()[len(match.group(1)):].strip()


def _inline_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    segment = text[start:end]
    if "`" not in segment:
        return []
    return [(start + m.start(), start + m.end()) for m in _INLINE_CODE.finditer(segment) if "\n\n" not in m.group(2)]


def _inside(ranges: Sequence[tuple[int, int]], offset: int) -> bool:
    if not ranges:
        return False
    index = bisect.bisect_right(ranges, (offset, float("inf"))) - 1
    return index >= 0 and ranges[index][0] <= offset < ranges[index][1]


def parse_attrs(raw: str) -> tuple[tuple[str, str], ...] | None:
    """``key=value key="quoted"`` -> pairs in written order; None when malformed."""
    pairs: list[tuple[str, str]] = []
    pos = 0
    seen: set[str] = set()
    while pos < len(raw):
        if _BLANK_TAIL.match(raw, pos):  # not raw[pos:].strip(): that copy made long lists quadratic
            break
        match = _ATTR.match(raw, pos)
        if not match:
            return None
        key = match.group(1)
        if key in seen:
            return None
        seen.add(key)
        if match.group(2) is not None:
            value = re.sub(r"\\(.)", r"\1", match.group(2))
        elif match.group(3) is not None:
            value = match.group(3)
        else:
            value = match.group(4)
        pairs.append((key, value))
        pos = match.end()
        if pos < len(raw) and not raw[pos].isspace():
            return None
    return tuple(pairs)


class _Lines:
    """1-based line numbers of offsets asked in increasing order (the comments come that way):
    each newline is counted once, by ``str.count``, with no table of every line start."""

    def __init__(self, text: str):
        self.text = text
        self.offset, self.line = 0, 1

    def of(self, offset: int) -> int:
        if offset < self.offset:  # never for the scan below; kept exact all the same
            self.offset, self.line = 0, 1
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line


def _comments(text: str, code: Sequence[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """``(start, close)`` of each ``<!--`` outside code, in order; ``close`` is -1 when unterminated.

    A comment runs from ``<!--`` to the first ``-->`` after it, unless another ``<!--`` opens
    first: then the earlier one is unterminated and the later one is tried (so an unclosed
    ``<!-- @todo`` never swallows the marker after it). Every ``find`` starts where the
    previous one stopped or at a later position, so the scan is linear in the text whatever
    it holds (thousands of unclosed ``<!--`` included).
    """
    close = -1
    closes_left = True
    opening = text.find("<!--")
    while opening != -1:
        if _inside(code, opening):
            opening = text.find("<!--", opening + 4)
            continue
        if closes_left and close < opening + 4:
            close = text.find("-->", opening + 4)
            closes_left = close != -1
        if not closes_left:
            yield opening, -1
            opening = text.find("<!--", opening + 4)
            continue
        interrupting = text.find("<!--", opening + 4, close)
        if interrupting != -1:
            yield opening, -1
            opening = interrupting
            continue
        yield opening, close
        opening = text.find("<!--", close + 3)


_Pending = tuple[str, tuple[tuple[str, str], ...], int, int, int]  # type, attrs, line, start, open_end


def parse(text: str, *, first_line: int = 1) -> tuple[list[Marker], list[MarkerProblem]]:
    """All markers of ``text`` and the problems found; never raises; linear in ``len(text)``."""
    if "<!--" not in text:
        return [], []
    code = _code_ranges(text)
    lines = _Lines(text)
    shift = first_line - 1
    problems: list[MarkerProblem] = []
    markers: list[Marker] = []
    pending: dict[str, list[_Pending]] = {}  # open blocks by type, innermost last

    for start, close in _comments(text, code):
        line = lines.of(start) + shift
        if close == -1:
            head = _UNCLOSED_HEAD.match(text, start + 4, min(len(text), start + 68))
            if head:
                problems.append(MarkerProblem(line, f"unterminated marker tag: '<!-- @{head.group(1)}' has no '-->'"))
            continue
        end = close + 3
        inner = text[start + 4 : close]
        closing = _CLOSE.match(inner)
        if closing:
            kind = closing.group(1)
            stack = pending.get(kind)
            if stack:
                _, attrs, open_line, open_start, open_end = stack.pop()
                markers.append(Marker(kind, attrs, text[open_end:start], open_line, open_start, open_end, end))
            else:
                problems.append(MarkerProblem(line, f"closing <!-- @/{kind} --> without an opening marker"))
            continue
        head = _OPEN_HEAD.match(inner)
        if not head:
            if inner.lstrip().startswith("@"):
                problems.append(MarkerProblem(line, "malformed marker: expected <!-- @type key=value -->"))
            continue
        kind, raw_attrs = head.group(1), head.group(2)
        if kind not in MARKER_TYPES:
            problems.append(MarkerProblem(line, f"unknown marker type @{kind}"))
            continue
        parsed_attrs = parse_attrs(raw_attrs)
        if parsed_attrs is None:
            problems.append(MarkerProblem(line, f"malformed attributes in @{kind} marker: {raw_attrs.strip()[:60]!r}"))
            continue
        if kind in INLINE_ONLY_TYPES:
            markers.append(Marker(kind, parsed_attrs, None, line, start, end, end))
        else:
            pending.setdefault(kind, []).append((kind, parsed_attrs, line, start, end))

    for kind, attrs, line, start, open_end in sorted((p for stack in pending.values() for p in stack), key=lambda p: p[3]):
        if kind in BLOCK_ONLY_TYPES:
            problems.append(MarkerProblem(line, f"unterminated @{kind} block: no <!-- @/{kind} --> follows"))
        else:
            markers.append(Marker(kind, attrs, None, line, start, open_end, open_end))
    markers.sort(key=lambda m: m.start)
    problems.sort(key=lambda p: p.line)
    return markers, problems


# --- rendering and edits -------------------------------------------------------------


def quote(value: str) -> str:
    if value and _BARE_VALUE.match(value) and "-->" not in value:
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_tag(kind: str, attrs: Iterable[tuple[str, str]]) -> str:
    rendered = " ".join(f"{key}={quote(value)}" for key, value in attrs)
    return f"<!-- @{kind} {rendered} -->" if rendered else f"<!-- @{kind} -->"


def render_block(kind: str, attrs: Iterable[tuple[str, str]], content: str) -> str:
    return f"{render_tag(kind, attrs)}\n{content.strip()}\n<!-- @/{kind} -->"


def with_attrs(marker: Marker, updates: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """The marker's attributes with ``updates`` applied, every other one kept in place."""
    out = [(key, updates.get(key, value)) for key, value in marker.attrs]
    known = {key for key, _ in marker.attrs}
    out.extend((key, value) for key, value in updates.items() if key not in known)
    return tuple(out)


def replace_block(text: str, marker: Marker, attrs: Iterable[tuple[str, str]], content: str | None) -> str:
    """``text`` with ``marker`` re-rendered: new attributes, and new content for a block."""
    tag = render_tag(marker.type, attrs)
    if marker.content is None or content is None:
        return text[: marker.start] + tag + text[marker.open_end :]
    closing_at = marker.open_end + len(marker.content)
    return text[: marker.start] + tag + content + text[closing_at:]


def remove(text: str, marker: Marker) -> str:
    """``text`` without ``marker``; a marker alone on its lines takes its line break along."""
    start, end = marker.start, marker.end
    line_start = text.rfind("\n", 0, start) + 1
    if text[line_start:start].strip() == "":
        after = text.find("\n", end)
        after = len(text) if after == -1 else after
        if text[end:after].strip() == "":
            return text[:line_start] + text[after + 1 :]
    return text[:start] + text[end:]


def code_closed(text: str) -> str:
    """``text`` as block content that keeps its code to itself: each backtick outside an inline
    code span of its own made a plain quote (``'``), and a fenced code block left open closed.

    Such text can never open code that runs on past the block's closing marker (to a backtick
    in the next lesson, or to the end of the note) and hides that marker, and the next one's
    opening, from :func:`parse`: an error message cut after its opening backtick, a model's
    answer with a stray one, an agent's note with an unclosed fence."""
    if "`" not in text and "~~~" not in text:
        return text
    out: list[str] = []
    prose: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        match = _FENCE.match(line)
        if fence is None and match:
            out.append(_spans_closed("".join(prose)))
            prose.clear()
            fence = match.group(1)
        elif fence is None:
            prose.append(line)
            continue
        elif _closes(fence, line, match):
            fence = None
            out.append(line)
            continue
        out.append(line)
    out.append(_spans_closed("".join(prose)))
    closed = "".join(out)
    if fence is not None:
        closed += ("" if closed.endswith("\n") else "\n") + fence
    return closed


def _spans_closed(text: str) -> str:
    """``text`` (no fence in it) with its backticks outside inline code spans made quotes."""
    if "`" not in text:
        return text
    out: list[str] = []
    at = 0
    for match in _INLINE_CODE.finditer(text):
        if "\n\n" in match.group(2):
            continue  # no span (:func:`_inline_spans`): its backticks go with the prose around
        out.append(text[at:match.start()].replace("`", "'"))
        out.append(match.group(0))
        at = match.end()
    out.append(text[at:].replace("`", "'"))
    return "".join(out)


def contains_marker_syntax(value: str) -> bool:
    return "<!--" in value or "-->" in value
