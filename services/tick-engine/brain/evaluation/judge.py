"""What the evaluation writes besides the report: every feed as a file, and tier-2 judge packets.

Judge packets (FEED-METRIC tier 2) are blind: each prompt shows one feed without saying which
system wrote it; ``judge-key.jsonl`` maps packet ids back to feeds. Nothing here calls an LLM.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from brain.evaluation.evaluate import FEEDS, Evaluation

JUDGE_INSTRUCTIONS = (
    "You judge the context block that was injected at the start of a coding-agent session.\n"
    "Below: the project and the operator's first request, what the session then actually used "
    "(files, commands, errors, identifiers), and the injected context.\n"
    "Answer in JSON: {\"useful\": [items of the context that would have helped], "
    "\"misleading\": [items that are stale, wrong or would send the agent the wrong way], "
    "\"score\": 0-3} where 0 = useless, 1 = marginal, 2 = helpful, 3 = would have saved real work."
)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80] or "session"


def write_feeds(evaluation: Evaluation, folder: Path) -> None:
    """``folder/<session>/<feed>.md`` for every target and feed."""
    for target in evaluation.targets:
        where = folder / _safe(target.session.id)
        where.mkdir(parents=True, exist_ok=True)
        for name in FEEDS:
            (where / f"{_safe(name)}.md").write_text(target.feeds[name], encoding="utf-8")


def write_judge_packets(evaluation: Evaluation, folder: Path) -> None:
    """``judge.jsonl`` (one blind prompt per session and non-empty feed) and ``judge-key.jsonl``."""
    folder.mkdir(parents=True, exist_ok=True)
    packets: list[tuple[str, str, str]] = []
    for target in evaluation.targets:
        session = target.session
        used = "\n".join(f"- {i.kind}: {i.label}" for i in target.needed[:80]) or "(nothing recorded)"
        first = " ".join(str(session.entry.get("first_prompt") or "").split())[:400]
        for name in FEEDS:
            text = target.feeds[name]
            if not text.strip():
                continue
            packet = hashlib.sha256(f"{session.id}\0{name}".encode()).hexdigest()[:16]
            prompt = (f"{JUDGE_INSTRUCTIONS}\n\n## Project\n{session.project}\n\n## First request\n{first}\n\n"
                      f"## What the session used\n{used}\n\n## Injected context\n{text}\n")
            packets.append((packet, name, json.dumps({"packet": packet, "session_id": session.id, "prompt": prompt},
                                                     ensure_ascii=False)))
    packets.sort()  # blind: ordered by packet id, not by feed
    (folder / "judge.jsonl").write_text("".join(line + "\n" for _, _, line in packets), encoding="utf-8")
    (folder / "judge-key.jsonl").write_text(
        "".join(json.dumps({"packet": p, "feed": n}) + "\n" for p, n, _ in packets), encoding="utf-8")
