"""Clustering (SPEC §4, §5): cluster ids, grouping, updates instead of duplicates, idempotence,
dry run, secrets, and the `brain extract | brain cluster` pipeline."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from brain.cli import app
from brain.core import frontmatter
from brain.core.arc_text import cluster_id, slug
from brain.core.grouping import assign
from brain.core.model import parse_note
from brain.core.session import Session, parse_bundle
from brain.io.writer import vault_lock
from brain.settings import Settings
from tests.support.vaults import init_vault, tree_digest, write_arc

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "sessions"
T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
NOW = "2026-11-21T12:00:00Z"


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def session(
    sid: str,
    start: datetime,
    minutes: int = 30,
    *,
    project: str = "demo-app",
    turns: int = 3,
    tools: int = 10,
    prompt: str = "Fix the login redirect loop",
    **extra: Any,
) -> dict[str, Any]:
    data = {
        "session_id": sid,
        "agent": "claude-code",
        "project": project,
        "cwd": f"/work/{project}",
        "git_branch": "main",
        "start": iso(start),
        "end": iso(start + timedelta(minutes=minutes)),
        "user_turns": turns,
        "assistant_turns": turns * 2,
        "tool_calls": tools,
        "top_tools": {"Bash": tools // 2, "Edit": tools - tools // 2} if tools else {},
        "files_touched": ["src/app.py"],
        "first_prompt": prompt,
        "last_prompt": "thanks, that works",
        "errors": 0,
        "joy": 1,
        "compactions": 0,
        "subagents": 0,
    }
    data.update(extra)
    return data


def bundle(*sessions: dict[str, Any]) -> dict[str, Any]:
    return {"version": 1, "generated": NOW, "sessions": list(sessions), "stats": {}}


def cluster(vault: Path, data: dict[str, Any] | None, *extra: str, out: str = "clusters/2026-11-21",
            now: str = NOW, bundle_file: Path | None = None) -> tuple[int, dict[str, Any], str]:
    args = ["cluster", "--out-dir", str(vault / out), "--vault", str(vault), "--now", now, *extra]
    if bundle_file is not None:
        args += ["--bundle", str(bundle_file)]
    result = CliRunner().invoke(app, args, input=json.dumps(data) if data is not None else None)
    payload = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    return result.exit_code, payload, result.stderr


def arcs_in(vault: Path) -> dict[str, tuple[dict[str, Any], str]]:
    """cluster_id -> (frontmatter, body) of every arc in the vault."""
    found = {}
    for path in vault.rglob("*.md"):
        if ".brain" in path.parts:
            continue
        doc = frontmatter.split(path.read_text(encoding="utf-8"))
        if doc.frontmatter is None:
            continue
        meta = frontmatter.load(doc.frontmatter)
        if "cluster_id" in meta:
            found[meta["cluster_id"]] = (meta, doc.body)
    return found


def sessions_of(*data: dict[str, Any]) -> list[Session]:
    return parse_bundle(bundle(*data))[0]


# --- ids and grouping ----------------------------------------------------------------------------------------


def test_cluster_id_formula() -> None:
    ids = ["b-session", "a-session"]
    digest = hashlib.sha1(b"a-session\nb-session").hexdigest()[:12]
    assert cluster_id(T0, "Fix the Login redirect: loop (again!)", ids) == f"2026-11-20-fix-the-login-redirect-loop-again-{digest}"
    assert len(slug("x" * 100)) == 40
    assert slug("Ünïcödé — only?!") == "unicode-only"
    assert slug("日本語") == "arc"


def test_new_arc_file_matches_the_formula(vault: Path) -> None:
    code, report, _ = cluster(vault, bundle(session("s-2", T0 + timedelta(hours=1)), session("s-1", T0)))
    assert code == 0
    [created] = report["created"]
    digest = hashlib.sha1(b"s-1\ns-2").hexdigest()[:12]
    assert created["cluster_id"] == f"2026-11-20-fix-the-login-redirect-loop-{digest}"
    path = vault / created["path"]
    assert path.name == f"{created['cluster_id']}.md" and path.parent == vault / "clusters" / "2026-11-21"
    meta, body = arcs_in(vault)[created["cluster_id"]]
    # The work keys of the C1/C2 contract (CLUSTERS.md) follow the original layout.
    assert list(meta) == ["cluster_id", "title", "region", "status", "heat", "created", "last_active", "project",
                          "cwd", "branch", "agents", "source_sessions", "activity", "synthesized", "files", "commands",
                          "open_errors", "errors_met", "identifiers", "last_prompt", "last_state"]
    assert meta["cwd"] == "/work/demo-app" and meta["branch"] == "main" and meta["last_prompt"] == "thanks, that works"
    assert meta["created"] == iso(T0) and meta["last_active"] == iso(T0 + timedelta(hours=1, minutes=30))
    assert meta["source_sessions"] == ["s-1", "s-2"] and meta["agents"] == ["claude-code"]
    assert meta["activity"] == {"sessions": 2, "user_turns": 6, "tool_calls": 20, "errors": 0, "joy": 2,
                                "compactions": 0}
    assert meta["synthesized"] is False and meta["status"] == "active" and 0 <= meta["heat"] <= 10
    headings = [line for line in body.splitlines() if line.startswith("#")]
    assert headings == ["# Fix the login redirect loop", "## Ignition", "## Timeline", "## Work", "## Lessons",
                        "## Resolution", "## Edges", "## Source sessions"]
    assert "> Fix the login redirect loop" in body
    assert body.count("<!-- brain:session") == 2


def test_grouping_by_gap_project_and_span() -> None:
    settings = Settings()
    data = [
        session("a1", T0),  # 09:00-09:30
        session("a2", T0 + timedelta(minutes=30 + 119)),  # starts 119 min after a1 ends: same arc
        session("a3", T0 + timedelta(hours=8)),  # far later: new arc
        session("b1", T0 + timedelta(minutes=10), project="other"),  # other project: its own arc
    ]
    result = assign(sessions_of(*data), [], settings)
    groups = sorted(sorted(s.session_id for s in g.sessions) for g in result.new)
    assert groups == [["a1", "a2"], ["a3"], ["b1"]]
    # A chain of sessions an hour apart is cut once it would span more than 72 hours.
    chain = [session(f"c{i:02d}", T0 + timedelta(hours=i), minutes=30) for i in range(80)]
    cut = assign(sessions_of(*chain), [], settings)
    spans = [max(s.end for s in g.sessions) - min(s.start for s in g.sessions) for g in cut.new]
    assert len(cut.new) == 2 and all(span <= timedelta(hours=72) for span in spans)
    tighter = assign(sessions_of(*data), [], Settings(cluster_gap_minutes=60))
    assert len(tighter.new) == 4


def test_bad_bundle_entries_are_reported_not_fatal(vault: Path) -> None:
    data = bundle(session("ok", T0), {"session_id": "../../etc/passwd", "start": iso(T0), "end": iso(T0)},
                  {"session_id": "no-times"}, "garbage")
    code, report, _ = cluster(vault, data)
    assert code == 0 and len(report["created"]) == 1
    assert len(report["problems"]) == 3


def test_a_session_dated_outside_the_usable_years_is_left_out_not_an_overflow(vault: Path) -> None:
    # end 9999-12-31 stopped `brain cluster` (OverflowError: date value out of range) when the
    # grouping added its gap to it; now it is left out and named, like any unreadable entry
    far = session("far", T0)
    far["end"] = "9999-12-31T23:59:59Z"
    early = session("early", T0)
    early["start"] = "0001-01-01T00:00:00Z"
    code, report, _ = cluster(vault, bundle(session("ok", T0), far, early))
    assert code == 0 and len(report["created"]) == 1
    assert [p["message"] for p in report["problems"]] == [
        "sessions[1]: session far: 9999-12-31T23:59:59Z is outside the years 1970-2999; left out",
        "sessions[2]: session early: 0001-01-01T00:00:00Z is outside the years 1970-2999; left out",
    ]


def test_not_a_bundle_is_a_usage_error(vault: Path) -> None:
    result = CliRunner().invoke(app, ["cluster", "--out-dir", str(vault / "clusters/x"), "--vault", str(vault)],
                                input="[1, 2]")
    assert result.exit_code == 2 and "not a session bundle" in result.stderr
    result = CliRunner().invoke(app, ["cluster", "--out-dir", str(vault / "clusters/x"), "--vault", str(vault)],
                                input="{not json")
    assert result.exit_code == 2 and "not JSON" in result.stderr


# --- idempotence, updates, dry run ---------------------------------------------------------------------------


def test_same_bundle_twice_changes_nothing(vault: Path) -> None:
    data = bundle(session("s1", T0), session("s2", T0 + timedelta(hours=1)), session("s3", T0, project="x"))
    assert cluster(vault, data)[0] == 0
    before = tree_digest(vault, include_state=False)
    code, report, _ = cluster(vault, data)
    assert code == 0
    assert report["written"] == [] and report["created"] == [] and report["updated"] == []
    assert report["unchanged"] == 2 and report["tick_id"] is None
    assert tree_digest(vault, include_state=False) == before
    # Even in another day's out-dir, and after the keeper has ticked the arcs.
    code, _report, _ = cluster(vault, data, out="clusters/2026-11-22")
    assert code == 0 and tree_digest(vault, include_state=False) == before


def test_a_session_already_in_an_arc_updates_it(vault: Path) -> None:
    first = session("s1", T0, turns=3, tools=10)
    code, report, _ = cluster(vault, bundle(first))
    [created] = report["created"]
    path = vault / created["path"]
    operator_note = "My own note: the redirect comes from the proxy.\n"
    path.write_text(path.read_text().replace("## Lessons\n", "## Lessons\n\n" + operator_note), encoding="utf-8")

    grown = session("s1", T0, minutes=90, turns=5, tools=25)
    joining = session("s2", T0 + timedelta(hours=2), turns=2, tools=4)
    code, report, _ = cluster(vault, bundle(grown, joining), out="clusters/2026-11-22")
    assert code == 0 and report["created"] == [] and len(report["updated"]) == 1
    assert not (vault / "clusters" / "2026-11-22").exists()
    arcs = arcs_in(vault)
    assert list(arcs) == [created["cluster_id"]]  # never a second arc, id unchanged
    meta, body = arcs[created["cluster_id"]]
    assert meta["source_sessions"] == ["s1", "s2"]
    assert meta["activity"]["sessions"] == 2
    assert meta["activity"]["user_turns"] == 7  # 5 (s1 as it is now, not 3 + 5) + 2
    assert meta["activity"]["tool_calls"] == 29
    assert meta["last_active"] == iso(T0 + timedelta(hours=2, minutes=30))
    assert meta["created"] == iso(T0)
    assert operator_note in body
    assert body.count("<!-- brain:session") == 2 and "5 turns" in body and "3 turns" not in body
    # And again: nothing moves.
    before = path.read_bytes()
    assert cluster(vault, bundle(grown, joining))[1]["written"] == []
    assert path.read_bytes() == before


def test_operator_edits_to_a_timeline_line_survive_a_rerun(vault: Path) -> None:
    data = bundle(session("s1", T0))
    report = cluster(vault, data)[1]
    path = vault / report["created"][0]["path"]
    edited = path.read_text().replace("3 turns", "3 turns (the painful one)")
    path.write_text(edited, encoding="utf-8")
    assert cluster(vault, data)[1]["written"] == []
    assert path.read_text() == edited


def test_daily_26h_windows_never_duplicate_arcs(vault: Path, tmp_path: Path) -> None:
    """Yesterday's run saw a session in progress; today's run sees it finished plus a new one."""
    projects = tmp_path / "projects" / "-work-demo-app"
    projects.mkdir(parents=True)
    sid, later = "aaaaaaaa-0000-4000-8000-000000000001", "aaaaaaaa-0000-4000-8000-000000000002"

    def record(uuid: str, text: str, at: datetime, session_id: str = sid) -> str:
        return json.dumps({"type": "user", "uuid": uuid, "sessionId": session_id, "timestamp": iso(at),
                           "cwd": "/work/demo-app", "message": {"role": "user", "content": text}}) + "\n"

    day1 = datetime(2026, 11, 20, 4, 7, tzinfo=UTC)
    day2 = day1 + timedelta(days=1)
    main = projects / f"{sid}.jsonl"
    main.write_text("".join(record(f"u{i}", f"step {i} of the migration", day1 - timedelta(hours=3 - i / 2))
                            for i in range(3)))
    os.utime(main, (day1.timestamp() - 60,) * 2)
    settings = ["--projects-dir", str(tmp_path / "projects"), "--codex-dir", str(tmp_path / "none"),
                "--since", "26h", "--min-turns", "1"]

    def daily(now: datetime) -> dict[str, Any]:
        result = CliRunner().invoke(app, ["extract", *settings, "--now", iso(now)])
        assert result.exit_code == 0, result.stderr
        code, report, stderr = cluster(vault, json.loads(result.stdout), out=f"clusters/{iso(now)[:10]}", now=iso(now))
        assert code == 0, stderr
        return report

    first = daily(day1)
    assert len(first["created"]) == 1
    with main.open("a") as handle:
        handle.write("".join(record(f"v{i}", f"more work {i}", day1 + timedelta(minutes=20 * i)) for i in range(4)))
    (projects / f"{later}.jsonl").write_text(record("w1", "follow-up on the migration", day1 + timedelta(hours=2),
                                                    later))
    for path in projects.iterdir():
        os.utime(path, (day2.timestamp() - 60,) * 2)
    second = daily(day2)
    assert second["created"] == [] and len(second["updated"]) == 1
    arcs = arcs_in(vault)
    assert len(arcs) == 1
    meta, body = next(iter(arcs.values()))
    assert meta["source_sessions"] == [sid, later]
    assert meta["activity"]["user_turns"] == 3 + 4 + 1
    assert body.count("<!-- brain:session") == 2
    before = tree_digest(vault, include_state=False)
    daily(day2)  # the same day twice
    assert tree_digest(vault, include_state=False) == before


def test_dry_run_writes_nothing(vault: Path) -> None:
    cluster(vault, bundle(session("s1", T0)))
    before = tree_digest(vault)
    data = bundle(session("s1", T0, minutes=60, turns=9), session("n1", T0 + timedelta(days=3)))
    code, report, stderr = cluster(vault, data, "--dry-run", out="clusters/2026-11-23")
    assert code == 0 and report["dry_run"] is True
    assert len(report["created"]) == 1 and len(report["updated"]) == 1
    assert len(report["written"]) == 2 and "would write" in stderr
    assert tree_digest(vault) == before


def test_sessions_join_an_open_arc_and_reopen_a_stalled_one(vault: Path) -> None:
    write_arc(vault, "frontal-lobe/conscious", "2026-11-20-old-work-0123456789ab", status="stalled",
              created=iso(T0), last_active=iso(T0 + timedelta(hours=1)), sessions=["old"])
    write_arc(vault, "left/projects", "2026-11-20-done-0123456789ab", status="complete",
              created=iso(T0), last_active=iso(T0 + timedelta(hours=1)), sessions=["done"])
    for path in vault.rglob("2026-11-20-*.md"):
        path.write_text(path.read_text().replace("source_sessions:", "project: demo-app\nsource_sessions:"))
    code, report, _ = cluster(vault, bundle(session("new", T0 + timedelta(hours=2))))
    assert code == 0 and report["created"] == []
    meta, _body = arcs_in(vault)["2026-11-20-old-work-0123456789ab"]
    assert meta["status"] == "active" and meta["source_sessions"] == ["old", "new"]
    assert meta["activity"]["sessions"] == 2 and meta["activity"]["user_turns"] == 5 + 3


def test_a_merged_tombstone_sends_its_sessions_to_the_kept_arc(vault: Path) -> None:
    write_arc(vault, "left/projects", "2026-11-20-kept-0123456789ab", sessions=["k1", "m1"], status="complete")
    write_arc(vault, "left/projects", "2026-11-20-gone-0123456789ab", sessions=["m1"], status="merged",
              extra={"merged_into": "2026-11-20-kept-0123456789ab"})
    write_arc(vault, "left/projects", "2026-11-20-split-0123456789ab", sessions=["p1"], status="split")
    code, report, _ = cluster(vault, bundle(session("m1", T0), session("p1", T0, project="other")))
    assert code == 0 and report["created"] == []
    assert [u["cluster_id"] for u in report["updated"]] == ["2026-11-20-kept-0123456789ab"]
    assert any("split tombstone" in p["message"] for p in report["problems"])


def test_arcs_from_the_older_layout_are_updated_without_losing_keys(vault: Path) -> None:
    path = write_arc(vault, "left/projects", "2026-11-20-legacy-0123456789ab", sessions=["l1"], legacy=True,
                     last_active=None, extra={"custom": "kept"})
    code, report, _ = cluster(vault, bundle(session("l1", T0 + timedelta(hours=30))))
    assert code == 0 and len(report["updated"]) == 1
    meta = frontmatter.load(frontmatter.split(path.read_text()).frontmatter or "")
    assert meta["custom"] == "kept" and meta["signals"] == {"errors": 0, "joy": 0, "tools": 10}
    assert meta["last_active"] == iso(T0 + timedelta(hours=30, minutes=30))
    assert meta["activity"]["tool_calls"] == 10  # a listed session without a line is taken as counted


# --- safety --------------------------------------------------------------------------------------------------


def test_secrets_never_reach_written_arcs(vault: Path) -> None:
    key = "ghp_" + "Z9y8X7w6V5" * 4
    data = bundle(session("s1", T0, prompt=f"deploy with GITHUB_TOKEN={key} now", project="proj",
                          git_branch=f"feature/{key}", last_prompt=f"password=hunter22-{key[:6]}",
                          top_tools={f"mcp__{key}": 1}))
    code, report, _ = cluster(vault, data)
    assert code == 0
    text = (vault / report["created"][0]["path"]).read_text()
    assert key not in text and "hunter22" not in text and "[REDACTED]" in text


def test_log_text_cannot_inject_markers_or_sections(vault: Path) -> None:
    prompt = "<!-- @signal severity=nuclear source=x -->boom<!-- @/signal -->\n## Resolution\n<!-- @hot heat=10 -->"
    code, report, _ = cluster(vault, bundle(session("s1", T0, prompt=prompt)))
    assert code == 0
    path = vault / report["created"][0]["path"]
    note = parse_note(path.name, path.read_bytes(), size=0, mtime_ns=0, sha1="")
    assert note.markers == () and note.problems == ()
    assert path.read_text().count("\n## Resolution") == 1


def test_out_dir_outside_the_vault_is_refused(vault: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["cluster", "--out-dir", str(tmp_path / "elsewhere"), "--vault", str(vault)],
                                input=json.dumps(bundle(session("s1", T0))))
    assert result.exit_code == 2 and "not inside --vault" in result.stderr
    assert not (tmp_path / "elsewhere").exists()


def test_a_held_lock_exits_3(vault: Path) -> None:
    with vault_lock(vault, "tick"):
        code, _report, stderr = cluster(vault, bundle(session("s1", T0)))
    assert code == 3 and "locked" in stderr
    assert not (vault / "clusters" / "2026-11-21").exists()


def test_without_vault_an_out_dir_in_clusters_uses_the_vault(vault: Path) -> None:
    result = CliRunner().invoke(app, ["cluster", "--out-dir", str(vault / "clusters" / "2026-11-21"), "--now", NOW],
                                input=json.dumps(bundle(session("s1", T0))))
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["mode"] == "vault" and report["tick_id"]
    assert (vault / ".brain" / "journal" / report["tick_id"]).is_dir()


def test_standalone_out_dir(tmp_path: Path) -> None:
    out = tmp_path / "loose-arcs"
    data = json.dumps(bundle(session("s1", T0), session("s2", T0 + timedelta(days=2))))
    first = CliRunner().invoke(app, ["cluster", "--out-dir", str(out), "--now", NOW], input=data)
    assert first.exit_code == 0, first.stderr
    report = json.loads(first.stdout)
    assert report["mode"] == "standalone" and len(report["written"]) == 2
    assert not (out / ".brain").exists()
    before = tree_digest(out)
    again = CliRunner().invoke(app, ["cluster", "--out-dir", str(out), "--now", NOW], input=data)
    assert json.loads(again.stdout)["written"] == [] and tree_digest(out) == before


def test_written_arcs_tick_cleanly(vault: Path) -> None:
    from tests.support.vaults import run_tick_json

    cluster(vault, bundle(session("s1", T0), session("s2", T0 + timedelta(days=1)), session("s3", T0, project="y")))
    code, data = run_tick_json(vault)
    assert code == 0, data.get("problems")
    assert data["problems"] == []
    assert cluster(vault, bundle(session("s1", T0), session("s2", T0 + timedelta(days=1)),
                                 session("s3", T0, project="y")))[1]["written"] == []


# --- the real pipeline -----------------------------------------------------------------------------------------


@pytest.mark.skipif(not FIXTURES.is_dir(), reason="shared session fixtures not present")
def test_extract_pipe_cluster_on_real_fixtures(tmp_path: Path) -> None:
    vault = init_vault(tmp_path / "vault")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAIN_")}
    env["BRAIN_NOW"] = "2026-06-01T04:07:00Z"
    extract = [sys.executable, "-m", "brain", "extract", "--projects-dir", str(FIXTURES / "claude-code"),
               "--codex-dir", str(FIXTURES / "codex" / "sessions"), "--since", "4000d", "--min-turns", "1"]
    cluster_cmd = [sys.executable, "-m", "brain", "cluster", "--out-dir", str(vault / "clusters" / "2026-06-01"),
                   "--vault", str(vault)]
    produced = subprocess.run(extract, env=env, capture_output=True, check=True)
    first = subprocess.run(cluster_cmd, input=produced.stdout, env=env, capture_output=True, check=True)
    report = json.loads(first.stdout)
    bundle_data = json.loads(produced.stdout)
    assert sum(len(c["sessions"]) for c in report["created"]) == len(bundle_data["sessions"])
    before = tree_digest(vault, include_state=False)
    second = subprocess.run(cluster_cmd, input=produced.stdout, env=env, capture_output=True, check=True)
    assert json.loads(second.stdout)["written"] == []
    assert tree_digest(vault, include_state=False) == before
    for path in (vault / "clusters" / "2026-06-01").glob("*.md"):
        note = parse_note(path.name, path.read_bytes(), size=0, mtime_ns=0, sha1="")
        assert note.arc is not None and note.problems == ()


def test_standalone_dry_run_into_a_new_folder_plans_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "not-yet"
    data = json.dumps(bundle(session("s1", T0)))
    result = CliRunner().invoke(app, ["cluster", "--out-dir", str(out), "--now", NOW, "--dry-run"], input=data)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert len(report["written"]) == 1 and report["problems"] == []
    assert not out.exists()


# --- growing sessions keep the operator's text (issue 12 item 3) ----------------------------------------------


def _timeline_line(body: str, sid: str) -> str:
    [line] = [line for line in body.split("\n") if f"brain:session id={sid} " in line]
    return line


def test_a_growing_session_keeps_operator_prose_byte_for_byte(vault: Path) -> None:
    report = cluster(vault, bundle(session("s1", T0, turns=3, tools=10)))[1]
    path = vault / report["created"][0]["path"]
    text = path.read_text(encoding="utf-8")
    line = _timeline_line(text, "s1")
    tail = " ← the proxy bug, see [[incident-42]] — ärger"
    prose = "\nOperator note under the line: do **not** retry the migration.\n  - indented detail\n"
    edited = text.replace(line, line + tail + prose)
    path.write_text(edited, encoding="utf-8")

    cluster(vault, bundle(session("s1", T0, minutes=90, turns=5, tools=25)))
    after = path.read_text(encoding="utf-8")
    new_line = _timeline_line(after, "s1")
    assert new_line.endswith(tail) and "5 turns" in new_line and "turns=5" in new_line
    assert prose in after
    # Only that one line changed in the body; the frontmatter moved with the new figures.
    before_body, after_body = edited.split("\n---\n", 1)[1], after.split("\n---\n", 1)[1]
    changed = [(a, b) for a, b in zip(before_body.split("\n"), after_body.split("\n"), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][1] == new_line


def test_a_hand_edited_timeline_line_keeps_its_visible_text_when_the_session_grows(vault: Path) -> None:
    report = cluster(vault, bundle(session("s1", T0, turns=3, tools=10)))[1]
    path = vault / report["created"][0]["path"]
    text = path.read_text(encoding="utf-8")
    line = _timeline_line(text, "s1")
    visible, record = line.split(" <!-- brain:session ", 1)
    mine = visible.replace("3 turns", "3 turns (the painful one)")
    path.write_text(text.replace(line, f"{mine} <!-- brain:session {record}"), encoding="utf-8")

    cluster(vault, bundle(session("s1", T0, minutes=90, turns=5, tools=25)))
    meta, body = arcs_in(vault)[report["created"][0]["cluster_id"]]
    new_line = _timeline_line(body, "s1")
    assert new_line.startswith(mine + " <!-- brain:session ")  # the operator's words, byte for byte
    assert "turns=5" in new_line and meta["activity"]["user_turns"] == 5  # the record still follows the session
    before = path.read_bytes()
    cluster(vault, bundle(session("s1", T0, minutes=90, turns=5, tools=25)))
    assert path.read_bytes() == before


# --- work keys, resumed and merged sessions --------------------------------------------------------------------


def test_arcs_carry_the_work_and_merged_sessions_stay_visible(vault: Path) -> None:
    first = session("w1", T0, prompt="Hey Claude, can you fix the cart total rounding?", files_edited={"src/cart.py": 3},
                    files_read={"README.md": 1, "src/money.py": 2}, commands={"uv run pytest": 4},
                    identifiers=["cart_total"], failures=[{"text": "AssertionError: 10.01 != 10.0", "resolved": True,
                                                           "line": 9, "command": "uv run pytest"}])
    second = session("w2", T0 + timedelta(hours=1), prompt="now the invoice PDF export",
                     files_edited={"src/invoice.py": 2}, commands={"npm run build": 1},
                     failures=[{"text": "TypeError: x is undefined", "resolved": False, "line": 4,
                                "command": "npm run build"}],
                     todos=[{"status": "in_progress", "text": "export totals"}, {"status": "completed", "text": "a"}],
                     last_prompt="the PDF still shows NaN", last_state="Stopped at the PDF renderer")
    report = cluster(vault, bundle(first, second))[1]
    [created] = report["created"]
    meta, body = arcs_in(vault)[created["cluster_id"]]
    assert meta["title"] == "Fix the cart total rounding"
    # Edited, read, generic; each session's counts weigh half those of the session after it
    # (RECENCY_DECAY): w2's 2 edits of invoice.py (2) outrank w1's 3 of cart.py (1.5).
    assert meta["files"] == ["src/invoice.py", "src/cart.py", "src/money.py", "README.md"]
    assert meta["commands"] == ["uv run pytest", "npm run build"]
    assert meta["open_errors"] == ["TypeError: x is undefined (npm run build)"]  # the latest session's only
    assert meta["last_prompt"] == "the PDF still shows NaN" and meta["last_state"] == "Stopped at the PDF renderer"
    assert meta["identifiers"] == ["cart_total"]
    # Every error name met, the resolved AssertionError included (the latest session's first).
    assert meta["errors_met"] == ["TypeError", "AssertionError"]
    assert "“Fix the cart total rounding”" in _timeline_line(body, "w1")
    assert "“now the invoice PDF export”" in _timeline_line(body, "w2")
    assert "<!-- @todo priority=2 source=w2 -->export totals<!-- @/todo -->" in body and ">a<!--" not in body

    # A later session that resumes w2 joins the arc however late it comes, and says so.
    resumed = session("w3", T0 + timedelta(days=2), prompt="continue", continues="w2",
                      todos=[{"status": "pending", "text": "send the PDF"}], last_prompt="ship it")
    report = cluster(vault, bundle(first, second, resumed), out="clusters/2026-11-22")[1]
    assert report["created"] == [] and report["updated"][0]["joined"] == ["w3"]
    meta, body = arcs_in(vault)[created["cluster_id"]]
    assert "resumed from `w2`" in _timeline_line(body, "w3")
    assert meta["last_prompt"] == "ship it" and meta["open_errors"] == []
    assert meta["errors_met"] == ["TypeError", "AssertionError"]  # what was met stays met
    assert "source=w2 -->export totals" not in body  # the latest todo state replaced the older one
    assert "<!-- @todo priority=3 source=w3 -->send the PDF<!-- @/todo -->" in body
    before = tree_digest(vault, include_state=False)
    cluster(vault, bundle(first, second, resumed), out="clusters/2026-11-22")
    assert tree_digest(vault, include_state=False) == before


def test_titles_never_leak_secrets_into_ids_or_file_names(vault: Path) -> None:
    secret = "ghp_" + "Z9" * 18
    report = cluster(vault, bundle(session("x1", T0, prompt=f"push with {secret} and migrate the schema")))[1]
    [created] = report["created"]
    assert "Z9Z9" not in created["path"] and "z9z9" not in created["cluster_id"]
    assert "Z9Z9" not in (vault / created["path"]).read_text(encoding="utf-8")


def test_lessons_and_todos_the_operator_deleted_stay_deleted(vault: Path) -> None:
    lesson = {"kind": "lesson", "text": "`uv run pytest` failed with ImportError; fixed by editing `a.py`, then it passed.",
              "source": "d1:12", "date": "2026-11-20"}
    first = session("d1", T0, lessons=[lesson], todos=[{"status": "pending", "text": "write the changelog"}])
    report = cluster(vault, bundle(first))[1]
    path = vault / report["created"][0]["path"]
    text = path.read_text(encoding="utf-8")
    assert "source=d1:12" in text and "write the changelog" in text
    pruned = "\n".join(line for line in text.split("\n") if "source=d1:12" not in line and "changelog" not in line)
    path.write_text(pruned, encoding="utf-8")
    cluster(vault, bundle(first))  # the same bundle: nothing comes back
    assert path.read_text(encoding="utf-8") == pruned
    # The session grows: only what it learnt after the last mined line is added.
    later = {"kind": "decision", "text": "no, keep the old API instead of the new one", "source": "d1:40",
             "date": "2026-11-20"}
    grown = session("d1", T0, minutes=60, turns=5, lessons=[lesson, later])
    cluster(vault, bundle(grown))
    after = path.read_text(encoding="utf-8")
    assert "source=d1:40" in after and "source=d1:12" not in after


def test_a_scaffolding_session_keeps_the_files_it_wrote_last(vault: Path) -> None:
    """A session that writes a whole application (55 files, once each) is continued by the next
    one, which needs the files written last as much as the first: the arc keeps them all."""
    built = session("g1", T0, prompt="Build the assessment app",
                    files_edited={f"app/Http/Controllers/C{i:02d}Controller.php": 1 for i in range(55)})
    [created] = cluster(vault, bundle(built))[1]["created"]
    files = arcs_in(vault)[created["cluster_id"]][0]["files"]
    assert len(files) == 55 and "app/Http/Controllers/C54Controller.php" in files


def test_the_tick_reads_every_file_an_arc_keeps(vault: Path) -> None:
    """An arc keeps up to 60 files (what the feed's file lists draw on); the tick's reading of
    the arc (ArcInfo.files, what every feed builder sees) drops none of them: on the spotter
    real logs the 51st file was the one the next session read."""
    built = session("k1", T0, prompt="Build the notifier",
                    files_edited={f"lib/notify/n{i:02d}.ex": 1 for i in range(70)})
    [created] = cluster(vault, bundle(built))[1]["created"]
    [path] = list(vault.rglob(f"{created['cluster_id']}.md"))
    kept = arcs_in(vault)[created["cluster_id"]][0]["files"]
    data = path.read_bytes()
    note = parse_note("clusters/x.md", data, size=len(data), mtime_ns=1, sha1="0")
    assert note.arc is not None and len(kept) == 60
    assert list(note.arc.files) == kept


def test_files_outside_the_work_rank_after_it_and_a_folder_beside_the_repo_is_work(vault: Path) -> None:
    """A session in the docs folder edits the code beside it (``X:/acg/addons/…``) and reads its
    notes from another drive (``C:/Users/…``) and the system: the code ranks with the repo's own
    files by use, the notes and the system last."""
    work = session("w1", T0, prompt="Fix the lead view", cwd="X:\\acg\\docs",
                   files_edited={"C:/Users/me/.claude/projects/X--acg-docs/memory/MEMORY.md": 4,
                                 "/usr/lib/python3/odoo/models.py": 3, "X:/acg/addons/crm/views/lead.xml": 2,
                                 "notes.md": 1})
    [created] = cluster(vault, bundle(work))[1]["created"]
    files = arcs_in(vault)[created["cluster_id"]][0]["files"]
    assert files == ["X:/acg/addons/crm/views/lead.xml", "notes.md",
                     "C:/Users/me/.claude/projects/X--acg-docs/memory/MEMORY.md", "/usr/lib/python3/odoo/models.py"]


def test_an_arc_keeps_the_files_read_beside_many_edited(vault: Path) -> None:
    """Two sessions of one piece of work edit 35 files and read the config the next session
    needs again: the arc keeps the read files too (up to 60), the feed can carry them."""
    first = session("f1", T0, prompt="Wire the hooks controller",
                    files_edited={f"lib/app/edited_{i}.ex": 2 for i in range(20)},
                    files_read={"config/config.exs": 3, "config/dev.exs": 1})
    second = session("f2", T0 + timedelta(minutes=30), prompt="now the session registry",
                     files_edited={f"lib/app/more_{i}.ex": 1 for i in range(15)},
                     files_read={"test/support/data_case.ex": 2})
    [created] = cluster(vault, bundle(first, second))[1]["created"]
    files = arcs_in(vault)[created["cluster_id"]][0]["files"]
    assert len(files) == 38 and files[:20] == [f"lib/app/edited_{i}.ex" for i in sorted(range(20), key=str)]
    # Read, by count weighed by recency: f2's 2 reads (2) before f1's 3 (1.5) and 1 (0.5); the
    # edits tie at 1 (f1's 2 halved, f2's 1) and keep their order by name.
    assert files[-3:] == ["test/support/data_case.ex", "config/config.exs", "config/dev.exs"]


def test_a_long_arc_lists_what_its_last_sessions_worked_on_and_keeps_files_outside_its_folder(vault: Path) -> None:
    """Ten sessions on one branch (one arc): each of the first nine edited twelve files nine
    times, the last one edited another five times and the operator's own agent files in
    ``~/.claude``. By count the first session's files would lead; weighed by recency the arc
    lists the last session's first, then the one before it, and so on, and keeps the outside
    files although the repository's own would fill the 60 places (at most AWAY_KEPT of them)."""
    from brain.core.arc_text import AWAY_KEPT, FILES_KEPT

    sessions = [session(f"d{k}", T0 + timedelta(hours=k), prompt="the sidebar", cwd="/w/app", git_branch="sidebar",
                        files_edited={f"src/old_{k}_{i}.ts": 9 for i in range(12)}) for k in range(9)]
    away = {f"/Users/me/.claude/agents/agent-{i}.md": 1 for i in range(AWAY_KEPT + 3)}
    sessions.append(session("d9", T0 + timedelta(hours=9), prompt="the lint agent", cwd="/w/app", git_branch="sidebar",
                            files_edited={"src/sidebar.ts": 5, **away}))
    report = cluster(vault, bundle(*sessions))[1]
    assert len(report["created"]) == 1
    files = arcs_in(vault)[report["created"][0]["cluster_id"]][0]["files"]
    assert len(files) == FILES_KEPT
    assert files[0] == "src/sidebar.ts"  # 5 edits in the last session outweigh 9 in the one before (4.5)
    assert files[1:13] == [f"src/old_8_{i}.ts" for i in sorted(range(12), key=str)]
    assert files[13:25] == [f"src/old_7_{i}.ts" for i in sorted(range(12), key=str)]
    assert files[-AWAY_KEPT:] == sorted(away, key=str)[:AWAY_KEPT]
