"""Recall benchmark for ``make bench`` (SPEC §14, §15), on a generated vault of 10 000 arcs.

- build: full index build from a scan (the scan itself timed apart);
- search: p50 / p95 over 100 queries of one to three words drawn from the same Zipf-distributed
  vocabulary as the arcs (a few words in every note, most words rare, as in real notes), minus
  its 30 most frequent words, which play the part of "the" and "and" that nobody searches for;
  the worst case, one word found in nearly every arc, is printed apart;
- refresh: re-indexing after 1 % of the arcs changed, given the notes of the scan the tick does
  anyway (timed apart);
- prompt-submit with recall: ``brain hook prompt-submit`` as a subprocess, wall time (the prompt
  matches the planted lesson and names another project, so both kinds of recall line are built).

Every arc carries frontmatter work items (files, commands, errors, identifiers) like real arcs.

Usage: ``python -m brain.bench_search [--arcs N]`` (``make bench`` calls :func:`run`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

NOW = "2026-11-21T12:00:00Z"
TOPICS = ("ingest", "auth", "billing", "search", "feed", "scheduler", "cache", "gateway", "etl", "vault")
_WORD_TEXT = (
    "retry backoff queue worker timeout deadlock migration schema index latency throughput webhook token "
    "session cookie cursor batch stream replica shard lock mutex goroutine thread pool connection socket "
    "handshake certificate rotation secret config flag rollout canary rollback alert pager dashboard metric "
    "histogram bucket quota limit burst spike regression benchmark profile allocation leak garbage heap "
    "stack trace panic crash restart probe liveness readiness container image registry manifest chart "
    "release tag branch merge conflict rebase review lint typecheck fixture snapshot golden flaky parallel"
)
WORDS = _WORD_TEXT.split()
SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "fi", "gu", "ha", "jo", "be")


def _vocabulary(size: int = 3000) -> tuple[list[str], list[float]]:
    """Words and cumulative Zipf weights: a few words everywhere, most words rare, like real notes."""
    rng = random.Random(3)
    words = list(WORDS)
    while len(words) < size:
        word = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
        if word not in words:
            words.append(word)
    rng.shuffle(words)
    cumulative, total = [], 0.0
    for rank in range(1, len(words) + 1):
        total += 1.0 / rank
        cumulative.append(total)
    return words, cumulative


VOCABULARY, CUMULATIVE = _vocabulary()
PLANTED = "The zanzibar webhook signer drops retries when the clock skews; pin NTP before blaming the queue."
PLANTED_QUERY = "zanzibar webhook clock skew"


def arc_id(i: int) -> str:
    return f"2026-{1 + i % 11:02d}-{1 + i % 28:02d}-{TOPICS[i % 10]}-work-{i:05d}-{i * 7919 % 16**12:012x}"


def words(rng: random.Random, n: int) -> list[str]:
    return rng.choices(VOCABULARY, cum_weights=CUMULATIVE, k=n)


STOP_RANKS = 30


def query_words(rng: random.Random, n: int) -> list[str]:
    """Words a person would search for: the vocabulary's distribution without its top ranks."""
    out: list[str] = []
    while len(out) < n:
        word = words(rng, 1)[0]
        if VOCABULARY.index(word) >= STOP_RANKS:
            out.append(word)
    return out


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(words(rng, n)).capitalize() + "."


def work_fields(i: int) -> str:
    """The arc's frontmatter work items (CLUSTERS.md), as real arcs carry them: eight files under
    the project's checkout, two commands, an open error on some, an identifier. Derived from ``i``
    alone, so the rest of the generated text does not change with them."""
    topic = TOPICS[i % 10]
    files = "".join(f"- /src/{topic}/src/{VOCABULARY[(i * 31 + k * 97) % len(VOCABULARY)]}.py\n" for k in range(8))
    errors = "\n- TimeoutError" if i % 7 == 0 else " []"
    return (f"cwd: /src/{topic}\nfiles:\n{files}commands:\n- make test\n- uv run pytest\n"
            f"open_errors:{errors}\nidentifiers:\n- {topic}_{VOCABULARY[(i * 17) % len(VOCABULARY)]}\n")


def arc_text(i: int, rng: random.Random, *, lesson: str | None = None, heat: int | None = None) -> str:
    topic = TOPICS[i % 10]
    month, day = 1 + i % 11, 1 + i % 28
    lesson = lesson or _sentence(rng, 12)
    signal = (f"<!-- @signal severity=warning source={topic}-{i} -->\n{_sentence(rng, 8)}\n<!-- @/signal -->\n\n"
              if i % 25 == 0 else "")
    return (
        f"---\ncluster_id: {arc_id(i)}\ntitle: {topic.title()} {' '.join(words(rng, 2))} work {i}\n"
        f"region: left-hemisphere\nstatus: {'active' if i % 30 == 0 else 'complete'}\n"
        f"heat: {heat if heat is not None else i % 11}\ncreated: '2026-{month:02d}-{day:02d}T09:00:00Z'\n"
        f"last_active: '2026-{month:02d}-{day:02d}T18:00:00Z'\nproject: {topic}\nsource_sessions:\n- {i:08x}-a\n"
        f"activity:\n  sessions: 1\n  user_turns: 20\n  tool_calls: 40\n  errors: 1\n  joy: 0\n  compactions: 0\n"
        f"synthesized: false\n{work_fields(i)}---\n# {topic.title()} work {i}\n\n## Ignition\n\n> {_sentence(rng, 10)}\n\n"
        f"## Timeline\n\n- {_sentence(rng, 14)}\n- {_sentence(rng, 14)}\n\n"
        f"## Lessons\n\n<!-- @lesson -->\n{lesson}\n<!-- @/lesson -->\n\n{signal}"
        f"## Resolution\n\n{_sentence(rng, 16)}\n\n## Source sessions\n\n- {i:08x}-a\n"
    )


def generate(vault: Path, count: int, *, seed: int = 11, planted_at: int | None = None) -> None:
    """A vault of ``count`` arcs under ``clusters/<date>/``, written directly (fast).

    ``planted_at``: that arc carries :data:`PLANTED` as its lesson, heat 0 (no help from heat).
    """
    rng = random.Random(seed)
    for rel in ("clusters", "frontal-lobe/conscious", "brain-feed", ".brain"):
        (vault / rel).mkdir(parents=True, exist_ok=True)
    folders: set[str] = set()
    for i in range(count):
        folder = f"clusters/2026-{1 + i % 11:02d}-{1 + i % 28:02d}"
        if folder not in folders:
            (vault / folder).mkdir(parents=True, exist_ok=True)
            folders.add(folder)
        planted = i == planted_at
        text = arc_text(i, rng, lesson=PLANTED if planted else None, heat=0 if planted else None)
        (vault / folder / f"{arc_id(i)}.md").write_text(text, encoding="utf-8")
    old = time.time() - 3600
    for path in vault.rglob("*.md"):
        os.utime(path, (old, old))


def _scan(vault: Path) -> Any:
    from brain.io.vault import scan

    return scan(vault, feed_dir=vault / "brain-feed", max_note_bytes=2_000_000, write_cache=True)


def run(count: int = 10_000) -> dict[str, Any]:
    from brain.search import index

    work = Path(tempfile.mkdtemp(prefix="brain-bench-search-"))
    try:
        vault = work / "vault"
        generate(vault, count, planted_at=count // 2)
        t = time.perf_counter()
        snapshot = _scan(vault)
        scan_s = time.perf_counter() - t
        build = index.rebuild(vault, snapshot.notes.values())
        rng = random.Random(5)
        queries = [" ".join(query_words(rng, rng.randint(1, 3))) for _ in range(99)] + [PLANTED_QUERY]
        timings = []
        for query in queries:
            t = time.perf_counter()
            index.search(vault, query, limit=10)
            timings.append((time.perf_counter() - t) * 1000)
        timings.sort()
        p50, p95 = statistics.median(timings), timings[int(len(timings) * 0.95) - 1]
        worst = []
        for _ in range(5):
            t = time.perf_counter()
            index.search(vault, VOCABULARY[0], limit=10)
            worst.append((time.perf_counter() - t) * 1000)
        # 1 % of the arcs change (a lesson rewritten); the tick's scan has already happened.
        paths = sorted(p for p in snapshot.notes if p.startswith("clusters/"))
        changed = paths[:: max(1, len(paths) // max(1, count // 100))][: max(1, count // 100)]
        for rel in changed:
            text = (vault / rel).read_text(encoding="utf-8")
            (vault / rel).write_text(text.replace("## Resolution", "## Resolution\n\nRechecked the pool.", 1),
                                     encoding="utf-8")
        after = _scan(vault)  # the tick's own scan, which it does anyway; the index then reads only the change
        refreshed = index.sync(vault, after.notes.values())
        hook = _prompt_submit(vault, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    figures = {
        "arcs": count,
        "scan_s": round(scan_s, 3),
        "build_s": round(build.ms / 1000, 3),
        "rows": build.rows_written,
        "search_p50_ms": round(p50, 2),
        "search_p95_ms": round(p95, 2),
        "search_most_common_word_ms": round(min(worst), 2),
        "refresh_files": len(changed),
        "refresh_s": round(refreshed.ms / 1000, 3),
        "prompt_submit_ms": hook,
    }
    lines = [
        f"recall ({count} arcs, {build.rows_written} rows): build {figures['build_s']:.2f} s (target < 5; scan "
        f"{scan_s:.2f} s apart), search p50 {p50:.1f} ms p95 {p95:.1f} ms (target < 20; a word in every arc: {min(worst):.0f} ms), refresh after "
        f"{len(changed)} changed {figures['refresh_s']:.3f} s (target < 0.3), prompt-submit with recall "
        f"{hook['p50_ms']:.0f} ms p50 / {hook['max_ms']:.0f} ms max, without recall {hook['without_recall_p50_ms']:.0f} ms "
        f"(target < 150, {hook['mode']})",
    ]
    return {"name": "search", "figures": figures, "lines": lines}


def _hook_command() -> list[str]:
    """``brain`` as installed (the launcher's fast path, as Claude Code runs it), else ``python -m brain``."""
    script = Path(sys.executable).with_name("brain")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "brain"]


def _prompt_submit(vault: Path, work: Path, runs: int = 15) -> dict[str, Any]:
    """Wall time of ``brain hook prompt-submit`` with recall on, and with it off as the baseline
    (runs interleaved, so a change in the machine's load hits both alike)."""
    base = {**os.environ, "BRAIN_VAULT": str(vault), "BRAIN_HOOK_STATE_DIR": str(work / "hook-state"),
            "BRAIN_REFRESH_INTERVAL": "1000"}
    envs = {"off": base, "on": {**base, "BRAIN_RECALL_ON_PROMPT": "true"}}
    times: dict[str, list[float]] = {"off": [], "on": []}
    recalled = False
    for n in range(runs):
        for label, env in envs.items():
            payload = json.dumps({"session_id": f"bench-{label}-{n}", "cwd": str(work),
                                  "prompt": PLANTED_QUERY + " again? compare /src/billing"})
            t = time.perf_counter()
            result = subprocess.run([*_hook_command(), "hook", "prompt-submit"], input=payload,
                                    capture_output=True, text=True, env=env, check=False)
            times[label].append((time.perf_counter() - t) * 1000)
            recalled = recalled or (label == "on" and "zanzibar" in result.stdout)
    return {"p50_ms": round(statistics.median(times["on"]), 1), "max_ms": round(max(times["on"]), 1),
            "without_recall_p50_ms": round(statistics.median(times["off"]), 1),
            "mode": "recall answered" if recalled else "recall not wired into the hook yet"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--arcs", type=int, default=10_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.arcs)
    if args.json:
        print(json.dumps(result["figures"], indent=2))
    else:
        print("\n".join(result["lines"]))


if __name__ == "__main__":
    main()
