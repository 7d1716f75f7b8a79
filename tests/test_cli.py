"""Exit codes and error text of the vault commands (SPEC §2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from brain.cli import app
from tests.support.vaults import NOW, tree_digest, write_arc

runner = CliRunner()


def test_every_command_has_help_with_an_example() -> None:
    for command in ("init", "tick", "keeper", "verify", "undo", "health"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0 and "Example: brain" in result.stdout, command


def test_missing_vault_is_a_usage_error() -> None:
    result = runner.invoke(app, ["tick", "--no-ai"])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: no vault given: use --vault V or set BRAIN_VAULT")
    assert result.stdout == ""


def test_vault_that_does_not_exist(tmp_path: Path) -> None:
    result = runner.invoke(app, ["tick", "--vault", str(tmp_path / "nope"), "--no-ai"])
    assert result.exit_code == 2 and f"Error: vault not found ({tmp_path / 'nope'}): not a folder" in result.stderr


def test_a_file_where_the_vault_needs_a_folder_is_a_usage_error_naming_it(vault: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x\n")
    made = runner.invoke(app, ["init", "--vault", str(tmp_path / "afile" / "vault")])
    assert made.exit_code == 2 and "Error: unusable path: Not a directory:" in made.stderr, made.stderr
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-x-0123456789ab", sessions=["a"])
    (vault / "brain-feed").rmdir()
    (vault / "brain-feed").write_text("not a folder\n")
    before = tree_digest(vault, include_state=False)
    ticked = runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--now", NOW])
    assert ticked.exit_code == 2 and "Error: unusable path: " in ticked.stderr  # File exists / Not a directory
    assert str(vault / "brain-feed") in ticked.stderr
    assert "unexpected" not in ticked.stderr
    (vault / "brain-feed").unlink()
    again = runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--now", NOW])
    chart = runner.invoke(app, ["health", "--vault", str(vault), "--svg", str(tmp_path)])  # a folder, not a file
    assert chart.exit_code == 2 and chart.stderr.strip().endswith(f"Is a directory: {tmp_path}"), chart.stderr
    assert again.exit_code == 0, again.stderr  # the folder back: the next tick rolls back and goes on
    assert tree_digest(vault, include_state=False).keys() >= before.keys() - {"brain-feed"}


def test_bad_now_and_bad_env_are_usage_errors(vault: Path) -> None:
    result = runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--now", "yesterday-ish"])
    assert result.exit_code == 2
    assert result.stderr == "Error: configuration: --now: 'yesterday-ish' is not an ISO-8601 date or time\n"
    result = runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai"], env={"BRAIN_PROMOTE_HEAT": "seven"})
    assert result.exit_code == 2 and "BRAIN_PROMOTE_HEAT: cannot read 'seven'" in result.stderr


def test_env_and_flags_override_defaults(vault: Path) -> None:
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-warm-0123456789ab", sessions=["a"], tool_calls=10,
              last_active="2026-11-21T11:00:00Z", status="complete")  # heat 4
    result = runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--json"],
                           env={"BRAIN_PROMOTE_HEAT": "4", "BRAIN_NOW": NOW})
    report = json.loads(result.stdout)
    assert report["now"] == NOW and report["stats"]["promoted"] == 1


def test_no_llm_configured_runs_as_no_ai_and_says_so(vault: Path) -> None:
    result = runner.invoke(app, ["tick", "--vault", str(vault), "--now", NOW, "--json"])
    assert result.exit_code == 0
    assert "AI phases skipped: no LLM configured" in result.stderr
    assert json.loads(result.stdout)["phases"]["llm"]["skipped"].startswith("no LLM configured")


def test_bad_llm_configuration_is_a_usage_error(vault: Path) -> None:
    result = runner.invoke(app, ["tick", "--vault", str(vault), "--now", NOW],
                           env={"BRAIN_LLM_URL": "http://127.0.0.1:9", "BRAIN_LLM_PROVIDER": "bogus"})
    assert result.exit_code == 2 and result.stderr.startswith("Error: LLM configuration")


def test_verify_exit_codes(vault: Path) -> None:
    assert runner.invoke(app, ["verify", "--vault", str(vault), "--now", NOW]).exit_code == 0
    arc = write_arc(vault, "clusters/2026-11-21", "2026-11-21-twice-0123456789ab")
    (vault / "left/projects/2026-11-21-twice-0123456789ab.md").write_bytes(arc.read_bytes())
    result = runner.invoke(app, ["verify", "--vault", str(vault), "--now", NOW])
    assert result.exit_code == 1 and "cluster_id 2026-11-21-twice-0123456789ab is in 2 files" in result.stderr


def test_keeper_runs_phase_one_only(vault: Path) -> None:
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-k-0123456789ab", sessions=["a", "b", "c"], tool_calls=900,
              last_active="2026-11-21T11:00:00Z")
    result = runner.invoke(app, ["keeper", "--vault", str(vault), "--now", NOW, "--json"])
    report = json.loads(result.stdout)
    assert result.exit_code == 0 and set(report["phases"]) == {"keeper", "verify"}
    assert (vault / "frontal-lobe/conscious/2026-11-21-k-0123456789ab.md").exists()
    assert not (vault / "brain-feed/health.jsonl").exists()


def test_init_is_idempotent_and_never_overwrites(tmp_path: Path) -> None:
    root = tmp_path / "v"
    assert runner.invoke(app, ["init", "--vault", str(root)]).exit_code == 0
    (root / "clusters" / "mine.md").write_text("keep me")
    before = tree_digest(root)
    result = runner.invoke(app, ["init", "--vault", str(root)])
    assert result.exit_code == 0 and json.loads(result.stdout)["created"] == []
    assert tree_digest(root) == before
    for folder in ("frontal-lobe/conscious", "left/incidents", "right/risk", "amygdala", "pineal", ".brain"):
        assert (root / folder).is_dir()


def test_undo_restores_and_refuses_edited_files(vault: Path) -> None:
    arc = write_arc(vault, "clusters/2026-11-21", "2026-11-21-u-0123456789ab", sessions=["a", "b", "c"],
                    tool_calls=900, last_active="2026-11-21T11:00:00Z")
    original = arc.read_bytes()
    before = tree_digest(vault, include_state=False)
    report = json.loads(runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--json", "--now", NOW]).stdout)
    moved = vault / "frontal-lobe/conscious/2026-11-21-u-0123456789ab.md"
    assert moved.exists() and not arc.exists()
    moved.write_text(moved.read_text() + "\noperator edit\n")
    result = runner.invoke(app, ["undo", "--vault", str(vault)])
    assert result.exit_code == 1 and "refusing to undo" in result.stderr and "use --force" in result.stderr
    assert moved.exists()
    result = runner.invoke(app, ["undo", "--vault", str(vault), "--tick", report["tick_id"], "--force"])
    assert result.exit_code == 0, result.stderr
    assert arc.read_bytes() == original and not moved.exists()
    after = tree_digest(vault, include_state=False)
    after.pop("brain-feed/health.jsonl")
    assert after == {k: v for k, v in before.items()}
    assert runner.invoke(app, ["undo", "--vault", str(vault), "--tick", "nope"]).exit_code == 2


def test_health_table_and_svg(vault: Path, tmp_path: Path) -> None:
    for hour in ("10", "12", "14"):
        runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--now", f"2026-11-21T{hour}:00:00Z"])
    with (vault / "brain-feed/health.jsonl").open("a") as handle:
        handle.write("not json\n")
    svg = tmp_path / "h.svg"
    result = runner.invoke(app, ["health", "--vault", str(vault), "--svg", str(svg)])
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("time") and len(lines) == 2 + 3
    assert "health.jsonl:4: not a JSON health row" in result.stderr
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg.read_text())
    assert root.tag.endswith("svg") and svg.read_text().count("<circle") >= 3


def test_brain_tick_alias_and_module_entry(vault: Path) -> None:
    exe = Path(sys.executable).with_name("brain_tick")
    result = subprocess.run([str(exe), "--vault", str(vault), "--no-ai", "--json", "--now", NOW],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["no_ai"] is True


def test_a_tick_leaves_at_once_with_its_output_whole_and_its_exit_code(vault: Path, tmp_path: Path) -> None:
    """``brain tick`` ends with os._exit (no interpreter teardown): stdout and stderr still arrive
    whole through a pipe, an error keeps its exit code, and teardown work really is skipped (an
    atexit handler a library left would have run in a normal exit)."""
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-q-0123456789ab", sessions=["a", "b", "c"], tool_calls=900,
              last_active="2026-11-21T11:00:00Z")
    marker = tmp_path / "atexit-ran"
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import atexit, pathlib, sys\n"
        f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'ran')\n"
        "from brain.launcher import main\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, str(probe), "tick", "--vault", str(vault), "--no-ai", "--json", "--now", NOW],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # the whole JSON report, flushed before leaving
    assert report["exit_code"] == 0 and report["stats"]["arcs"] == 1
    assert not marker.exists()  # left without teardown
    refused = subprocess.run([sys.executable, str(probe), "tick", "--vault", str(tmp_path / "nowhere"), "--no-ai"],
                             capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and refused.stderr.startswith("Error: "), refused.stderr
    other = subprocess.run([sys.executable, str(probe), "verify", "--vault", str(vault)],
                           capture_output=True, text=True, check=False)
    assert other.returncode == 0 and marker.read_text() == "ran"  # every other command exits as usual


def test_every_locking_command_exits_3_naming_the_holder(vault: Path) -> None:
    """One handler turns a held vault lock into the same error line for every command."""
    from brain.io.writer import vault_lock

    write_arc(vault, "clusters/2026-11-21", "2026-11-21-l-0123456789ab", sessions=["a", "b", "c"], tool_calls=900,
              last_active="2026-11-21T11:00:00Z")
    assert runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--now", NOW]).exit_code == 0
    with vault_lock(vault, "holder-under-test"):
        for args in (["tick", "--no-ai"], ["keeper"], ["undo"]):
            result = runner.invoke(app, [*args, "--vault", str(vault), "--now", NOW])
            assert result.exit_code == 3, args
            assert result.stderr.startswith("Error: vault is locked") and "holder-under-test" in result.stderr, args


# --- what a new user trips on (issue 12 items 15, 16) ----------------------------------


@pytest.mark.parametrize("command", [["tick", "--no-ai", "--now", NOW], ["keeper", "--now", NOW], ["verify"], ["undo"],
                                     ["health"], ["prompt"], ["apply", "--recommendations", "x.json"]])
def test_only_init_makes_a_vault_every_other_command_refuses_a_plain_folder(tmp_path: Path, command: list[str]) -> None:
    folder = tmp_path / "etc"
    folder.mkdir()
    (folder / "passwd").write_text("root:x:0:0\n")
    result = runner.invoke(app, [*command, "--vault", str(folder)])
    assert result.exit_code == 2, (command, result.stderr)
    assert result.stderr == f"Error: not a Brain vault ({folder}): run `brain init --vault {folder}`\n"
    assert sorted(p.name for p in folder.iterdir()) == ["passwd"]  # nothing created


def test_init_then_tick_works(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    assert runner.invoke(app, ["init", "--vault", str(root)]).exit_code == 0
    assert (root / ".brain").is_dir()
    assert runner.invoke(app, ["tick", "--vault", str(root), "--no-ai", "--now", NOW]).exit_code == 0


def test_a_tick_on_a_vault_subfolder_names_the_vault_root(vault: Path) -> None:
    sub = vault / "left" / "projects"
    result = runner.invoke(app, ["tick", "--vault", str(sub), "--no-ai", "--now", NOW])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: not a Brain vault ({sub}): it is a folder inside the vault {vault}")
    assert f"use --vault {vault}" in result.stderr
    assert not (sub / ".brain").exists() and not (sub / "brain-feed").exists()


def test_undo_with_nothing_to_undo_says_so_and_exits_0(vault: Path) -> None:
    result = runner.invoke(app, ["undo", "--vault", str(vault)])
    assert result.exit_code == 0
    assert result.stderr.startswith("nothing to undo: no complete tick journal") and result.stdout == ""


def test_bad_brain_now_is_named_once_as_the_variable(vault: Path) -> None:
    result = runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai"], env={"BRAIN_NOW": "garbage"})
    assert result.exit_code == 2
    assert result.stderr == "Error: configuration: BRAIN_NOW: 'garbage' is not an ISO-8601 date or time\n"
    assert "--now" not in result.stderr


def test_numeric_settings_are_range_checked_and_all_errors_reported_together(vault: Path) -> None:
    env = {"BRAIN_FEED_TOKEN_BUDGET": "-5", "BRAIN_PROMOTE_HEAT": "seven", "BRAIN_INJECT_TTL_DAYS": "99999999",
           "BRAIN_NOW": "garbage"}
    result = runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai"], env=env)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    line = result.stderr
    assert line.startswith("Error: configuration: 4 problems: ")
    assert "BRAIN_FEED_TOKEN_BUDGET: -5 is out of range (must be between 1 and 10000000)" in line
    assert "BRAIN_PROMOTE_HEAT: cannot read 'seven' as int" in line
    assert "BRAIN_INJECT_TTL_DAYS: 99999999 is out of range" in line and "BRAIN_NOW:" in line


def test_an_explicit_flag_beats_the_environment_even_a_bad_one(vault: Path) -> None:
    result = runner.invoke(app, ["tick", "--vault", str(vault), "--no-ai", "--json", "--now", NOW],
                           env={"BRAIN_NOW": "garbage", "BRAIN_VAULT": "/nonexistent"})
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["now"] == NOW


def test_every_setting_default_is_in_its_declared_range() -> None:
    from dataclasses import fields

    from brain.settings import DEFAULTS, Settings, _check

    for f in fields(Settings):
        _check(f.name, getattr(DEFAULTS, f.name), f.name)


def test_version_and_flags_without_a_type_in_help() -> None:
    from brain import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"brain {__version__}\n"
    help_text = runner.invoke(app, ["tick", "--help"], env={"COLUMNS": "200"}).stdout
    assert "--no-ai" in help_text and "<bool>" not in help_text and "<path>" in help_text


def test_progress_bar_draws_the_final_state_and_ends_its_line(capsys: pytest.CaptureFixture[str]) -> None:
    from brain.commands._common import ProgressBar

    bar = ProgressBar("files")
    bar.update(1, 4, " 0.1 MB")
    bar.update(2, 4, " 0.2 MB")  # within a tenth of a second of the last draw: skipped
    bar.update(4, 4, " 0.4 MB")  # the last step is always drawn
    bar.close()
    err = capsys.readouterr().err
    assert err.count("\r") == 2 and err.endswith("] 4/4 files 0.4 MB\n")
    assert "2/4" not in err


def test_a_tick_from_the_command_line_does_not_load_pydantic(vault: Path) -> None:
    """The CronJob pays every import of ``brain tick``: the command line must not pull in
    pydantic (typer 0.29 builds a pydantic adapter per option, ~100 ms per run; pinned below it)."""
    code = (
        "import sys\n"
        "from brain.cli import app\n"
        f"sys.argv = ['brain', 'tick', '--no-ai', '--vault', {str(vault)!r}, '--now', '2026-11-20T12:00:00Z']\n"
        "try:\n    app()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print('pydantic' in sys.modules, code)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split()[-2:] == ["False", "0"], done.stderr


@pytest.mark.parametrize(("argv", "expected"), [
    (["--vault", "V", "--no-ai", "--json"], {"--vault": "V", "--no-ai": True, "--json": True}),
    (["--vault=V", "--now", "2026-11-21T12:00:00Z", "--vault", "W"], {"--vault": "W", "--now": "2026-11-21T12:00:00Z"}),
    (["--llm-url", "http://x:1/v1", "--model", "m", "--dry-run"],
     {"--llm-url": "http://x:1/v1", "--model": "m", "--dry-run": True}),
    ([], {}),
])
def test_the_tick_fast_path_reads_the_tick_options(argv: list[str], expected: dict[str, object]) -> None:
    from brain.launcher import tick_options

    assert tick_options("tick", argv) == expected


@pytest.mark.parametrize(("command", "argv"), [
    ("tick", ["--help"]), ("tick", ["-h"]), ("tick", ["--bogus"]), ("tick", ["stray"]), ("tick", ["--vault"]),
    ("tick", ["--vault", "--no-ai"]), ("tick", ["--vault="]), ("tick", ["--no-ai=1"]), ("keeper", ["--no-ai"]),
    ("keeper", ["--llm-url", "u"]), ("verify", []),
])
def test_anything_else_goes_to_the_typer_command(command: str, argv: list[str]) -> None:
    from brain.launcher import tick_options

    assert tick_options(command, argv) is None


def _brain_process(args: list[str], *, importtime: bool = False) -> subprocess.CompletedProcess[str]:
    flags = ["-X", "importtime"] if importtime else []
    return subprocess.run([sys.executable, *flags, "-m", "brain", *args], capture_output=True, text=True, check=False)


def _typer_process(args: list[str]) -> subprocess.CompletedProcess[str]:
    code = "import sys\nfrom brain.cli import main\nsys.argv = ['brain', *sys.argv[1:]]\nmain()\n"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)


def _without_timings(value: object) -> object:
    if isinstance(value, dict):
        return {k: _without_timings(v) for k, v in value.items() if k != "ms" and not k.endswith("_ms")}
    if isinstance(value, list):
        return [_without_timings(v) for v in value]
    return value


def test_a_tick_runs_without_building_the_typer_commands_and_says_what_the_typer_command_says(
        vault: Path, tmp_path: Path) -> None:
    """The 2-hourly ``brain tick`` skips typer and click (60-90 ms of imports): same report,
    same errors, same exit codes as the typer command; ``--help`` still reaches typer."""
    write_arc(vault, "clusters/2026-11-21", "2026-11-21-q-0123456789ab", sessions=["a", "b", "c"], tool_calls=900,
              last_active="2026-11-21T11:00:00Z")
    twin = tmp_path / "twin"
    subprocess.run(["cp", "-a", str(vault), str(twin)], check=True)
    fast = _brain_process(["tick", "--vault", str(vault), "--no-ai", "--json", "--now", NOW], importtime=True)
    assert fast.returncode == 0, fast.stderr
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in fast.stderr.splitlines()
              if line.startswith("import time:")}
    assert {"brain", "typer", "click"} & loaded == {"brain"}
    slow = _typer_process(["tick", "--vault", str(twin), "--no-ai", "--json", "--now", NOW])
    assert slow.returncode == 0, slow.stderr
    ours, theirs = json.loads(fast.stdout), json.loads(slow.stdout)
    assert ours["stats"]["arcs"] == 1 and ours["changes"]["written"]
    assert _without_timings(ours) == _without_timings(theirs)
    notes, twins = (tree_digest(root, include_state=False) for root in (vault, twin))
    assert notes.pop("brain-feed/health.jsonl") and twins.pop("brain-feed/health.jsonl")  # each tick's own timings
    assert notes == twins
    for args in (["tick", "--vault", str(vault), "--now", "yesterday", "--no-ai"],
                 ["keeper", "--vault", str(tmp_path / "nowhere")],
                 ["tick", "--vault", str(vault / "clusters"), "--no-ai"]):
        ours_, theirs_ = _brain_process(args), _typer_process(args)
        assert (ours_.returncode, ours_.stderr) == (theirs_.returncode, theirs_.stderr) == (2, ours_.stderr)
        assert ours_.stderr.startswith("Error: ")
    helped = _brain_process(["tick", "--help"])
    assert helped.returncode == 0 and "--no-ai" in helped.stdout
