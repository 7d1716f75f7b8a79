"""Markdown sections of an arc body: level-1/2 headings outside fenced code, and appends.

Shared by clustering (Timeline, Source sessions) and the AI applier (Edges, Merged from).
A fence closes only on a fence line of the same character at least as long as the opening
one (CommonMark), so a fenced copy of another arc never ends early.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

FENCE_RE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")


def headings(lines: Sequence[str]) -> list[tuple[int, str]]:
    """(index, text) of the ``#`` and ``##`` headings outside fenced code."""
    out: list[tuple[int, str]] = []
    fence: str | None = None
    for index, line in enumerate(lines):
        match = FENCE_RE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
            elif line.startswith(("# ", "## ")):
                out.append((index, line.lstrip("#").strip()))
        elif match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) and \
                not line.strip()[len(match.group(1)):].strip():
            fence = None
    return out


def append_to_section(body: str, heading: str, new_lines: Sequence[str]) -> str:
    """``body`` with ``new_lines`` at the end of its ``## heading`` section (created at the end)."""
    lines = body.split("\n")
    heads = headings(lines)
    for position, (index, text) in enumerate(heads):
        if lines[index].startswith("## ") and text.lower() == heading.lower():
            end = heads[position + 1][0] if position + 1 < len(heads) else len(lines)
            last = end
            while last > index + 1 and not lines[last - 1].strip():
                last -= 1
            insert = ["", *new_lines] if last == index + 1 else list(new_lines)
            rest = lines[last:]
            if not rest or rest[0].strip():
                insert.append("")
            return "\n".join(lines[:last] + insert + rest)
    return append_section(body, [f"## {heading}", "", *new_lines])


def append_section(body: str, section: Sequence[str]) -> str:
    """``body`` with ``section`` (its heading first) appended after one blank line."""
    lines = body.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    head = [*lines, ""] if lines else []
    return "\n".join([*head, *section, ""])
