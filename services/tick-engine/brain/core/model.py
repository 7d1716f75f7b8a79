"""The vault as values: notes, arcs, problems. Built once by the scanner, shared by every phase.

:func:`parse_note` is pure: text in, :class:`Note` out. Bad input becomes problems on the
note, never an exception.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

from brain.core import frontmatter, markers
from brain.core.markers import Marker
from brain.core.vocab import TOMBSTONE_STATUSES

T = TypeVar("T")

CLUSTER_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


def field_names(cls: Any) -> list[str]:
    """A dataclass's field names, in the order its constructor takes them."""
    return [f.name for f in fields(cls)]


def built(cls: Any, names: list[str], values: Any) -> Any:
    """A frozen dataclass from its field values (``names``: :func:`field_names` of ``cls``), without
    its generated ``__init__``, which sets each field through ``object.__setattr__``: several times
    faster where 10 000 are made at once, and the same object for ``==``, ``hash`` and every reader.
    A value missing or extra for a name raises, like the constructor. The instance's own
    ``__dict__`` is filled, not replaced: it shares its keys with every instance of the class, a
    third of the size of a dictionary of its own (an ArcInfo's: 256 bytes, not 832)."""
    obj = object.__new__(cls)
    obj.__dict__.update(zip(names, values, strict=True))
    return obj


def replaced(obj: T, **changes: Any) -> T:
    """``dataclasses.replace`` of a frozen dataclass made of plain fields (no ``__post_init__``,
    no ``init=False`` field), the way :func:`built` makes one: a copy of its fields with
    ``changes`` on top, where a cold tick makes 10 000 (``dataclasses.replace`` walks the fields
    and calls the generated ``__init__`` each time). A name that is not a field raises, like it."""
    fields_of = obj.__dict__
    for name in changes:
        if name not in fields_of:
            raise TypeError(f"{type(obj).__name__} has no field {name!r}")
    new = object.__new__(type(obj))
    new.__dict__.update(fields_of)
    new.__dict__.update(changes)
    return new


@dataclass(frozen=True)
class Problem:
    path: str
    line: int | None
    message: str

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class Activity:
    sessions: int = 0
    user_turns: int = 0
    tool_calls: int = 0
    errors: int = 0
    joy: int = 0
    compactions: int = 0


@dataclass(frozen=True)
class ArcInfo:
    """What the tick needs of an arc's frontmatter, normalised (old layouts included)."""

    cluster_id: str
    title: str
    region: str
    status: str
    heat: int | None
    created: str | None
    last_active: str | None
    project: str | None
    agents: tuple[str, ...]
    source_sessions: tuple[str, ...]
    activity: Activity
    synthesized: bool
    summary: str | None
    merged_into: str | None
    split_into: tuple[str, ...]
    # Where the work stands (contract with brain cluster; CLUSTERS.md). No defaults on purpose:
    # a parse-cache entry written before these keys existed fails to load and is re-parsed.
    cwd: str | None
    branch: str | None
    files: tuple[str, ...]
    commands: tuple[str, ...]
    open_errors: tuple[str, ...]
    errors_met: tuple[str, ...]  # error names met in the arc's sessions, resolved or not
    identifiers: tuple[str, ...]
    last_prompt: str | None
    #: Every session a scripted run (``claude -p``, an SDK client such as claude-mem's observer,
    #: ``codex exec``): not work an operator moved on from, nor a visit to another project.
    headless: bool

    @property
    def is_tombstone(self) -> bool:
        return self.status in TOMBSTONE_STATUSES

    @property
    def session_count(self) -> int:
        return len(self.source_sessions) or self.activity.sessions


@dataclass(frozen=True)
class Note:
    """One markdown file of the vault as the scanner saw it."""

    path: str  # vault-relative, POSIX separators
    size: int
    mtime_ns: int
    sha1: str
    arc: ArcInfo | None = None
    markers: tuple[Marker, ...] = ()
    problems: tuple[Problem, ...] = ()
    parsed: bool = True  # False: unreadable (bad UTF-8, bad YAML, too large); never edited
    body_offset: int = 0
    #: The frontmatter is known to be in the plain subset the fast loader reads (parsed so), so a
    #: heat/status line edit needs no re-read of it. False: not known (a prediction, a JSON row).
    #: A hint about how the text was read, not part of what the note is: not compared.
    plain_front: bool = field(default=False, compare=False)

    @property
    def is_arc(self) -> bool:
        return self.arc is not None

    def to_json(self) -> dict[str, Any]:
        arc = None
        if self.arc is not None:
            arc = {name: getattr(self.arc, name) for name in _ARC_FIELDS}
            arc["activity"] = asdict(self.arc.activity)
        data: dict[str, Any] = {
            "path": self.path,
            "size": self.size,
            "mtime_ns": self.mtime_ns,
            "sha1": self.sha1,
            "arc": arc,
            "problems": [p.as_dict() for p in self.problems],
            "parsed": self.parsed,
            "body_offset": self.body_offset,
        }
        data["markers"] = [
            [m.type, [list(a) for a in m.attrs], m.content, m.line, m.start, m.open_end, m.end] for m in self.markers
        ]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Note:
        arc = data.get("arc")
        arc_info = None
        if arc is not None:
            arc = dict(arc)
            arc["activity"] = Activity(**arc["activity"])
            for key in _ARC_TUPLES:
                arc[key] = tuple(arc[key])
            arc_info = ArcInfo(**arc)
        return cls(
            path=data["path"],
            size=data["size"],
            mtime_ns=data["mtime_ns"],
            sha1=data["sha1"],
            arc=arc_info,
            markers=tuple(
                Marker(t, tuple((k, v) for k, v in attrs), content, line, start, open_end, end)
                for t, attrs, content, line, start, open_end, end in data["markers"]
            ),
            problems=tuple(Problem(**p) for p in data["problems"]),
            parsed=data["parsed"],
            body_offset=data.get("body_offset", 0),
        )


_ARC_FIELDS = tuple(f.name for f in fields(ArcInfo))
_ARC_TUPLES = ("agents", "source_sessions", "split_into", "files", "commands", "open_errors", "errors_met",
               "identifiers")


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    return None


def _int(value: Any) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else 0  # .nan, .inf: no count at all
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return 0
    return 0


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value if v is not None and not isinstance(v, dict | list))
    return ()


#: Bounds on the work keys: at least what brain cluster writes (``brain.core.arc_text``: 60 files),
#: so none of those is dropped on reading; a hand-edited arc may hold anything. They are part of
#: the parse cache's key (``brain.io.vault.CACHE_KEY``): a change re-parses every note once.
WORK_LIST_ITEMS = 60
WORK_ITEM_CHARS = 300
LAST_PROMPT_CHARS = 500


def _line(value: Any, limit: int) -> str | None:
    """A scalar as one line of at most ``limit`` characters; None for lists, maps and blanks."""
    text = _text(value)
    if text is None:
        return None
    line = " ".join(text.split())[:limit]
    return line or None


def _lines(value: Any) -> tuple[str, ...]:
    """A YAML list of scalars as one-line strings (bounded, blanks and duplicates dropped).

    Anything else (a map, a nested list, a bare scalar) is ignored: these keys are hints for the
    feed, and a wrong shape must never stop the tick. Each item is :func:`_line` inlined, and the
    lines seen are a dict's keys (an arc lists dozens of files and commands).
    """
    if not isinstance(value, list | tuple):
        return ()
    out: dict[str, None] = {}
    for item in value:
        if isinstance(item, str):
            text = item
        elif isinstance(item, int | float) and not isinstance(item, bool):
            text = str(item)
        else:
            continue
        line = " ".join(text.split())[:WORK_ITEM_CHARS]
        if line and line not in out:
            out[line] = None
            if len(out) == WORK_LIST_ITEMS:
                break
    return tuple(out)


def arc_info(meta: dict[str, Any]) -> ArcInfo:
    """Normalise an arc's frontmatter; reads the agentibrain ``signals:`` layout too."""
    activity_raw = meta.get("activity")
    legacy = meta.get("signals")
    sessions = _strings(meta.get("source_sessions"))
    if isinstance(activity_raw, dict):
        activity = Activity(
            sessions=_int(activity_raw.get("sessions", len(sessions))),
            user_turns=_int(activity_raw.get("user_turns")),
            tool_calls=_int(activity_raw.get("tool_calls")),
            errors=_int(activity_raw.get("errors")),
            joy=_int(activity_raw.get("joy")),
            compactions=_int(activity_raw.get("compactions")),
        )
    elif isinstance(legacy, dict):
        activity = Activity(
            sessions=len(sessions),
            tool_calls=_int(legacy.get("tools")),
            errors=_int(legacy.get("errors")),
            joy=_int(legacy.get("joy")),
        )
    else:
        activity = Activity(sessions=len(sessions))
    heat_raw = meta.get("heat")
    heat = None if heat_raw is None or isinstance(heat_raw, dict | list) else _int(heat_raw)
    cluster_id = str(meta["cluster_id"]).strip()
    title = _text(meta.get("title")) or cluster_id
    return ArcInfo(
        cluster_id=cluster_id,
        title=" ".join(title.split()),
        region=(_text(meta.get("region")) or "").strip(),
        status=(_text(meta.get("status")) or "").strip(),
        heat=heat,
        created=_text(meta.get("created")),
        last_active=_text(meta.get("last_active")),
        project=_text(meta.get("project")),
        agents=_strings(meta.get("agents")),
        source_sessions=sessions,
        activity=activity,
        synthesized=meta.get("synthesized") is True,
        summary=_text(meta.get("summary")),
        merged_into=_text(meta.get("merged_into")),
        split_into=_strings(meta.get("split_into")),
        cwd=_line(meta.get("cwd"), WORK_ITEM_CHARS),
        branch=_line(meta.get("branch"), WORK_ITEM_CHARS),
        files=_lines(meta.get("files")),
        commands=_lines(meta.get("commands")),
        open_errors=_lines(meta.get("open_errors")),
        errors_met=_lines(meta.get("errors_met")),
        identifiers=_lines(meta.get("identifiers")),
        last_prompt=_line(meta.get("last_prompt"), LAST_PROMPT_CHARS),
        headless=meta.get("headless") is True,
    )


@dataclass
class ParsedText:
    """Result of :func:`parse_text`, before file identity is attached."""

    meta: dict[str, Any] | None = None
    plain: bool = False  # the frontmatter is in the fast loader's plain subset
    document: frontmatter.Document | None = None
    markers: list[Marker] = field(default_factory=list)
    problems: list[tuple[int | None, str]] = field(default_factory=list)
    parsed: bool = True


def parse_text(text: str) -> ParsedText:
    out = ParsedText()
    try:
        document = frontmatter.split(text)
        meta, plain = frontmatter.load_plain(document.frontmatter) if document.frontmatter is not None else (None, False)
    except frontmatter.FrontmatterError as exc:
        out.problems.append((exc.line, exc.message + "; file left as it is"))
        out.parsed = False
        return out
    out.document, out.meta, out.plain = document, meta, plain
    found, problems = markers.parse(text)
    # Markers inside the frontmatter block are YAML text, not markers.
    out.markers = [m for m in found if m.start >= document.body_offset]
    out.problems.extend((p.line, p.message) for p in problems if p.line >= document.body_first_line)
    return out


def parse_note(path: str, data: bytes, *, size: int, mtime_ns: int, sha1: str) -> Note:
    """A :class:`Note` from a file's bytes. Invalid UTF-8 or YAML makes an unparsed note."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return Note(path, size, mtime_ns, sha1, problems=(Problem(path, line, "not valid UTF-8; file left as it is"),),
                    parsed=False)
    parsed = parse_text(text)
    problems = [Problem(path, line, message) for line, message in parsed.problems]
    if not parsed.parsed or parsed.document is None:
        return Note(path, size, mtime_ns, sha1, problems=tuple(problems), parsed=False)
    arc = None
    meta = parsed.meta
    if meta is not None and meta.get("cluster_id") not in (None, ""):
        raw_id = meta.get("cluster_id")
        if isinstance(raw_id, str | int) and CLUSTER_ID_RE.match(str(raw_id).strip()):
            arc = arc_info(meta)
        else:
            problems.append(Problem(path, 2, f"invalid cluster_id {str(raw_id)[:60]!r}: not treated as an arc"))
    return Note(
        path,
        size,
        mtime_ns,
        sha1,
        arc=arc,
        markers=tuple(parsed.markers),
        problems=tuple(problems),
        parsed=True,
        body_offset=parsed.document.body_offset,
        plain_front=parsed.plain,
    )
