"""Hostile values in an arc's frontmatter: every field of a real arc set to a value of another
type, out of range or not finite is reported or ignored, never a crash of the tick, the quiet
tick two hours later, the session-start hook or ``brain search``.

One vault holds one arc per (field, value) beside a plain arc, so a single run covers them all;
when it fails, each arc is ticked alone to name the fields that break it. The first version
stopped the whole tick on ``activity.tool_calls: .nan`` (``cannot convert float NaN to integer``).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from brain.cli import app
from tests.support.vaults import init_vault, run_tick_json

NOW, LATER = "2026-11-21T12:00:00Z", "2026-11-21T14:00:00Z"
#: YAML that loads as no value, the wrong type, a value out of range or not finite, a date
#: object, a recursive list, a lone surrogate.
HOSTILE = (".nan", ".inf", "-.inf", "~", "[]", "{a: {b: 1}}", "-1", "99999999999999999999999", "1e999",
           "2026-11-21", "'9999-12-31T23:59:59Z'", "&a [*a]", '"\\ud800x"', "[1, [2, {c: 3}]]")
BODY = """\
## Lessons
<!-- @lesson source=abcd1234:12 -->
Pin the tool version before upgrading.
<!-- @/lesson -->

<!-- @decision -->
Ship the reinstall path in the README.
<!-- @/decision -->

<!-- @todo -->
Check the Windows install.
<!-- @/todo -->

<!-- @signal severity=critical source=ci -->
CI is red on main.
<!-- @/signal -->

<!-- @inject target=all ttl_days=3 -->
Prefer small PRs.
<!-- @/inject -->

<!-- @hot heat=9 -->

## Edges
<!-- @edge type=related target=2026-11-21-plain-0123456789ab --> [[2026-11-21-plain-0123456789ab]]
"""


def _front(cluster_id: str) -> dict[str, Any]:
    """The frontmatter ``brain cluster`` writes, every field filled."""
    return {
        "cluster_id": cluster_id, "title": "Install the helper as a uv tool", "region": "left-hemisphere",
        "status": "active", "heat": 3, "created": "2026-11-21T09:00:00Z", "last_active": "2026-11-21T11:00:00Z",
        "project": "review-helper", "cwd": "/home/dev/src/review-helper", "branch": "fix/pagination",
        "agents": ["claude-code"], "source_sessions": ["cb2e607c-c758-415a-8b45-c49e4631906a"],
        "activity": {"sessions": 1, "user_turns": 5, "tool_calls": 88, "errors": 7, "joy": 1, "compactions": 0},
        "synthesized": False, "files": ["extract.py", "pyproject.toml"], "commands": ["uv tool install", "gh pr"],
        "open_errors": ["ValueError"], "errors_met": ["ModuleNotFoundError"], "identifiers": ["UV_TOOL_DIR"],
        "last_prompt": "update the readme", "last_state": "README updated.",
    }


def _arc(cluster_id: str, field: str | None = None, value: str | None = None) -> str:
    text = yaml.safe_dump(_front(cluster_id), sort_keys=False)
    if field is not None:
        if "." in field:
            parent, child = field.split(".")
            pattern = rf"(?m)^(  {child}:) .*$"
            start = text.index(f"{parent}:\n")
            text = text[:start] + re.sub(pattern, lambda m: f"{m.group(1)} {value}", text[start:], count=1)
        else:
            text = re.sub(rf"(?m)^({field}:)( .*)?\n((?:- .*\n|  .*\n)*)", lambda m: f"{m.group(1)} {value}\n", text,
                          count=1)
    return f"---\n{text}---\n# Install the helper\n\n{BODY}"


def _fields() -> list[str]:
    front = _front("x")
    return [key for key in front if key != "activity"] + [f"activity.{key}" for key in front["activity"]]


def _cases() -> list[tuple[str, str]]:
    return [(field, value) for field in _fields() for value in HOSTILE]


def _vault(root: Path, cases: list[tuple[str, str]]) -> Path:
    vault = init_vault(root)
    folder = vault / "clusters" / "2026-11-21"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "2026-11-21-plain-0123456789ab.md").write_text(_arc("2026-11-21-plain-0123456789ab"), encoding="utf-8")
    for number, (field, value) in enumerate(cases):
        cluster_id = f"2026-11-21-hostile-{number:04d}-0123456789ab"
        (folder / f"{cluster_id}.md").write_text(_arc(cluster_id, field, value), encoding="utf-8")
    return vault


def _failures(vault: Path) -> list[str]:
    """What stops a command on ``vault``: an exit code above 1 or a crash, by command."""
    out = []
    for now in (NOW, LATER):
        code, report = run_tick_json(vault, now=now)
        if code not in (0, 1) or not report:
            out.append(f"tick at {now}: exit {code}")
    hook = CliRunner().invoke(app, ["hook", "session-start", "--format", "text"],
                              input=json.dumps({"session_id": "s", "cwd": "/home/dev/src/review-helper"}),
                              env={"BRAIN_VAULT": str(vault)})
    if hook.exit_code != 0 or "review-helper" not in hook.stdout:
        out.append(f"hook: exit {hook.exit_code} {hook.stderr[-300:]}")
    search = CliRunner().invoke(app, ["search", "--vault", str(vault), "uv tool install"])
    if search.exit_code not in (0, 1) or "Traceback" in search.output or "unexpected" in search.stderr:
        out.append(f"search: exit {search.exit_code} {search.stderr[-300:]}")
    return out


def test_hostile_frontmatter_values_never_stop_the_tick_the_hook_or_search(tmp_path: Path) -> None:
    cases = _cases()
    assert len(cases) > 300
    vault = _vault(tmp_path / "all", cases)
    failures = _failures(vault)
    if failures:  # name the fields: each case alone
        named = []
        for number, case in enumerate(cases):
            alone = tmp_path / f"case-{number}"
            if _failures(_vault(alone, [case])):
                named.append(f"{case[0]}: {case[1]}")
            shutil.rmtree(alone)
        raise AssertionError(f"{failures}; the values that do it: {named}")
    code, report = run_tick_json(vault, now=LATER)
    assert code in (0, 1)
    assert report["stats"]["arcs"] >= 1  # the plain arc and the readable hostile ones are still arcs
