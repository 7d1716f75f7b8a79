"""Session extraction on every real fixture, plus synthesized damage (session-formats.md §1.13).

Expectations are computed here by a small independent reading of the JSONL, not by the
readers under test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import brain.io.sessions as sessions_io
from brain.cli import app
from brain.core.session import Session
from brain.io.sessions import incremental as incremental_io
from brain.pipeline.extract import Bundle, extract
from brain.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"
CLAUDE = FIXTURES / "claude-code"
CODEX = FIXTURES / "codex" / "sessions"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
EVERYTHING = "4000d"

pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared session fixtures not present")


def run(projects: Path | None = None, codex: Path | None = None, **kwargs: Any) -> Bundle:
    settings = Settings(
        projects_dir=projects if projects is not None else Path("/nonexistent/projects"),
        codex_dir=codex if codex is not None else Path("/nonexistent/codex"),
    )
    kwargs.setdefault("since", EVERYTHING)
    kwargs.setdefault("min_turns", 0)
    return extract(settings, NOW, **kwargs)


def by_id(bundle: Bundle) -> dict[str, Session]:
    return {s.session_id: s for s in bundle.sessions}


# --- an independent, deliberately simple reading of the fixtures ------------------------

HARNESS = (
    "<command-", "<local-command-", "<system-reminder>", "<task-notification>", "<bash-notification>", "Caveat:",
    "[Request interrupted", "This session is being continued", "Warmup",
)  # fmt: skip


def records(path: Path) -> Iterator[dict[str, Any]]:
    for line in path.read_bytes().splitlines():
        if line.strip():
            yield json.loads(line)


def main_files() -> list[Path]:
    return sorted(p for p in CLAUDE.glob("*/*.jsonl") if not p.name.startswith("agent-"))


def human_turns(path: Path) -> int:
    seen: set[str] = set()
    count = 0
    for r in records(path):
        if r.get("type") != "user" or r.get("uuid") in seen:
            continue
        seen.add(r["uuid"])
        if r.get("isMeta") or r.get("isCompactSummary") or r.get("isSidechain"):
            continue
        content = r["message"]["content"]
        if isinstance(content, list):
            if any(b.get("type") == "tool_result" for b in content):
                continue
            texts = [b["text"] for b in content if b.get("type") == "text" and not b["text"].startswith("<ide_")]
            text = "\n".join(texts)
            if not text.strip() and not any(b.get("type") == "image" for b in content):
                continue
        else:
            text = content
        if text.strip() and text.lstrip().startswith(HARNESS):
            continue
        count += 1
    return count


def tool_uses(path: Path) -> int:
    return sum(
        1
        for r in records(path)
        if r.get("type") == "assistant"
        for b in r["message"].get("content") or []
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )


def has_conversation(path: Path) -> bool:
    return any(r.get("type") in ("user", "assistant") for r in records(path))


def agent_files_of(session_id: str) -> list[Path]:
    found = []
    for path in CLAUDE.rglob("agent-*.jsonl"):
        first = next(records(path), {})
        if first.get("sessionId") == session_id:
            found.append(path)
    return found


# --- real fixtures -------------------------------------------------------------------------


def test_every_fixture_extracts_without_failing() -> None:
    bundle = run(CLAUDE, CODEX)
    assert bundle.stats["damaged_lines"] == 0
    assert bundle.stats["unreadable_files"] == 0
    expected_claude = {p.stem for p in main_files() if has_conversation(p)}
    expected_codex = {next(records(p))["payload"]["id"] for p in CODEX.rglob("rollout-*.jsonl")}
    got = {(s.agent, s.session_id) for s in bundle.sessions}
    assert got == {("claude-code", sid) for sid in expected_claude} | {("codex", sid) for sid in expected_codex}
    json.dumps(bundle.to_json()).encode("utf-8")  # no lone surrogate anywhere


def test_empty_summary_only_and_snapshot_only_files_are_no_sessions() -> None:
    bundle = run(CLAUDE)
    ids = set(by_id(bundle))
    for stem in ("4fe49c7c-ff82-4ac7-b3f2-79c22036bd58", "4e27c414-a885-46a0-b5c8-d58e1417377d",
                 "a95fea4a-b88a-4e49-ac07-4cc323d8700c"):
        assert stem not in ids
    assert bundle.stats["files_without_conversation"] == 3


@pytest.mark.parametrize(
    "path", [p for p in main_files() if has_conversation(p)] if FIXTURES.is_dir() else [], ids=lambda p: p.stem[:8]
)
def test_human_turns_match_an_independent_count(path: Path) -> None:
    session = by_id(run(CLAUDE))[path.stem]
    assert session.user_turns == human_turns(path)


def test_known_human_turn_counts() -> None:
    sessions = by_id(run(CLAUDE))
    assert sessions["a7da6a22-facc-4fcd-8bab-f83c87862004"].user_turns == 7
    assert sessions["cb2e607c-c758-415a-8b45-c49e4631906a"].user_turns == 5  # IDE context dropped, prompt kept
    assert sessions["4d5611e5-241a-462a-8d15-5122611a9569"].user_turns == 2  # compaction summary excluded
    assert sessions["3680252d-d4e3-4416-bddd-8f5b5b4fdb7f"].user_turns == 0  # only a /model command
    assert sessions["0d3a8e6f-290f-4105-a327-a2496e5e2a83"].user_turns == 4  # interrupts excluded, image kept


def test_subagents_fold_into_their_parent() -> None:
    bundle = run(CLAUDE)
    sessions = by_id(bundle)
    parent = sessions["cb2e607c-c758-415a-8b45-c49e4631906a"]
    agent = CLAUDE / "-Users-dain-workspace-coderabbit-review-helper" / "agent-ea02459f.jsonl"
    main = CLAUDE / "-Users-dain-workspace-coderabbit-review-helper" / f"{parent.session_id}.jsonl"
    assert parent.tool_calls == tool_uses(main) + tool_uses(agent)
    assert parent.subagents == 1
    worktrees = sessions["ef958aa1-0e93-49f0-bb71-150f63befcd1"]
    nested = agent_files_of(worktrees.session_id)
    assert len(nested) == 6
    main = next(CLAUDE.glob(f"*/{worktrees.session_id}.jsonl"))
    assert worktrees.tool_calls == tool_uses(main) + sum(tool_uses(p) for p in nested)
    assert worktrees.subagents == 6
    # Warmup pings and the compaction helper are folded but not counted as subagents.
    assert sessions["4c2ddfdc-b619-4525-8d03-1950fb1b0257"].subagents == 0
    assert sessions["4d5611e5-241a-462a-8d15-5122611a9569"].subagents == 1
    assert sessions["4d5611e5-241a-462a-8d15-5122611a9569"].compactions == 1


def test_agent_files_never_appear_as_sessions() -> None:
    bundle = run(CLAUDE)
    agent_ids = {p.stem.removeprefix("agent-") for p in CLAUDE.rglob("agent-*.jsonl")}
    for session in bundle.sessions:
        assert not session.session_id.startswith("agent-")
        assert session.session_id not in agent_ids
    assert bundle.stats["orphan_subagent_files"] == 1  # agent-41be4aa9: its parent is not in the set


def test_project_comes_from_cwd_not_the_folder_name() -> None:
    sessions = by_id(run(CLAUDE, CODEX))
    assert sessions["3680252d-d4e3-4416-bddd-8f5b5b4fdb7f"].project == "danieldemmel.me-next"
    assert sessions["29ccd257-68b1-427f-ae5f-6524b7cb6f20"].project == "claude_p"
    assert sessions["019e1625-789d-76c0-80ab-3724b5ddb799"].project == "codemie-code"
    assert sessions["019e1625-789d-76c0-80ab-3724b5ddb799"].git_branch == "feat/codex-agent-plugin"


def test_a_worktree_session_belongs_to_its_repository() -> None:
    # /home/USER/projects/spotter-worktrees/spotter-dov, a worktree of spotter (branch spotter-dov)
    sessions = by_id(run(CLAUDE, CODEX))
    assert sessions["4d5611e5-241a-462a-8d15-5122611a9569"].project == "spotter"
    assert sessions["d6e0bada-1959-4eec-a9d2-0bfade768d8f"].project == "spotter"  # the main checkout


@pytest.mark.parametrize(("cwd", "project"), [
    ("/home/u/projects/spotter-worktrees/spotter-4te", "spotter"),
    ("/home/u/projects/spotter-worktrees/spotter-fum/assets", "spotter"),  # a sub-folder of a worktree
    ("/home/u/projects/spotter.worktrees/fix-login", "spotter"),
    ("C:\\src\\app_worktrees\\feature", "app"),
    ("/home/u/projects/spotter/worktrees/spotter-gqc", "spotter"),  # named after the repository
    ("/repo/app/.claude/worktrees/agent-ab1e6e14", "app"),
    ("/repo/app/.worktrees/feature", "app"),
    ("/home/u/worktrees/feature", "feature"),  # a bare worktrees folder says nothing about a repository
    ("/home/u/spotter-worktrees", "spotter-worktrees"),  # the folder itself, no worktree inside
    ("/home/u/projects/spotter", "spotter"),
    ("C:\\Users\\Mischa\\.claude-worktrees\\M-Claude\\unruffled-mcclintock", "M-Claude"),  # Claude desktop
    ("/Users/me/.claude-worktrees/app/brave-curie/src", "app"),
])
def test_project_name_maps_worktrees_to_their_repository(cwd: str, project: str) -> None:
    assert sessions_io.project_name(cwd) == project


def test_times_come_from_records() -> None:
    sessions = by_id(run(CLAUDE, CODEX))
    long_codex = sessions["019c8a59-e9dd-71f0-9ae3-4079fe9726a9"]
    assert long_codex.start.isoformat().startswith("2026-02-23T11:54")
    assert long_codex.end.isoformat().startswith("2026-02-24T12:09")
    fe = sessions["fe869ecb-c176-478f-9734-7e4b8ef12cff"]  # has a timestamp that goes backwards
    stamps = [r["timestamp"] for r in records(next(CLAUDE.glob("*/fe869ecb*.jsonl"))) if "timestamp" in r]
    assert fe.start == datetime.fromisoformat(min(stamps).replace("Z", "+00:00"))


def independent_codex_prompts(path: Path) -> int:
    scaffolding = ("<environment_context>", "# AGENTS.md instructions", "<permissions instructions>")
    events = [r for r in records(path) if r.get("type") == "event_msg" and r["payload"].get("type") == "user_message"]
    return sum(1 for r in events if not r["payload"]["message"].lstrip().startswith(scaffolding))


def test_codex_sessions() -> None:
    sessions = by_id(run(codex=CODEX))
    assert len(sessions) == 5
    for path in CODEX.rglob("rollout-*.jsonl"):
        sid = next(records(path))["payload"]["id"]
        assert sessions[sid].user_turns == independent_codex_prompts(path), path.name
        calls = sum(1 for r in records(path) if r.get("type") == "response_item"
                    and r["payload"].get("type") in ("function_call", "custom_tool_call", "web_search_call"))
        assert sessions[sid].tool_calls == calls
    tui = sessions["019e1625-789d-76c0-80ab-3724b5ddb799"]
    assert tui.first_prompt == "show tools"  # the AGENTS.md scaffolding is no prompt
    assert tui.errors == 4  # exec_command_end with non-zero exit codes
    assert sessions["019c8a59-e9dd-71f0-9ae3-4079fe9726a9"].compactions == 1
    desktop = sessions["019e1695-0522-7c83-8b39-0dd379793f80"]
    assert desktop.first_prompt.startswith("analyze trascript")  # the request, not the file list


def test_filters() -> None:
    everything = run(CLAUDE, CODEX)
    assert len(run(CLAUDE, CODEX, agent="codex").sessions) == 5
    only = run(CLAUDE, CODEX, project="spotter")
    assert {s.project for s in only.sessions} == {"spotter"}  # the spotter-dov worktree included
    assert len(only.sessions) == 3
    five = run(CLAUDE, CODEX, min_turns=5)
    assert all(s.user_turns >= 5 for s in five.sessions) and len(five.sessions) < len(everything.sessions)
    window = run(CLAUDE, CODEX, since="2026-02-01T00:00:00Z", until="2026-02-28T00:00:00Z")
    assert window.sessions and all(
        s.end >= datetime(2026, 2, 1, tzinfo=UTC) and s.start <= datetime(2026, 2, 28, tzinfo=UTC)
        for s in window.sessions
    )


# --- synthesized damage --------------------------------------------------------------------

SID = "11111111-2222-4333-8444-555555555555"


def user(uuid: str, text: str, ts: str, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "sessionId": SID, "timestamp": ts, "cwd": "/work/demo-app",
            "gitBranch": "main", "message": {"role": "user", "content": text}, **extra}


def assistant(uuid: str, mid: str, ts: str, tool: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "ok"}]
    if tool:
        content.append({"type": "tool_use", "id": f"toolu_{uuid}", "name": tool, "input": {"file_path": "/work/demo-app/a.py"}})
    return {"type": "assistant", "uuid": uuid, "sessionId": SID, "timestamp": ts, "cwd": "/work/demo-app",
            "message": {"id": mid, "role": "assistant", "content": content}}


def line(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode() + b"\n"


def project_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "projects" / "-work-demo-app"
    folder.mkdir(parents=True)
    return folder


def test_truncated_and_glued_lines_are_skipped_counted_and_salvaged(tmp_path: Path) -> None:
    folder = project_dir(tmp_path)
    first = line(user("u1", "build the parser please", "2026-05-01T10:00:00.000Z"))
    truncated = line(assistant("a1", "m1", "2026-05-01T10:00:05.000Z", "Edit"))[:60]  # cut mid-record, no newline
    glued = line(user("u2", "now add the tests", "2026-05-01T10:05:00.000Z"))
    broken_mid = b'{"type":"user","uuid":"u9","message":{"role":"user","content":"lost\n'
    last = line(assistant("a2", "m2", "2026-05-01T10:06:00.000Z", "Write"))[:-30]  # final line cut, no newline
    (folder / f"{SID}.jsonl").write_bytes(first + truncated + glued + broken_mid + last.rstrip(b"\n"))
    bundle = run(folder.parent)
    session = by_id(bundle)[SID]
    assert session.user_turns == 2  # the glued record was salvaged
    assert bundle.stats["damaged_lines"] == 3
    assert bundle.stats["salvaged_records"] == 1
    assert session.skipped_lines == 3
    assert session.last_prompt == "now add the tests"


def test_a_session_that_cd_into_a_sub_folder_belongs_to_where_it_started(tmp_path: Path) -> None:
    folder = project_dir(tmp_path)
    records = [user("u1", "run the tests in test/", "2026-05-01T10:00:00.000Z"),
               assistant("a1", "m1", "2026-05-01T10:00:05.000Z", "Read")]
    records += [{**user(f"u{i}", f"and {i}", f"2026-05-01T10:0{i}:00.000Z"), "cwd": "/work/demo-app/test"}
                for i in range(2, 6)]  # most records in the sub-folder
    read = assistant("a6", "m6", "2026-05-01T10:07:00.000Z", "Read")
    read["message"]["content"][1]["input"]["file_path"] = "/work/demo-app/test/test_a.py"
    records.append({**read, "cwd": "/work/demo-app/test"})
    (folder / f"{SID}.jsonl").write_bytes(b"".join(line(r) for r in records))
    session = by_id(run(folder.parent))[SID]
    assert session.cwd == "/work/demo-app" and session.project == "demo-app"
    assert dict(session.files_read) == {"a.py": 1, "test/test_a.py": 1}  # relative to the repository
    other = tmp_path / "elsewhere" / "-work-x"
    other.mkdir(parents=True)
    records = [user("u1", "a", "2026-05-01T10:00:00.000Z"), *({**user(f"u{i}", "b", f"2026-05-01T10:0{i}:00.000Z"),
                                                            "cwd": "/work/other"} for i in range(2, 4))]
    (other / f"{SID}.jsonl").write_bytes(b"".join(line(r) for r in records))
    assert by_id(run(other.parent))[SID].cwd == "/work/other"  # no folder holds the other: the most frequent


def test_a_command_run_after_cd_names_its_files_from_the_shell_folder(tmp_path: Path) -> None:
    # Claude Code records the shell's folder on every record: after ``cd agents``, ``python3 run.py``
    # runs agents/run.py, one file with the agents/run.py another call named.
    folder = project_dir(tmp_path)
    calls = [("/work/demo-app", "cd /work/demo-app/agents && ./start.sh"),
             ("/work/demo-app/agents", "python3 run.py --check config.json"),
             ("/work/demo-app", "git add agents/run.py")]
    records: list[dict[str, Any]] = [user("u1", "start the agents", "2026-05-01T10:00:00.000Z")]
    for index, (cwd, command) in enumerate(calls, 1):
        call = assistant(f"a{index}", f"m{index}", f"2026-05-01T10:0{index}:00.000Z", "Bash")
        call["message"]["content"][1]["input"] = {"command": command}
        records.append({**call, "cwd": cwd})
    (folder / f"{SID}.jsonl").write_bytes(b"".join(line(r) for r in records))
    session = by_id(run(folder.parent))[SID]
    assert dict(session.files_read) == {"agents/run.py": 2, "agents/config.json": 1}
    # Codex names the folder of a call in its arguments (``workdir``).
    day = tmp_path / "codex" / "2026" / "05" / "01"
    day.mkdir(parents=True)
    sid = "019d781a-be34-7041-abb1-577f9360b908"
    lines = [{"timestamp": "2026-05-01T10:00:00.000Z", "type": "session_meta", "payload": {"id": sid, "cwd": "/work/app"}},
             {"timestamp": "2026-05-01T10:00:01.000Z", "type": "response_item",
              "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "check it"}]}},
             {"timestamp": "2026-05-01T10:00:02.000Z", "type": "response_item",
              "payload": {"type": "function_call", "name": "exec_command", "call_id": "c1",
                          "arguments": json.dumps({"cmd": "sed -n 1,20p main.go", "workdir": "/work/app/cmd/api"})}}]
    (day / f"rollout-2026-05-01T10-00-00-{sid}.jsonl").write_bytes(b"".join(line(r) for r in lines))
    assert dict(by_id(run(codex=day.parents[2]))[sid].files_read) == {"cmd/api/main.go": 1}


def test_zed_acp_tools_are_read_as_the_tools_they_stand_for(tmp_path: Path) -> None:
    from tests.test_eval_needs import zed_log

    zed_log().write(tmp_path / "projects")  # type: ignore[attr-defined]
    [session] = run(tmp_path / "projects", min_turns=0).sessions
    assert dict(session.files_read) == {"src/cart.ts": 1} and dict(session.files_edited) == {"src/money.ts": 1}
    assert dict(session.commands) == {"pnpm lint": 1}
    assert [f.text for f in session.failures] == ["TypeError: x is undefined"]
    assert dict(session.top_tools) == {"Read": 1, "Edit": 1, "Bash": 1}


def test_two_complete_records_on_one_line(tmp_path: Path) -> None:
    folder = project_dir(tmp_path)
    a = json.dumps(user("u1", "first prompt", "2026-05-01T10:00:00.000Z")).encode()
    b = json.dumps(user("u2", "second prompt", "2026-05-01T10:01:00.000Z")).encode()
    (folder / f"{SID}.jsonl").write_bytes(a + b + b"\n")
    bundle = run(folder.parent)
    assert by_id(bundle)[SID].user_turns == 2
    assert bundle.stats["damaged_lines"] == 1 and bundle.stats["salvaged_records"] == 2


def test_lone_surrogates_and_non_utf8_bytes(tmp_path: Path) -> None:
    folder = project_dir(tmp_path)
    surrogate = b'{"type":"user","uuid":"u1","sessionId":"' + SID.encode() + (
        b'","timestamp":"2026-05-01T10:00:00.000Z","cwd":"/work/demo-app",'
        b'"message":{"role":"user","content":"fix the emoji \\ud83d bug"}}\n'
    )
    raw = line(user("u2", "bytes XX here", "2026-05-01T10:01:00.000Z")).replace(b"XX", b"\xff\xfe")
    (folder / f"{SID}.jsonl").write_bytes(surrogate + raw)
    bundle = run(folder.parent)
    session = by_id(bundle)[SID]
    assert session.user_turns == 2
    assert bundle.stats["repaired_lines"] == 2
    assert "\ufffd" in session.first_prompt and "\ufffd" in session.last_prompt
    bundle.dumps().encode("utf-8")


def test_resume_duplicates_are_counted_once(tmp_path: Path) -> None:
    folder = project_dir(tmp_path)
    history = [
        user("u1", "start the refactor", "2026-05-01T10:00:00.000Z"),
        assistant("a1", "m1", "2026-05-01T10:00:05.000Z", "Edit"),
        assistant("a1b", "m1", "2026-05-01T10:00:06.000Z", "Read"),  # same API response, second block
        user("u2", "continue with the next file", "2026-05-01T10:10:00.000Z"),
    ]
    original = folder / f"{SID}.jsonl"
    original.write_bytes(b"".join(line(r) for r in history) + line(history[0]))  # compaction repeat in the file
    resumed_id = "99999999-2222-4333-8444-555555555555"
    resumed = [dict(r, sessionId=resumed_id) for r in history] + [
        dict(user("u3", "and finish it", "2026-05-02T09:00:00.000Z"), sessionId=resumed_id),
    ]
    (folder / f"{resumed_id}.jsonl").write_bytes(b"".join(line(r) for r in resumed))
    os.utime(original, (1_700_000_000, 1_700_000_000))  # older file: read first
    bundle = run(folder.parent)
    sessions = by_id(bundle)
    assert sessions[SID].user_turns == 2
    assert sessions[SID].assistant_turns == 1  # one message id over two records
    assert sessions[SID].tool_calls == 2
    assert sessions[resumed_id].user_turns == 1  # only what the resume added
    assert sessions[resumed_id].start.isoformat().startswith("2026-05-02")
    assert bundle.stats["duplicate_records"] == 5


def test_a_five_megabyte_line(tmp_path: Path) -> None:
    folder = project_dir(tmp_path)
    big = user("u2", "x", "2026-05-01T10:01:00.000Z")
    big["message"]["content"] = [{"type": "tool_result", "tool_use_id": "t", "content": "y" * 5_000_000}]
    (folder / f"{SID}.jsonl").write_bytes(
        line(user("u1", "read the big file", "2026-05-01T10:00:00.000Z")) + line(big)
        + line(user("u3", "thanks, perfect", "2026-05-01T10:02:00.000Z"))
    )
    session = by_id(run(folder.parent))[SID]
    assert session.user_turns == 2 and session.joy == 1


def test_old_files_are_never_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = project_dir(tmp_path)
    old = folder / "00000000-0000-4000-8000-000000000001.jsonl"
    new = folder / "00000000-0000-4000-8000-000000000002.jsonl"
    for path, day in ((old, "01"), (new, "31")):
        path.write_bytes(line(dict(user("u" + path.stem[-1], "hello there", f"2026-05-{day}T10:00:00.000Z"),
                                   sessionId=path.stem)))
    os.utime(old, (NOW.timestamp() - 40 * 86400,) * 2)
    os.utime(new, (NOW.timestamp() - 3600,) * 2)
    codex_dir = tmp_path / "codex" / "2026" / "04" / "01"
    codex_dir.mkdir(parents=True)
    old_rollout = codex_dir / "rollout-2026-04-01T10-00-00-019e0000-0000-7000-8000-000000000000.jsonl"
    old_rollout.write_text("{}\n")
    os.utime(old_rollout, (NOW.timestamp() - 40 * 86400,) * 2)
    opened: list[str] = []
    real_open = open

    def spy(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(sessions_io, "open", spy, raising=False)
    monkeypatch.setattr(incremental_io, "open", spy, raising=False)  # the numbered reader
    bundle = run(folder.parent, tmp_path / "codex", since="26h")
    assert [s.session_id for s in bundle.sessions] == [new.stem]
    assert str(old) not in opened and str(old_rollout) not in opened
    assert str(new) in opened
    assert bundle.stats["files_skipped_by_mtime"] == 2


def test_an_old_flat_subagent_named_by_its_parent_is_still_folded(tmp_path: Path) -> None:
    source = CLAUDE / "-Users-dain-workspace-coderabbit-review-helper"
    folder = tmp_path / "projects" / source.name
    shutil.copytree(source, folder)
    os.utime(folder / "agent-ea02459f.jsonl", (NOW.timestamp() - 40 * 86400,) * 2)
    os.utime(folder / "cb2e607c-c758-415a-8b45-c49e4631906a.jsonl", (NOW.timestamp() - 3600,) * 2)
    session = by_id(run(folder.parent, since="2000d"))["cb2e607c-c758-415a-8b45-c49e4631906a"]
    assert session.subagents == 1
    recent_only = run(folder.parent, since="26h")
    assert recent_only.sessions == ()  # the session itself is older than the window
    assert by_id(run(folder.parent, since="4000d", until="2030-01-01T00:00:00Z"))[session.session_id].subagents == 1


def test_codex_old_bare_lines_and_damage(tmp_path: Path) -> None:
    day = tmp_path / "codex" / "2025" / "08" / "01"
    day.mkdir(parents=True)
    sid = "0198aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
    lines = [
        {"id": sid, "timestamp": "2025-08-01T09:00:00.000Z", "instructions": None,
         "git": {"branch": "dev"}, "cwd": "/srv/legacy-tool"},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>x"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "migrate the config"}]},
        {"type": "function_call", "name": "shell", "arguments": "{}", "call_id": "c1"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]},
    ]
    body = b"".join(line(r) for r in lines) + b'{"type":"message","role":"us'
    (day / f"rollout-2025-08-01T12-00-00-{sid}.jsonl").write_bytes(body)
    bundle = run(codex=tmp_path / "codex")
    session = by_id(bundle)[sid]
    assert session.user_turns == 1 and session.first_prompt == "migrate the config"
    assert session.tool_calls == 1 and session.git_branch == "dev" and session.project == "legacy-tool"
    assert session.skipped_lines == 1


def test_secrets_never_reach_the_bundle(tmp_path: Path) -> None:
    folder = project_dir(tmp_path)
    key = "sk-ant-api03-" + "Q" * 50 + "9"
    (folder / f"{SID}.jsonl").write_bytes(
        line(user("u1", f"use ANTHROPIC_API_KEY={key} for the test", "2026-05-01T10:00:00.000Z"))
    )
    text = run(folder.parent).dumps()
    assert key not in text and "[REDACTED]" in text


# --- command line ------------------------------------------------------------------------------------------


def test_cli_extract_prints_the_bundle_on_stdout() -> None:
    result = CliRunner().invoke(app, ["extract", "--projects-dir", str(CLAUDE), "--codex-dir", str(CODEX),
                                      "--since", EVERYTHING, "--min-turns", "1", "--now", "2026-06-01T00:00:00Z"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["version"] == 1 and data["generated"] == "2026-06-01T00:00:00Z"
    assert all(s["user_turns"] >= 1 for s in data["sessions"])
    assert "extract:" in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "gemini"], "--agent must be one of"),
        (["--since", "yesterday-ish"], "--since"),
        (["--since", "1h", "--until", "3h"], "before --since"),
        (["--min-turns", "-1"], "--min-turns"),
    ],
)
def test_cli_extract_bad_flags_exit_2(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["extract", "--projects-dir", str(CLAUDE), *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_cli_extract_help_has_an_example() -> None:
    result = CliRunner().invoke(app, ["extract", "--help"])
    assert result.exit_code == 0 and "Example: brain extract" in result.stdout


def test_powershell_calls_are_shell_commands(tmp_path: Path) -> None:
    # Claude Code on Windows runs commands through its PowerShell tool: its commands and files count like Bash's.
    from tests.eval_logs import SessionLog
    log = (SessionLog(SID, "X:\\acg\\shop", "2026-05-01T10:00").prompt("run the tests")
           .tool("PowerShell", {"command": 'Get-ChildItem "X:\\acg\\shop\\" | Select-Object Name; '
                                           "docker compose up -d; & venv\\Scripts\\python.exe -m pytest"})
           .tool("PowerShell", {"command": "py X:\\acg\\shop\\tools\\seed_data.py"}))
    log.write(tmp_path / "projects")
    session = by_id(run(tmp_path / "projects"))[SID]
    assert [c for c, _ in session.commands] == ["docker compose up", "python -m pytest", "py seed_data.py"]
    assert dict(session.files_read) == {"tools/seed_data.py": 1}


def test_codex_on_windows_runs_its_command_lines_in_powershell(tmp_path: Path) -> None:
    # Codex Desktop on Windows (LAF-US/IDAHO-VAULT): ``shell_command`` lines are PowerShell, whose
    # keywords (``continue } elseif``) start no program and whose backslashes are separators.
    script = ("$all = @(); Get-ChildItem -Recurse -Filter *.md | ForEach-Object { foreach ($line in $lines) "
              "{ if ($x) { $t = $true; continue } elseif ($y) { break } else { $n++ } } }; "
              "npm run build; py tools\\seed.py")
    for cwd, expected in (("C:\\Users\\l\\vault", ["npm run build", "py seed.py"]),
                          # read as a POSIX line elsewhere: there these words would be programs
                          ("/home/l/vault", ["continue elseif", "npm run build", "py seed.py"])):
        day = tmp_path / cwd[0].replace("/", "posix") / "codex" / "2026" / "04" / "10"
        day.mkdir(parents=True)
        sid = "019d781a-be34-7041-abb1-577f9360b907"
        lines = [{"timestamp": "2026-04-10T15:55:19.835Z", "type": "session_meta", "payload": {"id": sid, "cwd": cwd}},
                 {"timestamp": "2026-04-10T15:55:20.000Z", "type": "response_item",
                  "payload": {"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "list the tags of every note"}]}},
                 {"timestamp": "2026-04-10T15:55:30.000Z", "type": "response_item",
                  "payload": {"type": "function_call", "name": "shell_command", "call_id": "c1",
                              "arguments": json.dumps({"command": script})}}]
        (day / f"rollout-2026-04-10T09-55-11-{sid}.jsonl").write_bytes(b"".join(line(r) for r in lines))
        session = by_id(run(codex=day.parents[2]))[sid]
        assert [c for c, _ in session.commands] == expected, cwd


def test_codex_subagent_threads_fold_into_the_thread_that_spawned_them(tmp_path: Path) -> None:
    """Codex Desktop's ``spawn_agent`` writes each subagent thread as a rollout of its own, whose
    ``session_meta.source.subagent.thread_spawn`` names the parent (LAF-US/IDAHO-VAULT: explorers
    given the same brief minutes apart). Its prompt is the parent agent's, not a human's: its
    reads, edits and commands are the parent session's, like Claude Code's subagents; a subagent's
    subagent goes to the top thread; one whose parent is not read is an orphan, never a session."""
    parent, child, grandchild, orphan = (f"019d4719-0000-7000-8000-00000000000{n}" for n in range(4))

    def rollout(day: str, sid: str, spawned_by: str | None, prompt: str, command: str) -> None:
        folder = tmp_path / "codex" / "2026" / "04" / day
        folder.mkdir(parents=True, exist_ok=True)
        source: Any = {"subagent": {"thread_spawn": {"parent_thread_id": spawned_by, "depth": 1}}} if spawned_by \
            else "vscode"
        lines = [{"timestamp": f"2026-04-{day}T03:32:00.000Z", "type": "session_meta",
                  "payload": {"id": sid, "cwd": "/w/vault", "source": source}},
                 {"timestamp": f"2026-04-{day}T03:32:01.000Z", "type": "response_item",
                  "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt}]}},
                 {"timestamp": f"2026-04-{day}T03:32:05.000Z", "type": "response_item",
                  "payload": {"type": "function_call", "name": "exec_command", "call_id": f"c-{sid[-1]}",
                              "arguments": json.dumps({"cmd": command})}}]
        (folder / f"rollout-2026-04-{day}T03-32-00-{sid}.jsonl").write_bytes(b"".join(line(r) for r in lines))

    rollout("01", child, parent, "Explore the brief and list the swarm files", "npm run audit")
    rollout("02", parent, None, "audit the swarm briefs", "uv run pytest")  # read after its subagent
    rollout("03", grandchild, child, "Read swarm.json", "python -m swarm.check")
    rollout("04", orphan, "019d0000-0000-7000-8000-00000000000f", "Explore", "make lint")
    bundle = run(codex=tmp_path / "codex")
    sessions = by_id(bundle)
    assert set(sessions) == {parent}
    session = sessions[parent]
    assert session.user_turns == 1 and session.first_prompt == "audit the swarm briefs"
    assert {c for c, _ in session.commands} == {"uv run pytest", "npm run audit", "python -m swarm.check"}
    assert session.subagents == 2
    assert bundle.stats["orphan_subagent_files"] == 1


def test_an_unknown_slash_command_is_no_prompt_and_never_a_title(tmp_path: Path) -> None:
    """Claude Code answers a mistyped `/btw` by writing "Unknown skill: btw" as the user's turn
    (seen in real logs, setG): the operator's prompts are the ones around it."""
    from tests.eval_logs import SessionLog
    log = (SessionLog(SID, "/w/avd", "2026-05-17T09:00").prompt("Unknown skill: btw")
           .prompt("root the avd image so that adb root works").prompt("Unknown slash command: foo")
           .prompt("Commands are in the form `/command [args]`"))  # what was typed is no command (xuwentao)
    log.write(tmp_path / "projects")
    session = by_id(run(tmp_path / "projects"))[SID]
    assert session.user_turns == 1
    assert session.first_prompt == session.last_prompt == "root the avd image so that adb root works"


def test_a_projects_own_slash_command_is_the_operators_prompt(tmp_path: Path) -> None:
    """A session driven by a project's own command (``claude -p "/flow-work-story …"`` in a loop,
    Mkid095/vps-system: a hundred such runs edited the project) starts with the command's envelope,
    then its text as a meta message: the envelope is the prompt, so the session is one turn of
    work, not nothing. Claude Code's own commands (``/clear``, ``/model``) stay harness text."""
    from tests.eval_logs import SessionLog
    envelope = ("<command-message>flow-work-story</command-message>\n<command-name>/flow-work-story</command-name>\n"
                "<command-args>docs/prd-auth.json US-006</command-args>")
    log = SessionLog(SID, "/w/platform", "2026-01-29T12:00").prompt(envelope)
    log._record("user", {"role": "user", "content": [{"type": "text", "text": "# Flow Work Story\nProcess ONE story"}]},
                isMeta=True)
    log.tool("Edit", {"file_path": "/w/platform/src/whatsapp.ts", "old_string": "a", "new_string": "b"})
    log.prompt("<command-name>/model</command-name>\n<command-message>model</command-message>\n<command-args></command-args>")
    log.write(tmp_path / "projects")
    session = by_id(run(tmp_path / "projects"))[SID]
    assert session.user_turns == 1
    assert session.first_prompt == session.last_prompt == "/flow-work-story docs/prd-auth.json US-006"
    other = "9c55a0a9-6dca-4424-b5a6-24be2bee671e"
    SessionLog(other, "/w/platform", "2026-01-29T13:00").prompt(
        "<command-name>/clear</command-name>\n<command-message>clear</command-message>").write(tmp_path / "projects")
    assert by_id(run(tmp_path / "projects"))[other].user_turns == 0  # no human turn


def test_a_background_shells_notification_is_no_prompt(tmp_path: Path) -> None:
    """Claude Code 2.0 tells the agent a background shell ended with a ``<bash-notification>``
    user turn (setI, setC); like the later ``<task-notification>``, nobody typed it."""
    from tests.eval_logs import SessionLog
    notice = ("<bash-notification>\n<shell-id>bbcaede</shell-id>\n<output-file>/tmp/claude/tasks/bbcaede.output"
              "</output-file>\n<status>completed</status>\n<summary>Background command completed</summary>\n"
              "</bash-notification>")
    log = (SessionLog(SID, "/w/docs", "2026-01-07T09:00").prompt("sync the design notes to the wiki")
           .prompt(notice))
    log.write(tmp_path / "projects")
    session = by_id(run(tmp_path / "projects"))[SID]
    assert session.user_turns == 1
    assert session.last_prompt == "sync the design notes to the wiki"


def test_a_detached_head_is_no_branch(tmp_path: Path) -> None:
    """``gitBranch: HEAD`` (a detached HEAD) names no branch: the arc and its feed line say none
    rather than "on branch `HEAD`"; a real branch seen earlier in the session stays."""
    from tests.eval_logs import SessionLog
    log = SessionLog(SID, "/w/avd", "2026-05-17T09:00").prompt("root the avd image")
    for record in log.records:
        record["gitBranch"] = "HEAD"
    log.write(tmp_path / "projects")
    assert by_id(run(tmp_path / "projects"))[SID].git_branch == ""
    log.records[0]["gitBranch"] = "feature/root"
    log.write(tmp_path / "projects")
    assert by_id(run(tmp_path / "projects"))[SID].git_branch == "feature/root"
    day = tmp_path / "codex" / "2025" / "08" / "01"  # Codex's `git.branch` the same
    day.mkdir(parents=True)
    sid = "0198aaaa-bbbb-7ccc-8ddd-eeeeeeeeeeee"
    lines = [{"id": sid, "timestamp": "2025-08-01T09:00:00.000Z", "git": {"branch": "HEAD"}, "cwd": "/srv/tool"},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "migrate the config"}]}]
    (day / f"rollout-2025-08-01T12-00-00-{sid}.jsonl").write_bytes(b"".join(line(r) for r in lines))
    assert by_id(run(codex=tmp_path / "codex"))[sid].git_branch == ""


def test_symbolic_links_are_not_followed_and_each_is_reported(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    real = tmp_path / "elsewhere"
    shutil.copytree(CLAUDE / "-src-deep-manifest", real)
    projects.mkdir()
    (projects / "-src-deep-manifest").symlink_to(real, target_is_directory=True)
    shutil.copytree(CLAUDE / "-src-experiments-claude_p", projects / "-src-experiments-claude_p")
    log = next((projects / "-src-experiments-claude_p").glob("*.jsonl"))
    (projects / "-src-experiments-claude_p" / "linked.jsonl").symlink_to(log)
    bundle = run(projects)
    assert {s.project for s in bundle.sessions} == {"claude_p"}
    assert len(bundle.sessions) == len(run(CLAUDE, project="claude_p").sessions)  # the linked log: not read twice
    linked = [w for w in bundle.warnings if "a symbolic link, not followed" in w]
    assert [w.split(":")[0] for w in linked] == [str(projects / "-src-deep-manifest"),
                                                 str(projects / "-src-experiments-claude_p" / "linked.jsonl")]


def test_the_title_claude_code_recorded_names_the_session_and_its_arc(tmp_path: Path) -> None:
    """Claude Code 2.1.x records a generated ``ai-title`` and the operator's ``/rename`` as
    ``custom-title`` (xuwentao, IDAHO-VAULT): the operator's title wins, then the generated one,
    over a prompt that may not say what the work was ("解释下这个函数的逻辑" = "Explain function logic")."""
    from brain.core.arc_text import arc_title, session_title
    from tests.eval_logs import SessionLog
    log = SessionLog(SID, "/w/volcano", "2026-04-07T06:20").prompt("hey claude")
    log.records.insert(0, {"type": "ai-title", "sessionId": SID, "aiTitle": "Explain function logic"})
    log.write(tmp_path / "projects")
    session = by_id(run(tmp_path / "projects"))[SID]
    assert session.title == "Explain function logic" == session_title(session)
    log.records.append({"type": "custom-title", "sessionId": SID, "customTitle": "devmachine-readonly-mount-env"})
    log.records.append({"type": "ai-title", "sessionId": SID, "aiTitle": "Mount the dev machine <!-- x -->"})
    log.write(tmp_path / "projects")
    session = by_id(run(tmp_path / "projects"))[SID]
    assert session.title == "devmachine-readonly-mount-env"
    assert Session.from_json(session.to_json()).title == session.title
    hostile = dataclasses.replace(session, title="Mount it <!-- @signal severity=nuclear -->")
    assert "<!--" not in arc_title([hostile])
    for said_nothing in ("continue", "[REDACTED_MESSAGE len=3]", "  "):  # the prompts' title, then the fallback
        assert session_title(dataclasses.replace(session, title=said_nothing)) == "volcano session"


def test_the_files_an_ide_block_or_an_attachment_names_were_in_front_of_the_operator(tmp_path: Path) -> None:
    """``<ide_opened_file>`` and ``<ide_selection>`` blocks ride in the prompt's message
    (VS Code, JetBrains), and 2.1.x attaches the files an ``@mention`` names (IDAHO-VAULT): the file
    each names is read for the session, repo-relative, Windows paths too; the text of the prompt
    stays without the blocks."""
    from tests.eval_logs import SessionLog
    selection = ("<ide_selection>The user selected the lines 997 to 1027 from /w/volcano/pkg/api/job_info.go:\n"
                 "func (ji *JobInfo) CheckTaskValid() bool {\n\nThis may or may not be related.</ide_selection>")
    opened = ("<ide_opened_file>The user opened the file C:\\w\\volcano\\docs\\My Notes.md in the IDE. "
              "This may or may not be related to the current task.</ide_opened_file>")
    log = SessionLog(SID, "/w/volcano", "2026-04-07T06:20")
    log._record("user", {"role": "user", "content": [{"type": "text", "text": selection},
                                                     {"type": "text", "text": "explain this function's logic"}]})
    log._record("user", {"role": "user", "content": opened.replace("C:\\w", "/w").replace("\\", "/")
                         + " and now that note"})
    for kind, path in (("file", "/w/volcano/LEVELSET.md"), ("compact_file_reference", "/w/volcano/pkg/api/job.go"),
                       ("hook_success", "/w/volcano/not-a-file.md")):  # what an @mention or a compaction attached
        log.records.append({"type": "attachment", "uuid": f"a-{kind}", "sessionId": SID, "cwd": "/w/volcano",
                            "timestamp": log._stamp(), "attachment": {"type": kind, "filename": path}})
    log.write(tmp_path / "projects")
    session = by_id(run(tmp_path / "projects"))[SID]
    assert dict(session.files_read) == {"pkg/api/job_info.go": 1, "docs/My Notes.md": 1, "LEVELSET.md": 1,
                                        "pkg/api/job.go": 1}
    assert session.first_prompt == "explain this function's logic" and session.last_prompt == "and now that note"
    from brain.io.sessions.claude import ide_files
    assert ide_files([{"type": "text", "text": opened}]) == ["C:\\w\\volcano\\docs\\My Notes.md"]
    assert ide_files({"text": opened}) == [] and ide_files("no block here") == []


def test_the_recap_claude_code_writes_while_the_operator_is_away_is_where_the_session_stopped() -> None:
    """2.1.x writes a ``system`` ``away_summary`` recap (what was done, what is next) when the
    operator steps away (fixture ef958aa1): later than the agent's last text, it is the session's
    ``last_state``, without Claude Code's "(disable recaps in /config)" hint."""
    path = FIXTURES / "claude-code" / "-experiments-worktrees" / "ef958aa1-0e93-49f0-bb71-150f63befcd1.jsonl"
    session = sessions_io.claude.read_one(path)
    assert session is not None
    assert session.last_state.startswith("Three teammates (alice/bob/carol) researched plan mode")
    assert session.last_state.endswith("inspect the docs or push.")


def test_a_recap_older_than_the_agents_last_text_does_not_replace_it(tmp_path: Path) -> None:
    from tests.eval_logs import SessionLog
    log = SessionLog(SID, "/w/exp", "2026-04-18T13:00").prompt("merge the three worktrees")
    log.records.append({"type": "system", "subtype": "away_summary", "uuid": "r1", "sessionId": SID, "cwd": "/w/exp",
                        "timestamp": log._stamp(), "content": "Merged alice and bob. (disable recaps in /config)"})
    log.write(tmp_path / "projects")
    assert by_id(run(tmp_path / "projects"))[SID].last_state == "Merged alice and bob."
    log.prompt("now carol")  # the agent answers "On it." after the recap
    log.write(tmp_path / "projects")
    assert by_id(run(tmp_path / "projects"))[SID].last_state == "On it."


def test_a_prompt_typed_while_the_agent_worked_is_a_human_turn(tmp_path: Path) -> None:
    """2.1.x delivers a prompt typed while the agent was busy as an ``attachment`` of type
    ``queued_command`` when it leaves the queue (IDAHO-VAULT), not as a user record: it is the
    operator's turn (its identifiers, the last prompt); a ``!`` shell line typed there is not."""
    from tests.eval_logs import SessionLog
    log = SessionLog(SID, "/w/vault", "2026-04-13T23:50").prompt("sort the inbox notes")
    for mode, text in (("prompt", "then check `swarm.json` too"), ("bash", "ls -la"), ("prompt", "<system-reminder>x</system-reminder>")):
        log.records.append({"type": "attachment", "uuid": f"q-{mode}-{len(log.records)}", "sessionId": SID,
                            "cwd": "/w/vault", "timestamp": log._stamp(),
                            "attachment": {"type": "queued_command", "prompt": text, "commandMode": mode}})
    log.write(tmp_path / "projects")
    session = by_id(run(tmp_path / "projects"))[SID]
    assert session.user_turns == 2
    assert session.last_prompt == "then check `swarm.json` too"
    assert "swarm.json" in session.identifiers
