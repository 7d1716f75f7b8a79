"""Resumed sessions and hostile lines, over copies of the real fixtures (the fixtures are never edited).

- A Claude Code ``--resume`` writes a new file that replays the old records (same uuids) or
  links to them by ``parentUuid``: the new session ``continues`` the old one and counts only
  its own records (session-formats.md §1.11).
- A Codex fork names the old rollout in ``session_meta.forked_from_id`` and replays its items.
- One deeply nested JSON line is a counted damaged line, never a RecursionError (issue 12 item 7).
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from brain.pipeline.extract import Bundle, extract
from brain.settings import Settings

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"
CLAUDE = FIXTURES / "claude-code"
CODEX = FIXTURES / "codex" / "sessions"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
SPOTTER = "-home-marco-projects-spotter"
ORIGINAL = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
RESUMED = "0e5e7a11-0000-4000-8000-00000000b0b0"
CHAINED = "0e5e7a11-0000-4000-8000-00000000c0c0"
NESTED = b"[" * 100_000 + b"]" * 100_000 + b"\n"

pytestmark = pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared session fixtures not present")


def run(projects: Path | None = None, codex: Path | None = None) -> Bundle:
    settings = Settings(projects_dir=projects or Path("/nonexistent/p"), codex_dir=codex or Path("/nonexistent/c"),
                        gemini_dir=Path("/nonexistent/g"), opencode_dir=Path("/nonexistent/o"))
    return extract(settings, NOW, since="4000d", min_turns=0, agent="all")


def by_id(bundle: Bundle) -> dict[str, Any]:
    return {s.session_id: s for s in bundle.sessions}


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def dump(items: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in items)


def new_turn(session_id: str, parent: str, cwd: str, tag: str) -> list[dict[str, Any]]:
    """One human prompt, one Edit call and its result, a day after the fixture ends."""
    base = {"sessionId": session_id, "cwd": cwd, "gitBranch": "main", "isSidechain": False, "userType": "external"}
    return [
        {**base, "type": "user", "uuid": f"{tag}-u", "parentUuid": parent, "timestamp": "2026-03-02T09:00:00.000Z",
         "message": {"role": "user", "content": f"pick up where we left off ({tag})"}},
        {**base, "type": "assistant", "uuid": f"{tag}-a", "parentUuid": f"{tag}-u", "timestamp": "2026-03-02T09:00:05.000Z",
         "message": {"id": f"msg_{tag}", "role": "assistant", "model": "claude-opus-4-6", "content": [
             {"type": "tool_use", "id": f"toolu_{tag}", "name": "Edit", "input": {"file_path": f"{cwd}/{tag}.py"}}]}},
        {**base, "type": "user", "uuid": f"{tag}-r", "parentUuid": f"{tag}-a", "timestamp": "2026-03-02T09:00:06.000Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{tag}", "content": "ok"}]}},
    ]


def spotter(tmp_path: Path) -> tuple[Path, Path, list[dict[str, Any]]]:
    folder = tmp_path / "projects" / SPOTTER
    shutil.copytree(CLAUDE / SPOTTER, folder)
    original = folder / f"{ORIGINAL}.jsonl"
    os.utime(original, (1_700_000_000, 1_700_000_000))
    return folder, original, records(original)


def cwd_of(items: list[dict[str, Any]]) -> str:
    return next(r["cwd"] for r in items if isinstance(r.get("cwd"), str))


def last_uuid(items: list[dict[str, Any]]) -> str:
    return [r["uuid"] for r in items if isinstance(r.get("uuid"), str)][-1]


@pytest.mark.parametrize("replay", ["new-session-id", "old-session-id", "parent-link-only"])
def test_a_resumed_claude_session_continues_the_original_and_counts_only_its_own_turns(
        tmp_path: Path, replay: str) -> None:
    folder, _original, old = spotter(tmp_path)
    pristine = by_id(run(folder.parent))
    if replay == "new-session-id":
        head = [dict(r, sessionId=RESUMED) if "sessionId" in r else r for r in old]
    elif replay == "old-session-id":
        head = old
    else:
        head = []
    (folder / f"{RESUMED}.jsonl").write_bytes(dump(head + new_turn(RESUMED, last_uuid(old), cwd_of(old), "r1")))
    sessions = by_id(run(folder.parent))
    resumed = sessions[RESUMED]
    assert resumed.continues == ORIGINAL
    assert (resumed.user_turns, resumed.assistant_turns, resumed.tool_calls) == (1, 1, 1)
    assert resumed.files_touched == ("r1.py",)
    assert resumed.start == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert sessions[ORIGINAL] == pristine[ORIGINAL]  # the original is untouched by its resumption
    assert sessions[ORIGINAL].continues == ""


def test_a_resume_chain_continues_the_latest_link(tmp_path: Path) -> None:
    folder, _original, old = spotter(tmp_path)
    second = [dict(r, sessionId=RESUMED) if "sessionId" in r else r for r in old]
    second += new_turn(RESUMED, last_uuid(old), cwd_of(old), "r1")
    (folder / f"{RESUMED}.jsonl").write_bytes(dump(second))
    os.utime(folder / f"{RESUMED}.jsonl", (1_700_000_100, 1_700_000_100))
    third = [dict(r, sessionId=CHAINED) if "sessionId" in r else r for r in second]
    (folder / f"{CHAINED}.jsonl").write_bytes(dump(third + new_turn(CHAINED, "r1-r", cwd_of(old), "r2")))
    sessions = by_id(run(folder.parent))
    assert sessions[RESUMED].continues == ORIGINAL
    assert sessions[CHAINED].continues == RESUMED
    assert sessions[CHAINED].user_turns == 1 and sessions[CHAINED].files_touched == ("r2.py",)


def test_a_resume_chain_is_read_in_the_order_its_records_were_written_whatever_the_mtimes(tmp_path: Path) -> None:
    """A copy or a git checkout stamps files in name order: the resumed sessions' files here are
    older on disk than the original they replay. The records say which came first, so the
    original keeps its turns and each resumption counts only its own."""
    folder, original, old = spotter(tmp_path)
    pristine = by_id(run(folder.parent))
    second = [dict(r, sessionId=RESUMED) if "sessionId" in r else r for r in old]
    second += new_turn(RESUMED, last_uuid(old), cwd_of(old), "r1")
    (folder / f"{RESUMED}.jsonl").write_bytes(dump(second))
    third = [dict(r, sessionId=CHAINED) if "sessionId" in r else r for r in second]
    (folder / f"{CHAINED}.jsonl").write_bytes(dump(third + new_turn(CHAINED, "r1-r", cwd_of(old), "r2")))
    for stamp, path in enumerate((folder / f"{CHAINED}.jsonl", folder / f"{RESUMED}.jsonl", original)):
        os.utime(path, (1_600_000_000 + stamp, 1_600_000_000 + stamp))  # newest work, oldest file
    sessions = by_id(run(folder.parent))
    assert sessions[ORIGINAL] == pristine[ORIGINAL]
    assert sessions[RESUMED].continues == ORIGINAL and sessions[RESUMED].files_touched == ("r1.py",)
    assert sessions[CHAINED].continues == RESUMED and sessions[CHAINED].files_touched == ("r2.py",)
    assert sessions[CHAINED].user_turns == 1


def test_unrelated_sessions_of_one_folder_continue_nothing() -> None:
    assert all(s.continues == "" for s in run(CLAUDE, CODEX).sessions)


# --- Codex forks ----------------------------------------------------------------------------------

SMALL = "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl"
FORK = "019c8bfe-0000-7000-8000-00000000f0f0"


def test_a_forked_codex_rollout_continues_the_original(tmp_path: Path) -> None:
    day = tmp_path / "codex" / "2026" / "02" / "23"
    day.mkdir(parents=True)
    source = next(CODEX.rglob(SMALL))
    shutil.copy(source, day / SMALL)
    pristine = by_id(run(codex=tmp_path / "codex"))
    old = records(source)
    meta = dict(old[0])
    original_id = meta["payload"]["id"]
    meta["payload"] = dict(meta["payload"], id=FORK, forked_from_id=original_id, timestamp="2026-02-24T08:00:00.000Z")
    meta["timestamp"] = "2026-02-24T08:00:00.000Z"
    new = [
        {"timestamp": "2026-02-24T08:00:01.000Z", "type": "event_msg",
         "payload": {"type": "user_message", "message": "now port it to the new API", "images": []}},
        {"timestamp": "2026-02-24T08:00:01.000Z", "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "now port it to the new API"}]}},
        {"timestamp": "2026-02-24T08:00:03.000Z", "type": "response_item", "payload": {
            "type": "function_call", "name": "shell", "arguments": "{\"command\":[\"ls\"]}", "call_id": "call_fork_1"}},
        {"timestamp": "2026-02-24T08:00:09.000Z", "type": "event_msg",
         "payload": {"type": "agent_message", "message": "Ported."}},
        {"timestamp": "2026-02-24T08:00:09.000Z", "type": "response_item", "payload": {
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Ported."}]}},
    ]
    fork = day.parent / "24" / f"rollout-2026-02-24T10-00-00-{FORK}.jsonl"
    fork.parent.mkdir()
    fork.write_bytes(dump([meta, *old[1:], *new]))  # the original's history replayed, then the new turn
    sessions = by_id(run(codex=tmp_path / "codex"))
    forked = sessions[FORK]
    assert forked.continues == original_id
    assert (forked.user_turns, forked.assistant_turns, forked.tool_calls) == (1, 1, 1)
    assert forked.first_prompt == "now port it to the new API"
    assert sessions[original_id] == pristine[original_id]


# --- one deeply nested line (issue 12 item 7) --------------------------------------------------------


def test_a_deeply_nested_line_is_a_damaged_line_and_every_other_project_still_comes_out(tmp_path: Path) -> None:
    projects = tmp_path / "projects"
    shutil.copytree(CLAUDE, projects)
    codex = tmp_path / "codex"
    shutil.copytree(CODEX, codex)
    pristine = run(projects, codex)
    victim = projects / SPOTTER / f"{ORIGINAL}.jsonl"
    lines = victim.read_bytes().splitlines(keepends=True)
    victim.write_bytes(b"".join(lines[:5]) + NESTED + b"".join(lines[5:]))
    rollout = next(codex.rglob(SMALL))
    body = rollout.read_bytes().splitlines(keepends=True)
    rollout.write_bytes(b"".join(body[:3]) + b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n" + b"".join(body[3:]))
    bundle = run(projects, codex)
    assert sorted(by_id(bundle)) == sorted(by_id(pristine))
    assert bundle.stats["damaged_lines"] == pristine.stats["damaged_lines"] + 2
    damaged = by_id(bundle)
    assert damaged[ORIGINAL].skipped_lines == 1
    assert damaged[ORIGINAL].user_turns == by_id(pristine)[ORIGINAL].user_turns


# --- the resumed session lands in the original's arc (brain extract | brain cluster) ---------------------


def arcs(vault: Path) -> dict[str, str]:
    """cluster_id -> text of every arc file in the vault."""
    found = {}
    for path in vault.rglob("*.md"):
        text = path.read_text(encoding="utf-8")
        if ".brain" not in path.parts and text.startswith("---") and "\ncluster_id:" in text:
            found[text.split("\ncluster_id:", 1)[1].split("\n", 1)[0].strip().strip("'\"")] = text
    return found


@pytest.mark.parametrize("runs", ["one-bundle", "next-day"])
def test_a_resumed_fixture_session_lands_in_its_original_arc(tmp_path: Path, runs: str) -> None:
    from typer.testing import CliRunner

    from brain.cli import app
    from tests.support.vaults import init_vault

    vault = init_vault(tmp_path / "vault")
    folder, _original, old = spotter(tmp_path)
    resumed = folder / f"{RESUMED}.jsonl"

    def extract_and_cluster(now: str, out: str) -> None:
        extracted = CliRunner().invoke(app, ["extract", "--projects-dir", str(folder.parent), "--codex-dir",
                                             "/nonexistent", "--since", "4000d", "--min-turns", "0", "--now", now])
        assert extracted.exit_code == 0, extracted.output
        clustered = CliRunner().invoke(app, ["cluster", "--out-dir", str(vault / "clusters" / out), "--vault",
                                             str(vault), "--now", now], input=extracted.stdout)
        assert clustered.exit_code == 0, clustered.output

    if runs == "next-day":
        extract_and_cluster("2026-03-01T00:00:00Z", "2026-03-01")
    head = [dict(r, sessionId=RESUMED) if "sessionId" in r else r for r in old]
    resumed.write_bytes(dump(head + new_turn(RESUMED, last_uuid(old), cwd_of(old), "r1")))
    extract_and_cluster("2026-03-03T00:00:00Z", "2026-03-03")
    found = arcs(vault)
    holding = [text for text in found.values() if ORIGINAL in text]
    assert len(holding) == 1, "the original session is in exactly one arc"
    assert RESUMED in holding[0], "the resumption joined the original's arc, a day after it ended"
    assert "resumed from" in holding[0]
    assert sum(RESUMED in text for text in found.values()) == 1
