"""``brain hook session-start`` / ``prompt-submit``: the Claude Code hooks (SPEC §12)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from brain import launcher
from brain.cli import app
from brain.pipeline import hook

FEED = {
    "signals.md": (8, "# Signals\n\n- **critical** db: primary slow"),
    "hot-arcs.md": (10, "# Hot arcs\n\n| Arc | Heat |\n|---|---|\n| [[a]] | 9 |"),
    "amygdala-active.md": (100, "# Active alarms\n\n- **NUCLEAR** auth-broker: ban rate rising"),
    "inject.md": (9, "# Inject\n\nAlways run the tests."),
    "last-tick-diff.md": (5, "# Last tick\n\n- moved [[a]] to conscious"),
}


@pytest.fixture(autouse=True)
def _state_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def write_feed_file(folder: Path, name: str, priority: int | None, body: str) -> None:
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    front = f"---\nid: {name[:-3]}-2026-11-21\ntitle: T\n"
    if priority is not None:
        front += f"priority: {priority}\n"
    front += "ttl: 7200\nseverity: info\n---\n"
    (folder / name).write_text(front + body + "\n", encoding="utf-8")


@pytest.fixture
def feed(tmp_path: Path) -> Path:
    folder = tmp_path / "vault" / "brain-feed"
    for name, (priority, body) in FEED.items():
        write_feed_file(folder, name, priority, body)
    (folder / "health.jsonl").write_text('{"score": 6}\n')
    return folder


def invoke(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(app, ["hook", *args], input=input, env=env)


def context_of(stdout: str, event: str) -> str:
    answer = json.loads(stdout)
    assert list(answer) == ["hookSpecificOutput"]
    assert list(answer["hookSpecificOutput"]) == ["hookEventName", "additionalContext"]
    assert answer["hookSpecificOutput"]["hookEventName"] == event
    context: str = answer["hookSpecificOutput"]["additionalContext"]
    return context


# --- session-start -----------------------------------------------------------------------


def test_session_start_prints_the_hook_json_by_priority_without_frontmatter(feed: Path) -> None:
    result = invoke("session-start", "--brain-feed", str(feed))
    assert result.exit_code == 0 and result.stderr == ""
    context = context_of(result.stdout, "SessionStart")
    order = ["# Active alarms", "# Hot arcs", "# Inject", "# Signals", "# Last tick"]
    assert [context.index(title) for title in order] == sorted(context.index(title) for title in order)
    assert context.startswith("# Active alarms")
    assert "priority:" not in context and "---\n" not in context and "score" not in context


def test_equal_priorities_and_missing_priorities(tmp_path: Path) -> None:
    folder = tmp_path / "feed"
    write_feed_file(folder, "b.md", 5, "# B")
    write_feed_file(folder, "a.md", 5, "# A")
    write_feed_file(folder, "none.md", None, "# None")
    (folder / "plain.md").write_text("# Plain, no frontmatter\n")
    (folder / ".hidden.md").write_text("# Hidden\n")
    text = invoke("session-start", "--brain-feed", str(folder), "--format", "text").stdout
    assert text == "# A\n\n# B\n\n# None\n\n# Plain, no frontmatter\n"


def test_format_text_prints_the_same_context_as_markdown(feed: Path) -> None:
    as_json = context_of(invoke("session-start", "--brain-feed", str(feed)).stdout, "SessionStart")
    as_text = invoke("session-start", "--brain-feed", str(feed), "--format", "text").stdout
    assert as_text == as_json + "\n"


def test_budget_cuts_lower_priorities_first_then_truncates(feed: Path) -> None:
    sections = hook.read_feed(feed)
    whole_top_two = len(sections[0].body) + 2 + len(sections[1].body)
    budget_tokens = (whole_top_two + 40) // 4
    result = invoke("session-start", "--brain-feed", str(feed), env={"BRAIN_FEED_TOKEN_BUDGET": str(budget_tokens)})
    context = context_of(result.stdout, "SessionStart")
    assert len(context) <= budget_tokens * 4
    assert "# Active alarms" in context and "# Hot arcs" in context
    assert "# Signals" not in context and "# Last tick" not in context

    tiny = invoke("session-start", "--brain-feed", str(feed), env={"BRAIN_FEED_TOKEN_BUDGET": "12"})
    cut = context_of(tiny.stdout, "SessionStart")
    assert len(cut) <= 48 and cut.startswith("# Active alarms") and cut.endswith("(cut to fit the feed budget)")


def test_assemble_fills_the_rest_with_the_first_file_that_does_not_fit() -> None:
    sections = [hook.FeedSection("a.md", 9, "A" * 10), hook.FeedSection("b.md", 5, "line one\n" + "x" * 500)]
    text = hook.assemble(sections, 100)
    assert text.startswith("A" * 10 + "\n\nline one\n…") and len(text) <= 100
    assert hook.assemble(sections, 5) == ""  # not even the top file's first line fits


def test_the_cut_shortens_a_long_files_line_before_it_drops_the_commands_line() -> None:
    """my-claude (real logs): a session that just ended, shown above a near-budget project file of
    ninety files, made the cut take the commands line below them. The files line loses its tail
    first (the least ranked files, down to sixty), and only as much of it as the budget needs."""
    files = ", ".join(f"`notes/n{i:02d}.md`" for i in range(90))
    commands = ", ".join(f"`uv run task{i}`" for i in range(10))
    body = f"# alpha: where we left off\n\n## Used here recently\n\n- Files: {files}\n- Commands: {commands}"
    ended = hook.FeedSection(hook.ENDED_SECTION, 100, "# A session here ended\n\n" + "x" * 100)
    budget = len(ended.body) + 2 + len(body) - 10 * len("`notes/n00.md`, ")
    text = hook.assemble([ended, hook.FeedSection("alpha.md", 50, body)], budget)
    assert len(text) <= budget and text.endswith(f"- Commands: {commands}")
    assert "`notes/n79.md`" in text and "`notes/n80.md`" not in text  # ten files, not thirty
    assert hook.CUT_NOTE not in text

    tight_budget = budget - 20 * len("`notes/n00.md`, ") - 100  # sixty files fit, the commands do not
    tight = hook.assemble([ended, hook.FeedSection("alpha.md", 50, body)], tight_budget)
    assert len(tight) <= tight_budget and "`notes/n59.md`" in tight and "`notes/n60.md`" not in tight
    assert "uv run task0" not in tight and tight.endswith(hook.CUT_NOTE.strip("\n"))  # then lines go


def test_the_cut_leaves_a_files_line_of_sixty_or_one_it_did_not_write_as_it_is() -> None:
    sixty = "- Files: " + ", ".join(f"`n{i}.md`" for i in range(60))
    assert hook.shorter_files(f"{sixty}\n- Commands: `make`", 10) == f"{sixty}\n- Commands: `make`"
    odd = "- Files: " + ", ".join(f"`n{i}.md`" for i in range(80)) + " and more"
    assert hook.shorter_files(odd, 10) == odd


def test_disabled_prints_nothing(feed: Path) -> None:
    result = invoke("session-start", "--brain-feed", str(feed), env={"BRAIN_ENABLED": "false"})
    assert result.exit_code == 0 and result.stdout == ""


@pytest.mark.parametrize("make", ["missing", "empty", "health-only", "blank-bodies"])
def test_missing_or_empty_feed_prints_nothing(tmp_path: Path, make: str) -> None:
    folder = tmp_path / "feed"
    if make != "missing":
        folder.mkdir()
    if make == "health-only":
        (folder / "health.jsonl").write_text("{}\n")
    if make == "blank-bodies":
        write_feed_file(folder, "hot-arcs.md", 10, "\n\n")
    result = invoke("session-start", "--brain-feed", str(folder))
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == ""


def test_no_feed_configured_prints_nothing() -> None:
    result = invoke("session-start")
    assert result.exit_code == 0 and result.stdout == ""


def test_feed_folder_resolution_an_explicit_flag_beats_the_environment(tmp_path: Path, feed: Path) -> None:
    other = tmp_path / "source"
    write_feed_file(other, "x.md", 1, "# From BRAIN_SOURCE_PATH")
    flag = invoke("session-start", "--brain-feed", str(feed), "--format", "text", env={"BRAIN_SOURCE_PATH": str(other)})
    assert flag.stdout.startswith("# Active alarms")  # issue 12 item 16: the flag wins
    env_only = invoke("session-start", "--format", "text", env={"BRAIN_SOURCE_PATH": str(other),
                                                                 "BRAIN_VAULT": str(feed.parent)})
    assert env_only.stdout == "# From BRAIN_SOURCE_PATH\n"
    from_vault = invoke("session-start", "--format", "text", env={"BRAIN_VAULT": str(feed.parent)})
    assert from_vault.stdout.startswith("# Active alarms")


def test_configuration_error_exits_1_never_2(feed: Path) -> None:
    result = invoke("session-start", "--brain-feed", str(feed), env={"BRAIN_FEED_TOKEN_BUDGET": "lots"})
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.startswith("Error: configuration")
    bad_format = invoke("session-start", "--brain-feed", str(feed), "--format", "yaml")
    assert bad_format.exit_code == 1 and "bad --format" in bad_format.stderr


# --- prompt-submit -----------------------------------------------------------------------


def turn(feed: Path, session: str = "s-1", interval: int = 3) -> str:
    result = invoke(
        "prompt-submit",
        "--brain-feed",
        str(feed),
        input=json.dumps({"session_id": session, "prompt": "hi", "hook_event_name": "UserPromptSubmit"}),
        env={"BRAIN_REFRESH_INTERVAL": str(interval)},
    )
    assert result.exit_code == 0, result.stderr
    out: str = result.stdout
    return out


def test_prompt_submit_refreshes_every_interval_only_when_the_feed_changed(feed: Path) -> None:
    start = invoke("session-start", "--brain-feed", str(feed), input=json.dumps({"session_id": "s-1", "source": "startup"}))
    assert start.exit_code == 0
    assert [turn(feed) for _ in range(3)] == ["", "", ""]  # turn 3: due, but the session saw this feed

    write_feed_file(feed, "intent.md", 7, "# Intent\n\nShip the amygdala.")
    assert [turn(feed) for _ in range(2)] == ["", ""]  # turns 4, 5: not due
    refreshed = turn(feed)  # turn 6: due and changed
    context = context_of(refreshed, "UserPromptSubmit")
    assert "# Intent" in context and context.startswith("# Active alarms")
    assert [turn(feed) for _ in range(3)] == ["", "", ""]  # turn 9: due, unchanged since turn 6


def test_prompt_submit_for_a_session_that_never_saw_the_feed(feed: Path) -> None:
    assert turn(feed, "fresh", interval=2) == ""
    assert "# Active alarms" in context_of(turn(feed, "fresh", interval=2), "UserPromptSubmit")


@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]", '{"session_id": ""}', '{"session_id": 42}'])
def test_prompt_submit_without_a_session_prints_nothing(feed: Path, stdin: str) -> None:
    result = invoke("prompt-submit", "--brain-feed", str(feed), input=stdin, env={"BRAIN_REFRESH_INTERVAL": "1"})
    assert result.exit_code == 0 and result.stdout == ""


def test_prompt_submit_disabled_prints_nothing(feed: Path) -> None:
    payload = json.dumps({"session_id": "s"})
    for env in ({"BRAIN_ENABLED": "0", "BRAIN_REFRESH_INTERVAL": "1"},):
        result = invoke("prompt-submit", "--brain-feed", str(feed), input=payload, env=env)
        assert result.exit_code == 0 and result.stdout == ""


def test_hostile_session_ids_stay_inside_the_state_folder(feed: Path, tmp_path: Path) -> None:
    for session in ("../../escape", "/etc/passwd", "a" * 500, "ok-session_1"):
        turn(feed, session, interval=1)
    state = tmp_path / "state" / hook.STATE_SUBDIR
    names = sorted(p.name for p in state.iterdir())
    assert "ok-session_1.json" in names and len(names) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state", "vault"]
    for path in state.iterdir():
        assert set(json.loads(path.read_text())) == {"turns", "digest"}


def test_a_state_folder_that_cannot_be_written_never_costs_the_session_its_context(feed: Path,
                                                                                   tmp_path: Path) -> None:
    # A full disk under the state folder failed session-start (JSON, the agents' format) with an
    # unexpected OSError: the session started with nothing. The state is a hint; the context is not.
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the state folder should be\n")
    env = {"BRAIN_HOOK_STATE_DIR": str(blocked / "sessions"), "BRAIN_REFRESH_INTERVAL": "1"}
    start = invoke("session-start", "--brain-feed", str(feed), input=json.dumps({"session_id": "s-1"}), env=env)
    assert start.exit_code == 0, start.stderr
    assert "# Active alarms" in context_of(start.stdout, "SessionStart")
    prompt = invoke("prompt-submit", "--brain-feed", str(feed), env=env,
                    input=json.dumps({"session_id": "s-1", "prompt": "hi", "hook_event_name": "UserPromptSubmit"}))
    assert prompt.exit_code == 0, prompt.stderr
    assert "# Active alarms" in context_of(prompt.stdout, "UserPromptSubmit")


@pytest.mark.timeout(30)
def test_a_named_pipe_in_the_feed_folder_is_passed_over_never_waited_on(projects: Path, tmp_path: Path) -> None:
    # Opening a FIFO waits for a writer: one in place of the project's feed file, the index or a
    # global file held the session's start until the agent gave up on its hook.
    (projects / "projects" / "alpha.md").unlink()
    os.mkfifo(projects / "projects" / "alpha.md")
    os.mkfifo(projects / "zz-extra.md")
    text = start(projects, "/home/u/src/alpha")
    assert text and "# Active alarms" in text and "# alpha:" not in text
    (projects / "projects" / "index.json").unlink()
    os.mkfifo(projects / "projects" / "index.json")
    assert "# Active alarms" in start(projects, "/home/u/src/alpha")


def test_corrupt_session_state_starts_over(feed: Path, tmp_path: Path) -> None:
    state = tmp_path / "state" / hook.STATE_SUBDIR
    state.mkdir(parents=True)
    (state / "s-1.json").write_text("{broken")
    assert "# Active alarms" in context_of(turn(feed, interval=1), "UserPromptSubmit")


# --- the fast path and the real process ---------------------------------------------------


def test_fast_path_matches_the_typer_commands(feed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    typer_text = invoke("session-start", "--brain-feed", str(feed), "--format", "text").stdout
    assert launcher.fast_main(["session-start", f"--brain-feed={feed}", "--format", "text"]) == 0
    assert capsys.readouterr().out == typer_text
    for needs_typer in (["session-start", "--help"], ["session-start", "--format", "yaml"], ["other"], [],
                        ["prompt-submit", "--format", "json"], ["session-start", "--brain-feed"]):
        assert launcher.fast_main(needs_typer) is None


def test_fast_path_configuration_error_exits_1(feed: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BRAIN_REFRESH_INTERVAL", "often")
    assert launcher.fast_main(["prompt-submit", "--brain-feed", str(feed)]) == 1
    assert capsys.readouterr().err.startswith("Error: configuration")


def run_brain(*args: str, stdin: bytes | None, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}
    return subprocess.run(
        [sys.executable, "-m", "brain", *args], input=stdin, capture_output=True, env={**clean, **env}, timeout=60,
        stdin=subprocess.DEVNULL if stdin is None else None,
    )


def test_session_start_as_a_process_with_closed_or_json_stdin(feed: Path, tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}
    closed = run_brain("hook", "session-start", "--brain-feed", str(feed), stdin=None, env=env)
    assert closed.returncode == 0 and context_of(closed.stdout.decode(), "SessionStart").startswith("# Active alarms")
    with_session = run_brain(
        "hook", "session-start", "--brain-feed", str(feed), stdin=b'{"session_id": "proc-1"}', env=env
    )
    assert with_session.returncode == 0 and with_session.stdout == closed.stdout
    assert (tmp_path / "state" / hook.STATE_SUBDIR / "proc-1.json").exists()


def test_hook_path_imports_nothing_heavy(feed: Path) -> None:
    """Third-party packages, and dataclasses with inspect under it (~15 ms: the settings class is
    a brain.record at run time), stay out of the process that answers every session start."""
    probe = (
        "import sys\n"
        "from brain.launcher import fast_main\n"
        f"fast_main(['session-start', '--brain-feed', {str(feed)!r}])\n"
        "heavy = {'yaml', 'redis', 'httpx', 'typer', 'pydantic', 'jinja2', 'frontmatter', 'dataclasses', 'inspect'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy), file=sys.stderr)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert result.returncode == 0 and result.stderr.decode().strip() == "[]"


def test_session_start_with_a_uuid_session_id_loads_no_hashlib(feed: Path, tmp_path: Path) -> None:
    """Every Claude Code session start names a session (a UUID): its state file needs no hash,
    and hashlib's OpenSSL load would cost the hook ~5 ms."""
    probe = (
        "import sys\n"
        "from brain.launcher import fast_main\n"
        f"fast_main(['session-start', '--brain-feed', {str(feed)!r}])\n"
        "print('hashlib' in sys.modules, file=sys.stderr)\n"
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")},
           "BRAIN_HOOK_STATE_DIR": str(tmp_path / "state")}
    session = b'{"session_id": "4d5611e5-241a-462a-8d15-5122611a9569", "source": "startup"}'
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, input=session, env=env, timeout=60)
    assert result.returncode == 0 and result.stderr.decode().strip() == "False"
    assert (tmp_path / "state" / "4d5611e5-241a-462a-8d15-5122611a9569.json").exists()


# --- project-aware session start (issue 11 item 3) -----------------------------------------

INDEX = {
    "version": 1,
    "generated": "2026-11-21T12:00:00Z",
    "ttl": 7200,
    "projects": {"alpha": {"file": "projects/alpha.md"}, "beta": {"file": "projects/beta.md"},
                 "gone": {"file": "projects/gone.md"}},
    "roots": {"/home/u/src/alpha": "alpha", "/srv/beta": "beta", "/srv/gone": "gone"},
}


@pytest.fixture
def projects(feed: Path) -> Path:
    write_feed_file(feed, "projects/alpha.md", 50, "# alpha: where we left off\n\n- Last session: importer")
    write_feed_file(feed, "projects/beta.md", 50, "# beta: where we left off\n\n- Last session: outage")
    (feed / "projects" / "index.json").write_text(json.dumps(INDEX))
    return feed


def start(feed: Path, cwd: str | None, *args: str, env: dict[str, str] | None = None) -> str:
    payload = json.dumps({"session_id": "s-9", "source": "startup", **({"cwd": cwd} if cwd is not None else {})})
    result = invoke("session-start", "--brain-feed", str(feed), "--format", "text", *args, input=payload,
                    env={"BRAIN_NOW": "2026-11-21T12:30:00Z", **(env or {})})
    assert result.exit_code == 0, result.stderr
    out: str = result.stdout
    return out


@pytest.mark.parametrize(
    ("cwd", "project"),
    [
        ("/home/u/src/alpha", "alpha"),  # the recorded cwd
        ("/home/u/src/alpha/", "alpha"),
        ("/home/u/src/alpha/lib/deep", "alpha"),  # a sub-folder
        ("/home/u/src/alpha/.claude/worktrees/agent-1", "alpha"),  # a worktree inside the repository
        ("/mnt/ci/alpha", "alpha"),  # the same repository checked out elsewhere: its name
        ("/mnt/ci/alpha/.worktrees/fix", "alpha"),
        ("C:\\Users\\u\\beta", "beta"),
        ("/home/u/src/alphabet", None),  # a root is a whole path component
        ("/home/u/projects", None),
        ("/srv/gone", None),  # indexed, but its file is missing: the global feed
    ],
)
def test_the_cwd_finds_the_project(projects: Path, cwd: str, project: str | None) -> None:
    text = start(projects, cwd)
    if project is None:
        note, _, rest = text.partition("\n\n")
        assert note.startswith("# `")  # the feed's title names the folder and says why
        assert "is new: no earlier sessions in `" in note
        assert rest.startswith("# Active alarms") and "# Hot arcs" in rest and "where we left off" not in rest
    else:
        assert text.startswith("# Active alarms")  # an active alarm reaches every session
        assert f"# {project}: where we left off" in text
        if cwd.startswith("/mnt/ci/alpha/.worktrees"):  # matched by name, and its own name is alpha: no note
            assert text.startswith("# Active alarms")
        assert "# Hot arcs" not in text and "# Signals" not in text  # the global files are not repeated
        other = "beta" if project == "alpha" else "alpha"
        assert f"# {other}:" not in text


def test_find_project_rules() -> None:
    index = hook.ProjectIndex({"alpha": "projects/alpha.md", "api": "projects/api.md"},
                              {"/w/alpha": "alpha", "/w/alpha/services/api": "api"}, None, None)
    assert hook.find_project(index, "/w/alpha/services/api/src") == "api"  # the deepest root wins
    assert hook.find_project(index, "/w/alpha/services") == "alpha"
    assert hook.find_project(index, "/elsewhere/api/src") == "api"  # the deepest component wins
    assert hook.find_project(index, "/home/src") is None  # generic components never match
    assert hook.find_project(index, None) is None
    named = hook.ProjectIndex({"spotter": "a.md", "spotter-dov": "b.md", "go": "c.md"}, {}, None, None)
    assert hook.find_project(named, "/home/u/projects/spotter-worktrees/spotter-dov") == "spotter-dov"
    assert hook.find_project(named, "/home/u/projects/spotter-worktrees/spotter-xyz") == "spotter"  # <repo>-<branch>
    assert hook.find_project(named, "/home/u/spotterific") is None
    assert hook.find_project(named, "/home/u/go-tools") is None  # names under 3 letters never prefix-match


def test_a_folder_numbered_another_way_is_the_same_project() -> None:
    """Folders sorted by a number in front (``01_Repos``, ``02_Clockhelp``) get renumbered: the
    name without the number still names the project, when only one project has it."""
    index = hook.ProjectIndex({"Clockhelp": "a.md", "08_ContactInfo": "b.md", "01_Notes": "c.md", "02_Notes": "d.md",
                               "app": "e.md"}, {"X:/01_Edmb/Clockhelp": "Clockhelp"}, None, None)
    assert hook.match_project(index, "X:\\01_Edmb\\02_Clockhelp") == ("Clockhelp", hook.NAME)
    assert hook.match_project(index, "D:/work/3 - clockhelp/src") == ("Clockhelp", hook.NAME)
    assert hook.match_project(index, "X:/02_JZS/ContactInfo") == ("08_ContactInfo", hook.NAME)
    assert hook.match_project(index, "/home/u/03_Notes") is None  # two projects are "notes"
    assert hook.match_project(index, "/home/u/02_app") is None  # too short a name to mean one project
    assert hook.match_project(index, "/home/u/3dclockhelp") is None  # a number that is part of the name


def test_the_same_place_in_another_home_is_the_same_project() -> None:
    """One operator, two machines: ``~/.claude`` on the laptop is ``~/.claude`` on the desktop,
    whatever the user name, although a hidden or common name (``.claude``, ``src``) names no
    project by itself."""
    index = hook.ProjectIndex({".claude": "a.md", "app": "b.md", "laptop-notes": "c.md", "desktop-notes": "d.md",
                               "home": "e.md"},
                              {"C:/Users/eduar/.claude": ".claude", "/Users/ana/src/app": "app",
                               "/home/bo/src/notes": "laptop-notes", "/Users/bo/src/notes": "desktop-notes",
                               "/home/ana": "home"}, None, None)
    assert hook.match_project(index, "C:\\Users\\emarquez\\.claude") == (".claude", hook.NAME)
    assert hook.match_project(index, "c:/users/EMARQUEZ/.Claude/") == (".claude", hook.NAME)
    assert hook.match_project(index, "/home/ana/src/app/lib") == ("app", hook.NAME)  # below it, as below a root
    assert hook.match_project(index, "/root/src/notes") is None  # two projects at that place: no guess
    assert hook.match_project(index, "/home/ana/src") is None  # above it is not it
    assert hook.match_project(index, "/Users/ana/.claude") == (".claude", hook.NAME)  # any kind of home
    assert hook.match_project(index, "/Users/ana") is None  # a home is no place in a home
    assert hook.match_project(index, "/srv/.claude") is None  # outside any home: only the names count


def test_a_repository_in_a_home_area_is_its_own_project_not_the_area_s() -> None:
    # Sessions started in ~/Downloads fixed a script there; the operator then cloned a repository
    # they worked on from ~/Documents into ~/Downloads: its first session there is that
    # repository's work (found by name), not the Downloads project's.
    index = hook.ProjectIndex({"Downloads": "a.md", "claude-backups": "b.md", "Desktop": "c.md"},
                              {"/home/u/Downloads": "Downloads", "/home/u/Documents/claude-backups": "claude-backups",
                               "C:/Users/u/Desktop": "Desktop"}, None, None)
    assert hook.match_project(index, "/home/u/Downloads/claude-backups") == ("claude-backups", hook.NAME)
    assert hook.match_project(index, "/home/u/Downloads/claude-backups/database") == ("claude-backups", hook.NAME)
    assert hook.match_project(index, "C:\\Users\\u\\Desktop\\claude-backups") == ("claude-backups", hook.NAME)
    assert hook.match_project(index, "/home/u/Downloads") == ("Downloads", hook.ROOT)
    # a folder there no project is named after is still the area's, by its name
    assert hook.match_project(index, "/home/u/Downloads/openvino") == ("Downloads", hook.NAME)
    # where the area's own sessions worked, it keeps the folder (evidence before names)
    worked = hook.ProjectIndex(index.files, index.roots, None, None,
                               touched={"/home/u/Downloads/claude-backups": "Downloads"})
    assert hook.match_project(worked, "/home/u/Downloads/claude-backups") == ("Downloads", hook.TOUCHED)


def test_a_session_started_in_a_system_folder_gets_the_work_across_projects(projects: Path) -> None:
    # Sessions run in C:\Windows\System32 (an elevated terminal) are recorded like any other:
    # that folder is still no project, and its chats do not stand for the fleet's recent work.
    index = {**INDEX, "projects": {**INDEX["projects"], "System32": {"file": "projects/alpha.md"}},
             "roots": {**INDEX["roots"], "C:/Windows/System32": "System32", "/": "alpha"}}
    (projects / "projects" / "index.json").write_text(json.dumps(index))
    loaded = hook.load_index(projects)
    assert loaded is not None
    for cwd in ("C:\\Windows\\System32", "c:/windows/system32/", "/", "C:\\"):
        assert hook.find_project(loaded, cwd) is None, cwd
    assert hook.find_project(loaded, "C:\\Windows\\System32\\drivers") == "System32"  # below it: recorded roots hold
    text = start(projects, "C:\\Windows\\System32")
    assert text.startswith("# `C:/Windows/System32` is no project's folder: the recent work across projects follows")
    assert "where we left off" not in text and "# Active alarms" in text


def test_a_folder_worked_on_from_beside_it_gets_that_projects_feed(projects: Path) -> None:
    # The alpha sessions (cwd /home/u/src/alpha) edited files in /home/u/src/deploy-tools: a
    # session opened there continues alpha's work; a folder nobody touched is still new.
    index = json.loads((projects / "projects" / "index.json").read_text())
    index["touched"] = {"/home/u/src/deploy-tools": "alpha", "/srv/old": "gone"}
    (projects / "projects" / "index.json").write_text(json.dumps(index))
    text = start(projects, "/home/u/src/deploy-tools/nginx")
    first, _, rest = text.partition("\n\n")
    assert first == "# Earlier sessions of `alpha` worked on files in this folder (`nginx`); its feed follows"
    assert "# alpha: where we left off" in rest
    assert "is new" in start(projects, "/home/u/src/other").split("\n", 1)[0]


def test_a_package_the_repository_worked_in_beats_a_folder_between_where_one_session_started() -> None:
    # A monorepo's sessions (cwd /w/mono) edited packages/app; one session once started in
    # /w/mono/packages (its own project, "packages"). A session in packages/app is the monorepo's.
    index = hook.ProjectIndex(
        files={"mono": "projects/mono.md", "packages": "projects/packages.md", "other": "projects/other.md"},
        roots={"/w/mono": "mono", "/w/mono/packages": "packages", "/w/other": "other"},
        generated=None, ttl=None,
        touched={"/w/mono/packages": "mono", "/w/mono/packages/app": "mono", "/w/other/lib": "other"},
    )
    assert hook.match_project(index, "/w/mono/packages/app/src") == ("mono", hook.TOUCHED)
    assert hook.match_project(index, "/w/mono/packages") == ("packages", hook.ROOT)  # its own recorded folder
    assert hook.match_project(index, "/w/mono/packages/cli") == ("packages", hook.ROOT)  # nobody worked there
    assert hook.match_project(index, "/w/mono/src") == ("mono", hook.ROOT)
    assert hook.match_project(index, "/w/other/lib/x") == ("other", hook.ROOT)  # the same project: as recorded


def test_a_git_worktree_beside_its_repository_gets_the_repositorys_feed(projects: Path, tmp_path: Path) -> None:
    # `git worktree add ../fix-login` from /w/alpha: the worktree's .git is a file naming the
    # repository's .git/worktrees/<name>. The folder above both (beta's, say a home folder) does
    # not claim it, and neither is it a new project.
    work = tmp_path / "w"
    repo = work / "alpha"
    (repo / ".git" / "worktrees" / "fix-login").mkdir(parents=True)
    tree = work / "fix-login"
    (tree / "src").mkdir(parents=True)
    (tree / ".git").write_text(f"gitdir: {repo}/.git/worktrees/fix-login\n")
    index = json.loads((projects / "projects" / "index.json").read_text())
    index["roots"] = {**index["roots"], str(repo): "alpha", str(work): "beta"}
    (projects / "projects" / "index.json").write_text(json.dumps(index))
    text = start(projects, str(tree))
    first, _, rest = text.partition("\n\n")
    assert first == "# This folder (`fix-login`) is a git worktree of `alpha`; its feed follows"
    assert "# alpha: where we left off" in rest
    assert "# alpha: where we left off" in start(projects, str(tree / "src"))  # from a folder inside it
    assert "# beta: where we left off" in start(projects, str(work / "notes"))  # no worktree: as before


def test_a_home_folder_claims_only_the_folders_its_sessions_worked_in() -> None:
    # One session once ran in /Users/ann (a project named after her); her repositories live below.
    index = hook.ProjectIndex(
        files={"ann": "projects/ann.md", "shop": "projects/shop.md", "notes": "projects/notes.md"},
        roots={"/Users/ann": "ann", "/Users/ann/code/shop": "shop", "C:/Users/ann": "ann"},
        generated=None, ttl=None,
        touched={"/Users/ann/Documents/notes": "ann", "/Users/ann/code/shop/lib": "shop"},
    )
    assert hook.match_project(index, "/Users/ann") == ("ann", hook.ROOT)  # the home folder itself
    assert hook.match_project(index, "/Users/ann/Documents/notes/2026") == ("ann", hook.TOUCHED)  # it worked there
    assert hook.match_project(index, "/Users/ann/Desktop/fix-login") is None  # a new folder: not hers by default
    assert hook.match_project(index, "C:\\Users\\ann\\work") is None  # nor by her name
    assert hook.match_project(index, "/Users/ann/code/shop/src") == ("shop", hook.ROOT)  # other roots hold
    assert hook.match_project(index, "/mnt/ann/x") == ("ann", hook.NAME)  # outside her home, a name still names


def test_a_folder_of_projects_claims_no_new_folder_in_it() -> None:
    # One session once started in ~/work, above the repositories the other sessions ran in (the
    # index's holders): a new folder there is not that session's project, by place or by name
    # (libnn_baseline is libnn's); a repository still claims its folders.
    index = hook.ProjectIndex(
        files={"work": "projects/work.md", "libnn": "projects/libnn.md", "sim": "projects/sim.md",
               "mono": "projects/mono.md", "app": "projects/app.md"},
        roots={"/home/n/work": "work", "/home/n/work/libnn": "libnn", "/home/n/work/sim": "sim",
               "/w/mono": "mono", "/w/mono/packages/app": "app"},
        generated=None, ttl=None, holders=frozenset({"/home/n/work"}),
    )
    assert hook.match_project(index, "/home/n/work") == ("work", hook.ROOT)  # the folder itself
    assert hook.match_project(index, "/home/n/work/libnn/src") == ("libnn", hook.ROOT)
    assert hook.match_project(index, "/home/n/work/libnn_baseline") == ("libnn", hook.NAME)
    assert hook.match_project(index, "/home/n/work/Alioth") is None
    assert hook.match_project(index, "/w/mono/packages/lib") == ("mono", hook.ROOT)


def test_a_folder_named_like_one_a_project_worked_in_elsewhere_gets_that_projects_feed(projects: Path) -> None:
    # The only sessions on M-Claude ran in the home folder (project "ann") and worked in
    # /home/ann/M-Claude. A session on another machine, in a worktree app's folder of it or a
    # checkout, is that work's continuation; a sub-folder's, a short, a common or a shared folder
    # name names nothing, and neither does a folder inside the checkout.
    index = hook.ProjectIndex(
        files={"ann": "projects/ann.md", "shop": "projects/shop.md", "bob": "projects/bob.md"},
        roots={"/home/ann": "ann", "/w/shop": "shop", "/home/bob": "bob"},
        generated=None, ttl=None,
        touched={"/home/ann/M-Claude": "ann", "/home/ann/M-Claude/scripts": "ann", "/home/ann/api": "ann",
                 "/home/ann/tools": "ann", "/home/bob/tools": "bob", "/w/shop/lib": "shop",
                 "/home/ann/Documents": "ann", "/home/ann/Desktop/site-redesign": "ann"},
    )
    worktree = "C:\\Users\\Ann\\.claude-worktrees\\M-Claude\\unruffled-mcclintock"
    assert hook.match_project(index, worktree) == ("ann", hook.TOUCHED_NAME)
    assert hook.match_project(index, "/srv/checkouts/m-claude") == ("ann", hook.TOUCHED_NAME)
    assert hook.match_project(index, "/srv/checkouts/site-redesign") == ("ann", hook.TOUCHED_NAME)
    assert hook.match_project(index, "/srv/checkouts/m-claude/lib") is None  # its folder's name is another
    assert hook.match_project(index, "/srv/x/scripts") is None  # a worked-in sub-folder's name
    assert hook.match_project(index, "/srv/x/api") is None  # too short to name a repository
    assert hook.match_project(index, "/srv/x/tools") is None  # two projects worked in folders of that name
    assert hook.match_project(index, "/Users/cy/Documents") is None  # every home has one
    assert hook.match_project(index, "/srv/shop/M-Claude") == ("shop", hook.NAME)  # a project's name comes first
    # What the session reads: ann's feed, under a title that says why.
    data = json.loads((projects / "projects" / "index.json").read_text())
    data["touched"] = {"/home/u/src/M-Claude": "alpha"}
    (projects / "projects" / "index.json").write_text(json.dumps(data))
    first, _, rest = start(projects, "/Users/ann/.claude-worktrees/M-Claude/brave-turing").partition("\n\n")
    assert first == "# Earlier sessions of `alpha` worked in a folder named `M-Claude`, like this one; its feed follows"
    assert "# alpha: where we left off" in rest


def test_home_folders() -> None:
    from brain.core.project import is_home_folder

    for path in ("/Users/ann", "/home/bob/", "/root", "C:\\Users\\ann", "c:/users/ann", "/c/Users/ann"):
        assert is_home_folder(path), path
    for path in ("/Users", "/Users/ann/code", "/home", "/srv/ann", "C:/Users", "/"):
        assert not is_home_folder(path), path


def test_which_git_folders_are_worktrees(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    relative = tmp_path / "rel"
    relative.mkdir()
    (relative / ".git").write_text("gitdir: ../repo/.git/worktrees/rel\n")
    submodule = repo / "vendor" / "lib"
    submodule.mkdir(parents=True)
    (submodule / ".git").write_text("gitdir: ../../.git/modules/lib\n")
    assert hook.worktree_repository(str(relative / "a" / "b")) == hook.normal_path(str(repo))
    assert hook.worktree_repository(str(repo / "src")) is None  # the main checkout
    assert hook.worktree_repository(str(submodule)) is None  # a submodule is its own repository
    assert hook.worktree_repository(str(tmp_path / "missing" / "x")) is None


def test_a_checkout_matched_by_name_is_told_whose_feed_it_gets(projects: Path) -> None:
    text = start(projects, "/mnt/ci/alpha-hotfix")
    first, _, rest = text.partition("\n\n")
    assert first == "# This folder (`alpha-hotfix`) looks like a checkout of `alpha`; its feed follows"
    assert rest.startswith("# Active alarms") and "# alpha: where we left off" in rest
    assert start(projects, "/home/u/src/alpha/lib").startswith("# Active alarms")  # a recorded root: no note


def test_an_explicit_cwd_flag_beats_the_hook_input(projects: Path) -> None:
    assert "# beta:" in start(projects, "/home/u/src/alpha", "--cwd", "/srv/beta")


def test_a_cwd_no_path_can_hold_is_passed_over_never_a_failed_hook(projects: Path) -> None:
    # A NUL byte stopped the hook (ValueError: embedded null byte) and the session got nothing.
    assert "# alpha:" in start(projects, "/home/u/src/alpha\x00/lib", "--cwd", "/home/u/src/alpha")
    text = start(projects, "/home/u/src/alpha\x00")
    assert text and "# alpha:" not in text  # where the hook process runs decides: the global feed here
    for hostile in (["/home/u/src/alpha"], {"path": "/srv/beta"}, 7, "   "):
        payload = json.dumps({"session_id": "s-9", "cwd": hostile})
        result = invoke("session-start", "--brain-feed", str(projects), "--format", "text", input=payload)
        assert result.exit_code == 0 and result.stdout, (hostile, result.stderr)


def test_no_index_or_a_corrupt_one_means_the_global_feed(projects: Path) -> None:
    (projects / "projects" / "index.json").write_text("{not json")
    assert "# Hot arcs" in start(projects, "/home/u/src/alpha")
    (projects / "projects" / "index.json").write_text(json.dumps({"projects": [1], "roots": "x"}))
    assert "# Hot arcs" in start(projects, "/home/u/src/alpha")


def test_a_note_when_the_feed_is_older_than_its_ttl(projects: Path) -> None:
    fresh = start(projects, "/home/u/src/alpha")  # 30 min after the tick, TTL 2 h
    assert "_Note:" not in fresh
    stale = start(projects, "/home/u/src/alpha", env={"BRAIN_NOW": "2026-11-23T12:00:00Z"})
    first, rest = stale.split("\n", 1)
    assert first.startswith("_Note: this feed was built 2 days ago (2026-11-21T12:00:00Z), past its 2 h lifetime")
    assert rest.lstrip().startswith("# Active alarms")
    assert "_Note:" in start(projects, None, env={"BRAIN_NOW": "2026-11-23T12:00:00Z"})  # the global feed too


def test_an_explicit_now_flag_beats_brain_now(projects: Path) -> None:
    text = start(projects, "/home/u/src/alpha", "--now", "2026-11-21T12:10:00Z",
                 env={"BRAIN_NOW": "2026-12-30T00:00:00Z"})
    assert "_Note:" not in text and "# alpha:" in text
    bad = invoke("session-start", "--brain-feed", str(projects), "--now", "yesterday-ish")
    assert bad.exit_code == 1 and bad.stdout == "" and "--now" in bad.stderr and bad.stderr.count("\n") == 1


def test_the_project_context_stays_within_the_budget(projects: Path) -> None:
    long_body = "# alpha: where we left off\n\n" + "".join(f"- line {i} {'x' * 60}\n" for i in range(200))
    write_feed_file(projects, "projects/alpha.md", 50, long_body)
    for budget in ("2000", "150"):
        env = {"BRAIN_FEED_TOKEN_BUDGET": budget, "BRAIN_NOW": "2026-11-25T00:00:00Z"}  # with the stale note
        text = start(projects, "/home/u/src/alpha", env=env).rstrip("\n")
        assert len(text) <= int(budget) * 4 and text.startswith("_Note:")
        assert "# alpha: where we left off" in text and text.endswith("(cut to fit the feed budget)")


def test_prompt_submit_refreshes_with_the_session_projects_feed(projects: Path) -> None:
    payload = json.dumps({"session_id": "p-1", "cwd": "/srv/beta"})
    result = invoke("prompt-submit", "--brain-feed", str(projects), input=payload,
                    env={"BRAIN_REFRESH_INTERVAL": "1", "BRAIN_NOW": "2026-11-21T12:30:00Z"})
    assert "# beta: where we left off" in context_of(result.stdout, "UserPromptSubmit")


def test_session_start_process_finds_the_project(projects: Path, tmp_path: Path) -> None:
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "BRAIN_NOW": "2026-11-21T12:30:00Z"}
    stdin = json.dumps({"session_id": "proc-2", "cwd": "/home/u/src/alpha/lib", "source": "resume"}).encode()
    done = run_brain("hook", "session-start", "--brain-feed", str(projects), stdin=stdin, env=env)
    assert done.returncode == 0 and "# alpha: where we left off" in context_of(done.stdout.decode(), "SessionStart")


def test_a_new_project_gets_the_global_feed_without_the_tick_diff_or_a_second_list_of_arcs(projects: Path) -> None:
    text = start(projects, "/home/u/src/new-thing")
    assert "# Hot arcs" in text and "# Last tick" not in text  # the tick's bookkeeping is not context
    assert "# Active alarms" in text and "# Signals" in text and "# Inject" in text
    write_feed_file(projects, "recent-work.md", 6, "# Recent work across projects\n\n- 2026-11-21 · alpha · importer")
    text = start(projects, "/home/u/src/new-thing")
    assert "# Recent work across projects" in text and "# Hot arcs" not in text  # the same arcs, once
    assert "# Active alarms" in text and "# Signals" in text and "# Inject" in text


def test_a_home_folder_session_gets_its_projects_feed_then_the_recent_work_across_projects(projects: Path) -> None:
    """A session in a home folder is about anything: the project its folder matched (its own
    sessions', or one that worked there) comes first, the recent work across projects after it;
    a project's own folder gets only its own feed."""
    write_feed_file(projects, "recent-work.md", 6, "# Recent work across projects\n\n- 2026-11-21 · beta · outage")
    index = {**INDEX, "projects": {**INDEX["projects"], "u": {"file": "projects/alpha.md"}},
             "roots": {**INDEX["roots"], "/home/u": "alpha"}}
    (projects / "projects" / "index.json").write_text(json.dumps(index))
    home = start(projects, "/home/u")
    assert home.index("# alpha: where we left off") < home.index("# Recent work across projects")
    own = start(projects, "/home/u/src/alpha")
    assert "# alpha: where we left off" in own and "# Recent work across projects" not in own
    desk = {**index, "roots": {**index["roots"], "C:/Users/u/Desktop": "alpha", "/srv/ops/Desktop": "beta"}}
    (projects / "projects" / "index.json").write_text(json.dumps(desk))
    desktop = start(projects, "C:\\Users\\u\\Desktop")  # a home's desktop: about anything too
    assert desktop.index("# alpha: where we left off") < desktop.index("# Recent work across projects")
    elsewhere = start(projects, "/srv/ops/Desktop")  # a folder named Desktop outside a home is a project's
    assert "# beta: where we left off" in elsewhere and "# Recent work across projects" not in elsewhere
    # a folder of projects (the index's holders): its sessions range over the projects in it
    held = {**index, "roots": {**index["roots"], "/home/u/work": "alpha"}, "holders": ["/home/u/work"]}
    (projects / "projects" / "index.json").write_text(json.dumps(held))
    work = start(projects, "/home/u/work/")
    assert work.index("# alpha: where we left off") < work.index("# Recent work across projects")
    (projects / "projects" / "index.json").write_text(json.dumps({**held, "holders": []}))
    assert "# Recent work across projects" not in start(projects, "/home/u/work")


def test_a_young_project_gets_the_recent_work_across_projects_while_another_was_just_worked(projects: Path) -> None:
    """A project the vault knows little of (its feed fills less than a third of the budget) is
    most likely what the operator was just doing elsewhere: while another project was worked on
    within a day, the recent work across projects follows its own feed. A project with a feed of
    its own to fill the budget, or an operator idle elsewhere for longer, gets its own feed only."""
    write_feed_file(projects, "recent-work.md", 6,
                    "# Recent work across projects\n\n- Commands lately: `adb devices`, `avdmanager list`")

    def index_with(beta_worked: str) -> None:
        index = {**INDEX, "projects": {"alpha": {"file": "projects/alpha.md", "worked": "2026-11-20T08:00:00Z"},
                                       "beta": {"file": "projects/beta.md", "worked": beta_worked}}}
        (projects / "projects" / "index.json").write_text(json.dumps(index))

    index_with("2026-11-21T10:30:00Z")  # beta 2 h before this 12:30 session
    text = start(projects, "/home/u/src/alpha")
    assert text.index("# alpha: where we left off") < text.index("# Recent work across projects")
    assert "`adb devices`" in text
    index_with("2026-11-20T06:30:00Z")  # 30 h before: the operator's work elsewhere is not this thread
    assert "# Recent work across projects" not in start(projects, "/home/u/src/alpha")
    index_with("2026-11-21T10:30:00Z")
    files = ", ".join(f"`src/module_{n}.py`" for n in range(200))  # a project with plenty of its own
    write_feed_file(projects, "projects/alpha.md", 50,
                    f"# alpha: where we left off\n\n- Last session: importer\n\n## Used here recently\n\n- Files: {files}")
    text = start(projects, "/home/u/src/alpha")
    assert "# alpha: where we left off" in text and "# Recent work across projects" not in text


def test_a_repository_root_gets_the_feeds_of_the_projects_in_its_sub_folders(projects: Path) -> None:
    """``/w/app/client`` is its own project (its sessions start there), inside the repository
    ``/w/app``: a session at the root gets the root's feed, then those of the sub-folders worked
    on since the root's latest work, the latest first and at most two, in what the budget
    leaves; the sub-folder's handoff line is not repeated as "Just before". A session in the
    sub-folder gets its own feed only, and a home folder, whatever lies below it, gets no
    project's feed that way."""
    write_feed_file(projects, "projects/app.md", 50, "# app: where we left off\n\n- Last session: the API")
    for name, line in (("client", "`agent-lint.md`"), ("server", "`routes.py`"), ("docs", "`guide.md`")):
        write_feed_file(projects, f"projects/{name}.md", 50,
                        f"# {name}: where we left off\n\n- Last session (2026-11-21 12:00): files in play: {line}")
    index = {**INDEX, "projects": {
        "app": {"file": "projects/app.md", "worked": "2026-11-21T09:00:00Z", "last_active": "2026-11-21T09:00:00Z"},
        "client": {"file": "projects/client.md", "worked": "2026-11-21T12:00:00Z", "last_active": "2026-11-21T12:00:00Z"},
        "server": {"file": "projects/server.md", "worked": "2026-11-21T11:00:00Z"},
        "docs": {"file": "projects/docs.md", "worked": "2026-11-21T10:00:00Z"},
        "alpha": {"file": "projects/alpha.md", "worked": "2026-11-21T11:00:00Z"}},
        "roots": {"/w/app": "app", "/w/app/client": "client", "/w/app/packages/server": "server",
                  "/w/app/docs": "docs", "/home/u": "alpha", "/home/u/src/alpha": "alpha"}}
    (projects / "projects" / "index.json").write_text(json.dumps(index))
    text = start(projects, "/w/app")
    assert text.index("# app: where we left off") < text.index("# client: where we left off") \
        < text.index("# server: where we left off")
    assert "# docs:" not in text  # two at most: the latest worked on
    assert "Just before" not in text  # client's line is there once, in its own feed
    assert "`agent-lint.md`" in text and "`routes.py`" in text
    index["projects"]["app"]["last_active"] = "2026-11-21T11:30:00Z"  # the root worked on after server
    (projects / "projects" / "index.json").write_text(json.dumps(index))
    text = start(projects, "/w/app")
    assert "# client: where we left off" in text and "# server:" not in text and "# docs:" not in text
    client = start(projects, "/w/app/client")
    assert "# client: where we left off" in client and "# app:" not in client and "# server:" not in client
    home = start(projects, "/home/u")  # alpha's, a home folder: about anything, not a repository
    assert "# app:" not in home and "# client:" not in home


def test_the_project_worked_on_just_before_adds_its_handoff_line(projects: Path) -> None:
    """An operator who moves from one repository to the next often carries the same thread: the
    handoff line of the project worked on last follows this project's feed, while that was
    another project, less than 3 h ago and later than anything here."""
    write_feed_file(projects, "projects/alpha.md", 50,
                    "# alpha: where we left off\n\n- Last session (2026-11-21 09:00): importer\n\n## Used here recently\n")
    write_feed_file(projects, "projects/beta.md", 50,
                    "# beta: where we left off\n\n- Last session (2026-11-21 11:50): parse_history.py for the outage; "
                    "files in play: `scripts/parse_history.py`\n- Unresolved errors: `timeout`\n")

    def index_with(alpha: str, beta: str) -> None:
        index = {**INDEX, "projects": {"alpha": {"file": "projects/alpha.md", "last_active": alpha},
                                       "beta": {"file": "projects/beta.md", "last_active": beta},
                                       "gone": {"file": "projects/gone.md", "last_active": "2026-11-21T12:20:00Z"}}}
        (projects / "projects" / "index.json").write_text(json.dumps(index))

    index_with("2026-11-21T09:00:00Z", "2026-11-21T11:50:00Z")
    text = start(projects, "/home/u/src/alpha")  # at 12:30: beta ended 40 min ago, alpha at 9:00
    assert text.index("# alpha: where we left off") < text.index("# Just before, in beta (40 min ago)")
    assert "- Last session (2026-11-21 11:50): parse_history.py" in text
    assert "Unresolved errors" not in text  # the one line, not beta's whole feed
    assert "Just before" not in start(projects, "/srv/beta")  # beta is the latest work: nothing to add
    assert "Just before" not in start(projects, "/home/u/src/new-thing")  # the global feed has the recent work
    index_with("2026-11-21T12:00:00Z", "2026-11-21T11:50:00Z")
    assert "Just before" not in start(projects, "/home/u/src/alpha")  # alpha itself was worked on since
    index_with("2026-11-21T09:00:00Z", "2026-11-21T09:10:00Z")
    assert "Just before" not in start(projects, "/home/u/src/alpha")  # beta ended over 3 h ago
    # beta's latest runs were headless (an SDK client such as claude-mem's observer): its last
    # work by an operator (``worked``) is what counts, here none at all, or long ago
    for worked in (None, "2026-11-21T08:00:00Z"):
        index_with("2026-11-21T09:00:00Z", "2026-11-21T11:50:00Z")
        index = json.loads((projects / "projects" / "index.json").read_text())
        index["projects"]["beta"]["worked"] = worked
        (projects / "projects" / "index.json").write_text(json.dumps(index))
        assert "Just before" not in start(projects, "/home/u/src/alpha")
    index["projects"]["beta"]["worked"] = "2026-11-21T11:50:00Z"
    (projects / "projects" / "index.json").write_text(json.dumps(index))
    assert "# Just before, in beta (40 min ago)" in start(projects, "/home/u/src/alpha")
