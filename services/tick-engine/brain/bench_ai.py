"""AI-layer benchmark for ``make bench`` (SPEC §14): prompt size at scale, cost of applying changes.

- prompt: tokens and build time of the tick prompt over 1 000 and 10 000 in-memory arcs
  (parsed with the scanner's own :func:`~brain.core.model.parse_note`), against the budget;
- apply: 40 changes (20 edges, 10 summaries, 10 signal escalations) applied through
  :func:`brain.pipeline.ai.apply_answer` with a journal, on generated vaults of 1 000 and
  10 000 arcs on disk, next to the same answer cut to 4 changes on the 10 000-arc vault, and
  the files read: applying is O(changes) (only the arcs involved are read), so the 40-change
  figure barely moves with the vault's size. The scan, which every tick pays once anyway, is
  timed apart as the baseline.

Usage: ``python -m brain.bench_ai`` (``make bench`` calls :func:`run`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from brain.core.model import Note, parse_note
from brain.core.prompt import build_prompt
from brain.core.timeutil import require_instant
from brain.settings import Settings

NOW = "2026-11-21T12:00:00Z"
TOPICS = ("ingest", "auth", "billing", "search", "feed", "scheduler", "cache", "gateway", "etl", "vault")


def arc_id(i: int) -> str:
    return f"2026-{1 + i % 11:02d}-{1 + i % 28:02d}-{TOPICS[i % 10]}-work-{i:05d}-{i * 7919 % 16**12:012x}"


def arc_text(i: int, count: int) -> str:
    """One synthetic arc: frontmatter, Ignition, a lesson, an edge, and a signal on one arc in 25."""
    month, day, topic = 1 + i % 11, 1 + i % 28, TOPICS[i % 10]
    signal = (f"<!-- @signal severity=warning source={topic}-{i} -->\n{topic} error budget burning.\n"
              "<!-- @/signal -->\n" if i % 25 == 0 else "")
    edge = arc_id((i + 1) % count)
    return (
        f"---\ncluster_id: {arc_id(i)}\ntitle: {topic.title()} work {i}\nregion: left-hemisphere\n"
        f"status: {'active' if i % 30 == 0 else 'complete'}\nheat: {i % 11}\n"
        f"created: '2026-{month:02d}-{day:02d}T09:00:00Z'\nlast_active: '2026-{month:02d}-{day:02d}T18:00:00Z'\n"
        f"project: {topic}\nsource_sessions:\n- {i:08x}-a\n- {i:08x}-b\nactivity:\n  sessions: 2\n  user_turns: 20\n"
        f"  tool_calls: {40 + i % 300}\n  errors: 1\n  joy: 0\n  compactions: 0\nsynthesized: false\n---\n"
        f"# {topic.title()} work {i}\n\n## Ignition\n\n> Make the {topic} pipeline stop dropping events.\n\n"
        f"## Lessons\n\n<!-- @lesson -->\nBack-pressure beats retries for {topic}.\n<!-- @/lesson -->\n\n{signal}"
        f"## Edges\n\n<!-- @edge type=related target={edge} --> [[{edge}]]\n\n## Source sessions\n\n- {i:08x}-a\n"
    )


def notes(count: int) -> list[Note]:
    out = []
    for i in range(count):
        data = arc_text(i, count).encode("utf-8")
        out.append(parse_note(f"clusters/{arc_id(i)}.md", data, size=len(data), mtime_ns=0,
                              sha1=hashlib.sha1(data, usedforsecurity=False).hexdigest()))
    return out


def generate(vault: Path, count: int) -> None:
    folder = vault / "clusters" / "2026-11-01"
    folder.mkdir(parents=True, exist_ok=True)
    (vault / "brain-feed").mkdir(exist_ok=True)
    for i in range(count):
        (folder / f"{arc_id(i)}.md").write_text(arc_text(i, count), encoding="utf-8")


def answer(count: int, changes: int) -> dict[str, Any]:
    """``changes`` changes spread over the vault: half edges, a quarter summaries, a quarter signals."""
    step = max(1, count // 50)
    edges = [{"source": arc_id(k * step), "target": arc_id(k * step + 7), "type": "unblocks", "reason": "bench"}
             for k in range(changes // 2)]
    summaries = [{"arc": arc_id(k * step + 3), "summary": f"bench summary {k}"} for k in range(changes // 4)]
    signals = [{"arc": arc_id(k * 25), "source": f"{TOPICS[(k * 25) % 10]}-{k * 25}", "action": "escalate",
                "severity": "critical", "reason": "bench"} for k in range(changes - len(edges) - len(summaries))]
    return {"edges": edges, "summaries": summaries, "signals": signals}


def _apply(vault: Path, count: int, changes: int) -> dict[str, Any]:
    from brain.io.transaction import transaction
    from brain.io.vault import scan
    from brain.pipeline.ai import apply_answer

    s = Settings(vault=vault)
    now = require_instant(NOW)
    t = time.perf_counter()
    snapshot = scan(vault, feed_dir=s.feed_dir, max_note_bytes=s.max_note_bytes, write_cache=True)
    scanned = time.perf_counter() - t
    with transaction(vault, "apply", f"bench-{changes}", now) as tx:
        t = time.perf_counter()
        outcome = apply_answer(s, vault, json.dumps(answer(count, changes)), now, target=tx, snapshot=snapshot)
        applied = time.perf_counter() - t
    figures = outcome.phases.apply
    return {"seconds": applied, "scan_seconds": scanned, "applied": sum(figures.applied.values()),
            "read": figures.read, "written": figures.written, "rejected": figures.rejected}


def run(work: Path | None = None) -> dict[str, Any]:
    """Measure the AI layer; returns the figures and the ``lines`` ``make bench`` prints."""
    s = Settings()
    now = require_instant(NOW)
    prompts = {}
    for count in (1_000, 10_000):
        built_notes = notes(count)
        t = time.perf_counter()
        prompt = build_prompt(built_notes, None, previous_intent="Ship the AI layer", settings=s, now=now)
        prompts[count] = {"tokens": prompt.tokens, "seconds": time.perf_counter() - t,
                          "arcs_shown": prompt.sections["arcs"]["shown"], "candidates": prompt.candidates}
    own = work is None
    base = work or Path(tempfile.mkdtemp(prefix="brain-bench-ai-"))
    try:
        applies = {}
        for count, changes in ((1_000, 40), (10_000, 40), (10_000, 4)):
            vault = base / f"vault-{count}-{changes}"
            shutil.rmtree(vault, ignore_errors=True)
            generate(vault, count)
            applies[(count, changes)] = _apply(vault, count, changes)
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)
    big, small, few = applies[(10_000, 40)], applies[(1_000, 40)], applies[(10_000, 4)]
    lines = [
        f"ai prompt: {count} arcs -> {p['tokens']} tokens (budget {s.prompt_token_budget}), built in "
        f"{p['seconds'] * 1000:.0f} ms; {p['arcs_shown']} arcs shown, {p['candidates']} candidate pairs"
        for count, p in prompts.items()
    ]
    lines.append(
        f"ai apply: {big['applied']} changes on 10000 arcs in {big['seconds'] * 1000:.0f} ms "
        f"({big['read']} files read, {big['written']} written); on 1000 arcs {small['seconds'] * 1000:.0f} ms "
        f"(ratio {big['seconds'] / max(small['seconds'], 1e-9):.2f}x for 10x the files); "
        f"{few['applied']} changes on 10000 arcs {few['seconds'] * 1000:.0f} ms; "
        f"baseline: the scan of 10000 arcs {big['scan_seconds'] * 1000:.0f} ms"
    )
    figures = {
        "prompt": {str(k): v for k, v in prompts.items()},
        "apply": {f"{count}x{changes}": v for (count, changes), v in applies.items()},
    }
    return {**figures, "lines": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, default=None, help="generate the vaults into this folder and keep them")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    result = run(args.keep)
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "lines"}, indent=2))
    else:
        print("\n".join(result["lines"]))


if __name__ == "__main__":
    main()
