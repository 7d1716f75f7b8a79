"""Fresh arcs (issue 11 item 5): the --until boundary and the incremental extraction cursor."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from brain.cli import app
from tests.support.vaults import init_vault

T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
NOW = T0 + timedelta(hours=3)
SID = "aaaaaaaa-0000-4000-8000-00000000000a"


def stamp(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def user(uuid: str, text: str, at: datetime, sid: str = SID) -> str:
    return json.dumps({"type": "user", "uuid": uuid, "sessionId": sid, "timestamp": stamp(at), "cwd": "/work/shop",
                       "gitBranch": "main", "message": {"role": "user", "content": text}}) + "\n"


def assistant(uuid: str, at: datetime, command: str, call: str, sid: str = SID) -> str:
    return json.dumps({"type": "assistant", "uuid": uuid, "sessionId": sid, "timestamp": stamp(at),
                       "cwd": "/work/shop", "message": {"id": f"msg-{uuid}", "role": "assistant", "content": [
                           {"type": "tool_use", "id": call, "name": "Bash", "input": {"command": command}}]}}) + "\n"


def projects(tmp_path: Path) -> Path:
    folder = tmp_path / "projects" / "-work-shop"
    folder.mkdir(parents=True)
    return folder


def write_session(folder: Path, lines: list[str], sid: str = SID) -> Path:
    path = folder / f"{sid}.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    os.utime(path, ((NOW - timedelta(minutes=5)).timestamp(),) * 2)
    return path


def run_extract(tmp_path: Path, *extra: str, now: datetime = NOW) -> tuple[dict[str, Any], str]:
    args = ["extract", "--projects-dir", str(tmp_path / "projects"), "--codex-dir", str(tmp_path / "none"),
            "--since", "2d", "--now", stamp(now), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def run_cluster(vault: Path, bundle: dict[str, Any]) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["cluster", "--out-dir", str(vault / "clusters" / "2026-03-02"), "--vault",
                                      str(vault), "--now", stamp(NOW)], input=json.dumps(bundle))
    assert result.exit_code == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


# --- --until ---------------------------------------------------------------------------------------------------


def test_until_cuts_a_session_that_was_still_running(tmp_path: Path) -> None:
    folder = projects(tmp_path)
    write_session(folder, [
        user("u1", "migrate the orders table", T0),
        assistant("a1", T0 + timedelta(minutes=10), "uv run pytest", "call-1"),
        user("u2", "now the invoices table", T0 + timedelta(minutes=30)),
        user("u3", "FUTURE-PROMPT deploy to production", T0 + timedelta(minutes=90)),
        assistant("a3", T0 + timedelta(minutes=95), "npm run deploy", "call-3"),
    ])
    until = T0 + timedelta(minutes=45)
    bundle, _ = run_extract(tmp_path, "--until", stamp(until))
    [session] = bundle["sessions"]
    assert session["end"] <= stamp(until).replace(".000", "")
    assert session["user_turns"] == 2 and session["last_prompt"] == "now the invoices table"
    assert "FUTURE-PROMPT" not in json.dumps(bundle) and "npm run deploy" not in json.dumps(bundle)
    assert list(session["commands"]) == ["uv run pytest"]
    # A session that starts after T is not in the bundle at all.
    bundle, _ = run_extract(tmp_path, "--until", stamp(T0 - timedelta(minutes=1)))
    assert bundle["sessions"] == []


def test_until_cuts_codex_rollouts_too(tmp_path: Path) -> None:
    day = tmp_path / "codex" / "2026" / "03" / "02"
    day.mkdir(parents=True)
    rid = "019e0000-0000-7000-8000-000000000001"

    def rec(at: datetime, kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": stamp(at), "type": kind, "payload": payload}) + "\n"

    path = day / f"rollout-2026-03-02T10-00-00-{rid}.jsonl"
    path.write_text(
        rec(T0, "session_meta", {"id": rid, "cwd": "/work/shop", "timestamp": stamp(T0)})
        + rec(T0, "event_msg", {"type": "user_message", "message": "fix the cart total"})
        + rec(T0 + timedelta(hours=2), "event_msg", {"type": "user_message", "message": "LATER-PROMPT ship it"}),
        encoding="utf-8",
    )
    os.utime(path, ((NOW - timedelta(minutes=5)).timestamp(),) * 2)
    result = CliRunner().invoke(app, ["extract", "--agent", "codex", "--codex-dir", str(tmp_path / "codex"),
                                      "--since", "2d", "--until", stamp(T0 + timedelta(hours=1)), "--now", stamp(NOW)])
    assert result.exit_code == 0, result.stderr
    [session] = json.loads(result.stdout)["sessions"]
    assert session["user_turns"] == 1 and "LATER-PROMPT" not in result.stdout


# --- the cursor ------------------------------------------------------------------------------------------------


def test_cursor_second_run_reads_nothing_and_an_appended_line_is_picked_up(tmp_path: Path) -> None:
    vault = init_vault(tmp_path / "vault")
    folder = projects(tmp_path)
    path = write_session(folder, [user("u1", "add the coupon field", T0)])

    first, log = run_extract(tmp_path, "--vault", str(vault))
    assert [s["user_turns"] for s in first["sessions"]] == [1]
    cursor = vault / ".brain" / "extract-cursor.json"
    assert first["cursor"]["file"] == str(cursor) and not cursor.exists()  # pending until cluster commits
    report = run_cluster(vault, first)
    assert len(report["created"]) == 1 and cursor.exists()

    second, log = run_extract(tmp_path, "--vault", str(vault))
    assert second["sessions"] == [] and second["stats"]["files_read"] == 0
    assert second["stats"]["files_unchanged_since_cursor"] == 1 and "1 unchanged since the cursor" in log
    run_cluster(vault, second)

    with path.open("a", encoding="utf-8") as handle:
        handle.write(user("u2", "and validate the coupon code", T0 + timedelta(minutes=20)))
    os.utime(path, ((NOW - timedelta(minutes=1)).timestamp(),) * 2)
    third, _ = run_extract(tmp_path, "--vault", str(vault))
    [grown] = third["sessions"]
    assert grown["user_turns"] == 2 and grown["last_prompt"] == "and validate the coupon code"
    report = run_cluster(vault, third)
    assert report["created"] == [] and len(report["updated"]) == 1


def test_a_run_that_is_not_clustered_loses_nothing(tmp_path: Path) -> None:
    """extract without a successful cluster: the cursor does not move, the next run reads the file again."""
    vault = init_vault(tmp_path / "vault")
    write_session(projects(tmp_path), [user("u1", "add the coupon field", T0)])
    first, _ = run_extract(tmp_path, "--vault", str(vault))
    assert len(first["sessions"]) == 1
    again, _ = run_extract(tmp_path, "--vault", str(vault))  # the first bundle never reached cluster
    assert len(again["sessions"]) == 1
    # A stale token (an older bundle) never commits a newer pending cursor.
    stale = dict(first, cursor={"file": first["cursor"]["file"], "token": "0" * 16})
    run_cluster(vault, stale)
    assert not (vault / ".brain" / "extract-cursor.json").exists()


def test_until_never_marks_a_file_modified_after_it(tmp_path: Path) -> None:
    """With --until T the records after T were dropped: the file must be read again next time."""
    cursor = tmp_path / "cursor.json"
    write_session(projects(tmp_path), [user("u1", "add the coupon field", T0),
                                       user("u2", "LATER", T0 + timedelta(hours=2))])
    first, _ = run_extract(tmp_path, "--cursor", str(cursor), "--until", stamp(T0 + timedelta(hours=1)))
    vault = init_vault(tmp_path / "vault")
    run_cluster(vault, first)
    assert json.loads(cursor.read_text())["files"] == {}
    second, _ = run_extract(tmp_path, "--cursor", str(cursor))
    assert second["sessions"][0]["user_turns"] == 2


def test_vault_flag_needs_a_vault(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["extract", "--vault", str(tmp_path / "missing"), "--projects-dir", str(tmp_path)])
    assert result.exit_code == 2 and "brain init" in result.stderr
    plain = tmp_path / "plain"
    plain.mkdir()
    result = CliRunner().invoke(app, ["extract", "--vault", str(plain), "--projects-dir", str(tmp_path)])
    assert result.exit_code == 2 and "not a Brain vault" in result.stderr and not (plain / ".brain").exists()


def test_a_changed_file_is_read_with_its_folder_so_resumed_records_count_once(tmp_path: Path) -> None:
    """Resume copies the original's records into the new file; uuids are counted once per folder."""
    cursor = tmp_path / "cursor.json"
    folder = projects(tmp_path)
    resumed = "aaaaaaaa-0000-4000-8000-00000000000b"
    original = [user("u1", "add the coupon field", T0), user("u2", "validate it", T0 + timedelta(minutes=10))]
    write_session(folder, original)
    write_session(folder, [line.replace(SID, resumed) for line in original]
                  + [user("u3", "now the tests", T0 + timedelta(minutes=40), resumed)], resumed)
    first, _ = run_extract(tmp_path, "--cursor", str(cursor))
    vault = init_vault(tmp_path / "vault")
    run_cluster(vault, first)
    turns = {s["session_id"]: s["user_turns"] for s in first["sessions"]}
    assert turns == {SID: 2, resumed: 1}
    path = folder / f"{resumed}.jsonl"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(user("u4", "and the docs", T0 + timedelta(minutes=50), resumed))
    os.utime(path, ((NOW - timedelta(minutes=1)).timestamp(),) * 2)
    second, _ = run_extract(tmp_path, "--cursor", str(cursor))
    turns = {s["session_id"]: s["user_turns"] for s in second["sessions"]}
    assert turns[resumed] == 2  # not 4: the copied records are the original's


def test_secrets_in_failures_never_reach_the_bundle(tmp_path: Path) -> None:
    token = "ghp_" + "Q7" * 18
    folder = projects(tmp_path)
    result = json.dumps({"type": "user", "uuid": "r1", "sessionId": SID, "timestamp": stamp(T0 + timedelta(minutes=2)),
                         "cwd": "/work/shop", "message": {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": "call-1", "is_error": True,
                              "content": f"ValueError: bad token {token}"}]}}) + "\n"
    write_session(folder, [user("u1", "deploy it", T0), assistant("a1", T0 + timedelta(minutes=1),
                                                                  f"GH_TOKEN={token} npm run deploy", "call-1"), result])
    bundle, _ = run_extract(tmp_path)
    [session] = bundle["sessions"]
    assert session["failures"] and session["failures"][0]["text"].startswith("ValueError: bad token")
    assert token not in json.dumps(bundle)
