"""The ``brain`` command: a thin typer layer over the pipeline.

Each ``brain.commands.<area>`` module defines ``register(app)``; command bodies import
their dependencies lazily so that fast commands (the session-start hook) stay fast.
"""

from __future__ import annotations

import importlib
import sys

import typer

app = typer.Typer(
    name="brain",
    help="Brain: the memory nervous system for a fleet of AI coding agents.\n\n"
    "Example: brain tick --vault ~/vault --no-ai",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

COMMAND_MODULES = (
    "brain.commands.vault",
    "brain.commands.extract",
    "brain.commands.ai",
    "brain.commands.amygdala",
    "brain.commands.hook",
    "brain.commands.eval",
    "brain.commands.search",
    "brain.commands.mcp",
)

for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(_name)
    except ModuleNotFoundError as _exc:  # an area not built yet must not break the others
        if _exc.name != _name:
            raise
        continue
    _module.register(app)


def main() -> None:
    app()


def tick_alias() -> None:
    """``brain_tick ARGS`` is ``brain tick ARGS``."""
    sys.argv = [sys.argv[0], "tick", *sys.argv[1:]]
    app()
