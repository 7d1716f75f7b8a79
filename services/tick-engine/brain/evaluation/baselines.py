"""The naive feeds Brain is compared with (FEED-METRIC §1, step 4).

Every baseline is rendered from the same filtered bundle Brain's vault was built from, so a
difference measures Brain's selection and rendering, not its extraction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from brain.core.feed import tokens
from brain.evaluation.needs import NeededItem
from brain.evaluation.replay import Session

EMPTY, TITLES, DIGEST_AT_BRAIN, RECENT_DIGEST, PROJECT_DIGEST, ORACLE = (
    "empty", "recent-titles", "digest@brain-tokens", "recent-digest", "project-digest", "oracle",
)
BASELINES = (EMPTY, TITLES, DIGEST_AT_BRAIN, RECENT_DIGEST, PROJECT_DIGEST, ORACLE)
TITLES_LIMIT = 10
TITLE_CHARS = 70
FIRST_PROMPT_CHARS = 200
LAST_PROMPT_CHARS = 150
TOP_TOOLS = 5


def _one_line(text: Any, limit: int) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def newest_first(history: Sequence[Session]) -> list[Session]:
    return sorted(history, key=lambda s: (s.start, s.id), reverse=True)


def recent_titles(history: Sequence[Session], limit: int = TITLES_LIMIT) -> str:
    """The last ``limit`` sessions as ``date project: first prompt line``."""
    lines = []
    for session in newest_first(history)[:limit]:
        first = str(session.entry.get("first_prompt") or "").strip().splitlines()
        title = _one_line(first[0] if first else "", TITLE_CHARS)
        lines.append(f"{session.start:%Y-%m-%d} {session.project}: {title}")
    return "\n".join(lines)


def _tools(value: Any) -> str:
    if not isinstance(value, Mapping):
        return ""
    ranked = sorted(((str(k), v) for k, v in value.items() if isinstance(v, int)), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{name} {count}" for name, count in ranked[:TOP_TOOLS])


def digest_block(session: Session) -> str:
    """One session of the naive digest: date · project · turns, prompts, files, top tools."""
    entry = session.entry
    lines = [f"{session.start:%Y-%m-%d} · {session.project} · {session.user_turns} turns"]
    first = _one_line(entry.get("first_prompt"), FIRST_PROMPT_CHARS)
    last = _one_line(entry.get("last_prompt"), LAST_PROMPT_CHARS)
    if first:
        lines.append(f"first: {first}")
    if last and last != first[: len(last)]:
        lines.append(f"last: {last}")
    files = entry.get("files_touched")
    if isinstance(files, list) and files:
        lines.append("files: " + ", ".join(str(f) for f in files))
    tools = _tools(entry.get("top_tools"))
    if tools:
        lines.append(f"tools: {tools}")
    return "\n".join(lines)


def cut_to_tokens(text: str, budget: int) -> str:
    """``text`` within ``budget`` tokens (characters / 4), cut at a line, else a word, boundary."""
    if tokens(text) <= budget:
        return text
    room = max(0, budget * 4)
    head = text[:room]
    newline = head.rfind("\n")
    if newline > room // 2:
        return head[:newline].rstrip()
    space = head.rfind(" ")
    return (head[:space] if space > 0 else head).rstrip()


def digest(sessions: Sequence[Session], budget: int) -> str:
    """Whole session blocks in the given order while they fit, then the next one cut to fill."""
    parts: list[str] = []
    for session in sessions:
        block = digest_block(session)
        candidate = "\n\n".join([*parts, block])
        if tokens(candidate) <= budget:
            parts.append(block)
            continue
        rest = budget - tokens("\n\n".join(parts)) - (1 if parts else 0)
        if rest > 0:
            cut = cut_to_tokens(block, rest)
            if cut.strip():
                parts.append(cut)
        break
    return "\n\n".join(parts)


def _same_place(cwd: str, other: str) -> bool:
    if not cwd or not other:
        return False
    a, b = cwd.rstrip("/"), other.rstrip("/")
    return a == b or a.startswith(b + "/") or b.startswith(a + "/")


def project_first(history: Sequence[Session], cwd: str) -> list[Session]:
    """Newest first, the sessions of this cwd (the hook receives it) before all others."""
    ranked = newest_first(history)
    return [s for s in ranked if _same_place(cwd, s.cwd)] + [s for s in ranked if not _same_place(cwd, s.cwd)]


def oracle(knowable: Sequence[NeededItem], budget: int) -> str:
    """Exactly the session's knowable items, one per line, until the budget is full."""
    lines: list[str] = []
    for item in knowable:
        candidate = "\n".join([*lines, f"- {item.label}"])
        if tokens(candidate) > budget:
            break
        lines.append(f"- {item.label}")
    return "\n".join(lines)


def baseline_feeds(
    target: Session, history: Sequence[Session], knowable: Sequence[NeededItem], *, brain_tokens: int, budget: int,
) -> dict[str, str]:
    """Every baseline's feed for one target, by name."""
    recent = digest(newest_first(history), budget)
    return {
        EMPTY: "",
        TITLES: recent_titles(history),
        DIGEST_AT_BRAIN: cut_to_tokens(recent, brain_tokens),
        RECENT_DIGEST: recent,
        PROJECT_DIGEST: digest(project_first(history, target.cwd), budget),
        ORACLE: oracle(knowable, budget),
    }
