"""The search index's work items and rows: what the plain definition gives, on hostile arcs too.

``index.work_items`` strips, cuts and de-duplicates each field with C calls over the whole field,
and ``rows_for`` puts the redacted items back into their fields by slices; both must give what the
definition below gives (the code as first written: a value at a time).
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from brain.core.model import parse_note
from brain.core.redaction import redact
from brain.search import index
from tests.support.vaults import arc_text


def _by_definition(arc: object) -> index.WorkItems:
    def relative(path: str, cwd: str | None) -> str:
        base = (cwd or "").rstrip("/")
        if base and path.startswith(base + "/"):
            return path[len(base) + 1:]
        return path

    out = []
    for attr, name in index.WORK_FIELDS:
        values = [*getattr(arc, attr), *(v for extra in index.WORK_EXTRA.get(attr, ()) for v in getattr(arc, extra, ()))]
        if attr == "files":
            values = [relative(v, arc.cwd) for v in values]  # type: ignore[attr-defined]
        kept = tuple(dict.fromkeys(v.strip()[:index.WORK_VALUE_CHARS] for v in values if v and v.strip()))
        if kept:
            out.append((name, kept[:index.WORK_MAX_VALUES]))
    return tuple(out)


_CWDS = [None, "", "/", "//", "/home/dev/work/gateway", "/home/dev/work/gateway/", "/home/dev/work/gateway//", "a",
         " /home/dev/work/gateway", "C:\\w\\repo"]
_VALUES = st.sampled_from([
    "src/a.py", "/home/dev/work/gateway/src/a.py", "/home/dev/work/gateway/", "/home/dev/work/gateway",
    "/home/dev/work/gatewayx/a.py", "/home/dev/work/gateway//a.py", "/a.py", "a/b.py", " src/a.py ", "src/a.py",
    "", " ", "\t", "\xa0", "\u3000x", "git status", "git status ", "x" * 199, "x" * 200, "x" * 201, "x" * 200 + "y",
    "y" * 300, "KeyError", "KeyError ", "ümlaut", "C:\\w\\repo\\src\\a.py", "push ghp_" + "a1B2" * 9,
    "/home/dev/work/gateway/" + "sk-ant-api03-" + "Q" * 60,
]) | st.text(alphabet=" /ab\t\xa0.", max_size=6)


@settings(max_examples=800, deadline=None)
@given(st.sampled_from(_CWDS), *(st.lists(_VALUES, max_size=70) for _ in range(5)))
def test_work_items_are_what_the_definition_gives(
    cwd: str | None, files: list[str], commands: list[str], errors: list[str], met: list[str], ids: list[str]
) -> None:
    note = parse_note("clusters/a.md", arc_text("2026-11-20-webhooks-aaaaaaaaaaaa").encode(), size=1, mtime_ns=0,
                      sha1="x")
    assert note.arc is not None
    arc = replace(note.arc, cwd=cwd, files=tuple(files), commands=tuple(commands), open_errors=tuple(errors),
                  errors_met=tuple(met), identifiers=tuple(ids))
    assert index.work_items(arc) == _by_definition(arc)
    text = arc_text("2026-11-20-webhooks-aaaaaaaaaaaa")
    rows = index.rows_for(replace(note, arc=arc), text)
    # Each field's values redacted, in its own field, in order (no value here reaches into the next).
    assert rows[0].work == tuple((name, tuple(map(redact, values))) for name, values in _by_definition(arc))
