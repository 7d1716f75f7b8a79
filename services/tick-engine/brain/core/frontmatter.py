"""YAML frontmatter: split, strict load, and byte-stable key edits.

Round trips are byte-stable: :func:`set_keys` rewrites only the lines of the keys it
changes, so comments, key order, quoting and unknown keys elsewhere keep their bytes, and
a file whose metadata did not change is not rewritten at all.

Loading is deliberately conservative: dates and times stay strings (PyYAML would turn
them into ``datetime`` objects that do not round-trip) and only ``true``/``false`` are
booleans (YAML 1.1's ``yes``/``no``/``on``/``off`` stay strings).
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

#: The implicit resolvers of PyYAML's SafeLoader (YAML 1.1), without timestamps and with only
#: ``true``/``false`` as booleans, in the loader's order: (tag, pattern, the first characters it
#: is tried for; a space stands for the empty scalar's key, ""). Written out so that reading and line-editing frontmatter does not import
#: PyYAML (a quarter of a quiet tick's imports); tests/test_frontmatter.py checks that it is the
#: table PyYAML's own loader would get.
_IMPLICIT: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "yYnNtTfFoO"),
    ("tag:yaml.org,2002:float", re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
                    |\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?
                    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
                    |[-+]?\.(?:inf|Inf|INF)
                    |\.(?:nan|NaN|NAN))$""", re.X), "-+0123456789."),
    ("tag:yaml.org,2002:int", re.compile(r"""^(?:[-+]?0b[0-1_]+
                    |[-+]?0[0-7_]+
                    |[-+]?(?:0|[1-9][0-9_]*)
                    |[-+]?0x[0-9a-fA-F_]+
                    |[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$""", re.X), "-+0123456789"),
    ("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), "<"),
    ("tag:yaml.org,2002:null", re.compile(r"""^(?: ~
                    |null|Null|NULL
                    | )$""", re.X), "~nN "),
    ("tag:yaml.org,2002:value", re.compile(r"^(?:=)$"), "="),
    ("tag:yaml.org,2002:yaml", re.compile(r"^(?:!|&|\*)$"), "!&*"),
)
_RESOLVERS: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
for _tag, _pattern, _firsts in _IMPLICIT:
    for _first in _firsts:
        _RESOLVERS.setdefault(_first.strip(), []).append((_tag, _pattern))


class _Yaml(NamedTuple):
    module: ModuleType
    loader: Any  # the SafeLoader (C when built) resolving with :data:`_RESOLVERS`
    dumper: Any


@functools.cache
def _yaml() -> _Yaml:
    """PyYAML, imported when a value needs it (a full parse, a dump)."""
    import yaml

    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Loader(base):  # type: ignore[misc]
        pass

    _Loader.yaml_implicit_resolvers = {first: list(found) for first, found in _RESOLVERS.items()}
    return _Yaml(yaml, _Loader, getattr(yaml, "CSafeDumper", yaml.SafeDumper))


class FrontmatterError(ValueError):
    """Frontmatter that cannot be read; ``line`` is 1-based within the file."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line


@dataclass(frozen=True)
class Document:
    """A markdown file cut into its frontmatter text and body.

    ``frontmatter`` is the YAML between the ``---`` lines (each line ending in ``newline``),
    or ``None`` when the file has none. ``body`` is everything after the closing line.
    """

    frontmatter: str | None
    body: str
    newline: str = "\n"
    closing: str | None = None  # the closing line exactly as written; None means "---" + newline

    @property
    def _closing(self) -> str:
        return self.closing if self.closing is not None else "---" + self.newline

    @property
    def body_offset(self) -> int:
        """Character offset of the body in the original text."""
        if self.frontmatter is None:
            return 0
        return 3 + len(self.newline) + len(self.frontmatter) + len(self._closing)

    @property
    def body_first_line(self) -> int:
        """1-based line number of the body's first line in the original text."""
        if self.frontmatter is None:
            return 1
        return self.frontmatter.count("\n") + 3

    def render(self) -> str:
        if self.frontmatter is None:
            return self.body
        return f"---{self.newline}{self.frontmatter}{self._closing}{self.body}"


def split(text: str) -> Document:
    """Cut ``text`` at its frontmatter; raises FrontmatterError for an unterminated block."""
    if text.startswith("---\n"):
        # The closing line is the first line that strips to "---" or "...": such a line starts
        # with one of them, so only those lines are looked at (found by the regex engine).
        pos = 4
        while True:
            found = _CLOSING_CANDIDATE.search(text, pos)
            if found is None:
                raise FrontmatterError("frontmatter has no closing '---' line", line=1)
            begin, end = found.span()
            if text[begin:end].rstrip() in ("---", "..."):
                after = end + 1 if end < len(text) else end
                closing = text[begin:after]
                return Document(text[4:begin], text[after:], "\n", None if closing == "---\n" else closing)
            pos = end
    if text.startswith("---\r\n"):
        newline = "\r\n"
    else:
        return Document(None, text)
    start = 3 + len(newline)
    pos = start
    while True:
        end = text.find(newline, pos)
        line = text[pos:] if end == -1 else text[pos:end]
        if line.rstrip() in ("---", "..."):
            after = len(text) if end == -1 else end + len(newline)
            closing = text[pos:after]
            return Document(text[start:pos], text[after:], newline, None if closing == "---" + newline else closing)
        if end == -1:
            raise FrontmatterError("frontmatter has no closing '---' line", line=1)
        pos = end + len(newline)


#: A line (of "\n"-separated text) that starts like a closing line.
_CLOSING_CANDIDATE = re.compile(r"^(?:---|\.\.\.)[^\n]*", re.MULTILINE)


_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_INT = re.compile(r"^-?(?:0|[1-9][0-9]*)$")
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")


#: YAML's white space (``str.strip()`` would also take U+00A0 and other characters YAML keeps).
_BLANKS = " \t"


class _NotSimple(Exception):
    pass


def _resolved(raw: str) -> Any:
    """One plain or simply quoted scalar, resolved exactly as the YAML loader would."""
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'") or "'" in raw[1:-1].replace("''", ""):
            raise _NotSimple
        return raw[1:-1].replace("''", "'")
    if raw.startswith('"'):
        inner = raw[1:-1]
        if len(raw) < 2 or not raw.endswith('"') or "\\" in inner or '"' in inner:
            raise _NotSimple
        return inner
    if raw in _NULLS:
        return None
    # Resolve exactly as the loader would: the first implicit resolver whose pattern matches.
    for tag, pattern in _RESOLVERS.get(raw[0], ()):
        if pattern.match(raw):
            if tag == "tag:yaml.org,2002:bool":
                return raw in _TRUE
            if tag == "tag:yaml.org,2002:int" and _INT.match(raw):
                return int(raw)
            raise _NotSimple  # floats, odd ints, merge keys, values: leave them to PyYAML
    if (
        raw[0] in _INDICATORS
        or ": " in raw
        or " #" in raw
        or raw.endswith(":")
        or raw != raw.strip()
        or "\t" in raw
    ):
        raise _NotSimple
    return raw


_DECLINED, _MISSING = object(), object()
#: Short scalars already resolved (statuses, counts, agent names, regions repeat in every arc):
#: a dictionary lookup instead of the resolver walk. Values are immutable; bounded in size.
_SHORT: dict[str, Any] = {}
SHORT_SCALAR_CHARS, SHORT_SCALARS_KEPT = 24, 4096


def _scalar(raw: str) -> Any:
    """:func:`_resolved`, remembered for short scalars."""
    value = _SHORT.get(raw, _MISSING)
    if value is _MISSING:
        try:
            value = _resolved(raw)
        except _NotSimple:
            value = _DECLINED
        if len(raw) <= SHORT_SCALAR_CHARS and len(_SHORT) < SHORT_SCALARS_KEPT:
            _SHORT[raw] = value
    if value is _DECLINED:
        raise _NotSimple
    return value


#: Top-level and nested keys already checked against :data:`_PLAIN_KEY` (arcs share their keys).
_KEYS: dict[str, bool] = {}
KEYS_KEPT = 1024


def _plain_key(key: str) -> bool:
    known = _KEYS.get(key)
    if known is None:
        known = _PLAIN_KEY.match(key) is not None
        if len(_KEYS) < KEYS_KEPT:
            _KEYS[key] = known
    return known


#: A plain scalar that :func:`_resolved` returns as itself: printable ASCII, no blank at either end,
#: no ``": "``, ``" #"`` or final ``:``, and no implicit resolver's match (a null, boolean or number).
_PLAIN_STR = (
    # A letter, "_" or "/" first (no resolver is tried for those but the null and boolean words).
    r"(?:(?!(?:true|True|TRUE|false|False|FALSE|null|Null|NULL)\n)[A-Za-z_/]"
    r"[!-9;-~]*+(?:(?::(?=[!-~])|[ ](?=[ !\"$-~]))[!-9;-~]*+)*+"
    # A digit first (a session id, a date): no "." or ":" at all, and a character no number holds.
    r"|(?!0[xb])[0-9][0-9_]*+[!-\-/;-@A-Z\[-^`-~]"
    r"[!-\-/-9;-~]*+(?:[ ](?=[ !\"$-\-/-9;-~])[!-\-/-9;-~]*+)*+)"
)
_KEY = r"[A-Za-z_][A-Za-z0-9_-]*"
#: A scalar as :func:`_lines_load` cuts it from its line (no blank at either end, no line break),
#: written with one space after its ``:`` or ``-`` (a wider gap goes line by line).
_RAW = r"[^ \t\r\n][^\r\n]*+(?<![ \t])"
#: One top-level key with its value, in the shapes arcs are written in (CLUSTERS.md): ``key: scalar``;
#: a block list of plain strings (read whole, cut by ``str.split``); a block list of other scalars; one
#: level of ``  sub: scalar`` lines; nothing below (null). A block ends where the next key starts.
_ENTRY = re.compile(
    rf"({_KEY}):(?: ({_RAW})\n"
    rf"|\n(?:((?:- {_PLAIN_STR}\n)+)|((?:- {_RAW}\n)+)|((?:  {_KEY}: {_RAW}\n)+))?(?=[A-Za-z_]|\Z))"
)
_ITEM = re.compile(rf"- ({_RAW})\n")
_SUB = re.compile(rf"  ({_KEY}): ({_RAW})\n")


def fast_load(frontmatter: str) -> dict[str, Any] | None:
    """The frontmatter mapping for the plain subset arcs use; None for anything else.

    Handles ``key: scalar``, block lists of scalars and one level of nested mappings of
    scalars. Anything fancier (flow collections, anchors, tags, block scalars, comments,
    odd numbers) returns None and goes through the YAML loader, so results never differ.

    A text made of :data:`_ENTRY` shapes alone (an arc as brain cluster writes it) is read an
    entry at a time by the regex engine; any other line (a blank or comment line, a tab, a
    repeated key) sends the whole text to the line by line reader, :func:`_lines_load`, whose
    results these are (tests/test_frontmatter_entries.py compares the two).
    """
    out: dict[str, Any] = {}
    pos = entries = 0
    try:
        for entry in _ENTRY.finditer(frontmatter):
            if entry.start() != pos:
                return _lines_load(frontmatter)
            pos = entry.end()
            entries += 1
            key, raw, plain, items, nested = entry.groups()
            if raw is not None:
                out[key] = _scalar(raw)
            elif plain is not None:
                # Interned, as the memo of _scalar shares its short strings: arcs list the same files and
                # commands, and the parse cache (marshal) writes a string it meets again as a reference.
                out[key] = list(map(sys.intern, plain[2:-1].split("\n- ")))
            elif items is not None:
                out[key] = [_scalar(item) for item in _ITEM.findall(items)]
            elif nested is not None:
                pairs = _SUB.findall(nested)
                sub = {name: _scalar(value) for name, value in pairs}
                if len(sub) != len(pairs):
                    return None  # a repeated key
                out[key] = sub
            else:
                out[key] = None
    except _NotSimple:
        return None
    if pos != len(frontmatter) or len(out) != entries:
        return _lines_load(frontmatter)
    return out


def _lines_load(frontmatter: str) -> dict[str, Any] | None:
    """:func:`fast_load` read line by line: every text the subset holds, blank lines and all."""
    out: dict[str, Any] = {}
    lines = frontmatter.split("\n")
    index, count = 0, len(lines)
    try:
        while index < count:
            line = lines[index]
            index += 1
            if not line or line[0] in " \t#-" or line[0].isspace():
                if not line.strip(_BLANKS):
                    continue
                return None
            if "\r" in line:
                return None
            key, sep, rest = line.partition(":")
            if not sep or key in out or not _plain_key(key):
                return None
            if rest:
                if rest[0] != " ":
                    return None
                rest = rest.strip(_BLANKS)
                if rest:
                    out[key] = _scalar(rest)
                    continue
            # A block below the key: "- item" lines, or "  sub: value" lines, or nothing (null).
            block: list[str] = []
            while index < count:
                following = lines[index]
                if following[:1] in (" ", "-"):
                    if following.strip(_BLANKS):
                        block.append(following)
                elif following.strip(_BLANKS):
                    break
                index += 1
            if not block:
                out[key] = None
            elif block[0][0] == "-":  # a list of scalars, or nothing this loader reads
                items = []
                for b in block:
                    if b[:2] != "- " and b != "-":
                        return None
                    raw = b[2:].strip(_BLANKS)
                    items.append(_scalar(raw))
                out[key] = items
            else:  # one level of "  sub: value" lines, or nothing this loader reads
                nested: dict[str, Any] = {}
                for b in block:
                    if b[:2] != "  " or b[2:3] in (" ", "-"):
                        return None
                    sub, sub_sep, sub_rest = b[2:].partition(":")
                    if not sub_sep or sub in nested or not _plain_key(sub) or \
                            (sub_rest and sub_rest[0] != " "):
                        return None
                    sub_rest = sub_rest.strip(_BLANKS)
                    if not sub_rest:
                        return None
                    nested[sub] = _scalar(sub_rest)
                out[key] = nested
    except _NotSimple:
        return None
    return out


def load(frontmatter: str) -> dict[str, Any]:
    """Parse frontmatter YAML into a mapping (strict; dates stay strings)."""
    return load_plain(frontmatter)[0]


def load_plain(frontmatter: str) -> tuple[dict[str, Any], bool]:
    """:func:`load`, and whether the text is in the plain subset :func:`fast_load` reads (then a
    line edit by :func:`set_scalars` needs no second look at the whole text)."""
    if not frontmatter.strip():
        return {}, True
    simple = fast_load(frontmatter)
    if simple is not None:
        return simple, True
    parts = _yaml()
    yaml = parts.module
    try:
        value = yaml.load(frontmatter, Loader=parts.loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 2 if mark is not None else None  # +1 for 1-based, +1 for the '---' line
        problem = exc.problem or str(exc)
        raise FrontmatterError(f"invalid YAML frontmatter: {problem}", line=line) from None
    except yaml.YAMLError as exc:
        raise FrontmatterError(f"invalid YAML frontmatter: {exc}") from None
    if value is None:
        return {}, False
    if not isinstance(value, dict):
        raise FrontmatterError("frontmatter is not a mapping of keys to values", line=2)
    if "*" in frontmatter:  # an alias: the loaded value shares, and may contain, itself
        _check_expanded_size(value)
    return {str(k): v for k, v in value.items()}, False


#: Values a frontmatter may hold once its YAML aliases are expanded. A recursive alias
#: (``&a [*a]``) or an alias bomb ("billion laughs") loads as a few shared objects, but every
#: reader that walks, prints or compares it would go on forever: refused here, like bad YAML.
MAX_EXPANDED_VALUES = 20_000


def _check_expanded_size(value: Any) -> None:
    stack, count = [value], 0
    while stack:
        item = stack.pop()
        count += 1
        if count > MAX_EXPANDED_VALUES:
            raise FrontmatterError(f"frontmatter holds more than {MAX_EXPANDED_VALUES} values once its YAML aliases "
                                   "are expanded (a recursive or repeated alias)")
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def dump_key(key: str, value: Any) -> str:
    """One top-level key as YAML text, quoted wherever a strict parser would need it."""
    parts = _yaml()
    text: str = parts.module.dump(
        {key: value},
        Dumper=parts.dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1_000_000,
    )
    return text


def dump(mapping: dict[str, Any]) -> str:
    """Frontmatter text for a new file, keys in the given order."""
    return "".join(dump_key(k, v) for k, v in mapping.items())


_KEY_LINE = re.compile(r"^(?P<key>[A-Za-z0-9_][A-Za-z0-9_.-]*|\"[^\"]*\"|'[^']*')\s*:(?:\s|$)")


def _key_blocks(lines: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Top-level key -> every (first line, end line exclusive) it occupies in ``lines``.

    A key's block is its line plus the indented (or ``- ``) continuation lines of its value.
    A key written twice has two blocks; the loader keeps the last one.
    """
    blocks: dict[str, list[tuple[int, int]]] = {}
    current: str | None = None
    begin = 0
    for index, line in enumerate(lines):
        match = _KEY_LINE.match(line)
        if match:
            if current is not None:
                blocks.setdefault(current, []).append((begin, _trim_tail(lines, begin, index)))
            current = match.group("key").strip("\"'")
            begin = index
        elif current is not None and line[:1] not in (" ", "\t", "-", "\r", "\n", "") and not line.startswith("#"):
            # Anything else at column 0 ends the block (flow continuation lines are indented).
            blocks.setdefault(current, []).append((begin, _trim_tail(lines, begin, index)))
            current = None
    if current is not None:
        blocks.setdefault(current, []).append((begin, _trim_tail(lines, begin, len(lines))))
    return blocks


def _trim_tail(lines: list[str], begin: int, end: int) -> int:
    """Leave trailing blank and column-0 comment lines outside the block they follow."""
    while end - 1 > begin and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
        end -= 1
    return end


_SIMPLE_VALUE = re.compile(r"^[A-Za-z][A-Za-z-]*$")


def set_scalars(frontmatter: str, updates: dict[str, int | str], *, plain: bool = False) -> str | None:
    """Replace ``key: value`` lines in place without the YAML loader, or None when not that simple.

    Only for ints and plain lowercase words (heat, status), on lines that hold exactly one
    plain scalar and nothing else, in plain frontmatter (what :func:`fast_load` reads).
    A key whose value is a block below it (``status:`` then ``  phase: review`` or
    ``  - active``), a comment, or anything else the fast loader declines returns None and
    goes through :func:`set_keys`, so the result is always the intended mapping.

    ``plain``: the caller knows ``frontmatter`` is in that subset (:func:`load_plain` said so).
    Then the result is not read again whole: in plain text a column-0 ``key:`` line is that
    key's one line, and replacing it by ``key: value`` keeps the text plain, so only each new
    value needs to read back as itself.
    """
    out = frontmatter
    for key, value in updates.items():
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, str) and _SIMPLE_VALUE.match(value)
                                       and value not in _YAML_WORDS)
        ):
            return None
        pattern = _SCALAR_LINES.get(key)
        if pattern is None:
            pattern = re.compile(rf"^{re.escape(key)}:[ \t]*(-?\d+|[A-Za-z][A-Za-z-]*)[ \t]*$", re.MULTILINE)
            if len(_SCALAR_LINES) < KEYS_KEPT:
                _SCALAR_LINES[key] = pattern
        matches = list(pattern.finditer(out))
        if len(matches) != 1 or matches[0].group(1).lower() in _YAML_WORDS:
            return None
        begin, end = matches[0].span()
        out = f"{out[:begin]}{key}: {value}{out[end:]}"
    if plain:
        for value in updates.values():
            try:
                if _scalar(str(value)) != value:
                    return None
            except _NotSimple:
                return None
        return out
    edited = fast_load(out)
    if edited is None or any(edited.get(key) != value for key, value in updates.items()):
        return None
    return out


#: The line patterns of :func:`set_scalars`, one per key edited.
_SCALAR_LINES: dict[str, re.Pattern[str]] = {}
_YAML_WORDS = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})
_BLOCK_SCALAR = re.compile(r":\s*[|>][0-9+-]*\s*(?:#.*)?$")
# The comment after a one-line value: after a quoted scalar, or after " #" in a plain one.
_TRAILING_COMMENT = re.compile(
    r"""^[^\s:][^:]*:(?:[ \t]+(?:'(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|[^'"\s#](?:[^#\n]|(?<!\s)#)*?))?[ \t]+(#[^\r\n]*)"""
)


def _kept_comments(lines: list[str], begin: int, end: int, newline: str) -> tuple[str, str]:
    """The comments of a value about to be replaced: (after the key line, the lines below)."""
    head = lines[begin]
    if _BLOCK_SCALAR.search(head.rstrip("\r\n")):
        return "", ""  # a "#" line inside a block scalar is text, not a comment
    trailing = _TRAILING_COMMENT.match(head)
    below = "".join(
        line if line.endswith("\n") else line + newline
        for line in lines[begin + 1 : end]
        if line.lstrip().startswith("#")
    )
    return (trailing.group(1) if trailing else ""), below


def set_keys(frontmatter: str, updates: dict[str, Any], *, remove: tuple[str, ...] = ()) -> str:
    """Return ``frontmatter`` with ``updates`` applied, touching only those keys' lines.

    A key's whole value is replaced: its line and the block of lines under it. Comments
    on and under a replaced key are kept; every other line keeps its bytes (so YAML 1.1
    values such as ``12:30`` or ``01234`` are never re-serialised); new keys are appended.
    The operator's YAML is never re-dumped: if a line-level edit would not re-parse to
    exactly the intended mapping (anchors and aliases, complex keys), this raises
    :class:`FrontmatterError` and the caller leaves the file alone.
    """
    before = load(frontmatter)
    expected = dict(before)
    for key in remove:
        expected.pop(key, None)
    expected.update(updates)
    if expected == before and all(key not in before for key in remove):
        return frontmatter
    for keep_comments in (True, False):
        result = _edit_lines(frontmatter, before, updates, remove, keep_comments=keep_comments)
        try:
            if load(result) == expected:
                return result
        except FrontmatterError:
            pass
    changed = ", ".join(sorted({*updates, *remove}))
    raise FrontmatterError(f"cannot edit {changed} line by line without changing other values; file left as it is")


def _edit_lines(
    frontmatter: str, before: dict[str, Any], updates: dict[str, Any], remove: tuple[str, ...], *, keep_comments: bool
) -> str:
    newline = "\r\n" if "\r\n" in frontmatter else "\n"
    lines = frontmatter.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += newline
    blocks = _key_blocks(lines)
    replacements: dict[int, tuple[int, str]] = {}
    appended: list[str] = []
    for key, value in updates.items():
        if key in before and before[key] == value:
            continue
        text = dump_key(key, value)
        if key not in blocks:
            appended.append(text.replace("\n", newline) if newline != "\n" else text)
            continue
        begin, end = blocks[key][-1]  # the loader keeps the last of a repeated key
        if keep_comments:
            trailing, below = _kept_comments(lines, begin, end, newline)
            first, rest = text.split("\n", 1)
            if trailing and (not rest or first.endswith(":")):  # one-line value, or a block below the key
                text = f"{first}  {trailing}\n{rest}"
            text += below.replace(newline, "\n")
        replacements[begin] = (end, text.replace("\n", newline) if newline != "\n" else text)
    for key in remove:
        for begin, end in blocks.get(key, ()):
            replacements[begin] = (end, "")
    out: list[str] = []
    index = 0
    while index < len(lines):
        if index in replacements:
            end, text = replacements[index]
            out.append(text)
            index = end
        else:
            out.append(lines[index])
            index += 1
    out.extend(appended)
    return "".join(out)
