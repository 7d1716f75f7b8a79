"""AI-layer commands: ``brain prompt`` (phase 2 alone) and ``brain apply`` (phases 4 + 5 on a saved answer)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from brain.commands._common import (
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


def _refuse_unknown_fields(text: str, path: Path) -> None:
    """A replayed answer is the operator's file: a field Brain does not know is a usage error
    (exit 2, nothing applied), where the tick's live LLM answer only has that field rejected."""
    from brain.core.answer_parse import AnswerError, parse_answer
    from brain.core.answer_schema import TOP_LEVEL_KEYS

    try:
        answer = parse_answer(text)
    except AnswerError:
        return  # an unusable answer is the AI phase's failure (exit 4), reported there
    unknown = sorted(str(name) for name in answer if name not in TOP_LEVEL_KEYS)
    if unknown:
        raise UsageError(
            "unknown field" + ("s " if len(unknown) > 1 else " ") + ", ".join(repr(n) for n in unknown),
            "known fields: " + ", ".join(TOP_LEVEL_KEYS), path=path,
        )


def register(app: typer.Typer) -> None:
    app.command("prompt")(prompt)
    app.command("apply")(apply)


def prompt(
    vault: Path = VaultOpt,
    brain_feed: Path = FeedOpt,
    as_json: bool = typer.Option(False, "--json", help="Print {system, user, tokens, sections} as JSON."),
    now: str = NowOpt,
) -> None:
    """Phase 2 only: print the prompt the tick would send to the LLM; writes nothing.

    The system message comes first, then a blank line, then the user message holding the
    vault data. Token count and budget go to stderr. ``--json`` adds the prompt's digest (its
    clock aside): a tick skips the LLM call when it equals the last successful AI tick's.

    Example: brain prompt --vault ~/vault | wc -c
    """

    def body() -> int:
        from brain.core.keeper import decide
        from brain.io.vault import scan
        from brain.pipeline.ai import prompt_for

        s = settings_from(vault=vault, brain_feed=brain_feed, now=now)
        root = require_vault(s)
        instant = resolve_now(s)
        snapshot = scan(root, feed_dir=s.feed_dir, max_note_bytes=s.max_note_bytes, write_cache=False)
        built = prompt_for(s, snapshot, instant, decide(snapshot.notes.values(), instant, s))
        if as_json:
            sys.stdout.write(json.dumps({"system": built.system, "user": built.user, "tokens": built.tokens,
                                         "budget": s.prompt_token_budget, "candidates": built.candidates,
                                         "sections": built.sections, "digest": built.digest},
                                        indent=2, ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(built.text)
        shown = ", ".join(f"{name} {v['shown']}/{v['total']}" for name, v in built.sections.items())
        log(f"prompt: {built.tokens} tokens (budget {s.prompt_token_budget}); {shown}")
        return 0

    run(body)


def apply(
    vault: Path = VaultOpt,
    recommendations: Path = typer.Option(
        None, "--recommendations", help="The LLM answer to apply: a JSON file, or a saved .brain/answers/<tick>.json."
    ),
    brain_feed: Path = FeedOpt,
    dry_run: bool = typer.Option(False, "--dry-run", help="Plan and report; write nothing at all."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout."),
    now: str = NowOpt,
) -> None:
    """Phase 4 (+5) on a saved answer: validate, apply, re-run the keeper, verify — like a tick.

    Exit 4 when the file holds no usable answer (the deterministic feed is still refreshed),
    3 when a tick holds the vault lock. A second apply of the same answer changes nothing.

    Example: brain apply --vault ~/vault --recommendations /tmp/recommendations.json --dry-run
    """

    def body() -> int:
        from brain.commands.ticking import emit_report
        from brain.core.recommendations import MAX_ANSWER_CHARS
        from brain.pipeline.ai import replay_phase, unwrap_saved
        from brain.pipeline.tick import run_tick

        s = settings_from(vault=vault, brain_feed=brain_feed, now=now)
        require_vault(s)
        if recommendations is None:
            raise UsageError("no recommendations given", "use --recommendations FILE")
        instant = resolve_now(s)
        try:
            with recommendations.open("rb") as handle:
                # One byte past what any usable answer can hold: parsing then refuses it as too long.
                raw = handle.read(MAX_ANSWER_CHARS * 4 + 1)
        except OSError as exc:
            raise UsageError("cannot read the recommendations", exc.strerror or str(exc),
                             path=recommendations) from None
        text = unwrap_saved(raw.decode("utf-8", errors="replace"))
        _refuse_unknown_fields(text, recommendations)
        report = run_tick(s, instant, no_ai=False, dry_run=dry_run,
                          ai_phase=replay_phase(text, str(recommendations)))
        data = report.as_dict()
        emit_report(data, as_json=as_json)
        if not as_json:
            apply_phase = data["phases"].get("apply", {})
            if apply_phase.get("applied"):
                verb = "would apply" if dry_run else "applied"
                log(f"{verb}: " + ", ".join(f"{n} {kind}" for kind, n in apply_phase["applied"].items()))
                for line in apply_phase.get("changes", []):
                    log(f"  {line}")
        return report.exit_code

    run(body)
