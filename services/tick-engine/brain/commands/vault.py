"""Vault commands: init, tick, keeper, verify, undo, health."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from brain.commands._common import (
    EXIT_FAILED,
    BrainError,
    FeedOpt,
    NowOpt,
    UsageError,
    VaultOpt,
    log,
    require_vault,
    resolve_now,
    run,
    settings_from,
)
from brain.commands.ticking import tick_body


def register(app: typer.Typer) -> None:
    app.command("init")(init)
    app.command("tick")(tick)
    app.command("keeper")(keeper)
    app.command("verify")(verify)
    app.command("undo")(undo)
    app.command("health")(health)


def init(vault: Path = VaultOpt, now: str = NowOpt) -> None:
    """Create the compartment folders and .brain/ (idempotent; never overwrites a file).

    Example: brain init --vault ~/vault
    """

    def body() -> int:
        from brain.core.vocab import COMPARTMENTS

        s = settings_from(vault=vault, now=now)
        root = require_vault(s, must_exist=False)
        if root.exists() and not root.is_dir():
            raise UsageError("vault is not a folder", path=root)
        created = []
        for rel in (*COMPARTMENTS, ".brain"):
            folder = root / rel
            if not folder.is_dir():
                folder.mkdir(parents=True, exist_ok=True)
                created.append(rel)
        log(f"vault ready at {root} ({len(created)} folders created)")
        print(json.dumps({"vault": str(root), "created": created}))
        return 0

    run(body)


def tick(
    vault: Path = VaultOpt,
    brain_feed: Path = FeedOpt,
    no_ai: bool = typer.Option(False, "--no-ai", help="Deterministic phases only (no LLM call, no cost)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Plan and report; write nothing at all."),
    as_json: bool = typer.Option(False, "--json", help="Print the tick report as JSON on stdout."),
    now: str = NowOpt,
    llm_url: str = typer.Option(None, "--llm-url", help="LLM base URL (env: BRAIN_LLM_URL)."),
    model: str = typer.Option(None, "--model", help="LLM model name (env: BRAIN_LLM_MODEL)."),
) -> None:
    """Run a tick: keeper, prompt, LLM, apply, verify.

    Example: brain tick --vault ~/vault --no-ai --json
    """
    run(lambda: tick_body(vault, brain_feed, now, no_ai=no_ai, dry_run=dry_run, as_json=as_json, llm_url=llm_url,
                      model=model))


def keeper(
    vault: Path = VaultOpt,
    brain_feed: Path = FeedOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Plan and report; write nothing at all."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    now: str = NowOpt,
) -> None:
    """Phase 1 only: heat, promote/demote/graduate, brain-feed, dashboards.

    Example: brain keeper --vault ~/vault --dry-run
    """
    run(lambda: tick_body(vault, brain_feed, now, no_ai=True, dry_run=dry_run, as_json=as_json, keeper_only=True))


def verify(
    vault: Path = VaultOpt,
    brain_feed: Path = FeedOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the failures as JSON on stdout."),
    now: str = NowOpt,
) -> None:
    """Phase 5 only: check the vault invariants; exit 1 when one fails.

    Example: brain verify --vault ~/vault
    """

    def body() -> int:
        from brain.pipeline.verify import verify_vault

        s = settings_from(vault=vault, brain_feed=brain_feed, now=now)
        root = require_vault(s)
        resolve_now(s)  # a bad --now is still an error
        failures = verify_vault(s, root, s.feed_dir)
        if as_json:
            print(json.dumps({"ok": not failures, "failures": [f.as_dict() for f in failures]}, indent=2))
        for failure in failures:
            log(f"FAIL {failure.path}: {failure.message}")
        if not failures:
            log("verify: all invariants hold")
        return EXIT_FAILED if failures else 0

    run(body)


def undo(
    vault: Path = VaultOpt,
    tick_id: str = typer.Option(None, "--tick", help="Tick id to undo (default: the latest complete tick)."),
    force: bool = typer.Option(False, "--force", help="Restore even files edited since the tick."),
    now: str = NowOpt,
) -> None:
    """Restore the files a tick changed from its journal.

    Example: brain undo --vault ~/vault --tick 20261121T120700Z-tick
    """

    def body() -> int:
        from brain.io import writer

        s = settings_from(vault=vault, now=now)
        root = require_vault(s)
        # The amygdala's alarm-file journals are not ticks: the default undoes the latest tick or cluster run.
        entries = [m for m in writer.journals(root)
                   if m.get("state") == "complete" and not str(m.get("tick_id", "")).endswith("-amygdala")]
        if tick_id is None:
            if not entries:  # not a failure (exit 1 is for verify and crashes): say so, exit 0
                log(f"nothing to undo: no complete tick journal in {root / writer.JOURNAL_DIR}")
                return 0
            target = entries[-1]["tick_id"]
        else:
            target = tick_id
            if not writer.JOURNAL_ID.match(target) or not (root / writer.JOURNAL_DIR / target / "manifest.json").is_file():
                raise UsageError("unknown tick", f"no journal {target}", path=root / writer.JOURNAL_DIR)
        from brain.io.transaction import transaction

        # No recovery first: undo is how an operator inspects and restores journals by hand.
        with transaction(root, "undo", f"undo-{target}", resolve_now(s), recover=False) as tx:
            try:
                result = tx.undo(target, force=force)
            except writer.JournalError as exc:  # nothing was restored
                raise BrainError(f"cannot undo {target}", f"a damaged journal: {exc}", path=root) from None
        print(json.dumps({"tick_id": target, "restored": result.restored, "conflicts": result.conflicts,
                          "done": result.done}))
        if not result.done:
            raise BrainError(
                f"refusing to undo {target}",
                f"{len(result.conflicts)} files were edited since: {', '.join(result.conflicts[:5])}; use --force",
                path=root,
            )
        log(f"undid {target}: {len(result.restored)} files restored")
        return 0

    run(body)


def health(
    vault: Path = VaultOpt,
    brain_feed: Path = FeedOpt,
    svg: Path = typer.Option(None, "--svg", help="Also draw the trend as an SVG chart into this file."),
    last: int = typer.Option(30, "--last", help="Show the last N ticks."),
) -> None:
    """Show the health trend recorded by every tick (brain-feed/health.jsonl).

    Example: brain health --vault ~/vault --svg health.svg
    """

    def body() -> int:
        from brain.core.health import read_rows, render_svg, render_table

        s = settings_from(vault=vault, brain_feed=brain_feed)
        require_vault(s)
        from brain.io.atomic import read_regular

        path = s.feed_dir / "health.jsonl"
        try:
            text = read_regular(path).decode("utf-8", "replace")
        except FileNotFoundError:
            text = ""
        except OSError as exc:  # a folder or a named pipe in its place: said, never waited on
            log(f"problem: {path}: unreadable: {exc.strerror or exc}")
            text = ""
        rows, bad = read_rows(text)
        for line in bad:
            log(f"problem: {path}:{line}: not a JSON health row; skipped")
        if not rows:
            log(f"no health rows yet in {path}")
            return 0
        sys.stdout.write(render_table(rows[-last:]))
        if svg is not None:
            from brain.io.atomic import atomic_write

            atomic_write(svg, render_svg(rows[-last:]).encode("utf-8"))
            log(f"chart written to {svg}")
        return 0

    run(body)
