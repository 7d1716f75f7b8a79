"""OpenCode reader, built from the published format (no licensed real capture exists to copy).

Sources of the shapes used here:
- the SQLite schema of ``opencode.db``: anomalyco/opencode
  ``packages/opencode/src/session/session.sql.ts`` @ 063e8306d9895af9bdd175306cfa4fa3291fd83a
  (tables ``session``, ``message``, ``part``; ``data`` holds the JSON without its ids);
- the JSON tree ``storage/{session/<projectID>/<id>.json, message/<sessionID>/<id>.json,
  part/<messageID>/<id>.json}``: lamnguyenx/opencode2
  ``docs/refs/how_opencode_organize_sessions_and_messages.md`` and
  ``reference/session-formats.md`` §4;
- the message ``info`` and ``parts`` bodies (``step-start``, ``reasoning``, ``text``,
  ``step-finish``, ``path.cwd``, ``time.created``/``completed`` in ms) follow a real OpenCode
  server response captured in Krenuds/toji_electron ``CONVO.md`` @ 1356b82d6d9 (that
  repository has no licence, so it is cited, not copied).
"""

from __future__ import annotations

import json
import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from brain.cli import app
from brain.pipeline.extract import Bundle, extract
from brain.settings import Settings

NOW = datetime(2026, 6, 1, tzinfo=UTC)
T0 = 1_777_000_000_000  # 2026-04-24, epoch ms as OpenCode stores it
SID = "ses_6aade4081ffe216ygZUgcUQdR1"
CHILD = "ses_6aade017cffer4kT2udw0fg6f5"
PROJECT = "/home/dev/tojiTest"


def run(opencode_dir: Path, **kwargs: Any) -> Bundle:
    settings = Settings(projects_dir=Path("/nonexistent/p"), codex_dir=Path("/nonexistent/c"),
                        gemini_dir=Path("/nonexistent/g"), opencode_dir=opencode_dir)
    kwargs.setdefault("since", "4000d")
    kwargs.setdefault("min_turns", 0)
    return extract(settings, NOW, agent="opencode", **kwargs)


def conversation(sid: str = SID, parent: str | None = None) -> tuple[dict[str, Any], list[tuple[dict[str, Any], list[dict[str, Any]]]]]:
    """(session info, [(message info, parts)]) of one session: 2 prompts, 2 answers, 4 tool calls."""
    info: dict[str, Any] = {"id": sid, "slug": "brave-otter", "version": "1.1.36", "projectID": "global",
                            "directory": PROJECT, "title": "Clown agents", "time": {"created": T0, "updated": T0 + 90_000}}
    if parent:
        info["parentID"] = parent

    def user(mid: str, at: int, text: str, **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        message = {"id": mid, "sessionID": sid, "role": "user", "time": {"created": at},
                   "agent": "build", "model": {"providerID": "opencode", "modelID": "grok-code"}}
        parts = [{"id": f"prt_{mid}_1", "sessionID": sid, "messageID": mid, "type": "text", "text": text, **extra}]
        return message, parts

    def assistant(mid: str, at: int, tools: list[dict[str, Any]], **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        message = {"id": mid, "sessionID": sid, "role": "assistant", "mode": "build", "modelID": "grok-code",
                   "providerID": "opencode", "path": {"cwd": PROJECT, "root": "/"}, "cost": 0,
                   "tokens": {"input": 9640, "output": 12, "reasoning": 266, "cache": {"write": 0, "read": 9600}},
                   "time": {"created": at, "completed": at + 2252}, **extra}
        parts: list[dict[str, Any]] = [{"id": f"prt_{mid}_0", "sessionID": sid, "messageID": mid, "type": "step-start"}]
        for index, tool in enumerate(tools):
            parts.append({"id": f"prt_{mid}_t{index}", "sessionID": sid, "messageID": mid, "type": "tool",
                          "callID": f"call_{mid}_{index}", **tool})
        parts.append({"id": f"prt_{mid}_9", "sessionID": sid, "messageID": mid, "type": "step-finish",
                      "tokens": {"input": 1, "output": 1, "reasoning": 0, "cache": {"write": 0, "read": 0}}, "cost": 0})
        return message, parts

    done = {"status": "completed", "output": "ok", "title": "", "metadata": {}, "time": {"start": T0, "end": T0 + 1}}
    messages = [
        user(f"msg_{sid[-4:]}_u1", T0, "write an AGENTS.md file in this folder that says that you're a clown"),
        assistant(f"msg_{sid[-4:]}_a1", T0 + 1000, [
            {"tool": "write", "state": {**done, "input": {"filePath": f"{PROJECT}/AGENTS.md", "content": "clown"}}},
            {"tool": "bash", "state": {"status": "error", "input": {"command": "ls /nope"}, "error": "exit 2",
                                       "time": {"start": T0, "end": T0 + 1}}},
        ]),
        user(f"msg_{sid[-4:]}_u2", T0 + 60_000, "thanks, perfect"),
        assistant(f"msg_{sid[-4:]}_a2", T0 + 61_000, [
            {"tool": "edit", "state": {**done, "input": {"filePath": f"{PROJECT}/src/app.ts", "oldString": "a",
                                                         "newString": "b"}}},
            {"tool": "read", "state": {**done, "input": {"filePath": f"{PROJECT}/README.md"}}},
        ]),
    ]
    messages[3][1].append({"id": f"prt_patch_{sid}", "sessionID": sid, "messageID": messages[3][0]["id"], "type": "patch",
                           "hash": "abc", "files": [f"{PROJECT}/src/app.ts", f"{PROJECT}/src/util.ts"]})
    messages[3][1].insert(-1, {"id": f"prt_txt_{sid}", "sessionID": sid, "messageID": messages[3][0]["id"],
                               "type": "text", "text": "Done: the clown file is written."})
    messages[2][1].append({"id": f"prt_syn_{sid}", "sessionID": sid, "messageID": messages[2][0]["id"], "type": "text",
                           "text": "<system-reminder>injected</system-reminder>", "synthetic": True})
    return info, messages


def write_storage(root: Path, info: dict[str, Any], messages: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> Path:
    storage = root / "storage"
    session = storage / "session" / info["projectID"] / f"{info['id']}.json"
    session.parent.mkdir(parents=True, exist_ok=True)
    session.write_text(json.dumps(info))
    for message, parts in messages:
        path = storage / "message" / info["id"] / f"{message['id']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(message))
        for part in parts:
            target = storage / "part" / message["id"] / f"{part['id']}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(part))
    return session


SCHEMA = """
CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT, time_created INTEGER, time_updated INTEGER);
CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, workspace_id TEXT, parent_id TEXT,
  slug TEXT NOT NULL, directory TEXT NOT NULL, path TEXT, title TEXT NOT NULL, version TEXT NOT NULL,
  share_url TEXT, cost REAL NOT NULL DEFAULT 0, time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL,
  time_compacting INTEGER, time_archived INTEGER);
CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER NOT NULL,
  time_updated INTEGER NOT NULL, data TEXT NOT NULL);
CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,
  time_created INTEGER NOT NULL, time_updated INTEGER NOT NULL, data TEXT NOT NULL);
"""


def write_database(root: Path, sessions: list[tuple[dict[str, Any], list[tuple[dict[str, Any], list[dict[str, Any]]]]]],
                   raw_parts: list[tuple[str, str, str, str | bytes]] = ()) -> Path:  # type: ignore[assignment]
    root.mkdir(parents=True, exist_ok=True)
    path = root / "opencode.db"
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        for info, messages in sessions:
            db.execute("INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created,"
                       " time_updated) VALUES (?,?,?,?,?,?,?,?,?)",
                       (info["id"], info["projectID"], info.get("parentID"), info["slug"], info["directory"],
                        info["title"], info["version"], info["time"]["created"], info["time"]["updated"]))
            for message, parts in messages:
                data = {k: v for k, v in message.items() if k not in ("id", "sessionID")}
                db.execute("INSERT INTO message VALUES (?,?,?,?,?)", (message["id"], info["id"],
                           message["time"]["created"], message["time"]["created"], json.dumps(data)))
                for part in parts:
                    body = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
                    db.execute("INSERT INTO part VALUES (?,?,?,?,?,?)", (part["id"], message["id"], info["id"],
                               T0, T0, json.dumps(body)))
        for pid, mid, sid, data in raw_parts:
            db.execute("INSERT INTO part VALUES (?,?,?,?,?,?)", (pid, mid, sid, T0, T0, data))
    return path


def check_main(bundle: Bundle) -> None:
    session = {s.session_id: s for s in bundle.sessions}[SID]
    assert session.agent == "opencode"
    assert session.project == "tojiTest" and session.cwd == PROJECT
    assert session.user_turns == 2 and session.joy == 1
    assert session.assistant_turns == 2
    assert session.tool_calls == 4
    assert dict(session.top_tools) == {"bash": 1, "edit": 1, "read": 1, "write": 1}
    assert session.errors == 1
    assert session.files_touched == ("AGENTS.md", "src/app.ts", "src/util.ts")
    assert session.first_prompt.startswith("write an AGENTS.md") and session.last_prompt == "thanks, perfect"
    assert session.title == "Clown agents"  # the title OpenCode generated
    assert session.start == datetime.fromtimestamp(T0 / 1000, UTC)
    assert session.end == datetime.fromtimestamp((T0 + 61_000 + 2252) / 1000, UTC).replace(microsecond=252000)


def test_json_storage_tree(tmp_path: Path) -> None:
    write_storage(tmp_path, *conversation())
    check_main(run(tmp_path))
    check_main(run(tmp_path / "storage"))  # the storage folder itself is accepted too


def test_sqlite_database(tmp_path: Path) -> None:
    write_database(tmp_path, [conversation()])
    bundle = run(tmp_path)
    check_main(bundle)
    assert len(bundle.sessions) == 1


def test_database_first_then_json_sessions_it_does_not_hold(tmp_path: Path) -> None:
    write_database(tmp_path, [conversation()])
    write_storage(tmp_path, *conversation())  # migrated: the same session in both
    write_storage(tmp_path, *conversation("ses_orphanedJSONonly0000001"))  # left behind by the migration
    bundle = run(tmp_path)
    assert sorted(s.session_id for s in bundle.sessions) == sorted([SID, "ses_orphanedJSONonly0000001"])


def test_child_sessions_fold_into_their_parent(tmp_path: Path) -> None:
    write_database(tmp_path, [conversation(), conversation(CHILD, parent=SID)])
    bundle = run(tmp_path)
    (session,) = bundle.sessions
    assert session.session_id == SID and session.subagents == 1 and session.tool_calls == 8
    assert bundle.stats["subagent_files"] == 1


def test_old_sessions_are_never_read(tmp_path: Path) -> None:
    session_file = write_storage(tmp_path, *conversation())
    os.utime(session_file, (NOW.timestamp() - 40 * 86400,) * 2)
    write_database(tmp_path / "db", [conversation()])
    for root in (tmp_path, tmp_path / "db"):
        bundle = run(root, since="26h")
        assert bundle.sessions == () and bundle.stats["files_skipped_by_mtime"] == 1
        assert bundle.stats["bytes_read"] == 0


def test_damaged_files_and_rows_are_counted_not_fatal(tmp_path: Path) -> None:
    info, messages = conversation()
    write_storage(tmp_path, info, messages)
    part_dir = tmp_path / "storage" / "part" / messages[0][0]["id"]
    (part_dir / "prt_trunc.json").write_bytes(b'{"type":"text","text":"cut in the mid')
    (part_dir / "prt_glued.json").write_bytes(b'{"type":"tool"}{"type":"tool"}')
    (part_dir / "prt_nested.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    surrogate = part_dir / f"prt_{messages[0][0]['id']}_1.json"
    surrogate.write_bytes(surrogate.read_bytes().replace(b"clown", b"clown \\ud83d"))
    bad = tmp_path / "storage" / "part" / messages[2][0]["id"] / f"prt_{messages[2][0]['id']}_1.json"
    bad.write_bytes(bad.read_bytes().replace(b"perfect", b"perf\xff\xfeect"))
    bundle = run(tmp_path)
    session = bundle.sessions[0]
    assert bundle.stats["damaged_lines"] == 3 and session.skipped_lines == 3
    assert bundle.stats["repaired_lines"] == 1
    assert session.user_turns == 2 and "\ufffd" in session.first_prompt and "\ufffd" in session.last_prompt
    bundle.dumps().encode("utf-8")


def test_damaged_database_rows_are_counted(tmp_path: Path) -> None:
    info, messages = conversation()
    mid = messages[1][0]["id"]
    write_database(tmp_path, [(info, messages)], raw_parts=[
        ("prt_bad1", mid, SID, '{"type":"tool","tool":"bash"'),
        ("prt_bad2", mid, SID, "[" * 100_000 + "]" * 100_000),
        ("prt_bad3", mid, SID, b"\xff\xfe not json"),
    ])
    bundle = run(tmp_path)
    assert bundle.sessions[0].tool_calls == 4 and bundle.stats["damaged_lines"] == 3


def test_secrets_never_reach_the_bundle(tmp_path: Path) -> None:
    info, messages = conversation()
    key = "sk-ant-api03-" + "Q" * 85
    messages[0][1][0]["text"] = f"export ANTHROPIC_API_KEY={key} then run it"
    messages[1][1][1]["state"]["input"]["filePath"] = f"{PROJECT}/ghp_{'a1B2' * 9}.md"
    write_storage(tmp_path, info, messages)
    text = run(tmp_path).dumps()
    assert key not in text and "ghp_a1B2" not in text and "[REDACTED]" in text


def test_cli_agent_opencode(tmp_path: Path) -> None:
    write_database(tmp_path, [conversation()])
    result = CliRunner().invoke(app, ["extract", "--agent", "opencode", "--opencode-dir", str(tmp_path),
                                      "--since", "4000d", "--min-turns", "1", "--now", "2026-06-01T00:00:00Z"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["agents"] == ["opencode"] and [s["session_id"] for s in data["sessions"]] == [SID]
    missing = CliRunner().invoke(app, ["extract", "--agent", "opencode", "--opencode-dir", str(tmp_path / "none"),
                                       "--now", "2026-06-01T00:00:00Z"])
    assert missing.exit_code == 0 and "OpenCode data folder not found" in missing.stderr


def test_until_leaves_out_later_messages(tmp_path: Path) -> None:
    write_database(tmp_path, [conversation()])
    cut = datetime.fromtimestamp((T0 + 30_000) / 1000, UTC)
    session = run(tmp_path, until=cut.isoformat().replace("+00:00", "Z")).sessions[0]
    assert (session.user_turns, session.assistant_turns, session.tool_calls) == (1, 1, 2)
    assert session.end <= cut and session.files_touched == ("AGENTS.md",)


def test_work_items(tmp_path: Path) -> None:
    write_database(tmp_path, [conversation()])
    session = run(tmp_path).sessions[0]
    assert dict(session.files_edited) == {"AGENTS.md": 1, "src/app.ts": 1}
    assert dict(session.files_read) == {"README.md": 1}
    assert session.prompts == ("write an AGENTS.md file in this folder that says that you're a clown", "thanks, perfect")
    assert session.last_state == "Done: the clown file is written."


def test_with_a_cursor_an_unchanged_database_session_is_not_read_again(tmp_path: Path) -> None:
    from brain.io.sessions.incremental import commit

    database = write_database(tmp_path, [conversation()])
    cursor = tmp_path / "cursor.json"
    settings = Settings(projects_dir=Path("/nonexistent/p"), codex_dir=Path("/nonexistent/c"),
                        gemini_dir=Path("/nonexistent/g"), opencode_dir=tmp_path)
    first = extract(settings, NOW, agent="opencode", since="4000d", min_turns=0, cursor=cursor)
    assert len(first.sessions) == 1 and commit(cursor, first.to_json()["cursor"]["token"])
    second = extract(settings, NOW, agent="opencode", since="4000d", min_turns=0, cursor=cursor)
    assert second.sessions == () and commit(cursor, second.to_json()["cursor"]["token"])
    with sqlite3.connect(database) as db:  # OpenCode touches time_updated when a message is added
        db.execute("INSERT INTO message VALUES ('msg_zz_u3', ?, ?, ?, ?)", (SID, T0 + 120_000, T0 + 120_000, json.dumps(
            {"role": "user", "time": {"created": T0 + 120_000}})))
        db.execute("INSERT INTO part VALUES ('prt_zz', 'msg_zz_u3', ?, 0, 0, ?)", (SID, json.dumps(
            {"type": "text", "text": "one more"})))
        db.execute("UPDATE session SET time_updated = ? WHERE id = ?", (T0 + 120_000, SID))
    third = extract(settings, NOW, agent="opencode", since="4000d", min_turns=0, cursor=cursor)
    assert [s.user_turns for s in third.sessions] == [3]


def test_the_placeholder_title_is_no_title(tmp_path: Path) -> None:
    """OpenCode names a session ``New session - <date>`` until it generates a title: that says
    nothing, and the arc is titled from the prompts instead."""
    info, messages = conversation()
    info["title"] = "New session - 2025-11-02T10:00:00.000Z"
    write_database(tmp_path, [(info, messages)])
    [session] = run(tmp_path).sessions
    assert session.title == ""
    from brain.core.arc_text import session_title
    assert session_title(session) == "write an AGENTS.md file in this folder that says that you're a clown"
