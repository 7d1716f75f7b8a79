"""``brain tick`` and ``brain keeper`` without typer: the command body, its report and summary.

The typer commands (:mod:`brain.commands.vault`) and the launcher's fast path
(:mod:`brain.launcher`, a 2-hourly CronJob tick that need not build the command tree) both
run :func:`tick_body`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from brain.commands._base import StepBar, UsageError, log, require_vault, resolve_now, settings_from


def print_summary(report: dict[str, Any]) -> None:
    st, ch = report["stats"], report["changes"]
    log(
        f"tick {report['tick_id']}{' (dry run)' if report['dry_run'] else ''}: {st.get('arcs', 0)} arcs, "
        f"{st.get('promoted', 0)} promoted, {st.get('demoted', 0)} demoted, {st.get('graduated', 0)} graduated, "
        f"{st.get('heat_changed', 0)} heat changes, {len(ch['written'])} written, {len(ch['moved'])} moved, "
        f"{st.get('signals_active', 0)} open signals, feed {st.get('feed_tokens', 0)} tokens"
    )
    for problem in report["problems"][:20]:
        where = f"{problem['path']}:{problem['line']}" if problem["line"] else problem["path"]
        log(f"  problem: {where}: {problem['message']}")
    if len(report["problems"]) > 20:
        log(f"  … {len(report['problems']) - 20} more problems (use --json)")
    for item in report["rejected"][:10]:
        log(f"  rejected {item.get('kind')}: {item.get('reason')}")


def tick_body(vault: Path | None, brain_feed: Path | None, now: str | None, *, no_ai: bool, dry_run: bool,
          as_json: bool, llm_url: str | None = None, model: str | None = None, keeper_only: bool = False,
          process_ends: bool = False) -> int:
    """The command's body; ``process_ends``: the caller leaves the process once it returns
    (:func:`brain.pipeline.tick.run_tick` then frees nothing)."""
    from brain.pipeline.tick import run_tick

    s = settings_from(vault=vault, brain_feed=brain_feed, now=now, llm_url=llm_url, llm_model=model)
    require_vault(s)
    instant = resolve_now(s)
    ai_phase = None
    skip = "--no-ai" if no_ai else None
    if not no_ai and not keeper_only:
        ai_phase, skip = ai_phase_of(s)
        if ai_phase is None:
            log(f"AI phases skipped: {skip}")
    bar = StepBar.on_terminal("keeper" if keeper_only else "tick")
    try:
        report = run_tick(s, instant, no_ai=no_ai, dry_run=dry_run, ai_phase=ai_phase, ai_skip_reason=skip,
                          keeper_only=keeper_only, progress=bar, process_ends=process_ends)
    finally:
        if bar is not None:
            bar.close()
    emit_report(report.as_dict(), as_json=as_json)
    return report.exit_code


def emit_report(data: dict[str, Any], *, as_json: bool) -> None:
    """A tick-shaped report: JSON on stdout, or the short human summary on stderr."""
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    else:
        print_summary(data)


def ai_phase_of(s: Any) -> tuple[Any, str | None]:
    if not s.llm_url:
        return None, "no LLM configured (set BRAIN_LLM_URL or --llm-url); running as --no-ai"
    try:
        from brain.pipeline.ai import make_ai_phase
    except ModuleNotFoundError as exc:
        if exc.name != "brain.pipeline.ai":
            raise
        return None, "the AI layer is not installed in this build"
    from brain.settings import SettingsError

    try:
        phase = make_ai_phase(s)
    except SettingsError as exc:
        raise UsageError("LLM configuration", str(exc)) from None
    return phase, None
