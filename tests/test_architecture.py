"""The layers import one way (STYLE.md): core is pure, io does effects, pipeline orchestrates.

core never imports io, pipeline or commands; io never imports pipeline or commands. Every
import is found with ``ast`` (top-level and inside functions alike), so a lazy import inside a
function cannot hide a wrong-way dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "services" / "tick-engine" / "brain"
FORBIDDEN = {
    "core": ("brain.io", "brain.pipeline", "brain.commands", "brain.cli"),
    "io": ("brain.pipeline", "brain.commands", "brain.cli"),
}


def imports_of(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``; relative imports resolved against the package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = ".".join(("brain", *path.relative_to(root).parent.parts))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.append((node.lineno, module))
            # ``from brain import io`` names a layer too
            found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names)
    return found


def violations(layer: str, root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted((root / layer).rglob("*.py")):
        for line, module in imports_of(path, root):
            if any(module == banned or module.startswith(banned + ".") for banned in FORBIDDEN[layer]):
                bad.append(f"{path.relative_to(root)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_layers_import_one_way(layer: str) -> None:
    assert violations(layer) == []


def test_the_check_sees_a_wrong_way_import(tmp_path: Path) -> None:
    """The parser finds lazy, relative and ``from brain import …`` imports, so the test above can fail."""
    (tmp_path / "core" / "deep").mkdir(parents=True)
    (tmp_path / "core" / "probe.py").write_text(
        "import json\nfrom brain.core import heat\n\n\ndef f():\n    from ..io import vault\n"
        "    import brain.pipeline.tick\n    from brain import commands\n", encoding="utf-8")
    (tmp_path / "core" / "deep" / "probe.py").write_text("from ...pipeline.keeper import plan_keeper\n",
                                                          encoding="utf-8")
    assert violations("core", tmp_path) == [
        "core/deep/probe.py:1 imports brain.pipeline.keeper",
        "core/deep/probe.py:1 imports brain.pipeline.keeper.plan_keeper",
        "core/probe.py:6 imports brain.io",
        "core/probe.py:6 imports brain.io.vault",
        "core/probe.py:7 imports brain.pipeline.tick",
        "core/probe.py:8 imports brain.commands",
    ]
