"""``brain mcp``: the stdio MCP server agents call mid-session (SPEC §15)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from brain.commands._common import NowOpt, VaultOpt, require_vault, resolve_now, run, settings_from


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)


def mcp(
    vault: Path = VaultOpt,
    writes: bool = typer.Option(None, "--writes/--no-writes", help="Offer remember and raise_signal "
                                "(env BRAIN_MCP_WRITES; default off)."),
    now: str = NowOpt,
) -> None:
    """Serve the vault to agents over stdio (Model Context Protocol).

    Tools: search, get_arc, feed, status; with writes enabled also remember and raise_signal, which leave notes in V/raw/inbox/ for the next tick. Stdout carries the protocol only. Wiring for Claude Code and Codex: docs/agents-wiring.md.

    Example: claude mcp add brain -- brain mcp --vault ~/vault
    """

    def body() -> int:
        from brain.core.timeutil import wall_clock
        from brain.mcp_server import serve

        s = settings_from(vault=vault, now=now, mcp_writes=writes)
        require_vault(s)
        fixed = resolve_now(s) if s.now else None
        try:
            cwd: str | None = os.getcwd()
        except OSError:
            cwd = None
        serve(s, clock=(lambda: fixed) if fixed is not None else wall_clock, cwd=cwd)
        return 0

    run(body)
