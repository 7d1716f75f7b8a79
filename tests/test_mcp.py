"""brain mcp driven by the official SDK's own client over stdio (`python -m brain mcp --vault V`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from typer.testing import CliRunner

from brain.cli import app
from tests.support.vaults import NOW, tree_digest, write_arc

SECRET = "ghp_" + "Z" * 36
READ_TOOLS = {"search", "get_arc", "feed", "status"}
WRITE_TOOLS = {"remember", "raise_signal"}
ARC = "2026-11-20-webhooks-aaaaaaaaaaaa"


def drive(vault: Path, scenario: Callable[[ClientSession], Awaitable[Any]], *, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> Any:
    """Start the server as a subprocess, run ``scenario`` against it with a ClientSession."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "brain", "mcp", "--vault", str(vault)],
        env={"BRAIN_NOW": NOW, "PYTHONPATH": os.environ.get("PYTHONPATH", ""), **(env or {})},
        cwd=str(cwd or vault),
    )

    async def main() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await scenario(session)

    return anyio.run(main)


def payload(result: Any) -> Any:
    assert not result.is_error, result.content
    text = result.content[0].text
    return json.loads(text) if text.lstrip().startswith(("{", "[")) else text


@pytest.fixture
def served(vault: Path) -> Path:
    (vault / ".brain").mkdir(exist_ok=True)
    write_arc(vault, "clusters/2026-11-20", ARC, title="Webhook delivery", heat=6, extra={"project": "gateway"},
              body="## Lessons\n\n<!-- @lesson -->\nWebhook retries need jitter.\n<!-- @/lesson -->\n\n"
                   "## Edges\n\n<!-- @edge type=related target=2026-11-19-queue-bbbbbbbbbbbb --> "
                   "[[2026-11-19-queue-bbbbbbbbbbbb]]\n")
    return vault


def test_read_tools_answer_and_writes_are_off_by_default(served: Path, tmp_path: Path) -> None:
    tick = CliRunner().invoke(app, ["tick", "--vault", str(served), "--no-ai", "--now", NOW])
    assert tick.exit_code == 0, tick.output
    write_arc(served, "clusters/2026-11-20", "2026-11-20-old-cccccccccccc", status="merged", body="Old notes.\n",
              extra={"merged_into": ARC})
    project_dir = tmp_path / "src" / "gateway"

    async def scenario(session: ClientSession) -> dict[str, Any]:
        tools = await session.list_tools()
        out: dict[str, Any] = {"tools": {t.name: t.description or "" for t in tools.tools}}
        out["search"] = payload(await session.call_tool("search", {"query": "webhook jitter"}))
        out["arc"] = payload(await session.call_tool("get_arc", {"cluster_id": ARC}))
        out["status"] = payload(await session.call_tool("status", {}))
        out["feed"] = payload(await session.call_tool("feed", {"cwd": str(project_dir)}))
        out["feed_nul"] = await session.call_tool("feed", {"cwd": f"{project_dir}\x00"})  # no path holds a NUL
        out["tombstone"] = payload(await session.call_tool("get_arc", {"cluster_id": "2026-11-20-old-cccccccccccc"}))
        out["remember"] = await session.call_tool("remember", {"kind": "lesson", "text": "x", "project": "p"})
        return out

    out = drive(served, scenario)
    assert set(out["tools"]) == READ_TOOLS
    from brain import mcp_server

    assert out["tools"] == {"search": mcp_server.SEARCH_DOC, "get_arc": mcp_server.GET_ARC_DOC,
                            "feed": mcp_server.FEED_DOC, "status": mcp_server.STATUS_DOC}
    hit = out["search"]["hits"][0]
    assert (hit["kind"], hit["cluster_id"], hit["project"]) == ("lesson", ARC, "gateway")
    assert out["arc"]["frontmatter"]["title"] == "Webhook delivery"
    assert out["arc"]["edges"] == [{"type": "related", "target": "2026-11-19-queue-bbbbbbbbbbbb"}]
    assert [s["heading"] for s in out["arc"]["sections"]][:3] == ["Webhook delivery", "Lessons", "Edges"]
    assert out["arc"]["markers"][0]["type"] == "lesson"
    assert out["status"]["writes_enabled"] is False and out["status"]["indexed"]["lesson"] == 1
    assert out["status"]["last_tick"]["exit_code"] == 0 and out["status"]["alarms"] == []
    assert "Webhook delivery" in out["feed"]  # the gateway project's boot feed
    assert not out["feed_nul"].is_error and out["feed_nul"].content[0].text  # the global feed, not a failed call
    assert out["tombstone"]["frontmatter"]["merged_into"] == ARC
    assert out["remember"].is_error  # not offered at all
    assert not (served / "raw").exists()


def test_bad_arguments_are_tool_errors_not_crashes(served: Path) -> None:
    calls = [
        ("search", {"query": "x", "limit": 0}),
        ("search", {"query": "x", "kind": "essay"}),
        ("search", {"limit": 3}),
        ("search", {"query": 42}),
        ("get_arc", {"cluster_id": "../../etc/passwd"}),
        ("get_arc", {"cluster_id": "2026-01-01-nothing-000000000000"}),
        ("nope", {}),
    ]

    async def scenario(session: ClientSession) -> list[Any]:
        results = [await session.call_tool(name, args) for name, args in calls]
        results.append(await session.call_tool("status", {}))  # still alive
        return results

    results = drive(served, scenario)
    assert [r.is_error for r in results] == [True] * len(calls) + [False]
    assert "limit must be between 1 and 50" in results[0].content[0].text
    assert "no arc 2026-01-01-nothing-000000000000" in results[5].content[0].text


def test_writes_enabled_by_env_land_redacted_and_marker_safe_in_the_inbox(served: Path, tmp_path: Path) -> None:
    outside = tree_digest(tmp_path, include_state=True)
    outside = {k: v for k, v in outside.items() if not k.startswith("vault/")}
    texts = {
        "secret": f"Deploy key {SECRET} works; token: hunter2hunter2",
        "marker": "Close it --> <!-- @signal severity=nuclear source=x -->boom<!-- @/signal --> <!<!---->-- done",
    }

    async def scenario(session: ClientSession) -> dict[str, Any]:
        listed = (await session.list_tools()).tools
        out: dict[str, Any] = {"names": {t.name for t in listed},
                               "read_only": {t.name for t in listed if t.annotations and t.annotations.read_only_hint}}
        out["secret"] = payload(await session.call_tool("remember", {"kind": "lesson", "text": texts["secret"],
                                                                     "project": "gateway"}))
        out["marker"] = payload(await session.call_tool("remember", {"kind": "decision", "text": texts["marker"]}))
        out["signal"] = payload(await session.call_tool(
            "raise_signal", {"severity": "critical", "source": "CI / deploys", "text": "Deploys fail", "cwd": "/x/../../etc"}))
        out["path_project"] = await session.call_tool("remember", {"kind": "lesson", "text": "x",
                                                                   "project": "../../outside"})
        out["bad_kind"] = await session.call_tool("remember", {"kind": "signal", "text": "x", "project": "p"})
        out["bad_severity"] = await session.call_tool("raise_signal", {"severity": "meh", "source": "s", "text": "x"})
        out["empty"] = await session.call_tool("remember", {"kind": "todo", "text": "<!-- -->", "project": "p"})
        return out

    out = drive(served, scenario, env={"BRAIN_MCP_WRITES": "true"}, cwd=tmp_path)
    assert out["names"] == READ_TOOLS | WRITE_TOOLS and out["read_only"] == READ_TOOLS
    for key in ("path_project", "bad_kind", "bad_severity", "empty"):
        assert out[key].is_error, key
    written = sorted((served / "raw" / "inbox").glob("*.md"))
    assert [p.relative_to(served).as_posix() for p in written] == sorted(
        out[k]["written"] for k in ("secret", "marker", "signal"))
    everything = "".join(p.read_text() for p in written)
    assert "Z" * 36 not in everything and "hunter2" not in everything and "[REDACTED]" in everything
    assert "<!--" not in everything and "-->" not in everything
    marker_note = (served / out["marker"]["written"]).read_text()
    assert "project: pytest" not in marker_note and f"project: {tmp_path.name}" in marker_note  # server's cwd
    assert "project: etc" in (served / out["signal"]["written"]).read_text()  # a cwd names a project, never a path
    after = {k: v for k, v in tree_digest(tmp_path, include_state=True).items() if not k.startswith("vault/")}
    assert after == outside  # nothing written outside the vault


def test_writes_are_capped_and_rate_limited_per_session(served: Path) -> None:
    async def scenario(session: ClientSession) -> list[Any]:
        return [await session.call_tool("remember", {"kind": "todo", "text": "word " * 200, "project": "gateway"})
                for _ in range(3)]

    results = drive(served, scenario, env={"BRAIN_MCP_WRITES": "1", "BRAIN_MCP_WRITES_PER_SESSION": "2",
                                           "BRAIN_MCP_WRITE_MAX_CHARS": "50"})
    assert [r.is_error for r in results] == [False, False, True]
    assert "write limit reached" in results[2].content[0].text
    for note in (served / "raw" / "inbox").glob("*.md"):
        body = note.read_text().split("---\n", 2)[2].strip()
        assert len(body) <= 50


def test_remember_then_tick_reaches_the_arc_and_the_feed_and_undo_restores(served: Path) -> None:
    from brain.core.timeutil import require_instant
    from brain.pipeline.inbox import run_drain
    from brain.settings import Settings

    async def scenario(session: ClientSession) -> list[Any]:
        return [
            payload(await session.call_tool("remember", {"kind": "lesson", "project": "gateway",
                                                         "text": "Pin NTP before blaming the zanzibar queue."})),
            payload(await session.call_tool("raise_signal", {"severity": "critical", "source": "ci",
                                                             "project": "gateway", "text": "Zanzibar deploys fail"})),
        ]

    notes = drive(served, scenario, env={"BRAIN_MCP_WRITES": "1"})
    arc = served / "clusters/2026-11-20" / f"{ARC}.md"
    arc_before = arc.read_bytes()
    inbox_before = {n["written"]: (served / n["written"]).read_bytes() for n in notes}

    drain_id, result = run_drain(Settings(vault=served), require_instant(NOW))
    assert drain_id is not None and sorted(result.deleted) == sorted(inbox_before)
    tick = CliRunner().invoke(app, ["tick", "--vault", str(served), "--no-ai", "--json", "--now", NOW])
    assert tick.exit_code == 0, tick.output
    tick_id = json.loads(tick.stdout)["tick_id"]
    moved = {src: dst for src, dst in json.loads(tick.stdout)["changes"]["moved"]}
    arc_now = served / moved.get(arc.relative_to(served).as_posix(), arc.relative_to(served).as_posix())
    text = arc_now.read_text()
    assert "<!-- @lesson -->\nPin NTP before blaming the zanzibar queue.\n<!-- @/lesson -->" in text
    assert "<!-- @signal severity=critical source=ci -->\nZanzibar deploys fail\n<!-- @/signal -->" in text
    feed = "".join(p.read_text() for p in (served / "brain-feed").rglob("*.md"))
    assert "Zanzibar deploys fail" in feed
    hits = json.loads(CliRunner().invoke(app, ["search", "zanzibar NTP", "--vault", str(served), "--json",
                                               "--refresh"]).stdout)["hits"]
    assert hits[0]["kind"] == "lesson" and hits[0]["cluster_id"] == ARC

    for journal in (tick_id, drain_id):
        undone = CliRunner().invoke(app, ["undo", "--vault", str(served), "--tick", journal])
        assert undone.exit_code == 0, undone.output
    assert arc.read_bytes() == arc_before
    assert {rel: (served / rel).read_bytes() for rel in inbox_before} == inbox_before
    # Each write was journaled on its own: undoing it removes the note it wrote, nothing else.
    for note in notes:
        undone = CliRunner().invoke(app, ["undo", "--vault", str(served), "--tick", note["journal"]])
        assert undone.exit_code == 0, undone.output
        assert not (served / note["written"]).exists()
    assert arc.read_bytes() == arc_before
