"""Phases 2-4 of the tick (SPEC §8): prompt, the one LLM call, apply — as an ``AIPhase``.

:func:`make_ai_phase` returns the function :func:`brain.pipeline.tick.run_tick` calls after
the keeper; the tick then re-runs the keeper (heat and places of the arcs apply changed) and
verifies. :func:`apply_answer` is phase 4 alone, shared with ``brain apply``
(:func:`replay_phase`).

Failures: an LLM error (after the client's retries) or an answer that is not one JSON
object ends the AI phases with ``failed`` (the tick exits 4); phase 1 already wrote a fresh
feed.

Unchanged vault, no call: after an AI tick whose answer was usable, the prompt's digest (both
messages without their clock prefix) and the model are kept in ``.brain/ai-state.json``; a
later tick whose prompt has the same digest, for the same model, skips the LLM call and the apply (reported as
``{"skipped": "prompt unchanged since <tick_id>"}``) — the same question would cost the same
money for, at best, the same answer (``llm_skip_unchanged``, on by default). Every answer the model gave is kept, redacted, under ``.brain/answers/<tick_id>.json``
(with the prompt it answered, its usage and cost) for audit and for ``brain apply``; the
newest ``journal_keep`` are kept.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from brain.core import frontmatter
from brain.core.apply import CurrentArc, plan_answer
from brain.core.candidates import candidate_summary, live_arcs
from brain.core.model import Note, Problem
from brain.core.prompt import EXCERPT_ARCS, HeatSource, Prompt, build_prompt, excerpt, unsynthesized
from brain.core.recommendations import (
    ANSWER_SCHEMA,
    AnswerError,
    Validated,
    parse_answer,
    validate,
    views_from_notes,
)
from brain.core.redaction import redact
from brain.core.timeutil import iso
from brain.core.vocab import AMYGDALA
from brain.io.atomic import atomic_write, read_regular
from brain.io.llm import Completion, LLMClient, LLMError, client_from_settings
from brain.io.transaction import Target
from brain.io.vault import ChangedError, Snapshot, expect_of, read_current
from brain.pipeline.keeper import KeeperPlan
from brain.pipeline.reports import AIOutcome, AIReports, ApplyReport, LLMReport, PromptReport
from brain.pipeline.tick import AIPhase
from brain.settings import Settings, SettingsError

ANSWERS_DIR = ".brain/answers"
#: Digest of the last prompt whose answer was usable, and the tick that sent it.
AI_STATE = ".brain/ai-state.json"
#: ``kind`` of a saved answer file; ``brain apply`` unwraps such a file to the answer it holds.
SAVED_KIND = "brain-answer"


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 2)


# --- prompt ---------------------------------------------------------------------------------

def previous_intent(feed_dir: Path) -> str | None:
    """The operator intent the last AI tick wrote to ``intent.md`` (None when there is none)."""
    try:
        text = read_regular(feed_dir / "intent.md").decode("utf-8", "replace")
    except OSError:
        return None
    try:
        body = frontmatter.split(text).body
    except frontmatter.FrontmatterError:
        body = text
    lines = [
        line.strip() for line in body.splitlines()
        if line.strip() and not line.startswith("#") and not line.strip().startswith("_")
    ]
    return " ".join(lines) or None


def prompt_for(settings: Settings, snapshot: Snapshot, now: datetime, decisions_or_heat: HeatSource) -> Prompt:
    """The tick prompt for ``snapshot``: reads only the excerpts of the hottest unsynthesized arcs."""
    notes = list(snapshot.notes.values())
    arcs = live_arcs(notes)
    excerpts: dict[str, str] = {}
    for cid in unsynthesized(notes, decisions_or_heat)[:EXCERPT_ARCS]:
        try:
            excerpts[cid] = excerpt(read_regular(snapshot.vault / arcs[cid].path).decode("utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return build_prompt(notes, decisions_or_heat, previous_intent=previous_intent(settings.feed_dir),
                        settings=settings, now=now, excerpts=excerpts)


# --- the LLM phase --------------------------------------------------------------------------

def make_ai_phase(settings: Settings, *, client: LLMClient | None = None) -> AIPhase:
    """The AI phases of a tick against the configured LLM (``client`` replaces it in tests).

    Raises :class:`SettingsError` when no LLM is configured or its configuration is invalid.
    """
    llm = client if client is not None else client_from_settings(settings)
    if llm is None:
        raise SettingsError("no LLM configured (set BRAIN_LLM_URL or --llm-url)")

    def phase(s: Settings, snapshot: Snapshot, kplan: KeeperPlan, now: datetime, target: Target) -> AIOutcome:
        journal = target.journal  # None in a dry run: no answer, no digest kept
        t = time.perf_counter()
        prompt = prompt_for(s, snapshot, now, kplan.decisions)
        asked = PromptReport(ms=_ms(t), tokens=prompt.tokens, budget=s.prompt_token_budget, sections=prompt.sections,
                             candidates=candidate_summary(prompt.found))
        key = f"{prompt.digest} {s.llm_model}"
        last = last_prompt(snapshot.vault) if s.llm_skip_unchanged else None
        if last is not None and last[0] == key:
            return AIOutcome(AIReports.skipped(f"prompt unchanged since {last[1]}", prompt=asked))
        t = time.perf_counter()
        try:
            completion = llm.complete(prompt.system, prompt.user, json_schema=ANSWER_SCHEMA)
        except LLMError as exc:
            called = LLMReport(ms=_ms(t), error=str(exc), status=exc.status, attempts=exc.attempts)
            return AIOutcome(AIReports(asked, called, ApplyReport(skipped="the LLM call failed")), failed=True,
                             problems=[Problem("llm", None, f"AI phase failed: {exc}; the deterministic feed is fresh")])
        called = LLMReport(ms=_ms(t), completion=completion.as_dict())
        saved, problems = None, []
        if journal is not None:
            try:
                saved = save_answer(snapshot.vault, journal.tick_id, now, completion, prompt, keep=s.journal_keep)
                called.answer = saved
            except OSError as exc:  # the audit copy is not worth the tick
                problems.append(Problem(ANSWERS_DIR, None, f"could not keep the answer: {exc}"))
        outcome = apply_answer(s, snapshot.vault, completion.text, now, target=target, snapshot=snapshot,
                               source=saved or "llm answer")
        outcome.phases.prompt, outcome.phases.llm = asked, called
        outcome.problems = problems + outcome.problems
        outcome.health.update({"input_tokens": completion.input_tokens, "output_tokens": completion.output_tokens,
                               "cost_usd": completion.cost_usd})
        if not outcome.failed and journal is not None:
            try:
                remember_prompt(snapshot.vault, key, journal.tick_id)
            except OSError as exc:  # the next tick then asks again: a cost, not a fault
                outcome.problems.append(Problem(AI_STATE, None, f"could not keep the prompt digest: {exc}"))
        return outcome

    return phase


def last_prompt(vault: Path) -> tuple[str, str] | None:
    """(key, tick_id) of the last prompt whose answer was usable, if any; the key is the prompt's
    digest and the model it was sent to."""
    try:
        state = json.loads((vault / AI_STATE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if isinstance(state, dict) and isinstance(state.get("key"), str) and isinstance(state.get("tick_id"), str):
        return state["key"], state["tick_id"]
    return None


def remember_prompt(vault: Path, key: str, tick_id: str) -> None:
    atomic_write(vault / AI_STATE, json.dumps({"key": key, "tick_id": tick_id}).encode("utf-8"))


def save_answer(vault: Path, tick_id: str, now: datetime, completion: Completion, prompt: Prompt, *,
                keep: int) -> str:
    """Keep the model's raw answer (redacted) and what it answered; returns the vault-relative path."""
    rel = f"{ANSWERS_DIR}/{tick_id}.json"
    record = {
        "kind": SAVED_KIND,
        "tick_id": tick_id,
        "now": iso(now),
        **completion.as_dict(),
        "prompt_tokens_estimate": prompt.tokens,
        "answer": redact(completion.text),
        "prompt": {"system": prompt.system, "user": prompt.user},
    }
    atomic_write(vault / rel, json.dumps(record, indent=1, ensure_ascii=False).encode("utf-8"))
    saved = sorted(p for p in (vault / ANSWERS_DIR).glob("*.json") if p.is_file())
    for old in saved[: max(0, len(saved) - max(1, keep))]:
        old.unlink(missing_ok=True)
    return rel


def unwrap_saved(text: str) -> str:
    """The answer inside a file saved under ``.brain/answers/``; any other text as it is."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if isinstance(data, dict) and data.get("kind") == SAVED_KIND and isinstance(data.get("answer"), str):
        answer: str = data["answer"]
        return answer
    return text


# --- apply ----------------------------------------------------------------------------------

def _involved(validated: Validated) -> set[str]:
    ids: set[str] = set()
    for merge in validated.merges:
        ids.update((merge.keep, merge.absorb))
    ids.update(split.arc for split in validated.splits)
    ids.update(change.arc for change in validated.signals)
    ids.update(edge.source for edge in validated.edges)
    ids.update(summary.arc for summary in validated.summaries)
    ids.update(synthesis.arc for synthesis in validated.syntheses)
    return ids


def _health(validated: Validated | None) -> dict[str, Any]:
    health = validated.health if validated is not None else None
    return {"score": health.score if health else None, "reason": health.reason if health else None}


def apply_answer(
    settings: Settings,
    vault: Path,
    answer_text: str,
    now: datetime,
    *,
    target: Target,
    snapshot: Snapshot,
    source: str = "llm answer",
) -> AIOutcome:
    """Phase 4: parse, validate and apply ``answer_text`` to ``target`` (the run's transaction, or
    a dry run's preview).

    Only the arcs the answer touches are read (with :func:`read_current`: one that changed
    since ``snapshot`` has its changes rejected); the cost is O(changes) beyond the scan.
    """
    t = time.perf_counter()
    views, signals = views_from_notes(snapshot.notes.values())
    try:
        answer = parse_answer(answer_text)
        validated = validate(answer, arcs=views, open_signals=signals, max_changes=settings.max_ai_changes,
                             redact=redact)
    except AnswerError as exc:
        message = f"unusable answer: {exc}"
        return AIOutcome(AIReports(apply=ApplyReport(ms=_ms(t), error=message)), failed=True,
                         problems=[Problem(source, None, f"AI phase failed, {message}; the deterministic feed is fresh")],
                         health=_health(None))

    by_id = snapshot.arcs_by_id()
    unique = {cid: notes[0] for cid, notes in by_id.items() if len(notes) == 1}
    current, unavailable = read_involved(vault, unique, _involved(validated))
    planned = plan_answer(validated, current, now=now, unavailable=unavailable, taken_ids=set(by_id),
                          taken_paths=set(snapshot.notes),
                          tick_id=target.journal.tick_id if target.journal is not None else "dry-run")
    result = target.apply(planned.plan)
    rejected = [r.as_dict() for r in (*validated.rejected, *planned.rejected)]
    written = set(result.written)
    return AIOutcome(
        AIReports(apply=ApplyReport(ms=_ms(t), applied=planned.applied, changes=planned.diff_lines,
                                    rejected=len(rejected), read=len(current) + len(unavailable),
                                    written=len(result.written), created=len(planned.created))),
        result=result,
        diff_lines=planned.diff_lines,
        intent=validated.intent,
        rejected=rejected,
        problems=list(result.problems),
        health=_health(validated),
        edges_added=sum(n for path, n in planned.edges_by_path.items() if path in written),
    )


def read_involved(vault: Path, unique: Mapping[str, Note],
                  ids: Iterable[str]) -> tuple[dict[str, CurrentArc], dict[str, str]]:
    """The current text of each arc in ``ids`` (``unique``: cluster_id -> its one file), and why
    the others could not be read."""
    current: dict[str, CurrentArc] = {}
    unavailable: dict[str, str] = {}
    for cid in sorted(ids):
        note = unique.get(cid)
        if note is None:
            unavailable[cid] = "the arc is not in the vault"
            continue
        if note.path.startswith(f"{AMYGDALA}/"):
            unavailable[cid] = "an alarm file belongs to the amygdala consumer"
            continue
        try:
            text = read_current(vault, note)
        except ChangedError:
            unavailable[cid] = "changed since the scan; the next tick takes it up"
            continue
        except UnicodeDecodeError:
            unavailable[cid] = "not valid UTF-8"
            continue
        current[cid] = CurrentArc(cid, note.path, text, expect_of(note))
    return current, unavailable


def replay_phase(answer_text: str, source: str) -> AIPhase:
    """An AIPhase that applies a saved answer instead of asking a model (``brain apply``)."""

    def phase(s: Settings, snapshot: Snapshot, kplan: KeeperPlan, now: datetime, target: Target) -> AIOutcome:
        outcome = apply_answer(s, snapshot.vault, answer_text, now, target=target, snapshot=snapshot, source=source)
        skipped = f"brain apply: the answer comes from {source}"
        outcome.phases.prompt, outcome.phases.llm = PromptReport(skipped=skipped), LLMReport(skipped=skipped)
        return outcome

    return phase
