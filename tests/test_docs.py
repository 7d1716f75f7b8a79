"""The operator docs stay true to the code: configuration reference, commands, marker grammar."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import typer.main

from brain.core import markers
from brain.core.vocab import BLOCK_ONLY_TYPES, INLINE_ONLY_TYPES, MARKER_TYPES, REGIONS, STATUSES
from brain.settings import reference_markdown

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REGENERATE = "python -m brain.settings --markdown > docs/configuration.md"

#: SPEC §2, plus the second hook and the alias.
COMMANDS = (
    "init",
    "extract",
    "cluster",
    "keeper",
    "prompt",
    "apply",
    "verify",
    "tick",
    "undo",
    "health",
    "amygdala",
    "hook session-start",
    "hook prompt-submit",
)


def operator_text() -> str:
    """README (when there is one) and every page under docs/."""
    pages = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    return "\n".join(p.read_text() for p in pages if p.is_file())


def test_configuration_reference_is_generated_from_the_settings() -> None:
    assert (DOCS / "configuration.md").read_text() == reference_markdown(), f"stale: run `{REGENERATE}`"


def test_regeneration_command_is_documented() -> None:
    assert REGENERATE in operator_text()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_spec_command_is_documented(command: str) -> None:
    assert f"brain {command}" in operator_text()


def test_alias_is_documented() -> None:
    assert "brain_tick" in operator_text()


def cli_commands() -> list[str]:
    from brain.cli import app

    # typer >= 0.29 vendors click; groups are recognised by their ``commands`` mapping.
    def walk(command: Any, prefix: str) -> list[str]:
        if isinstance(getattr(command, "commands", None), dict):
            return [
                name for key, sub in sorted(command.commands.items()) for name in walk(sub, f"{prefix} {key}")
            ]
        return [prefix.strip()]

    if not app.registered_commands and not app.registered_groups:
        return []
    root = typer.main.get_command(app)
    if not isinstance(getattr(root, "commands", None), dict):  # a single command collapses into the app
        return [app.registered_commands[0].name or ""]
    return walk(root, "")


def test_every_registered_command_is_documented() -> None:
    text = operator_text()
    missing = [name for name in cli_commands() if f"brain {name}" not in text]
    assert not missing, f"commands without docs: {missing}"


def test_exit_codes_are_documented() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    for code in range(5):
        assert re.search(rf"^\| {code} \|", text, re.M), code


# --- MARKERS.md -------------------------------------------------------------------------------

MARKERS_MD = ROOT / "MARKERS.md"


def type_sections() -> dict[str, str]:
    text = MARKERS_MD.read_text()
    parts = re.split(r"^### `(\w+)`.*$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize("kind", MARKER_TYPES)
def test_markers_md_has_a_valid_example_of_every_type(kind: str) -> None:
    section = type_sections().get(kind)
    assert section is not None, f"MARKERS.md has no section for @{kind}"
    examples = re.findall(r"```markdown\n(.*?)```", section, re.S)
    assert examples, f"no example of @{kind}"
    for example in examples:
        found, problems = markers.parse(example)
        assert not problems, problems
        of_kind = [m for m in found if m.type == kind]
        assert of_kind, f"the @{kind} example parses to no @{kind} marker"
        for marker in of_kind:
            if kind in BLOCK_ONLY_TYPES:
                assert marker.is_block
            if kind in INLINE_ONLY_TYPES:
                assert not marker.is_block
        if kind == "edge":
            for line in example.splitlines():
                target = re.search(r"target=(\S+) -->", line)
                if target:
                    assert f"[[{target.group(1)}]]" in line


def test_markers_md_documents_both_forms_of_hot_and_milestone() -> None:
    for kind in ("hot", "milestone"):
        found, _ = markers.parse("\n".join(re.findall(r"```markdown\n(.*?)```", type_sections()[kind], re.S)))
        assert {m.is_block for m in found if m.type == kind} == {True, False}, kind


def test_markers_md_problem_examples_produce_their_messages() -> None:
    text = MARKERS_MD.read_text()
    table = text[text.index("| Message | Example |") :].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    assert len(rows) >= 5
    for row in rows:
        message, example = (cell.strip() for cell in row.strip("|").split("|")[:2])
        pattern = re.escape(message.strip("`")).replace("X", r"\w+")
        sample = re.search(r"`([^`]+)`", example)
        assert sample, row
        _, problems = markers.parse(sample.group(1))
        assert any(re.match(pattern, p.message) for p in problems), (row, problems)


def test_markers_in_code_are_documentation() -> None:
    """MARKERS.md itself shows every marker in code: as a vault note it has no markers."""
    found, problems = markers.parse(MARKERS_MD.read_text())
    assert found == [] and problems == []


# --- CLUSTERS.md ------------------------------------------------------------------------------

FRONTMATTER_KEYS = (
    "cluster_id",
    "title",
    "region",
    "status",
    "heat",
    "created",
    "last_active",
    "project",
    "agents",
    "source_sessions",
    "activity",
    "synthesized",
    "summary",
    "merged_into",
    "split_into",
)
ACTIVITY_KEYS = ("sessions", "user_turns", "tool_calls", "errors", "joy", "compactions")
BODY_SECTIONS = (
    "## Ignition",
    "## Timeline",
    "## Lessons",
    "## Resolution",
    "## Edges",
    "## Source sessions",
)


def test_clusters_md_covers_the_arc_schema() -> None:
    text = (ROOT / "CLUSTERS.md").read_text()
    for word in (*FRONTMATTER_KEYS, *ACTIVITY_KEYS, *REGIONS, *STATUSES):
        assert f"`{word}`" in text, word
    for section in BODY_SECTIONS:
        assert section in text, section
    assert "signals: {errors: 3, joy: 1, tools: 212}" in text
    assert "`signals.tools` counts as `activity.tool_calls`" in text
    chain = (
        "`last_active` → `created` → the date in `cluster_id` → a date in the file\n  name → the file's mtime"
    )
    assert chain in text


# --- links --------------------------------------------------------------------------------------


LINKED_PAGES = [
    ROOT / "CLUSTERS.md",
    MARKERS_MD,
    *sorted(DOCS.glob("*.md")),
    ROOT / "agents" / "brain-keeper" / "README.md",
]


@pytest.mark.parametrize("page", LINKED_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if "://" not in target:
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
