"""``brain extract`` and ``brain cluster``: phase 0, session logs -> arcs (SPEC §2, §5)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer

from brain.commands._common import (
    NowOpt,
    ProgressBar,
    UsageError,
    VaultOpt,
    log,
    require_vault,
    resolve_now,
    run,
    settings_from,
)


def register(app: typer.Typer) -> None:
    app.command("extract")(extract)
    app.command("cluster")(cluster)


def extract(
    agent: str = typer.Option("all", "--agent", help="claude-code, codex, gemini-cli, opencode or all."),
    projects_dir: Path = typer.Option(None, "--projects-dir", help="Claude Code projects folder "
                                      "(env BRAIN_PROJECTS_DIR; default ~/.claude/projects)."),
    codex_dir: Path = typer.Option(None, "--codex-dir", help="Codex sessions folder "
                                   "(env BRAIN_CODEX_DIR; default ~/.codex/sessions)."),
    gemini_dir: Path = typer.Option(None, "--gemini-dir", help="Gemini CLI folder "
                                    "(env BRAIN_GEMINI_DIR; default ~/.gemini/tmp)."),
    opencode_dir: Path = typer.Option(None, "--opencode-dir", help="OpenCode data folder "
                                      "(env BRAIN_OPENCODE_DIR; default ~/.local/share/opencode)."),
    since: str = typer.Option(None, "--since", help="Window start: 26h, 7d or ISO-8601 (env BRAIN_SINCE; default 26h)."),
    until: str = typer.Option(None, "--until", help="Window end: ISO-8601 or relative like 2h (default: now)."),
    project: str = typer.Option(None, "--project", help="Only sessions whose project or cwd contains this."),
    min_turns: int = typer.Option(None, "--min-turns", help="Leave out sessions with fewer human turns "
                                  "(env BRAIN_MIN_TURNS; default 1)."),
    vault: Path = typer.Option(None, "--vault", help="Incremental: keep a cursor in V/.brain/extract-cursor.json and "
                               "read only the logs changed since the last run that `brain cluster` committed."),
    cursor: Path = typer.Option(None, "--cursor", help="Incremental with the cursor in this file instead."),
    now: str = NowOpt,
) -> None:
    """Read Claude Code, Codex, Gemini CLI and OpenCode session logs; print the session bundle JSON on stdout.

    Files modified before the window are never opened; every text field is redacted. With --until T
    nothing stamped after T gets through (a session running at T is cut at T). With --vault or
    --cursor only logs changed since the last committed run are read; `brain cluster` commits the
    cursor once the arcs are written, so a failed run loses nothing.

    Example: brain extract --vault ~/vault | brain cluster --out-dir ~/vault/clusters/$(date -u +%F) --vault ~/vault
    """

    def body() -> int:
        from brain.pipeline.extract import ExtractError, vault_cursor
        from brain.pipeline.extract import extract as run_extract

        if vault is not None and cursor is not None:
            raise UsageError("bad extract request", "use --vault or --cursor, not both")
        if vault is not None:
            require_vault(settings_from(vault=vault))
        where = vault_cursor(vault) if vault is not None else cursor

        s = settings_from(projects_dir=projects_dir, codex_dir=codex_dir, gemini_dir=gemini_dir,
                          opencode_dir=opencode_dir, since=since, min_turns=min_turns, now=now)
        instant = resolve_now(s)
        bar = ProgressBar.on_terminal("files")
        progress = None if bar is None else (
            lambda done, total, read: bar.update(done, total, f" {read / 1e6:.1f} MB"))
        try:
            bundle = run_extract(s, instant, agent=agent, until=until, project=project, progress=progress,
                                 cursor=where)
        except ExtractError as exc:
            raise UsageError("bad extract request", str(exc)) from None
        finally:
            if bar is not None:
                bar.close()
        for warning in bundle.warnings:
            log(f"warning: {warning}")
        st = bundle.stats
        log(f"extract: {st['sessions']} sessions ({st['sessions_found']} found) from {st['files_read']} files "
            f"read, {st['files_skipped_by_mtime']} skipped by mtime"
            + (f", {st.get('files_unchanged_since_cursor', 0)} unchanged since the cursor" if where else "")
            + f", {st['damaged_lines']} damaged lines skipped")
        sys.stdout.write(bundle.dumps())
        return 0

    run(body)


def _load_bundle(bundle: str | None) -> Any:
    source = bundle or "-"
    try:
        if source == "-":
            if sys.stdin.isatty():
                raise UsageError("no bundle", "pipe `brain extract` into `brain cluster` or pass --bundle FILE")
            raw = sys.stdin.buffer.read()
            where = "<stdin>"
        else:
            raw = Path(source).read_bytes()
            where = source
    except OSError as exc:
        raise UsageError("cannot read the bundle", exc.strerror or str(exc), path=source) from None
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise UsageError("the bundle is not JSON", str(exc)[:200], path=where) from None


def _commit_cursor(data: Any, dry_run: bool) -> None:
    """The arcs are written: promote the extraction's pending cursor (see io.sessions.incremental)."""
    mark = data.get("cursor") if isinstance(data, dict) else None
    if dry_run or not isinstance(mark, dict):
        return
    from brain.io.sessions.incremental import commit

    file, token = mark.get("file"), mark.get("token")
    if isinstance(file, str) and isinstance(token, str) and file and token and commit(Path(file), token):
        log(f"cluster: extraction cursor committed ({file})")


def cluster(
    out_dir: Path = typer.Option(..., "--out-dir", help="Folder for new arcs, normally V/clusters/<YYYY-MM-DD>."),
    vault: Path = VaultOpt,
    bundle: str = typer.Option(None, "--bundle", help="Bundle file, or - for stdin (the default)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would be written; write nothing."),
    now: str = NowOpt,
) -> None:
    """Turn a session bundle into arc files: new arcs in --out-dir, existing arcs updated.

    With --vault (or when --out-dir is V/clusters/<date> of an existing vault) a session already in an arc anywhere in the vault updates that arc; the same bundle twice changes nothing. A JSON summary goes to stdout; --dry-run reports the same and writes nothing.

    Example: brain extract --since 26h | brain cluster --out-dir ~/vault/clusters/2026-02-12 --vault ~/vault
    """

    def body() -> int:
        from brain.core.session import BundleError
        from brain.pipeline.cluster import ClusterError, run_cluster, summary_line

        s = settings_from(vault=vault, now=now)
        instant = resolve_now(s)
        if s.vault is not None:
            require_vault(s)
        data = _load_bundle(bundle)
        try:
            report = run_cluster(s, instant, bundle=data, out_dir=out_dir, vault=s.vault, dry_run=dry_run)
        except (BundleError, ClusterError) as exc:
            raise UsageError("cannot cluster", str(exc)) from None
        log(summary_line(report))
        _commit_cursor(data, dry_run)
        for problem in report.problems[:20]:
            where = f"{problem.path}:{problem.line}" if problem.line else problem.path
            log(f"  problem: {where}: {problem.message}")
        sys.stdout.write(json.dumps(report.as_dict(), indent=2, ensure_ascii=False) + "\n")
        return 0

    run(body)
