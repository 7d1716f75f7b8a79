"""Frontmatter: strict parsing and byte-stable edits."""

from __future__ import annotations

import frontmatter as python_frontmatter
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brain.core import frontmatter as fm
from tests.support.fresh import assert_in_fresh_interpreter

ORIGINAL = """cluster_id: 2026-04-09-litellm-mcp-abc123def456 # deterministic id
title: "LiteLLM: MCP self-service"
region: left-hemisphere
status: complete
heat: 9
created: 2026-04-09T10:00:00Z
flag: yes
custom:
  nested: [1, 2]
source_sessions:
- 7d031027
- a69e27d7
"""


def test_dates_and_yes_stay_strings() -> None:
    meta = fm.load(ORIGINAL)
    assert meta["created"] == "2026-04-09T10:00:00Z" and meta["flag"] == "yes"
    assert meta["heat"] == 9 and meta["custom"] == {"nested": [1, 2]}


def test_set_keys_touches_only_the_changed_lines() -> None:
    out = fm.set_keys(ORIGINAL, {"heat": 4})
    assert out == ORIGINAL.replace("heat: 9", "heat: 4")


def test_set_keys_with_nothing_changed_returns_the_same_text() -> None:
    assert fm.set_keys(ORIGINAL, {"heat": 9, "status": "complete"}) is ORIGINAL


def test_list_values_are_replaced_and_new_keys_appended() -> None:
    out = fm.set_keys(ORIGINAL, {"source_sessions": ["7d031027", "a69e27d7", "ffff"], "summary": "yes: quoted?"})
    meta = fm.load(out)
    assert meta["source_sessions"] == ["7d031027", "a69e27d7", "ffff"] and meta["summary"] == "yes: quoted?"
    assert out.startswith(ORIGINAL.split("source_sessions:")[0])  # everything before is byte-identical


def test_strings_that_need_quoting_are_quoted() -> None:
    text = fm.dump({"a": "2026-01-01", "b": "yes", "c": "x: y", "d": "#no", "e": "007"})
    assert fm.load(text) == {"a": "2026-01-01", "b": "yes", "c": "x: y", "d": "#no", "e": "007"}


def test_split_and_render_round_trip_byte_for_byte() -> None:
    for text in (f"---\n{ORIGINAL}---\nbody\n", "no frontmatter\n", f"---\r\n{ORIGINAL.replace(chr(10), chr(13) + chr(10))}---\r\nb",
                 "---\na: 1\n---", "---\n---\nbody"):
        assert fm.split(text).render() == text


def test_unterminated_frontmatter_and_bad_yaml_report_a_line() -> None:
    with pytest.raises(fm.FrontmatterError):
        fm.split("---\na: 1\nno end\n")
    with pytest.raises(fm.FrontmatterError) as info:
        fm.load("a: 1\nb: [unclosed\n")
    assert info.value.line is not None
    with pytest.raises(fm.FrontmatterError):
        fm.load("- just\n- a list\n")


def test_a_recursive_alias_or_an_alias_bomb_is_refused_and_a_plain_alias_is_read() -> None:
    with pytest.raises(fm.FrontmatterError, match="aliases"):
        fm.load("title: &a [*a]\n")
    laughs = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{name}: &{name} [{', '.join([f'*{before}'] * 9)}]\n" for before, name in zip("abcdef", "bcdefg", strict=True))
    with pytest.raises(fm.FrontmatterError, match="aliases"):
        fm.load(laughs)  # 9 ** 7 values once expanded: refused before anything walks them
    assert fm.load("files: &f [a.py, b.py]\nread: *f\n") == {"files": ["a.py", "b.py"], "read": ["a.py", "b.py"]}


_scalar = st.one_of(
    st.integers(-10**6, 10**6),
    st.booleans(),
    st.none(),
    st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=20),
)
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.from_regex(r"[a-z][a-z_]{0,6}", fullmatch=True), inner, max_size=3), max_leaves=6)
_mapping = st.dictionaries(st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True), _value, max_size=6)


@settings(max_examples=150, deadline=None)
@given(_mapping)
def test_dump_load_round_trip_and_an_independent_parser_agrees(mapping: dict) -> None:
    text = fm.dump(mapping)
    assert fm.load(text) == mapping
    post = python_frontmatter.loads(f"---\n{text}---\nbody\n")
    assert dict(post.metadata) == mapping


@settings(max_examples=150, deadline=None)
@given(_mapping, _mapping)
def test_set_keys_gives_exactly_the_updated_mapping(base: dict, updates: dict) -> None:
    text = fm.dump(base)
    out = fm.set_keys(text, updates)
    assert fm.load(out) == {**base, **updates}
    untouched = [k for k in base if k not in updates]
    for key in untouched:  # untouched keys keep their bytes
        assert fm.dump_key(key, base[key]) in out


def _yaml_only(text: str) -> object:
    import yaml

    try:
        return yaml.load(text, Loader=fm._yaml().loader)
    except yaml.YAMLError:
        return "error"


_tricky = st.sampled_from([
    "007", "0x1F", "1_000", "+1", "1.5", ".5", ".inf", "-.nan", "1e3", "yes", "No", "on", "~", "null", "NULL",
    "true", "False", "2026-01-01", "2026-01-01T10:00:00Z", "a: b", "a #c", "#c", "-x", "- x", "[a]", "{a: 1}",
    "'q''uote'", '"dq"', '"esc\\n"', "&anchor", "*ref", "!tag x", "|", ">", "x:", "%x", "@x", "`x", "a\tb",
    "plain words", "ümlaut", "=", "<<", "-1", "-0", "0", "10", "", " ", "'unterminated", "multi: colon: here",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"[a-z_][a-z0-9_-]{0,6}", fullmatch=True),
                          st.one_of(_tricky, st.lists(_tricky, min_size=1, max_size=3),
                                    st.dictionaries(st.from_regex(r"[a-z]{1,4}", fullmatch=True), _tricky,
                                                    min_size=1, max_size=3))),
                max_size=6))
def test_fast_loader_never_disagrees_with_yaml(pairs: list) -> None:
    lines = []
    for key, value in pairs:
        if isinstance(value, list):
            lines.append(f"{key}:")
            lines.extend(f"- {v}" for v in value)
        elif isinstance(value, dict):
            lines.append(f"{key}:")
            lines.extend(f"  {k}: {v}" for k, v in value.items())
        else:
            lines.append(f"{key}: {value}")
    text = "\n".join(lines) + "\n"
    fast = fm.fast_load(text)
    if fast is not None:
        expected = _yaml_only(text)
        assert fast == ({} if expected is None else expected), text


@settings(max_examples=200, deadline=None)
@given(_mapping)
def test_fast_loader_reads_what_we_dump(mapping: dict) -> None:
    text = fm.dump(mapping)
    fast = fm.fast_load(text)
    assert fast is None or fast == mapping


# --- line edits of operator YAML (issue 12 item 2) -------------------------------------


def test_a_status_with_a_block_below_is_replaced_whole() -> None:
    for block in ("status:\n  phase: review\n", "status:\n  - active\n", "status:\n- active\n- stalled\n"):
        text = "cluster_id: x\n" + block + "heat: 3\n"
        assert fm.set_scalars(text, {"status": "graduated"}) is None  # the fast path declines
        out = fm.set_keys(text, {"status": "graduated", "heat": 0})
        assert out == "cluster_id: x\nstatus: graduated\nheat: 0\n"
        assert fm.load(out) == {"cluster_id": "x", "status": "graduated", "heat": 0}


def test_edits_keep_comments_and_yaml_1_1_values_byte_for_byte() -> None:
    text = (
        "# operator header\ncluster_id: x  # the id\nat: 12:30\nzip: 01234\n"
        "status:  # phase kept by hand\n  # inner note\n  phase: review\nheat: 3 # warm\n"
    )
    out = fm.set_keys(text, {"status": "graduated", "heat": 0})
    assert out == (
        "# operator header\ncluster_id: x  # the id\nat: 12:30\nzip: 01234\n"
        "status: graduated  # phase kept by hand\n  # inner note\nheat: 0  # warm\n"
    )


def test_an_edit_that_cannot_be_made_line_by_line_is_refused_not_redumped() -> None:
    text = "a: &shared 1\nb: *shared\n"
    with pytest.raises(fm.FrontmatterError, match="cannot edit a line by line"):
        fm.set_keys(text, {"a": 2})


def test_a_repeated_key_is_edited_where_the_loader_reads_it() -> None:
    out = fm.set_keys("heat: 1\ntitle: t\nheat: 2\n", {"heat": 5})
    assert fm.load(out)["heat"] == 5 and out.startswith("heat: 1\n")


_comment_ids = iter(range(10**9))
_plain_value = st.sampled_from(["active", "12:30", "01234", "yes", "2026-11-20", "'quoted: x'", '"dq # not"',
                                "a#b", "[a, b]", "{k: 1}", "7", "~", ""])
_block_value = st.sampled_from(["\n  phase: review", "\n  - active", "\n- a\n- b", "\n  sub:\n    deep: 1",
                                "|\n  line one\n  line two", ">-\n  folded"])


@st.composite
def _operator_frontmatter(draw: st.DrawFn) -> tuple[str, list[str], dict[str, str]]:
    """Frontmatter as an operator writes it: comments anywhere, YAML 1.1 values, blocks under keys."""
    keys = draw(st.lists(st.sampled_from(["heat", "status", "title", "at", "zip", "tags", "notes", "custom"]),
                         min_size=1, max_size=8, unique=True))
    lines: list[str] = []
    comments: list[str] = []
    blocks: dict[str, str] = {}

    def comment() -> str:
        tag = f"# c{next(_comment_ids)}"
        comments.append(tag)
        return tag

    for key in keys:
        if draw(st.booleans()):
            lines.append(comment())
        value = draw(st.one_of(_plain_value, _block_value))
        first, *rest = value.split("\n")
        head = f"{key}: {first}" if first else f"{key}:"
        if not first.startswith(("|", ">")):  # a "#" inside a block scalar is text, not a comment
            if draw(st.booleans()):
                head += f"  {comment()}"
            if rest and draw(st.booleans()):
                rest.insert(0, "  " + comment())
        block = "\n".join([head, *rest]) + "\n"
        blocks[key] = block
        lines.append(block.rstrip("\n"))
    return "\n".join(lines) + "\n", comments, blocks


@settings(max_examples=400, deadline=None)
@given(_operator_frontmatter(), st.integers(0, 12), st.sampled_from(["active", "graduated", "stalled"]),
       st.sets(st.sampled_from(["heat", "status", "title", "tags"]), min_size=1))
def test_any_edit_reparses_strictly_and_keeps_other_values_and_comments(
    case: tuple[str, list[str], dict[str, str]], heat: int, status: str, which: set[str]
) -> None:
    text, comments, blocks = case
    before = fm.load(text)
    updates: dict[str, object] = {"heat": heat, "status": status, "title": "new: title # x", "tags": ["a", "b"]}
    updates = {k: v for k, v in updates.items() if k in which}
    for out in (fm.set_scalars(text, {k: v for k, v in updates.items() if k in ("heat", "status")}),  # type: ignore[misc]
                fm.set_keys(text, updates)):
        if out is None:
            continue
        loaded = fm.load(out)  # the strict loader: never invalid YAML
        for key in before:
            if key not in updates:
                assert loaded[key] == before[key]
                assert blocks[key] in out  # other keys keep their bytes (12:30 stays 12:30)
        for comment in comments:
            assert comment in out
    out = fm.set_keys(text, updates)
    assert fm.load(out) == {**before, **updates}


# --- the fast paths agree with the plain algorithms they replace (issue 10) ------------------


def _split_line_by_line(text: str) -> tuple[str, str, str | None] | None:
    """The closing line found by walking every line: the first that strips to --- or ...."""
    if not text.startswith("---\n"):
        return None
    pos = 4
    while True:
        end = text.find("\n", pos)
        line = text[pos:] if end == -1 else text[pos:end]
        if line.rstrip() in ("---", "..."):
            after = len(text) if end == -1 else end + 1
            closing = text[pos:after]
            return text[4:pos], text[after:], None if closing == "---\n" else closing
        if end == -1:
            return ("error", "", None)
        pos = end + 1


_split_lines = st.sampled_from(["---", "...", "--- ", "---\r", "...  ", "----", "---x", "..x", "a: 1", "- b",
                                "  c: d", "", " ---", "\t", "---\x0b", "x --- y"])


@settings(max_examples=400, deadline=None)
@given(st.lists(_split_lines, max_size=8), st.booleans())
def test_split_finds_the_closing_line_a_line_by_line_walk_finds(lines: list[str], final_newline: bool) -> None:
    text = "---\n" + "\n".join(lines) + ("\n" if final_newline else "")
    expected = _split_line_by_line(text)
    try:
        document = fm.split(text)
    except fm.FrontmatterError:
        assert expected == ("error", "", None)
        return
    assert (document.frontmatter, document.body, document.closing) == expected
    assert document.render() == text


def test_remembered_scalars_resolve_like_fresh_ones_every_time() -> None:
    for raw in ("complete", "0", "007", "yes", "true", "~", "a: b", "x:", "1.5", "-3", "'q''s'", '"d"', "#c"):
        for _ in range(3):  # the first call resolves, later ones come from the memo
            try:
                fresh: object = fm._resolved(raw)
            except fm._NotSimple:
                fresh = "declined"
            try:
                memo: object = fm._scalar(raw)
            except fm._NotSimple:
                memo = "declined"
            assert memo == fresh and type(memo) is type(fresh), raw


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.from_regex(r"[a-z_][a-z0-9_-]{0,6}", fullmatch=True),
                          st.one_of(_tricky, st.lists(_tricky, min_size=1, max_size=3))), max_size=5),
       st.one_of(st.integers(-5, 12), st.sampled_from(["graduated", "active", "Null", "True", "No", "a-b"])),
       st.sampled_from(["heat", "status"]))
def test_a_plain_frontmatter_edit_needs_no_second_read(pairs: list, value: object, key: str) -> None:
    """set_scalars told the text is plain gives what the full check gives, on every text load_plain calls plain."""
    lines = [f"{key}: 3"]
    for name, item in pairs:
        if name == key:
            continue
        if isinstance(item, list):
            lines.append(f"{name}:")
            lines.extend(f"- {v}" for v in item)
        else:
            lines.append(f"{name}: {item}")
    text = "\n".join(lines) + "\n"
    try:
        _, plain = fm.load_plain(text)
    except fm.FrontmatterError:
        return
    if not plain:
        return
    assert fm.set_scalars(text, {key: value}, plain=True) == fm.set_scalars(text, {key: value})  # type: ignore[dict-item]


@pytest.mark.parametrize("value", ["\xa0", "a\xa0", "\u2003x", "\u3000"])
def test_fast_loader_keeps_what_yaml_does_not_call_white_space(value: str) -> None:
    """Python's str.strip() takes U+00A0 and friends; YAML keeps them: the fast loader must
    read such a value exactly as PyYAML does, or hand it to PyYAML."""
    text = fm.dump({"a": value, "b": [value]})
    fast = fm.fast_load(text)
    assert fast is None or fast == {"a": value, "b": [value]}
    assert fm.load(text) == {"a": value, "b": [value]}


def test_the_written_out_resolvers_are_pyyamls_own_without_timestamps_and_yes_no() -> None:
    """frontmatter.py spells out the implicit resolvers (so a quiet tick never imports PyYAML):
    they must be SafeLoader's, in its order, minus timestamps, with only true/false as booleans."""
    import re

    import yaml

    expected: dict[str, list[tuple[str, str, int]]] = {}
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items():
        kept = [(tag, r"^(?:true|True|TRUE|false|False|FALSE)$", re.U) if tag.endswith(":bool")
                else (tag, rx.pattern, rx.flags) for tag, rx in resolvers if not tag.endswith(":timestamp")]
        if kept:
            expected[first] = kept
    written = {first: [(tag, rx.pattern, rx.flags) for tag, rx in found] for first, found in fm._RESOLVERS.items()}
    assert written == expected
    assert fm._yaml().loader.yaml_implicit_resolvers == fm._RESOLVERS  # the loader resolves with the same table


def test_reading_and_editing_plain_frontmatter_never_imports_pyyaml() -> None:
    code = (
        "import sys\n"
        "from brain.core import frontmatter as fm\n"
        "text = 'heat: 3\\nstatus: active\\ntitle: Fix the feed\\nagents:\\n- claude-code\\n'\n"
        "assert fm.load(text)['heat'] == 3\n"
        "assert fm.set_scalars(text, {'heat': 5, 'status': 'complete'}) is not None\n"
        "assert 'yaml' not in sys.modules, 'PyYAML imported'\n"
        "assert fm.load('a: [1, {b: 2}]\\n') == {'a': [1, {'b': 2}]}\n"
        "assert 'yaml' in sys.modules\n"
    )
    assert_in_fresh_interpreter(code)
