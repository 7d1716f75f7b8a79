"""``brain hook``: the typer face of the agent hooks (SPEC §12); the logic is in
:mod:`brain.pipeline.hook`, and :mod:`brain.launcher` answers the common calls without typer.

Wiring and behaviour: docs/hooks.md. Every failure exits 1 (Claude Code's non-blocking
error), never 2, which for UserPromptSubmit would block the operator's prompt.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

CwdHelp = "The session's working directory (default: the hook input's `cwd`, else the current folder)."


def register(app: Any) -> None:
    """Add ``brain hook session-start``, ``prompt-submit`` and ``session-end`` (typer imported here only)."""
    import os

    import typer

    from brain.commands._common import EXIT_USAGE, FeedOpt, NowOpt, UsageError, run
    from brain.pipeline import hook

    hook_app = typer.Typer(
        name="hook",
        help="Claude Code and Gemini CLI hooks: hand the brain-feed to agent sessions (see docs/hooks.md).\n\n"
        "Example: brain hook session-start --brain-feed ~/vault/brain-feed",
        no_args_is_help=True,
        add_completion=False,
    )

    def hook_run(command: str, flags: dict[str, str | None], output_format: str = "json") -> None:
        """:func:`run`, but a usage error exits 1: exit 2 would block the prompt in Claude Code."""

        def printing() -> int:
            if output_format not in hook.FORMATS:
                raise UsageError("bad --format", f"{output_format!r}: use json or text")
            try:
                call = hook.hook_call(command, flags, os.environ)
            except hook.HookUsageError as exc:
                what, _, why = str(exc).partition(": ")
                raise UsageError(what, why) from None
            sys.stdout.write(hook.answer(command, call, output_format))
            return 0

        try:
            run(printing)
        except typer.Exit as exc:
            if exc.exit_code == EXIT_USAGE:
                raise typer.Exit(hook.EXIT_HOOK_FAILED) from None
            raise

    def flags(brain_feed: Path | None, now: str | None, cwd: str | None) -> dict[str, str | None]:
        return {"brain_feed": str(brain_feed) if brain_feed else None, "now": now, "cwd": cwd}

    @hook_app.command(
        "session-start",
        help="Print the SessionStart hook answer: the feed written for the session's project.\n\n"
        "Reads the hook input (cwd, session_id, source) on stdin, finds the project from the cwd "
        "(projects/index.json) and prints that project's feed plus any active alarm; a session outside "
        "every known project gets the whole feed (its *.md files, highest `priority` first). Within "
        "BRAIN_FEED_TOKEN_BUDGET, frontmatter stripped; one line notes a feed older than its TTL. Prints "
        "nothing when BRAIN_ENABLED=false or the feed is missing or empty. Feed folder: --brain-feed, else "
        "BRAIN_SOURCE_PATH, else $BRAIN_VAULT/brain-feed.\n\n"
        "Example: echo '{\"cwd\": \"'$PWD'\"}' | brain hook session-start --brain-feed ~/vault/brain-feed --format text",
    )
    def session_start(
        brain_feed: Path | None = FeedOpt,
        output_format: str = typer.Option("json", "--format", help="json (the hook answer) or text (plain markdown)."),
        now: str | None = NowOpt,
        cwd: str | None = typer.Option(None, "--cwd", help=CwdHelp),
    ) -> None:
        hook_run("session-start", flags(brain_feed, now, cwd), output_format)

    @hook_app.command(
        "prompt-submit",
        help="UserPromptSubmit hook: every BRAIN_REFRESH_INTERVAL turns of a session, re-send the "
        "session's feed if it changed since the session last saw it; otherwise print nothing.\n\n"
        "Reads the hook's JSON (session_id, cwd, ...) on stdin.\n\n"
        "Example: echo '{\"session_id\": \"abc\"}' | brain hook prompt-submit --brain-feed ~/vault/brain-feed",
    )
    def prompt_submit(
        brain_feed: Path | None = FeedOpt,
        now: str | None = NowOpt,
        cwd: str | None = typer.Option(None, "--cwd", help=CwdHelp),
    ) -> None:
        hook_run("prompt-submit", flags(brain_feed, now, cwd))

    @hook_app.command(
        "session-end",
        help="SessionEnd hook: keep what the session that ended leaves for the next session in its "
        "project (title, where it stopped, files, commands, errors, open todos), read from the "
        "transcript the hook input names (a Claude Code transcript or a Gemini CLI chat file), until "
        "the next tick has it in the feed. Prints nothing.\n\n"
        "Reads the hook's JSON (session_id, transcript_path, and cwd: a Gemini CLI chat records none) "
        "on stdin; the entry goes to the hook state folder (BRAIN_HOOK_STATE_DIR), where session-start "
        "finds it.\n\n"
        "Example: echo '{\"session_id\": \"abc\", \"transcript_path\": \"'$HOME'/.claude/projects/x/abc.jsonl\"}' "
        "| brain hook session-end",
    )
    def session_end(brain_feed: Path | None = FeedOpt, now: str | None = NowOpt) -> None:
        hook_run("session-end", flags(brain_feed, now, None))

    app.add_typer(hook_app, name="hook")
