"""``brain hook``: Claude Code hooks that hand the brain-feed to agent sessions (SPEC §12).

``session-start`` prints the SessionStart hook answer, ``prompt-submit`` re-sends the feed
every ``refresh_interval`` turns when it changed. Both read local files only and must start
fast: nothing heavy is imported here (no yaml, redis, httpx); the feed files' frontmatter is
read with a small line parser. Wiring: docs/hooks.md.

A hook must never get in the agent's way: a missing or empty feed prints nothing (exit 0),
and errors exit 1 (Claude Code's non-blocking error), never 2, which for UserPromptSubmit
would block the operator's prompt.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from brain.settings import Settings

SESSION_START = "SessionStart"
PROMPT_SUBMIT = "UserPromptSubmit"
#: Session state files untouched for this long are removed (at session start).
SESSION_STATE_KEEP_DAYS = 30
#: Proposed setting ``hook_state_dir``; until then: $XDG_STATE_HOME/brain/hook-sessions.
STATE_SUBDIR = "brain/hook-sessions"
CUT_NOTE = "\n… (cut to fit the feed budget)"
STDIN_MAX_BYTES = 1_000_000
FEED_FILE_MAX_CHARS = 1_000_000
#: How long session-start waits for the hook's stdin JSON (it only uses it to note what it sent).
SESSION_START_STDIN_WAIT = 0.2
#: Every failure exits 1, Claude Code's non-blocking error (2 would block the prompt).
EXIT_HOOK_FAILED = 1


# --- the feed ----------------------------------------------------------------------------


@dataclass(frozen=True)
class FeedSection:
    name: str
    priority: int
    body: str


def split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """``key: value`` lines of a leading ``---`` block, and the body after it.

    Enough for the feed files the brain writes (flat scalar keys); text without a complete
    block is all body.
    """
    if not text.startswith("---"):
        return {}, text
    lines = text.splitlines(keepends=True)
    if lines[0].rstrip() != "---":
        return {}, text
    meta: dict[str, str] = {}
    for index, line in enumerate(lines[1:], start=1):
        if line.rstrip() in ("---", "..."):
            return meta, "".join(lines[index + 1 :])
        key, colon, value = line.partition(":")
        if colon and key.strip() and not line[:1].isspace():
            meta[key.strip()] = value.strip().strip("'\"")
    return {}, text


def _priority(meta: Mapping[str, str]) -> int:
    try:
        return int(meta.get("priority", "0"))
    except ValueError:
        return 0


def read_feed(folder: Path) -> list[FeedSection]:
    """The feed's ``*.md`` files (not ``health.jsonl``), highest ``priority`` first, then by name."""
    try:
        paths = [p for p in folder.iterdir() if p.suffix == ".md" and not p.name.startswith(".")]
    except OSError:
        return []
    sections = []
    for path in paths:
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read(FEED_FILE_MAX_CHARS)  # a stray huge file cannot slow a session down
        except OSError:
            continue
        meta, body = split_frontmatter(text)
        body = body.strip()
        if body:
            sections.append(FeedSection(path.name, _priority(meta), body))
    sections.sort(key=lambda s: (-s.priority, s.name))
    return sections


def assemble(sections: Iterable[FeedSection], budget_chars: int) -> str:
    """The sections joined within ``budget_chars``: lower-priority files go first, whole;
    the first file that does not fit is cut at a line boundary to fill what is left."""
    parts: list[str] = []
    used = 0
    for section in sections:
        gap = 2 if parts else 0
        if used + gap + len(section.body) <= budget_chars:
            parts.append(section.body)
            used += gap + len(section.body)
            continue
        room = budget_chars - used - gap - len(CUT_NOTE)
        if room > 0:
            head = section.body[:room]
            newline = head.rfind("\n")
            head = head[:newline] if newline > 0 else head
            if head.strip():
                parts.append(head.rstrip() + CUT_NOTE)
        break
    return "\n\n".join(parts)


def feed_folder(settings: Settings) -> Path | None:
    """``BRAIN_SOURCE_PATH``, else ``--brain-feed``, else ``<BRAIN_VAULT>/brain-feed``."""
    if settings.source_path is not None:
        return settings.source_path
    if settings.brain_feed is not None:
        return settings.brain_feed
    if settings.vault is not None:
        return settings.vault / "brain-feed"
    return None


def feed_text(settings: Settings) -> str:
    folder = feed_folder(settings)
    if folder is None:
        return ""
    return assemble(read_feed(folder), max(0, settings.feed_token_budget) * 4)


def hook_answer(event: str, context: str) -> str:
    """The hook's stdout: ``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``."""
    import json

    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}})


# --- per-session state (turn counter, what the session last saw) --------------------------


def state_folder(settings: Settings) -> Path:
    configured = getattr(settings, "hook_state_dir", None)
    if isinstance(configured, Path):
        return configured
    import os

    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / STATE_SUBDIR


def _session_file(folder: Path, session_id: str) -> Path:
    import hashlib
    import re

    if re.fullmatch(r"[A-Za-z0-9_-]{1,128}", session_id):
        return folder / f"{session_id}.json"
    return folder / f"{hashlib.sha256(session_id.encode('utf-8', 'replace')).hexdigest()[:32]}.json"


def _load_session(path: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {"turns": 0, "sha256": None}
    turns = data.get("turns") if isinstance(data, dict) else None
    sha = data.get("sha256") if isinstance(data, dict) else None
    return {"turns": turns if isinstance(turns, int) and turns >= 0 else 0, "sha256": sha if isinstance(sha, str) else None}


def _save_session(path: Path, state: Mapping[str, Any]) -> None:
    import json

    from brain.io.atomic import atomic_write

    atomic_write(path, json.dumps(dict(state), sort_keys=True).encode("utf-8"))


def _prune_sessions(folder: Path, now: float) -> None:
    import contextlib

    horizon = now - SESSION_STATE_KEEP_DAYS * 86_400
    with contextlib.suppress(OSError):
        for path in folder.glob("*.json"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < horizon:
                    path.unlink()


def sha256_of(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_hook_input(wait_seconds: float | None) -> dict[str, Any]:
    """The JSON Claude Code writes on the hook's stdin; ``{}`` when there is none (a terminal,
    nothing within ``wait_seconds``, or not a JSON object)."""
    import json

    stream = sys.stdin
    if stream is None or stream.isatty():
        return {}
    if wait_seconds is not None:
        import select

        try:
            ready, _, _ = select.select([stream], [], [], wait_seconds)
        except (OSError, ValueError):  # no file descriptor (an in-memory stream): just read it
            ready = [stream]
        if not ready:
            return {}
    try:
        data = json.loads(stream.read(STDIN_MAX_BYTES) or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _session_id(payload: Mapping[str, Any]) -> str | None:
    value = payload.get("session_id")
    return value if isinstance(value, str) and value.strip() else None


# --- commands ----------------------------------------------------------------------------


def session_start_answer(settings: Settings, output_format: str) -> str:
    """What ``session-start`` prints ("" for nothing); notes what the session was sent."""
    if not settings.enabled:
        return ""
    text = feed_text(settings)
    if not text:
        return ""
    if output_format == "text":
        return text + "\n"
    session = _session_id(read_hook_input(SESSION_START_STDIN_WAIT))
    if session is not None:
        import time

        folder = state_folder(settings)
        path = _session_file(folder, session)
        state = _load_session(path)
        state["sha256"] = sha256_of(text)
        _save_session(path, state)
        _prune_sessions(folder, time.time())
    return hook_answer(SESSION_START, text) + "\n"


def prompt_submit_answer(settings: Settings) -> str:
    """What ``prompt-submit`` prints: the feed every ``refresh_interval`` turns if it changed."""
    if not settings.enabled or settings.refresh_interval <= 0:
        return ""
    session = _session_id(read_hook_input(None))
    if session is None:
        return ""
    path = _session_file(state_folder(settings), session)
    state = _load_session(path)
    state["turns"] += 1
    answer = ""
    if state["turns"] % settings.refresh_interval == 0:
        text = feed_text(settings)
        digest = sha256_of(text) if text else None
        if digest is not None and digest != state["sha256"]:
            state["sha256"] = digest
            answer = hook_answer(PROMPT_SUBMIT, text) + "\n"
    _save_session(path, state)
    return answer


FORMATS = ("json", "text")
_FAST_OPTIONS = {"session-start": ("--brain-feed", "--format"), "prompt-submit": ("--brain-feed",)}


def fast_main(argv: Sequence[str]) -> int | None:
    """``brain hook ...`` without building the typer app (which costs ~60 ms of imports).

    ``argv`` is what follows ``hook``. Returns the exit code, or None when the arguments need
    the full CLI (``--help``, an unknown option, a bad value): the caller then runs typer.
    Same behaviour and error lines as the typer commands below.
    """
    if not argv or argv[0] not in _FAST_OPTIONS:
        return None
    command, rest = argv[0], list(argv[1:])
    options: dict[str, str] = {}
    while rest:
        name, equals, value = rest.pop(0).partition("=")
        if name not in _FAST_OPTIONS[command] or (not equals and not rest):
            return None
        options[name] = value if equals else rest.pop(0)
    output_format = options.get("--format", "json")
    if output_format not in FORMATS:
        return None
    feed = options.get("--brain-feed")
    import os  # this is the CLI edge of the fast path: the environment is read here, once

    try:
        from brain.settings import Settings, SettingsError

        try:
            settings = Settings.from_env(os.environ, brain_feed=Path(feed) if feed else None)
        except SettingsError as exc:
            print(f"Error: configuration: {exc}", file=sys.stderr)
            return EXIT_HOOK_FAILED
        if command == "session-start":
            answer = session_start_answer(settings, output_format)
        else:
            answer = prompt_submit_answer(settings)
    except Exception as exc:
        if os.environ.get("BRAIN_DEBUG", "") not in ("", "0", "false"):
            raise
        print(f"Error: unexpected {type(exc).__name__}: {exc} (set BRAIN_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_HOOK_FAILED
    sys.stdout.write(answer)
    return 0


def register(app: Any) -> None:
    """Add ``brain hook session-start`` and ``brain hook prompt-submit`` (typer imported here only)."""
    import typer

    from brain.commands._common import EXIT_USAGE, FeedOpt, UsageError, run, settings_from

    hook_app = typer.Typer(
        name="hook",
        help="Claude Code hooks: hand the brain-feed to agent sessions (see docs/hooks.md).\n\n"
        "Example: brain hook session-start --brain-feed ~/vault/brain-feed",
        no_args_is_help=True,
        add_completion=False,
    )

    def hook_run(body: Callable[[], str]) -> None:
        """:func:`run`, but a usage error exits 1: exit 2 would block the prompt in Claude Code."""

        def printing() -> int:
            sys.stdout.write(body())
            return 0

        try:
            run(printing)
        except typer.Exit as exc:
            if exc.exit_code == EXIT_USAGE:
                raise typer.Exit(EXIT_HOOK_FAILED) from None
            raise

    @hook_app.command(
        "session-start",
        help="Print the SessionStart hook answer built from the brain-feed.\n\n"
        "The feed's *.md files, highest `priority` first, within BRAIN_FEED_TOKEN_BUDGET, frontmatter "
        "stripped. Prints nothing when BRAIN_ENABLED=false or the feed is missing or empty. Feed folder: "
        "BRAIN_SOURCE_PATH, else --brain-feed, else $BRAIN_VAULT/brain-feed.\n\n"
        "Example: brain hook session-start --brain-feed ~/vault/brain-feed --format text",
    )
    def session_start(
        brain_feed: Path | None = FeedOpt,
        output_format: str = typer.Option("json", "--format", help="json (the hook answer) or text (plain markdown)."),
    ) -> None:
        def body() -> str:
            if output_format not in FORMATS:
                raise UsageError("bad --format", f"{output_format!r}: use json or text")
            return session_start_answer(settings_from(brain_feed=brain_feed), output_format)

        hook_run(body)

    @hook_app.command(
        "prompt-submit",
        help="UserPromptSubmit hook: every BRAIN_REFRESH_INTERVAL turns of a session, re-send the "
        "brain-feed if it changed since the session last saw it (SHA-256); otherwise print nothing.\n\n"
        "Reads the hook's JSON (session_id, ...) on stdin.\n\n"
        "Example: echo '{\"session_id\": \"abc\"}' | brain hook prompt-submit --brain-feed ~/vault/brain-feed",
    )
    def prompt_submit(brain_feed: Path | None = FeedOpt) -> None:
        hook_run(lambda: prompt_submit_answer(settings_from(brain_feed=brain_feed)))

    app.add_typer(hook_app, name="hook")
