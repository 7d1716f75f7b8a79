"""The deterministic lesson miner and the work items on real fixture sessions (issue 11 item 2).

Every expectation below was worked out by reading the fixture lines by hand (line numbers are
1-based lines of the session file):

fe869ecb (claude-code-log, 1.0.24)
  30  Bash `act --container-architecture linux/amd64 -j test` -> 31 is_error
  33  `uv run ruff format` ok; 35 `act` fails again; 41 Edit .github/workflows/ci.yml;
  43  `act` ok                      => lesson fe869ecb:30, fixed by editing ci.yml
  41  Edit ci.yml (A -> B); 57 Edit ci.yml (B -> A)
                                    => lesson fe869ecb:57, the change made at line 41 reverted
  48  prompt "Wait, does it only run on main? I think we should run it on all push? …"
                                    => decision fe869ecb:48
  69  `uv run pyright` fails; 72-96 edits of claude_code_log/converter.py; 99 pyright ok
                                    => lesson fe869ecb:69, fixed by editing converter.py
cb2e607c (coderabbit-review-helper, 2.0.37)
  14  ExitPlanMode rejected at 15: "…reason for the rejection: Let's keep the name of the py
      file but change the pyproject script to reference it, otherwise gtg"
                                    => decision cb2e607c:15
  45  `uv tool install .` fails (ValueError); 49 Edit pyproject.toml; 53 install ok
                                    => lesson cb2e607c:45
  57  `coderabbit-extract --help` fails (ModuleNotFoundError: No module named
      'extract_coderabbit_feedback'); 61 Edit pyproject.toml; 69 the same call ok
                                    => lesson cb2e607c:57
0d3a8e6f (claude-code-log, 1.0.43)
  16  "You can set group.visible using the vis library which is less work"  => decision
  21  "I don't think we need to loop through all items, …"                   => decision
4c2ddfdc (-tmp-private): create / update / delete hello files, nothing fails => nothing
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from brain.core import markers as marker_parser
from brain.core.arc_text import arc_title, lesson_block, render_new_arc
from brain.core.grouping import NewArc
from brain.core.lessons import LessonMiner, is_correction, safe_text
from brain.core.session import Lesson, Session
from brain.core.worklog import WorkLog, command_keys, error_signature, identifiers, shell_files
from brain.pipeline.extract import extract
from brain.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"
CLAUDE = FIXTURES / "claude-code"
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def read_one(tmp_path: Path, folder: str, stem: str) -> Session:
    """Extract one fixture session through the real reader (copied: fixtures are read-only)."""
    target = tmp_path / "projects" / folder
    target.mkdir(parents=True)
    shutil.copy(CLAUDE / folder / f"{stem}.jsonl", target / f"{stem}.jsonl")
    settings = Settings(projects_dir=tmp_path / "projects", codex_dir=tmp_path / "none", since="2000-01-01T00:00:00Z",
                        min_turns=0)
    [session] = extract(settings, NOW, agent="claude-code").sessions
    return session


def by_source(session: Session) -> dict[str, Lesson]:
    return {lesson.source: lesson for lesson in session.lessons}


def test_error_then_fix_revert_and_correction_in_the_act_session(tmp_path: Path) -> None:
    session = read_one(tmp_path, "-Users-dain-workspace-claude-code-log-sample", "fe869ecb-c176-478f-9734-7e4b8ef12cff")
    found = by_source(session)
    assert sorted(found) == ["fe869ecb:30", "fe869ecb:48", "fe869ecb:57", "fe869ecb:69"]
    act = found["fe869ecb:30"]
    assert act.kind == "lesson" and act.text.startswith("`act` failed with ")
    assert "fixed by editing `.github/workflows/ci.yml`" in act.text
    assert found["fe869ecb:57"].kind == "lesson" and "`.github/workflows/ci.yml`" in found["fe869ecb:57"].text
    assert "line 41" in found["fe869ecb:57"].text and "reverted (adding `continue-on-error: true`)" in \
        found["fe869ecb:57"].text
    decision = found["fe869ecb:48"]
    assert decision.kind == "decision" and decision.text.startswith("Wait, does it only run on main?")
    assert decision.date == "2025-06-14"
    pyright = found["fe869ecb:69"]
    assert pyright.text.startswith("`uv run pyright` failed with ") and "`claude_code_log/converter.py`" in pyright.text
    # Both failures were resolved later in the session: none stays open.
    assert session.failures and session.open_failures == ()
    assert dict(session.commands)["uv run pyright"] == 5 and dict(session.commands)["act"] == 5
    assert session.files_edited[0] == ("claude_code_log/converter.py", 7)


def test_rejected_plan_and_module_not_found_in_the_coderabbit_session(tmp_path: Path) -> None:
    session = read_one(tmp_path, "-Users-dain-workspace-coderabbit-review-helper",
                       "cb2e607c-c758-415a-8b45-c49e4631906a")
    found = by_source(session)
    assert sorted(found) == ["cb2e607c:15", "cb2e607c:45", "cb2e607c:57"]
    assert found["cb2e607c:15"].kind == "decision"
    assert found["cb2e607c:15"].text.startswith("Let's keep the name of the py file but change the pyproject script")
    assert found["cb2e607c:45"].text.startswith("`uv tool install` failed with ")
    assert "fixed by editing `pyproject.toml`" in found["cb2e607c:45"].text
    module = found["cb2e607c:57"].text
    assert "ModuleNotFoundError: No module named 'extract_coderabbit_feedback'" in module
    assert "fixed by editing `pyproject.toml`" in module
    assert session.git_branch == "fix/comment-attribution-and-pagination"
    assert "pr_input" in session.identifiers


def test_operator_corrections_in_the_timeline_session(tmp_path: Path) -> None:
    session = read_one(tmp_path, "-Users-dain-workspace-claude-code-log-sample", "0d3a8e6f-290f-4105-a327-a2496e5e2a83")
    found = by_source(session)
    assert sorted(found) == ["0d3a8e6f:16", "0d3a8e6f:21"]
    assert all(lesson.kind == "decision" for lesson in found.values())
    assert found["0d3a8e6f:21"].text.startswith("I don't think we need to loop through all items")
    assert "group.visible" in session.identifiers


def test_a_session_where_nothing_failed_teaches_nothing(tmp_path: Path) -> None:
    session = read_one(tmp_path, "-tmp-private", "4c2ddfdc-b619-4525-8d03-1950fb1b0257")
    assert session.lessons == () and session.failures == ()
    assert [path for path, _n in session.files_edited] == ["hello.py", "hello.md", "hello.js"]


def test_titles_on_real_fixtures(tmp_path: Path) -> None:
    settings = Settings(projects_dir=CLAUDE, codex_dir=FIXTURES / "codex" / "sessions",
                        since="2000-01-01T00:00:00Z", min_turns=0)
    titles = {s.session_id[:8]: arc_title([s]) for s in extract(settings, NOW).sessions}
    assert titles["fe869ecb"] == "Add a Github Action to run tests and linting"  # "Hey Claude, can you please" dropped
    assert titles["4d5611e5"] == "Work on bead spotter-dov"
    assert titles["0d3a8e6f"].startswith("Refactoring the timeline filtering")  # "I'd like your help with" dropped
    assert titles["019e1625"].startswith("Update the defailt context compart to 90")  # "show tools" skipped
    assert titles["55604662"] == "mix phx.server doesnt seem to start"
    # Codex text redacted upstream: project and main files instead of a placeholder.
    assert titles["019c8a70"] == "da0ba47443 session"
    for title in titles.values():
        assert "REDACTED" not in title and not title.lower().startswith(("hey", "hi ", "continue", "/"))


def test_a_headless_run_is_recognised() -> None:
    settings = Settings(projects_dir=CLAUDE, codex_dir=FIXTURES / "none", since="2000-01-01T00:00:00Z", min_turns=0)
    headless = {s.session_id[:8] for s in extract(settings, NOW).sessions if s.headless}
    assert headless == {"29ccd257"}  # the `claude -p` run; every interactive session is not


@pytest.mark.parametrize(("line", "keys"), [
    ("cd /x && uv run pytest -q 2>&1 | tail -20", ["uv run pytest"]),
    ("mix phx.server", ["mix phx.server"]),
    ("npm run build && npx vitest run", ["npm run build", "npx vitest"]),
    ("timeout 60 mix test test/a_test.exs", ["mix test"]),
    ("FOO=1 bd show spotter-dov", ["bd show"]),
    ("git commit -m \"$(cat <<'EOF'\nfix\nEOF\n)\" && git push", []),
    ("rg -n \"compact|compacting\" src | head", []),
    ("python3 -c \"\nimport tarfile\nwith open(x) as f: pass\"", []),
    ("python3 extract-feedback.py --pr 3", ["python3 extract-feedback.py"]),
    ("python -m pytest tests/", ["python -m pytest"]),
    # a framework's console names its task: Laravel's artisan, Symfony's bin/console
    ("php artisan test --filter=VersionTest", ["php artisan test"]),
    ("php ./artisan migrate:fresh --seed", ["php artisan migrate:fresh"]),
    ("php bin/console cache:clear", ["php bin/console cache:clear"]),
    ("php -r 'echo 1;'", []),
    # continued lines are one command: their words are arguments, not programs
    ("for f in \\\n  views/index.blade.php \\\n  views/edit.blade.php; do head -1 $f; done", []),
    ("docker compose \\\n  up -d", ["docker compose up"]),
])
def test_commands_are_program_and_subcommand(line: str, keys: list[str]) -> None:
    assert command_keys(line) == keys


def test_file_arguments_of_shell_commands() -> None:
    assert shell_files("sed -n '1,80p' src/app.py && cat README.md Makefile") == ["src/app.py", "README.md", "Makefile"]
    assert shell_files("act --container-architecture linux/amd64 -j test") == []
    assert shell_files("grep -rn foo.bar lib/x.ex") == ["lib/x.ex"]  # the pattern is no file


def test_file_arguments_are_read_from_the_folder_the_command_ran_in() -> None:
    # The shell's folder (a record's cwd after an earlier ``cd``) and a ``cd`` in the line itself.
    assert shell_files("python3 VOICE_TOGGLE.py status", workdir="/r/agents") == ["/r/agents/VOICE_TOGGLE.py"]
    assert shell_files("cd /r/agents && bash run.sh x.json", workdir="/r") == ["/r/agents/run.sh", "/r/agents/x.json"]
    assert shell_files("cd agents; cat ../a.py ./b.py", workdir="/r") == ["/r/a.py", "/r/agents/b.py"]
    # A folder that cannot be told (a variable, the home folder) leaves the argument as typed.
    assert shell_files("cd $DIR && cat a.py", workdir="/r") == ["a.py"]
    assert shell_files("cat ./a.py /etc/x.conf ~/b.md") == ["a.py", "/etc/x.conf", "~/b.md"]
    assert shell_files("Set-Location C:/x; Get-Content a.py", powershell=True, workdir="C:\\r") == ["C:/x/a.py"]
    # Git Bash on Windows names a drive /c/; a bare cd goes home (unknown); cd / is the root.
    assert shell_files("cd /c/w/repo/sub && cat a.py /c/w/repo/b.py", workdir="C:/w/repo") == \
        ["C:/w/repo/sub/a.py", "C:/w/repo/b.py"]
    assert shell_files("cd && cat a.py", workdir="/r") == ["a.py"]
    assert shell_files("cd / && cat a.py", workdir="/r") == ["/a.py"]
    log = WorkLog("s")
    log.cwd = "/r"
    log.shell("c1", 1, "python3 VOICE_TOGGLE.py", workdir="/r/agents")
    log.shell("c2", 2, "cat ./agents/VOICE_TOGGLE.py")
    log.shell("c3", 3, "cd /tmp && cat > notes.md")
    assert dict(log.files_read()) == {"agents/VOICE_TOGGLE.py": 2, "/tmp/notes.md": 1}  # one file, counted once


def test_error_signatures() -> None:
    assert error_signature("Traceback …\nModuleNotFoundError: No module named 'foo'") == \
        "ModuleNotFoundError: No module named 'foo'"
    assert error_signature("connect ECONNREFUSED 127.0.0.1:5432") == "connect ECONNREFUSED 127.0.0.1:5432"
    assert error_signature("zsh: command not found: mix") == "zsh: command not found: mix"
    traceback = 'Traceback:\n  File "b.py", line 3\n    raise ValueError(message)\nValueError: no files to ship'
    assert error_signature(traceback) == "ValueError: no files to ship"  # the raised line, not the raise
    assert error_signature("==== test session starts ====\nplatform linux\nt.py::test_a FAILED [ 50%]\n"
                           "t.py:60: AssertionError") == "t.py:60: AssertionError"
    assert error_signature("SIM115 Use a context manager for opening files\n --> a.py:3:5\nFound 1 error.") == \
        "SIM115 Use a context manager for opening files"
    # a coloured script output (mk's flow scripts) reads as its words, not "[0;90mNo active session[0m"
    assert error_signature("Exit code 1\n\x1b[0;90mNo active session\x1b[0m") == "No active session"
    assert error_signature("\x1b[0;31m[FAIL]\x1b[0m Failed to lock story") == "[FAIL] Failed to lock story"
    # a long line is cut on a word boundary: the path before tsc's error stays whole, not "essActivitiesCard…"
    tsc = ("src/components/business-processes/__tests__/BusinessProcessActivitiesCard.test.tsx(3,32): error TS2307: "
           "Cannot find module '@testing-library/react' or its corresponding type declarations.")
    assert error_signature("$ yarn run types\n" + tsc).startswith("src/components/business-processes/__tests__/")


def test_operator_feedback_on_a_stopped_command_is_a_decision() -> None:
    from brain.core.worklog import WorkLog

    work = WorkLog("abcdef12")
    work.shell("c1", 10, "git push origin main")
    work.result("c1", 11, True, "Wait a sec, we need to copy public/favicons/token.svg to the other repo too")
    work.shell("c2", 20, "uv run pytest")
    work.result("c2", 21, True, "The user doesn't want to proceed with this tool use. STOP what you are doing")
    [decision] = work.lessons()
    assert decision.kind == "decision" and decision.source == "abcdef12:11"
    assert decision.text.startswith("Wait a sec, we need to copy")
    assert work.failures() == ()  # neither is a failure of the work
    assert error_signature("The user doesn't want to proceed with this tool use.") == ""
    assert error_signature("Chunk ID: 1\nWall time: 2\nProcess exited with code 1\nOutput:\nrg: x: No such file") == \
        "rg: x: No such file"


def test_a_programs_one_line_complaint_is_output_not_the_operators_answer() -> None:
    """Laravel's ``php artisan test --verbose`` answers one coloured line (Tmeister/dotfiles,
    business-process, twice): ``\\x1b[44;1m INFO \\x1b[49;22m Unknown option "--verbose".`` It
    reads like a short sentence, but no operator types terminal colours or a log level: it
    stays a failure of the command, never a decision in the arc."""
    from brain.core.worklog import WorkLog

    work = WorkLog("abcdef12")
    work.shell("c1", 41, "php artisan test --verbose")
    work.result("c1", 42, True, '\x1b[44;1m INFO \x1b[49;22m Unknown option "--verbose".')
    work.shell("c2", 50, "php artisan migrate --step")
    work.result("c2", 51, True, "WARN  Unknown option given to the migrate command here")
    assert work.lessons() == ()
    assert [(f.command, f.text) for f in work.failures()] == [
        ("php artisan migrate", "WARN Unknown option given to the migrate command here"),
        ("php artisan test", 'INFO Unknown option "--verbose".')]
    assert dict(work.ranked_commands()) == {"php artisan test": 1, "php artisan migrate": 1}
    # an operator's answer in plain words is still one
    work.shell("c3", 60, "git push origin main")
    work.result("c3", 61, True, "No, push to the staging remote instead of main")
    [decision] = work.lessons()
    assert decision.text == "No, push to the staging remote instead of main"


def test_debugging_prints_taken_out_again_are_no_lesson() -> None:
    """Adding ``console.log`` lines to see the data and removing them once seen is how one debugs
    (Tmeister/dotfiles: two such "lessons" about ``sop-tab-content.tsx`` in one feed); a change
    that did something and was undone still is one, whatever comments came with it."""
    from brain.core.lessons import LessonMiner

    miner = LessonMiner("abcdef12")
    debug = "  const data = props.data;\n  console.log('SOP Tab Content - Data', data);\n"
    miner.edit(36, "sop-tab.tsx", "  const data = props.data;\n", debug)
    miner.edit(55, "sop-tab.tsx", debug, "  const data = props.data;\n")
    dbg = "def run():\n    # see what comes in\n    print(payload)\n    breakpoint()\n"
    miner.edit(60, "run.py", "def run():\n", dbg)
    miner.edit(61, "run.py", dbg, "def run():\n")
    assert miner.lessons() == ()
    reload = "  // Force a reload of the page\n  router.reload();\n"
    miner.edit(70, "show.tsx", "  return null;\n", reload)
    miner.edit(80, "show.tsx", reload, "  return null;\n")
    [lesson] = miner.lessons()
    assert lesson.source == "abcdef12:80" and "made at line 70 was reverted" in lesson.text


def test_a_lesson_never_carries_terminal_escapes() -> None:
    from brain.core.lessons import safe_text

    assert safe_text("\x1b[31mFAILED\x1b[0m tests/test_a.py\x00 then \x07fixed") == "FAILED tests/test_a.py then fixed"


def test_a_tool_the_machine_refuses_is_a_failure_until_it_works_again() -> None:
    """Grep's bundled ``rg`` not executable fails every Grep of a session, and of the next one
    (xuwentao/paas-controller, three sessions): a tool failing for the environment's sake
    (EACCES, EPERM, a full disk …) is recorded like a command's failure, and mended by the next
    call of that tool that works; a path the agent got wrong (ENOENT, EISDIR) stays exploration."""
    from brain.core.worklog import WorkLog

    spawn = "spawn /opt/homebrew/lib/node_modules/@anthropic-ai/claude-code/vendor/ripgrep/arm64-darwin/rg EACCES"
    work = WorkLog("abcdef12")
    work.cwd = "/w/paas"
    work.tool("g1", 3, "Grep")
    work.result("g1", 4, True, spawn)
    work.tool("r1", 5, "Read", "/w/paas/pkg")
    work.result("r1", 6, True, "EISDIR: illegal operation on a directory, read")
    work.tool("r2", 7, "Read", "/w/paas/gone.go")
    work.result("r2", 8, True, "ENOENT: no such file or directory")
    work.tool("r3", 9, "Read", "/w/paas/main.go")
    work.result("r3", 10, False, "")  # another tool working mends nothing
    [failure] = work.failures()
    assert (failure.command, failure.text, failure.resolved, failure.names) == ("Grep", spawn, False, ("EACCES",))
    assert work.lessons() == ()  # not an error the work fixed
    work.tool("g2", 11, "Grep")
    work.result("g2", 12, False, "")
    [failure] = work.failures()
    assert failure.resolved


def test_identifiers_the_operator_typed() -> None:
    found = identifiers("Work on bead spotter-dov, see `pr_input` in lib/spotter/app.ex and group.visible; "
                        "myVariable vs follow-up on GitHub, version 1.2.3, [REDACTED_MESSAGE len=3]")
    assert found == ["pr_input", "spotter-dov", "lib/spotter/app.ex", "group.visible", "myVariable"]


def test_corrections() -> None:
    assert is_correction("no, use the staging database instead")
    assert is_correction("Don't touch the migrations folder please")
    assert is_correction("use `uv` instead of pip for this")
    assert not is_correction("Please add a test for the parser")
    assert not is_correction("no")  # a bare "no" says nothing to keep


def test_lesson_blocks_are_redacted_and_marker_safe() -> None:
    miner = LessonMiner("abcdef12")
    secret = "sk-ant-api03-" + "A" * 90
    miner.prompt(7, f"no, use {secret} instead <!-- @signal severity=critical -->x<!-- @/signal --> ok", "2026-01-02")
    [lesson] = miner.lessons()
    block = lesson_block(lesson)
    assert secret not in block
    found, problems = marker_parser.parse(block)
    assert [m.type for m in found] == ["decision"] and not problems
    assert 'source=abcdef12:7' in block and "date=2026-01-02" in block
    assert "<!--" not in safe_text("a <!-- b --> c")


def test_a_lesson_cut_inside_a_code_span_does_not_hide_the_next_one() -> None:
    """A lesson's text is cut to its length; cut after the opening backtick of an error message,
    it left a code span open that ran on to the next lesson's first backtick: the parser read
    the first lesson's closing marker and the second one's opening as code, so the first lesson
    held both (markup and all, into 14 of 233 feeds of a real vault) and the second was gone."""
    long_error = "`Bun not found at " + "/very/long/path" * 20 + "`"
    first = Lesson("lesson", f"`npx claude-mem` failed with {long_error}; fixed by installing bun", "f0feb01a:243",
                   "2026-05-04")
    second = Lesson("lesson", "`node gen.mjs` failed; fixed by editing `gen.mjs`", "f0feb01a:250", "2026-05-04")
    text = "## Lessons\n\n" + "\n".join(lesson_block(lesson) for lesson in (first, second)) + "\n"
    found, problems = marker_parser.parse(text)
    assert [m.type for m in found] == ["lesson", "lesson"] and not problems
    assert not any("<!--" in m.text or "-->" in m.text for m in found)
    assert found[0].text.startswith("`npx claude-mem` failed with 'Bun not found at /very/long/path")
    assert found[1].text == "`node gen.mjs` failed; fixed by editing `gen.mjs`"  # whole spans are kept


def test_new_arcs_carry_lessons_and_open_todos(tmp_path: Path) -> None:
    session = read_one(tmp_path, "-Users-dain-workspace-coderabbit-review-helper",
                       "cb2e607c-c758-415a-8b45-c49e4631906a")
    rendered = render_new_arc(NewArc((session,)), NOW, Settings())
    assert rendered.text.count("<!-- @lesson ") == 2 and rendered.text.count("<!-- @decision ") == 1
    _found, problems = marker_parser.parse(rendered.text)
    assert not problems
    assert json.dumps(rendered.text).count("cb2e607c:") >= 3


@pytest.mark.parametrize(("prompt", "title"), [
    ("[Image #1] Can you please add margin-bottom to the header", "Add margin-bottom to the header"),
    ("Hey Claude, I'd like your help with refactoring the timeline", "Refactoring the timeline"),
    ("Oh, this is not supported by Chrome :(\\ \\ This is bad", "Oh, this is not supported by Chrome :( This is bad"),
    ("please fix these", ""),
    ("continue", ""),
    ("/model", ""),
    ("[REDACTED_MESSAGE len=32 sha=821fd802]", ""),
    ("show tools", ""),  # two plain words say too little
    ("Implement spotter-gqc", "Implement spotter-gqc"),  # two words naming the work item do not
    ("fix parse_rows", "fix parse_rows"),
    # Chinese, Japanese and Korean run without spaces: two characters weigh a word (xuwentao)
    ("解释下这个函数的逻辑", "解释下这个函数的逻辑"),
    ("你可以阅读下当前的 @pkg/backend/aisuite/ 里的代码。当前的设计完全依赖harbor仓库的配置",
     "你可以阅读下当前的 @pkg/backend/aisuite/ 里的代码"),
    ("继续", ""),  # "continue"
    ("好的！", ""),  # "ok!"
])
def test_meaningful_titles(prompt: str, title: str) -> None:
    from brain.core.arc_text import meaningful_title

    assert meaningful_title(prompt) == title


def test_a_pasted_field_list_does_not_flood_the_identifiers() -> None:
    from brain.core.worklog import WorkLog

    work = WorkLog("abcdef12")
    fields = " ".join(f"fieldName{i}" for i in range(40))
    work.prompt(3, f"Why does `parse_pr` drop these? {fields}")
    assert work.identifier_list() == ("parse_pr", "fieldName0", "fieldName1", "fieldName2", "fieldName3",
                                      "fieldName4", "fieldName5", "fieldName6", "fieldName7", "fieldName8",
                                      "fieldName9", "fieldName10")


def test_files_are_repo_relative_and_worktrees_fold_into_the_repo() -> None:
    from brain.core.worklog import relative_path

    assert relative_path("/x/repo/.claude/worktrees/agent-a4ca7529/work/a.md", "/x/repo") == "work/a.md"
    assert relative_path("C:\\w\\repo\\src\\a.py", "C:\\w\\repo") == "src/a.py"
    assert relative_path("/elsewhere/b.py", "/x/repo") == "/elsewhere/b.py"
    assert relative_path("x:\\W\\Repo\\src\\a.py", "X:\\w\\repo") == "src/a.py"  # Windows: no case


def test_a_powershell_here_string_is_data_not_commands() -> None:
    # Codex on Windows pipes a script to Python through a here-string (IDAHO-VAULT): its lines
    # (``for path in paths:``, ``added = sorted(…)``) are no programs, and no files.
    line = ("@'\nimport csv\n# the column's count\nfor path in paths:\n    compare rows\n"
            "    print(open(path + '/notes.md').read())\n'@ | python -\nnpm run build")
    assert command_keys(line, powershell=True) == ["npm run build"]
    assert shell_files(line, powershell=True) == []
    assert command_keys('$body = @"\nfor x in y\n"@; uv run pytest', powershell=True) == ["uv run pytest"]
    assert command_keys("@'\ncut short\nfor x in y", powershell=True) == []  # its end past the cut


def test_claude_code_spill_files_are_not_project_files() -> None:
    from brain.core.worklog import WorkLog

    # A long tool output Claude Code saved beside its log is read once by that session, never again.
    work = WorkLog("abcdef12", cwd="C:\\w\\repo")
    work.file_read("C:\\Users\\me\\.claude\\projects\\C--w-repo\\7d63f975-4d42\\tool-results\\toolu_01KJ.txt")
    work.file_read("/home/me/.claude/projects/-w-repo/7d63f975-4d42/tool-results/b7viwdw0o.txt")
    work.file_read("C:\\Users\\me\\.claude\\projects\\C--w-repo\\memory\\MEMORY.md")
    work.file_read("C:\\w\\repo\\src\\a.py")
    assert list(work.read) == ["C:/Users/me/.claude/projects/C--w-repo/memory/MEMORY.md", "src/a.py"]


@pytest.mark.parametrize(("line", "keys"), [
    # a program run by its Windows path is its name: no folders, no .exe, no case
    ('"C:\\Program Files\\Python312\\Python.exe" -m pytest -q', ["python -m pytest"]),
    ("venv\\Scripts\\python.exe manage.py migrate", ["python manage.py"]),
    ("venv\\Scripts\\pip.exe install -r requirements.txt", ["pip install"]),
    ('cd "C:\\x" && py "C:\\Users\\me\\scripts\\gen_report.py"', ["py gen_report.py"]),
    # PowerShell cmdlets and Windows utilities are plumbing like ls; -Command runs its own line
    ("Get-Content app.log -Tail 20; Remove-Item -Recurse dist; where.exe node", []),
    ('powershell -NoProfile -Command "npm run build"', ["npm run build"]),
    ("py -m pip install -r requirements.txt", ["py -m pip"]),
    # POSIX lines read as before
    ("./bin/deploy.sh prod", ["deploy.sh prod"]),
])
def test_windows_commands_are_program_and_subcommand(line: str, keys: list[str]) -> None:
    assert command_keys(line) == keys


def test_powershell_lines_keep_backslashes_as_separators() -> None:
    # PowerShell has no backslash escapes: "X:\\app\\" ends with a separator, not an escaped quote.
    line = 'Get-ChildItem "X:\\app\\" ; & "X:\\app\\venv\\Scripts\\python.exe" X:\\app\\tools\\seed.py'
    assert command_keys(line, powershell=True) == ["python seed.py"]
    assert shell_files(line, powershell=True) == ["X:/app/tools/seed.py"]
    # A script body: keywords, hash table entries and cmdlets start no program.
    script = "$links = @(\n  @{ Name = 'docs'; Target = $root }\n)\nforeach ($l in $links) {\n" \
             "  if (Test-Path $l.Target) { continue }\n  Receive-Job -Id 3\n}\nnpm run build"
    assert command_keys(script, powershell=True) == ["npm run build"]


def test_a_long_log_is_named_by_the_error_at_its_end() -> None:
    # An Odoo upgrade prints thousands of INFO lines before the traceback that says what went wrong.
    log = "".join(f"2026-05-04 03:13:{i % 60:02d},937 122 INFO odoo18 odoo.modules.loading: loading {i}\n"
                  for i in range(120))
    log += "Traceback (most recent call last):\n  File \"convert.py\", line 9\n" \
           "odoo.tools.convert.ParseError: while parsing views/job_views.xml:51\n"
    assert len(log) > 6000
    assert error_signature(log) == "odoo.tools.convert.ParseError: while parsing views/job_views.xml:51"


def test_generated_ids_and_keys_are_not_identifiers() -> None:
    # Seen in real prompts (M-Thisness/M-Claude): a pasted token and a teleport session id.
    text = ("the key iHubJjktLhacUMAZJR5BK8U failed; run claude --teleport session_01Nb9BCWhSmkDT3fRFNDXD8C "
            "then fix `getUTF8StringFromBytes2` in Base64Encoder, "
            "not `ghp_16C7e42F292c6912E7710c838347Ae178B4a`")
    assert identifiers(text) == ["getUTF8StringFromBytes2", "Base64Encoder"]


def test_every_error_name_of_a_failed_commands_output_is_met() -> None:
    """Windows (real logs): PowerShell wraps a failed native command in a block whose name is on
    the last line (``FullyQualifiedErrorId : NativeCommandError``), under the ``RemoteException``
    the signature keeps; the next session hit the same NativeCommandError. Every name the output
    mentions is kept with the failure, through the bundle's JSON, into the arc's ``errors_met``."""
    from brain.core.arc_text import work_keys
    from brain.core.session import Session
    from brain.core.worklog import WorkLog

    output = ("gpg: no valid OpenPGP data found.\r\nAt line:1 char:1\r\n+ & gpg.exe --import 2>&1\r\n"
              "+ ~~~~~~~~~~~~~~~~~~~~~~~~~~~~\r\n    + CategoryInfo          : NotSpecified: (gpg: no valid "
              "OpenPGP data found.:String) [], RemoteException\r\n    + FullyQualifiedErrorId : NativeCommandError\r\n")
    work = WorkLog("abcdef12", cwd="C:\\Users\\m")
    work.shell("c1", 10, "gpg --import key.asc")
    work.result("c1", 11, True, output)
    work.shell("c2", 12, "gpg --import key.asc")
    work.result("c2", 13, False, "imported")
    [failure] = work.failures()
    assert failure.resolved and "RemoteException" in failure.text and "NativeCommandError" not in failure.text
    assert failure.names == ("RemoteException", "NativeCommandError")
    at = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
    session = Session("s", "claude-code", "m", "C:\\Users\\m", "", at, at, 1, 1, 2, (), (), "go", "go", 0, 0, 0, 0,
                      failures=work.failures())
    again = Session.from_json(json.loads(json.dumps(session.to_json())))
    assert again.failures == session.failures
    assert work_keys([again])["errors_met"] == ["NativeCommandError", "RemoteException"]
    # a name in a bundle is only ever an error name: anything else is dropped on reading
    data = session.to_json()
    data["failures"][0]["names"] = ["NativeCommandError", "<!-- @signal -->", "rm -rf /", 7]
    assert Session.from_json(data).failures[0].names == ("NativeCommandError",)
