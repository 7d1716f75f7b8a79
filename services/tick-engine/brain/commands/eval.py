"""``brain eval feed``: does the session-start feed carry what sessions needed? (FEED-METRIC.md)"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import typer

from brain.commands._common import ProgressBar, UsageError, log, run


def register(app: typer.Typer) -> None:
    eval_app = typer.Typer(
        name="eval",
        help="Measure Brain on your own session logs (see docs/eval.md).\n\n"
        "Example: brain eval feed --projects-dir ~/.claude/projects --codex-dir ~/.codex/sessions",
        no_args_is_help=True,
        add_completion=False,
    )
    eval_app.command("feed")(feed)
    app.add_typer(eval_app, name="eval")


def feed(
    projects_dir: Path = typer.Option(None, "--projects-dir", help="Claude Code projects folder (like ~/.claude/projects)."),
    codex_dir: Path = typer.Option(None, "--codex-dir", help="Codex sessions folder (like ~/.codex/sessions)."),
    profile: str = typer.Option("ideal", "--profile", help="ideal (extraction at every session start, every "
                                "session, Claude Code + Codex) or production (what the Helm chart ships)."),
    mode: str = typer.Option("incremental", "--mode", help="incremental (one vault across targets, like a "
                             "deployment) or fresh (a new vault per target)."),
    warmup: int = typer.Option(2, "--warmup", help="The first N sessions are history only, never scored."),
    exclude_targets_from: Path = typer.Option(None, "--exclude-targets-from", help="Sessions whose log lies in "
                                              "this folder (inside --projects-dir or --codex-dir) are history only."),
    min_target_turns: int = typer.Option(0, "--min-target-turns", help="Score only sessions with at least N human turns."),
    helm_values: Path = typer.Option(None, "--helm-values", help="Chart values for --profile production "
                                     "(default: helm/brain-ops/values.yaml of this checkout)."),
    budget: int = typer.Option(2000, "--budget", help="Token budget of the baselines' feeds."),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON instead of the tables."),
    work_dir: Path = typer.Option(None, "--work-dir", help="Keep the replay's vaults in this folder "
                                  "(default: a temporary folder, removed afterwards)."),
    dump_feeds: Path = typer.Option(None, "--dump-feeds", help="Write every feed of every target to this folder "
                                    "(<session>/<feed>.md), to read what each feed said."),
    judge_packets: Path = typer.Option(None, "--judge-packets", help="Write judge.jsonl (tier 2: one blind "
                                       "prompt per session and feed for an LLM judge) to this folder."),
) -> None:
    """Replay your session logs in time order and measure the boot feed (FEED-METRIC.md).

    For each session S, the vault is built from the sessions that ended before S started (by
    running brain extract, cluster, tick and hook), and the feed S would have received is
    compared with what S then needed (files, commands, errors, identifiers), against naive
    baselines, with bootstrap confidence intervals. Deterministic; no LLM.

    Example: brain eval feed --projects-dir ~/.claude/projects --codex-dir ~/.codex/sessions
    """

    def body() -> int:
        import os
        import shutil
        import tempfile

        from brain.evaluation.evaluate import MODES, EvalRequest, evaluate
        from brain.evaluation.judge import write_feeds, write_judge_packets
        from brain.evaluation.replay import (
            BrainRunner,
            LogSources,
            ReplayError,
            default_helm_values,
            ideal_profile,
            product_env,
            production_profile,
        )
        from brain.evaluation.report import as_json as render_json
        from brain.evaluation.report import human

        if projects_dir is None and codex_dir is None:
            raise UsageError("no session logs", "give --projects-dir and/or --codex-dir")
        for given in (projects_dir, codex_dir):
            if given is not None and not given.is_dir():
                raise UsageError("log folder not found", "not a folder", path=given)
        if mode not in MODES:
            raise UsageError("bad --mode", f"{mode!r}: use incremental or fresh")
        if warmup < 0 or min_target_turns < 0 or budget <= 0:
            raise UsageError("bad numbers", "--warmup and --min-target-turns >= 0, --budget > 0")
        sources = LogSources(projects_dir.expanduser().resolve() if projects_dir else None,
                             codex_dir.expanduser().resolve() if codex_dir else None)
        try:
            if profile == "ideal":
                chosen = ideal_profile()
                if sources.agent() != "all":
                    chosen = type(chosen)(chosen.name, sources.agent(), chosen.min_turns, source=chosen.source)
            elif profile == "production":
                values = helm_values or default_helm_values()
                if values is None:
                    raise UsageError("no chart values", "pass --helm-values helm/brain-ops/values.yaml")
                chosen = production_profile(values, codex_available=codex_dir is not None)
                if sources.projects_dir is None and chosen.agent == "claude-code":
                    raise UsageError("no Claude Code logs", "the production profile reads Claude Code only; "
                                     "give --projects-dir")
            else:
                raise UsageError("bad --profile", f"{profile!r}: use ideal or production")
        except ReplayError as exc:
            raise UsageError("cannot build the profile", str(exc)) from None
        if exclude_targets_from is not None:
            inside = [d for d in (sources.projects_dir, sources.codex_dir)
                      if d is not None and exclude_targets_from.resolve().is_relative_to(d)]
            if not inside:
                raise UsageError("--exclude-targets-from must lie inside --projects-dir or --codex-dir",
                                 path=exclude_targets_from)
        request = EvalRequest(sources, chosen, mode=mode, warmup=warmup, exclude_targets_from=exclude_targets_from,
                              min_target_turns=min_target_turns, budget=budget)
        work = Path(tempfile.mkdtemp(prefix="brain-eval-")) if work_dir is None else work_dir.resolve()
        work.mkdir(parents=True, exist_ok=True)
        runner = BrainRunner(product_env(os.environ, work))
        bar = ProgressBar.on_terminal("targets")
        started = time.monotonic()
        try:
            result = evaluate(request, runner, work, progress=None if bar is None else bar.update)
        except ReplayError as exc:
            raise UsageError("replay failed", str(exc)) from None
        finally:
            if bar is not None:
                bar.close()
            if work_dir is None:
                shutil.rmtree(work, ignore_errors=True)
        if dump_feeds is not None:
            write_feeds(result, dump_feeds)
        if judge_packets is not None:
            write_judge_packets(result, judge_packets)
        log(f"eval feed: {len(result.targets)} targets replayed with {runner.calls} product commands in "
            f"{time.monotonic() - started:.1f} s")
        sys.stdout.write(render_json(result) if as_json else human(result))
        return 0

    run(body)
