"""The ``brain`` entry point: answers the hooks without building the CLI, then runs the CLI.

``brain hook session-start`` runs at every agent session start, so it must not pay for
building the full command tree (typer, click and every command module: ~60 ms of imports).
:func:`fast_main` parses the hooks' few options by hand; anything else (``--help``, an
unknown option, a bad value) falls through to the typer commands, which say what is wrong.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

_FAST_OPTIONS = {
    "session-start": ("--brain-feed", "--format", "--now", "--cwd"),
    "prompt-submit": ("--brain-feed", "--now", "--cwd"),
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
    from brain.cli import main as cli_main

    _run_cli(cli_main)


def tick_alias() -> None:
    """``brain_tick ARGS`` is ``brain tick ARGS``."""
    from brain.cli import main as cli_main

    sys.argv = [sys.argv[0], "tick", *sys.argv[1:]]
    _run_cli(cli_main)
