"""The ``brain`` entry point: routes the hooks around the typer app, then runs the CLI.

``brain hook session-start`` runs at every agent session start, so it must not pay for
building the full command tree (typer, click and every command module).
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        from brain.commands.hook import fast_main

        code = fast_main(sys.argv[2:])
        if code is not None:
            sys.stdout.flush()
            raise SystemExit(code)
    from brain.cli import main as cli_main

    cli_main()


def tick_alias() -> None:
    from brain.cli import tick_alias as alias

    alias()
