"""The ``brain`` entry point: answers the hooks and runs a tick without building the CLI,
then runs the CLI.

``brain hook session-start`` runs at every agent session start, and ``brain tick`` every two
hours, so neither pays for building the full command tree (typer, click and every command
module: 60-90 ms of imports). :func:`fast_main` and :func:`fast_tick` parse their few options
by hand; anything else (``--help``, an unknown option, a bad value) falls through to the typer
commands, which say what is wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

_FAST_OPTIONS = {
    "session-start": ("--brain-feed", "--format", "--now", "--cwd"),
    "prompt-submit": ("--brain-feed", "--now", "--cwd"),
    "session-end": ("--brain-feed", "--now"),
}


def fast_main(argv: Sequence[str]) -> int | None:
    """``brain hook ...``; ``argv`` is what follows ``hook``. The exit code, or None when the
    arguments need the full CLI. Same behaviour and error lines as :mod:`brain.commands.hook`."""
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
    import os  # this is the CLI edge of the fast path: the environment is read here, once

    from brain.pipeline import hook

    if output_format not in hook.FORMATS:
        return None
    try:
        try:
            call = hook.hook_call(
                command,
                {"brain_feed": options.get("--brain-feed"), "now": options.get("--now"), "cwd": options.get("--cwd")},
                os.environ,
            )
        except hook.HookUsageError as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return hook.EXIT_HOOK_FAILED
        text = hook.answer(command, call, output_format)
    except Exception as exc:
        if os.environ.get("BRAIN_DEBUG", "") not in ("", "0", "false"):
            raise
        print(f"Error: unexpected {type(exc).__name__}: {exc} (set BRAIN_DEBUG=1 for a traceback)", file=sys.stderr)
        return hook.EXIT_HOOK_FAILED
    sys.stdout.write(text)
    return 0


#: ``brain tick`` and ``brain keeper`` options: those that take a value, and the on/off flags.
_TICK_VALUES = {
    "tick": ("--vault", "--brain-feed", "--now", "--llm-url", "--model"),
    "keeper": ("--vault", "--brain-feed", "--now"),
}
_TICK_FLAGS = {"tick": ("--no-ai", "--dry-run", "--json"), "keeper": ("--dry-run", "--json")}


def tick_options(command: str, argv: Sequence[str]) -> dict[str, str | bool] | None:
    """``brain tick|keeper ARGS`` as its options (``--vault V`` or ``--vault=V``; the last of a
    repeated one wins, as in the typer command), or None when only the typer command can read
    them: ``--help``, an unknown option, a stray argument, a value missing, empty or starting
    with ``-``."""
    if command not in _TICK_VALUES:
        return None
    options: dict[str, str | bool] = {}
    rest = list(argv)
    while rest:
        name, equals, value = rest.pop(0).partition("=")
        if name in _TICK_FLAGS[command] and not equals:
            options[name] = True
            continue
        if name not in _TICK_VALUES[command]:
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        if not value or value.startswith("-"):
            return None
        options[name] = value
    return options


def fast_tick(command: str, argv: Sequence[str]) -> int | None:
    """``brain tick|keeper ARGS`` without typer: the exit code, or None when the arguments need
    the full CLI. Runs the command's own body (:func:`brain.commands.ticking.tick_body`), so its
    output, errors and exit codes are the typer command's. Its callers :func:`leave` with that
    code, so the tick frees nothing it loaded (``process_ends``)."""
    options = tick_options(command, argv)
    if options is None:
        return None
    from pathlib import Path

    from brain.commands._base import outcome
    from brain.commands.ticking import tick_body

    def path(name: str) -> Path | None:
        value = options.get(name)
        return Path(value) if isinstance(value, str) else None

    def text(name: str) -> str | None:
        value = options.get(name)
        return value if isinstance(value, str) else None

    keeper = command == "keeper"
    return outcome(lambda: tick_body(path("--vault"), path("--brain-feed"), text("--now"),
                                     no_ai=keeper or "--no-ai" in options, dry_run="--dry-run" in options,
                                     as_json="--json" in options, llm_url=text("--llm-url"), model=text("--model"),
                                     keeper_only=keeper, process_ends=True))


#: Commands that end by leaving the process at once (:func:`leave`): a tick holds tens of
#: thousands of objects (the listing, the view, the caches) that a normal exit frees one by one;
#: extraction and clustering run with the keeper every few minutes (the Helm chart's extract job).
QUICK_EXIT_COMMANDS = frozenset({"tick", "keeper", "extract", "cluster"})


def leave(code: object) -> NoReturn:
    """Exit with ``code`` as :class:`SystemExit` would (None is 0, a message goes to stderr and
    is 1), without tearing the interpreter down: on an unchanged 10 000-arc vault freeing the
    tick's objects at exit cost 0.1 s, a quarter of the tick. Only once the command is done:
    every file it wrote is closed (the vault's writes are journaled and synced by the writer),
    so only the standard streams are left to flush."""
    import os

    if code is None:
        status = 0
    elif isinstance(code, int) and not isinstance(code, bool):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (``brain tick --json | head``): nothing more to say
            status = status or 1
    os._exit(status)


def _run_cli(run: Callable[[], None]) -> None:
    """Run the CLI (``run``: its entry function); a quick-exit command leaves at once after it."""
    if sys.argv[1:2] and sys.argv[1] in QUICK_EXIT_COMMANDS:
        try:
            run()
        except SystemExit as exc:
            leave(exc.code)
        leave(0)
    run()


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        code = fast_main(sys.argv[2:])
        if code is not None:
            sys.stdout.flush()
            raise SystemExit(code)
    if sys.argv[1:2] and sys.argv[1] in _TICK_VALUES:
        code = fast_tick(sys.argv[1], sys.argv[2:])
        if code is not None:
            leave(code)
    from brain.cli import main as cli_main

    _run_cli(cli_main)


def tick_alias() -> None:
    """``brain_tick ARGS`` is ``brain tick ARGS``."""

    code = fast_tick("tick", sys.argv[1:])
    if code is not None:
        leave(code)
    from brain.cli import main as cli_main

    sys.argv = [sys.argv[0], "tick", *sys.argv[1:]]
    _run_cli(cli_main)
