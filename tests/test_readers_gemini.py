"""Gemini CLI reader over the real fixtures in ../shared/fixtures/sessions/gemini-cli and derived copies.

Expectations are computed here from the fixture JSON itself, not from the reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from brain.cli import app
from brain.io.sessions import gemini
from brain.pipeline.extract import Bundle, extract
from brain.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"
GEMINI = FIXTURES / "gemini-cli" / "tmp"
NOW = datetime(2026, 6, 1, tzinfo=UTC)

pytestmark = pytest.mark.skipif(not GEMINI.is_dir(), reason="shared session fixtures not present")


def run(gemini_dir: Path, **kwargs: Any) -> Bundle:
    settings = Settings(projects_dir=Path("/nonexistent/p"), codex_dir=Path("/nonexistent/c"), gemini_dir=gemini_dir,
                        opencode_dir=Path("/nonexistent/o"))
    kwargs.setdefault("since", "4000d")
    kwargs.setdefault("min_turns", 0)
    return extract(settings, NOW, agent="gemini-cli", **kwargs)


def chats() -> list[Path]:
    return sorted(GEMINI.glob("*/chats/session-*.json"))


def iso(value: str) -> str:
    return value[:19] + "Z"


def expected(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_bytes())
    messages = data["messages"]
    calls = [c for m in messages for c in m.get("toolCalls", [])]
    stamps = sorted(m["timestamp"] for m in messages)
    return {
        "session_id": data["sessionId"],
        "user_turns": sum(1 for m in messages if m["type"] == "user"),
        "assistant_turns": sum(1 for m in messages if m["type"] == "gemini"),
        "tool_calls": len(calls),
        "errors": sum(1 for c in calls if c.get("status") == "error"),
        "start": iso(stamps[0]),
        "end": iso(stamps[-1]),
        "first_prompt": next(m["content"] for m in messages if m["type"] == "user"),
    }


def test_every_fixture_chat_is_a_session_with_independently_counted_figures() -> None:
    bundle = run(GEMINI)
    found = {s["session_id"]: s for s in bundle.to_json()["sessions"]}
    assert len(found) == len(chats()) == 2
    for path in chats():
        want = expected(path)
        got = found[want["session_id"]]
        for key, value in want.items():
            assert got[key] == value, (path.name, key)
        assert got["agent"] == "gemini-cli"
    assert bundle.stats["damaged_lines"] == 0


def test_project_comes_from_recorded_paths_not_the_hash() -> None:
    sessions = {s.session_id: s for s in run(GEMINI).sessions}
    for path in chats():
        text = path.read_text()
        sid = json.loads(text)["sessionId"]
        # Independent reading: the folder of a listed directory, or the folder a relative write resolved to.
        listed = re.search(r'"dir_path": "(/[^"]+?)/?"', text)
        wrote = re.search(r'wrote to new file: (/[^"]+)/hello\.md', text)
        folder = listed.group(1) if listed else wrote.group(1) if wrote else None
        assert folder is not None
        assert sessions[sid].cwd == folder
        assert sessions[sid].project == folder.rsplit("/", 1)[-1]
        assert sessions[sid].project not in path.parts[-3]  # not the hash folder


def test_cli_agent_all_gives_gemini_sessions_the_bundle_keys_of_the_others() -> None:
    result = CliRunner().invoke(app, [
        "extract", "--agent", "all", "--projects-dir", str(FIXTURES / "claude-code"),
        "--codex-dir", str(FIXTURES / "codex" / "sessions"), "--gemini-dir", str(GEMINI),
        "--opencode-dir", "/nonexistent/opencode", "--since", "4000d", "--min-turns", "0",
        "--now", "2026-06-01T00:00:00Z",
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for session in data["sessions"]:
        by_agent.setdefault(session["agent"], []).append(session)
    assert {expected(p)["session_id"] for p in chats()} == {s["session_id"] for s in by_agent["gemini-cli"]}
    keys = {frozenset(s) for s in data["sessions"]}
    assert len(keys) == 1  # every agent's sessions carry the same fields
    assert "gemini-cli" in data["agents"] and "opencode" in data["agents"]


def test_unknown_agent_lists_every_registered_one() -> None:
    result = CliRunner().invoke(app, ["extract", "--agent", "aider", "--gemini-dir", str(GEMINI)])
    assert result.exit_code == 2
    for name in ("claude-code", "codex", "gemini-cli", "opencode", "all"):
        assert name in result.stderr


# --- the .jsonl chat log, derived from a real chat --------------------------------------------


def jsonl_copy(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    source = next(p for p in chats() if "37b7abef" in p.name)
    data = json.loads(source.read_bytes())
    folder = tmp_path / "tmp" / data["projectHash"] / "chats"
    folder.mkdir(parents=True)
    return folder / (source.stem + ".jsonl"), data


def line(value: Any) -> bytes:
    return json.dumps(value).encode() + b"\n"


def test_jsonl_chat_upserts_sets_and_rewinds(tmp_path: Path) -> None:
    path, data = jsonl_copy(tmp_path)
    messages = data["messages"]
    meta = {k: data[k] for k in ("sessionId", "projectHash", "startTime", "lastUpdated")}
    body = line(meta) + b"".join(line(m) for m in messages[:6])
    rewritten = dict(messages[5], content="rewritten answer")  # same id: replaces, not adds
    body += line(rewritten) + line({"$set": {"lastUpdated": messages[-1]["timestamp"]}})
    body += b"".join(line(m) for m in messages[6:])
    body += line({"$rewindTo": messages[-2]["id"]})  # drops the last two messages
    path.write_bytes(body)
    kept = messages[:-2]
    session = run(path.parents[2]).sessions[0]
    assert session.session_id == data["sessionId"]
    assert session.user_turns == sum(1 for m in kept if m["type"] == "user")
    assert session.assistant_turns == sum(1 for m in kept if m["type"] == "gemini")
    assert session.tool_calls == sum(len(m.get("toolCalls", [])) for m in kept)
    assert session.end.isoformat().startswith(kept[-1]["timestamp"][:19])


def test_the_chat_summary_is_the_sessions_title(tmp_path: Path) -> None:
    """Gemini CLI writes a one-line ``summary`` into the chat's metadata for its resume list
    (``session-formats.md`` §3): the session's recorded title, the latest ``$set`` winning."""
    path, data = jsonl_copy(tmp_path)
    meta = {k: data[k] for k in ("sessionId", "projectHash", "startTime", "lastUpdated")}
    path.write_bytes(line(meta) + b"".join(line(m) for m in data["messages"]))
    assert run(path.parents[2]).sessions[0].title == ""
    path.write_bytes(path.read_bytes() + line({"$set": {"summary": "Rename the notes"}})
                     + line({"$set": {"summary": "Rename and move the notes\n<!-- @signal -->"}}))
    assert run(path.parents[2]).sessions[0].title == "Rename and move the notes <!-- @signal -->"


def test_jsonl_checkpoint_replaces_the_whole_list(tmp_path: Path) -> None:
    path, data = jsonl_copy(tmp_path)
    messages = data["messages"]
    meta = {k: data[k] for k in ("sessionId", "projectHash", "startTime", "lastUpdated")}
    path.write_bytes(line(meta) + b"".join(line(m) for m in messages) + line({"$set": {"messages": messages[:2]}}))
    session = run(path.parents[2]).sessions[0]
    assert session.user_turns == 1 and session.assistant_turns == 1


def test_jsonl_damaged_lines_are_counted_not_fatal(tmp_path: Path) -> None:
    path, data = jsonl_copy(tmp_path)
    messages = data["messages"]
    meta = {k: data[k] for k in ("sessionId", "projectHash", "startTime", "lastUpdated")}
    users = [m for m in messages if m["type"] == "user"]
    truncated = line(messages[1])[:40]  # cut mid-record, glued to the next line's record
    glued = line(users[1])
    surrogate = line(dict(users[2], content="fix the emoji XX bug")).replace(b"XX", b"\\ud83d")
    non_utf8 = line(dict(users[3], content="bytes YY here")).replace(b"YY", b"\xff\xfe")
    nested = b"[" * 100_000 + b"]" * 100_000 + b"\n"
    path.write_bytes(line(meta) + line(users[0]) + truncated + glued + surrogate + non_utf8 + nested
                     + line(users[4]) + line(messages[-1])[:-25])
    bundle = run(path.parents[2])
    session = bundle.sessions[0]
    assert session.user_turns == 5  # the glued record was salvaged; the damaged ones are skipped
    assert bundle.stats["damaged_lines"] == 3  # truncated+glued, nested, final cut line
    assert bundle.stats["salvaged_records"] == 1
    assert bundle.stats["repaired_lines"] == 2
    assert session.skipped_lines == 3
    bundle.dumps().encode("utf-8")


def test_truncated_legacy_chat_keeps_the_messages_before_the_damage(tmp_path: Path) -> None:
    source = next(p for p in chats() if "5b959dae" in p.name)
    raw = source.read_bytes()
    folder = tmp_path / "tmp" / source.parts[-3] / "chats"
    folder.mkdir(parents=True)
    cut = raw.index(b'"id": "44b913a6') if b'"id": "44b913a6' in raw else len(raw) // 2
    (folder / source.name).write_bytes(raw[:cut])
    bundle = run(tmp_path / "tmp")
    session = bundle.sessions[0]
    complete = [m for m in json.loads(raw)["messages"] if json.dumps(m["id"]).encode() in raw[:cut]]
    assert session.user_turns == sum(1 for m in complete if m["type"] == "user") == 2
    assert bundle.stats["damaged_lines"] == 1 and bundle.stats["salvaged_records"] == len(complete)


def test_an_oversized_legacy_chat_is_reported_and_the_others_still_come_out(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "tmp"
    shutil.copytree(GEMINI, root)
    big = next(p for p in root.glob("*/chats/*.json") if p.stat().st_size > 80_000)
    monkeypatch.setattr(gemini, "MAX_JSON_BYTES", 70_000)
    bundle = run(root)
    assert bundle.stats["oversized_files"] == 1
    assert any("larger than 70000 bytes" in w and str(big) in w for w in bundle.warnings)
    sessions = {s.session_id: s for s in bundle.sessions}
    assert len(sessions) == 2
    other = next(p for p in chats() if p.name != big.name)
    assert sessions[expected(other)["session_id"]].tool_calls == expected(other)["tool_calls"]
    unread = json.loads(big.read_bytes())["sessionId"]
    assert sessions[unread].assistant_turns == 0  # only what logs.json says about it
    assert sessions[unread].user_turns == len(json.loads((big.parents[1] / "logs.json").read_text()))


def test_secrets_in_prompts_and_tool_arguments_never_reach_the_bundle(tmp_path: Path) -> None:
    path, data = jsonl_copy(tmp_path)
    key = "AIza" + "Q" * 35
    token = "ghp_" + "a1B2" * 9
    messages = [dict(m) for m in data["messages"]]
    messages[0]["content"] = f"use GEMINI_API_KEY={key} please"
    call = next(m for m in messages if m.get("toolCalls"))
    call["toolCalls"] = [dict(call["toolCalls"][0], name="write_file",
                              args={"file_path": f"/srv/app/{token}.txt", "content": token})]
    path.write_bytes(b"".join(line(m) for m in messages))
    text = run(path.parents[2]).dumps()
    assert key not in text and token not in text and "[REDACTED]" in text


def test_hash_named_project_found_among_the_path_ancestors(tmp_path: Path) -> None:
    """projectHash = SHA-256 of the project path: the matching ancestor wins over the deepest common folder."""
    project = "/home/dev/shop"
    folder = tmp_path / "tmp" / hashlib.sha256(project.encode()).hexdigest() / "chats"
    folder.mkdir(parents=True)
    stamp = "2026-05-01T10:00:0{}.000Z"
    messages = [
        {"id": "u1", "timestamp": stamp.format(0), "type": "user", "content": "fix checkout"},
        {"id": "g1", "timestamp": stamp.format(1), "type": "gemini", "content": "", "toolCalls": [
            {"id": "t1", "name": "replace", "args": {"file_path": f"{project}/src/cart.py"}, "status": "success"},
            {"id": "t2", "name": "read_file", "args": {"file_path": f"{project}/src/pay.py"}, "status": "error"},
        ]},
        {"id": "e1", "timestamp": stamp.format(2), "type": "error", "content": "quota exceeded"},
    ]
    (folder / "session-2026-05-01T10-00-abcdef12.json").write_text(json.dumps(
        {"sessionId": "abcdef12-0000-4000-8000-000000000000", "projectHash": folder.parent.name,
         "startTime": stamp.format(0), "lastUpdated": stamp.format(2), "messages": messages}))
    session = run(tmp_path / "tmp").sessions[0]
    assert session.cwd == project and session.project == "shop"
    assert session.files_touched == ("src/cart.py",)
    assert session.errors == 2  # one failed tool call, one error message


def test_prompt_log_only_sessions_and_subagent_chats(tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    shutil.copytree(GEMINI, root)
    project = next(p for p in root.iterdir() if (p / "logs.json").exists())
    log = json.loads((project / "logs.json").read_text())
    log.append({"sessionId": "0ld5e55-1", "messageId": 0, "type": "user", "message": "an older session",
                "timestamp": "2025-11-30T09:00:00.000Z"})
    (project / "logs.json").write_text(json.dumps(log))
    parent = json.loads(next((project / "chats").glob("*.json")).read_text())["sessionId"]
    sub = project / "chats" / parent
    sub.mkdir()
    (sub / "agent-1.jsonl").write_bytes(
        line({"sessionId": "agent-1", "kind": "subagent"})
        + line({"id": "s1", "type": "gemini", "timestamp": "2025-12-01T21:46:00.000Z",
                "toolCalls": [{"name": "grep", "args": {}, "status": "success"}]}))
    sessions = {s.session_id: s for s in run(root).sessions}
    assert sessions["0ld5e55-1"].user_turns == 1 and sessions["0ld5e55-1"].project == sessions[parent].project
    assert sessions[parent].subagents == 1
    assert sessions[parent].tool_calls == expected(next(p for p in chats() if parent[:8] in p.name))["tool_calls"] + 1


def test_chats_older_than_the_window_are_never_opened(tmp_path: Path) -> None:
    root = tmp_path / "tmp"
    shutil.copytree(GEMINI, root)
    old = NOW.timestamp() - 40 * 86400
    for path in root.rglob("*.json"):
        os.utime(path, (old, old))
    bundle = run(root, since="26h")
    assert bundle.sessions == ()
    assert bundle.stats["files_skipped_by_mtime"] == 3 and bundle.stats["bytes_read"] == 0
    assert bundle.stats["files_read"] == 0


def test_until_cuts_a_chat_at_that_instant() -> None:
    path = next(p for p in chats() if "37b7abef" in p.name)
    messages = json.loads(path.read_bytes())["messages"]
    cut = "2026-01-16T12:00:00Z"
    kept = [m for m in messages if m["timestamp"] <= cut]
    session = {s.session_id: s for s in run(GEMINI, until=cut).sessions}["37b7abef-713d-4522-85f0-8ff15a4e6d17"]
    assert session.user_turns == sum(1 for m in kept if m["type"] == "user") == 2
    assert session.tool_calls == sum(len(m.get("toolCalls", [])) for m in kept)
    assert session.end <= datetime(2026, 1, 16, 12, tzinfo=UTC)


def test_work_items_match_an_independent_reading_of_the_tool_calls() -> None:
    sessions = {s.session_id: s for s in run(GEMINI).sessions}
    for path in chats():
        data = json.loads(path.read_bytes())
        session = sessions[data["sessionId"]]
        calls = [c for m in data["messages"] for c in m.get("toolCalls", [])]
        root = session.cwd + "/"

        def rel(value: str, root: str = root) -> str:
            return value[len(root):] if value.startswith(root) else value

        edited: dict[str, int] = {}
        read: dict[str, int] = {}
        for call in calls:
            target = call["args"].get("file_path")
            if call["name"] in ("write_file", "replace"):
                edited[rel(target)] = edited.get(rel(target), 0) + 1
            elif call["name"] == "read_file":
                read[rel(target)] = read.get(rel(target), 0) + 1
        assert dict(session.files_edited) == edited
        assert dict(session.files_read) == read
        todos = [c["args"]["todos"] for c in calls if c["name"] == "write_todos"]
        assert [(t.status, t.text) for t in session.todos] == (
            [(t["status"], t["description"]) for t in todos[-1]] if todos else [])
        assert list(session.prompts) == [m["content"] for m in data["messages"] if m["type"] == "user"][:6]
        answers = [m["content"] for m in data["messages"] if m["type"] == "gemini" and m["content"].strip()]
        assert session.last_state[:60] == answers[-1][:60]


def test_with_a_cursor_an_unchanged_chat_is_not_read_again_and_a_grown_one_is(tmp_path: Path) -> None:
    from brain.io.sessions.incremental import commit

    root = tmp_path / "tmp"
    shutil.copytree(GEMINI, root)
    cursor = tmp_path / "cursor.json"
    settings = Settings(projects_dir=Path("/nonexistent/p"), codex_dir=Path("/nonexistent/c"), gemini_dir=root,
                        opencode_dir=Path("/nonexistent/o"))
    first = extract(settings, NOW, agent="gemini-cli", since="4000d", min_turns=0, cursor=cursor)
    assert len(first.sessions) == 2
    assert commit(cursor, first.to_json()["cursor"]["token"])
    second = extract(settings, NOW, agent="gemini-cli", since="4000d", min_turns=0, cursor=cursor)
    assert second.sessions == () and second.stats["bytes_read"] == 0  # nor a prompt-log-only session
    assert commit(cursor, second.to_json()["cursor"]["token"])
    grown = next(root.glob("*/chats/session-*37b7abef.json"))
    data = json.loads(grown.read_text())
    data["messages"].append({"id": "new-1", "timestamp": "2026-01-17T09:00:00.000Z", "type": "user",
                             "content": "one more thing"})
    grown.write_text(json.dumps(data))
    third = extract(settings, NOW, agent="gemini-cli", since="4000d", min_turns=0, cursor=cursor)
    assert [s.session_id for s in third.sessions] == [data["sessionId"]]
    assert third.sessions[0].user_turns == 6  # a grown file is read whole: figures stay absolute


# --- one chat, as the session-end hook reads it -----------------------------------------------


def with_subagent(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the fixtures where the 37b7abef chat has one subagent chat: (chat, subagent's chat)."""
    root = tmp_path / "tmp"
    shutil.copytree(GEMINI, root)
    chat = next(root.glob("*/chats/session-*37b7abef.json"))
    sub = chat.parent / json.loads(chat.read_text())["sessionId"]
    sub.mkdir()
    (sub / "agent-1.jsonl").write_bytes(
        line({"sessionId": "agent-1", "kind": "subagent"})
        + line({"id": "s1", "type": "gemini", "timestamp": "2026-01-16T11:03:00.000Z",
                "toolCalls": [{"name": "grep", "args": {}, "status": "success"}]}))
    return chat, sub / "agent-1.jsonl"


def test_read_one_gives_the_session_read_gives_subagents_folded_in(tmp_path: Path) -> None:
    chat, sub = with_subagent(tmp_path)
    from_plan = {s.session_id: s for s in run(tmp_path / "tmp").sessions}
    for path in chat.parent.parent.parent.glob("*/chats/session-*.json"):
        assert gemini.read_one(path) == from_plan[expected(path)["session_id"]]
    one = gemini.read_one(chat)
    assert one is not None and one.subagents == 1 and one.tool_calls == expected(chat)["tool_calls"] + 1
    assert gemini.read_one(sub) is None  # a subagent's chat is its parent's work


def test_read_one_leaves_out_what_came_after_until() -> None:
    path = next(p for p in chats() if "37b7abef" in p.name)
    cut = "2026-01-16T12:00:00Z"
    session = gemini.read_one(path, until=cut)
    assert session is not None
    assert session == {s.session_id: s for s in run(GEMINI, until=cut).sessions}[session.session_id]


def test_read_one_project_root_then_the_hook_cwd_then_the_recorded_paths(tmp_path: Path) -> None:
    chat, _ = with_subagent(tmp_path)
    recorded = gemini.read_one(chat)
    assert recorded is not None and recorded.cwd == "/Users/Nikita_Levyankov/repos/EPMCDME/codemie-ai/codemie-code"
    told = gemini.read_one(chat, cwd="/srv/codemie")
    assert told is not None and (told.cwd, told.project) == ("/srv/codemie", "codemie")
    (chat.parents[1] / ".project_root").write_text("/home/me/codemie-code\n")
    rooted = gemini.read_one(chat, cwd="/srv/codemie")
    assert rooted is not None and rooted.cwd == "/home/me/codemie-code"


def test_read_one_opens_only_a_regular_chat_file(tmp_path: Path) -> None:
    chats_folder = tmp_path / "tmp" / "project" / "chats"
    chats_folder.mkdir(parents=True)
    fifo = chats_folder / "session-2026-01-16T11-01-fifo.jsonl"
    os.mkfifo(fifo)
    link = chats_folder / "session-2026-01-16T11-01-link.json"
    link.symlink_to(next(p for p in chats() if "37b7abef" in p.name))
    stray = tmp_path / "session-2026-01-16T11-01-37b7abef.json"  # a chat file, but not in a chats folder
    shutil.copy(link, stray)
    for path in (fifo, link, stray, chats_folder / "session-missing.json", chats_folder):
        assert gemini.read_one(path) is None
