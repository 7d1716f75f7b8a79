"""The needs parser of ``brain eval feed``: what a session needed, read from raw logs by hand-checked rules."""

from __future__ import annotations

import json
from pathlib import Path

from brain.evaluation.needs import (
    SessionFiles,
    _Collector,
    _human_prompt,
    locate_claude,
    locate_codex,
    normalise,
    parse_errors,
    parse_prompt,
    parse_shell,
    read_needs,
)
from tests.eval_logs import ALPHA, S1, S1_PROMPT, S2, S3, S4, S5, write_logs


def _items(needs: object) -> list[tuple[str, str, int]]:
    return [(i.kind, i.key, i.first_call) for i in needs.headline()]  # type: ignore[attr-defined]


def test_needed_items_of_the_hand_made_sessions(tmp_path: Path) -> None:
    write_logs(tmp_path)
    located = locate_claude(tmp_path)
    assert sorted(located) == sorted([S1, S2, S3, S4, S5])
    # S1: the backticked `converter.py` and the Read of src/converter.py are one file item; git and ls
    # are not commands; the failed pytest run gives its error class.
    assert _items(read_needs(located[S1])) == [
        ("file", "converter.py", 0), ("entity", "parse_header", 0),
        ("file", "test_converter.py", 1), ("command", "uv run pytest", 1), ("error", "valueerror", 1),
    ]
    # S2: README.md is generic; ECONNREFUSED comes from the failed build (call 2), not from the prompt.
    assert _items(read_needs(located[S2])) == [
        ("file", "converter.py", 0), ("entity", "parse_header", 0),
        ("command", "npm run build", 2), ("error", "econnrefused", 2),
    ]
    assert _items(read_needs(located[S3])) == [
        ("command", "mix phx.server", 0), ("error", "undefinedfunctionerror", 0), ("entity", "phx.server", 0),
    ]
    # S4: the typed path lib/beta/router.ex and the Read of it are one file item.
    assert _items(read_needs(located[S4])) == [
        ("file", "router.ex", 0), ("command", "mix phx.server", 0),
        ("error", "undefinedfunctionerror", 0), ("entity", "phx.server", 0),
    ]


def test_human_prompts_are_kept_in_order_for_the_recall_replay(tmp_path: Path) -> None:
    write_logs(tmp_path)
    needs = read_needs(locate_claude(tmp_path)[S1])
    assert needs.prompts == (S1_PROMPT, "thanks, that works")  # tool results are not prompts
    assert "header tests pass again" not in repr(needs)  # kept out of anything printed


def test_file_items_carry_basename_and_repo_relative_forms(tmp_path: Path) -> None:
    write_logs(tmp_path)
    needs = read_needs(locate_claude(tmp_path)[S1], ALPHA)
    converter = next(i for i in needs.items if i.key == "converter.py")
    assert converter.forms == ("converter py", "src converter py")
    assert converter.label == "src/converter.py"


def test_windows_paths_are_keyed_by_basename_like_posix_ones() -> None:
    # Claude Code on Windows logs X:\\… paths; their basename and cwd-relative form are the keys, as on POSIX.
    out = _Collector("X:\\03_ACG\\Odoo_Docs")
    out.file("X:\\03_ACG\\Odoo_Docs\\docs\\plan.md")
    out.file("x:\\03_acg\\odoo_docs\\models.py")
    out.file("X:\\03_ACG\\Custom_Addons\\crm\\views.xml")
    assert [(i.key, i.forms, i.label) for i in out.items.values()] == [
        ("plan.md", ("plan md", "docs plan md"), "docs/plan.md"),
        ("models.py", ("models py",), "models.py"),
        ("views.xml", ("views xml", "x 03 acg custom addons crm views xml"), "X:/03_ACG/Custom_Addons/crm/views.xml"),
    ]
    entities, _ = parse_prompt("in X:\\03_ACG\\crm\\views\\lead_view.xml the list and crm\\models\\lead.py")
    assert [key for key, _ in entities] == ["lead_view.xml", "lead.py"]


def test_shell_commands_are_program_and_subcommand() -> None:
    assert parse_shell("cd x && uv run pytest -q tests/test_a.py 2>&1 | tail -5") == (["uv run pytest"], ["tests/test_a.py"])
    assert parse_shell("bd show spotter-dov") == (["bd show"], [])
    assert parse_shell("FOO=1 npm run build > out.log") == (["npm run build"], [])
    assert parse_shell("git commit -m fix && git push") == ([], [])
    assert parse_shell("cat <<'EOF' > notes.py\nimport os\nEOF\nmake test") == (["make test"], [])
    assert parse_shell("for f in a b; do echo $f; done") == ([], [])
    assert parse_shell('python3 -c "\nimport tarfile\n"') == ([], [])
    assert parse_shell("python -m pytest") == (["python -m pytest"], [])
    assert parse_shell('bash -lc "mix test test/foo_test.exs"') == (["mix test"], ["test/foo_test.exs"])
    # the shell's own built-ins run no program, like set and export (a loop's preamble, vps-system)
    assert parse_shell("trap 'release_lock $ID' EXIT; local n=2; pushd web && pnpm build; popd") == (["pnpm build"], [])


def test_a_background_shells_notification_is_no_human_prompt() -> None:
    """Its tags (``shell-id``, ``output-file``) are not identifiers the operator typed."""
    notice = "<bash-notification>\n<shell-id>bbcaede</shell-id>\n<status>completed</status>\n</bash-notification>"
    record = {"type": "user", "message": {"role": "user", "content": notice}}
    assert _human_prompt(record) is None
    assert _human_prompt({**record, "message": {"role": "user", "content": "rename shell_id please"}}) is not None


def test_errors_skip_harness_noise() -> None:
    assert parse_errors("The user doesn't want to proceed with this tool use. ValueError") == []
    assert parse_errors("<tool_use_error>Sibling tool call errored</tool_use_error>") == []
    assert parse_errors("Exit code 127\n/bin/bash: line 1: pytest: command not found") == [
        ("command not found pytest", "command not found: pytest")]
    assert parse_errors("<tool_use_error>InputValidationError: Bash failed due to the following issue:\n"
                        "An unexpected parameter `tabId` was provided</tool_use_error>") == []
    for zsh in ("(eval):1: command not found: go", "Exit code 127\nzsh:1: command not found: go"):  # not "1"
        assert parse_errors(zsh) == [("command not found go", "command not found: go")]
    assert parse_errors("ModuleNotFoundError: No module named 'yaml'") == [
        ("modulenotfounderror", "ModuleNotFoundError"), ("no module named yaml", "No module named yaml")]
    assert parse_errors("src/a.ts(3,1): error TS2322: Type x") == [("ts2322", "TS2322")]


def test_prompt_entities_skip_english_and_brands() -> None:
    entities, terms = parse_prompt(
        "Work on spotter-dov: a follow-up to the read-only `mix test` run on GitHub, see isMeta and a.b_c")
    assert [key for key, _ in entities] == ["mix test", "a.b_c", "ismeta", "spotter-dov"]
    assert "follow" in terms and "github" in terms


def test_subagent_tool_calls_count_and_their_prompts_do_not(tmp_path: Path) -> None:
    write_logs(tmp_path)
    folder = tmp_path / ALPHA.replace("/", "-")
    agents = folder / S1 / "subagents"
    agents.mkdir(parents=True)
    records = [
        {"type": "user", "isSidechain": True, "sessionId": S1, "uuid": "sub-0", "timestamp": "2026-01-01T10:00:05Z",
         "message": {"role": "user", "content": "Look for parse_things_secretly in the code"}},
        {"type": "assistant", "isSidechain": True, "sessionId": S1, "uuid": "sub-1", "timestamp": "2026-01-01T10:00:06Z",
         "message": {"role": "assistant", "content": [
             {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": f"{ALPHA}/src/lexer.py"}}]}},
    ]
    (agents / "agent-a1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + "{broken\n")
    needs = read_needs(locate_claude(tmp_path)[S1])
    keys = {i.key for i in needs.items}
    assert "lexer.py" in keys and "parse_things_secretly" not in keys
    assert not any("parse_things_secretly" in p for p in needs.prompts)  # a subagent's prompt is not the human's
    assert needs.damaged_lines == 1


def test_codex_rollout_items(tmp_path: Path) -> None:
    day = tmp_path / "2026" / "05" / "11"
    day.mkdir(parents=True)
    sid = "019e1625-789d-76c0-80ab-3724b5ddb799"
    lines = [
        {"type": "session_meta", "payload": {"id": sid, "cwd": "/r/app"}},
        {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>ignore_me_please</environment_context>"}]}},
        {"type": "event_msg", "payload": {"type": "user_message", "message": "raise the `compact_threshold` to 90"}},
        {"type": "response_item", "payload": {"type": "function_call", "name": "exec_command", "call_id": "c1",
                                              "arguments": json.dumps({"cmd": "npm test -- src/env.test.ts"})}},
        {"type": "response_item", "payload": {"type": "function_call_output", "call_id": "c1",
                                              "output": "Process exited with code 1\nOutput:\nAssertionError: 80 != 90"}},
        {"type": "response_item", "payload": {"type": "custom_tool_call", "name": "apply_patch", "call_id": "c2",
                                              "input": "*** Begin Patch\n*** Update File: src/env.ts\n@@\n*** End Patch"}},
    ]
    (day / f"rollout-2026-05-11T11-26-55-{sid}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    located = locate_codex(tmp_path)
    assert list(located) == [sid]
    assert _items(read_needs(located[sid])) == [
        ("file", "env.test.ts", 0), ("command", "npm test", 0), ("error", "assertionerror", 0),
        ("entity", "compact_threshold", 0), ("file", "env.ts", 1),
    ]
    assert read_needs(located[sid]).prompts == ("raise the `compact_threshold` to 90",)  # scaffolding left out


def test_damaged_and_empty_files_are_survived(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"type":"user","message":{"content":"hi \\ud83d `odd_name`"}}\nnot json\n\n')
    needs = read_needs(SessionFiles("x", "claude-code", path))
    assert [i.key for i in needs.headline()] == ["odd_name"]
    assert needs.damaged_lines == 1
    empty = tmp_path / "e.jsonl"
    empty.write_text("")
    assert read_needs(SessionFiles("e", "claude-code", empty)).items == ()


def test_normalise_turns_every_run_of_non_alphanumerics_into_one_space() -> None:
    assert normalise("  lib/Spotter_web/app.JS ") == "lib spotter web app js"
    assert normalise("converter_py2") == "converter py2"


def test_powershell_calls_are_shell_commands(tmp_path: Path) -> None:
    # Claude Code on Windows runs commands through its PowerShell tool: read like Bash, backslashes are
    # separators (PowerShell has no backslash escapes) and built-in cmdlets are utilities like ls.
    from tests.eval_logs import SessionLog
    log = (SessionLog(S1, "X:/acg/shop", "2026-01-01T10:00").prompt("run the tests")
           .tool("PowerShell", {"command": 'Get-ChildItem "X:\\acg\\shop\\" | Select-Object Name; '
                                           "docker compose up -d; & venv\\Scripts\\python.exe -m pytest"})
           .tool("PowerShell", {"command": 'py "X:\\acg\\shop\\tools\\seed_data.py"'},
                 "ParserError: unexpected token", error=True))
    needs = read_needs(locate_claude(log.write(tmp_path).parent.parent)[S1])
    assert [(i.kind, i.key) for i in needs.headline() if i.kind != "entity"] == [
        ("command", "docker compose up"), ("command", "python -m pytest"), ("file", "seed_data.py"),
        ("command", "py seed_data.py"), ("error", "parsererror"),
    ]


def zed_log() -> object:
    """Claude Code run from Zed: its Read, Edit and Bash arrive as the ``acp`` MCP server's tools."""
    from tests.eval_logs import SessionLog
    return (SessionLog(S1, "/w/shop", "2026-01-01T10:00").prompt("fix the cart total")
            .tool("mcp__acp__Read", {"file_path": "/w/shop/src/cart.ts"})
            .tool("mcp__acp__Edit", {"file_path": "/w/shop/src/money.ts", "old_string": "a", "new_string": "b"})
            .tool("mcp__acp__Bash", {"command": "cd /w/shop && pnpm lint 2>&1 | head -50"},
                  "TypeError: x is undefined", error=True))


def test_zed_acp_tools_are_the_tools_they_stand_for(tmp_path: Path) -> None:
    needs = read_needs(locate_claude(zed_log().write(tmp_path).parent.parent)[S1])  # type: ignore[attr-defined]
    assert [(i.kind, i.key) for i in needs.headline() if i.kind != "entity"] == [
        ("file", "cart.ts"), ("file", "money.ts"), ("command", "pnpm lint"), ("error", "typeerror"),
    ]


def test_windows_programs_are_named_like_posix_ones() -> None:
    # A program run by its Windows path is its name: no folders, no .exe, no case.
    assert parse_shell('"C:\\Program Files\\Python312\\Python.exe" -m pytest -q') == (["python -m pytest"], [])
    assert parse_shell("venv\\Scripts\\python.exe manage.py migrate") == (["python manage.py"], ["manage.py"])
    assert parse_shell("venv\\Scripts\\pip.exe install -r requirements.txt")[0] == ["pip install"]
    assert parse_shell('cd "C:\\x" && py "C:\\Users\\me\\scripts\\gen_report.py"')[0] == ["py gen_report.py"]
    assert parse_shell("Get-Content app.ini -Tail 20; Remove-Item -Recurse dist") == ([], ["app.ini"])
    assert parse_shell('powershell -NoProfile -Command "npm run build"') == (["npm run build"], [])
    script = "$links = @(\n  @{ Name = 'docs'; Target = $root }\n)\nforeach ($l in $links) {\n" \
             "  if (Test-Path $l.Target) { continue }\n  Receive-Job -Id 3\n}\nnpm run build"
    assert parse_shell(script, powershell=True) == (["npm run build"], [])
    # POSIX lines read as before: an escaped space or quote is no path separator.
    assert parse_shell("python3 my\\ script.py") == ([], [])
    assert parse_shell('echo "a\\"b" && ./bin/deploy.sh prod') == (["deploy.sh prod"], ["./bin/deploy.sh"])
