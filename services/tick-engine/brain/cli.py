"""The ``brain`` command: a thin typer layer over the pipeline.

Each ``brain.commands.<area>`` module defines ``register(app)``; command bodies import
their dependencies lazily so that fast commands (the session-start hook) stay fast.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer
from typer.core import TyperGroup


def _untyped_flags(params: list[Any]) -> list[Any]:
    """On/off flags show as ``--no-ai``, not ``--no-ai <bool>`` (typer labels every option with its type)."""
    for param in params:
        if getattr(param, "is_flag", False) and not getattr(param, "count", False) and param.metavar is None:
            param.metavar = ""
    return params


class _BrainGroup(TyperGroup):
    """The root group: every command's (and sub-group's) flags are shown without a type."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _untyped_flags(command.get_params(ctx))
            for sub in getattr(command, "commands", {}).values():
                _untyped_flags(sub.get_params(ctx))
        return command

    def get_params(self, ctx: Any) -> Any:
        return _untyped_flags(super().get_params(ctx))


app = typer.Typer(
    cls=_BrainGroup,
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

def _version(value: bool) -> None:
    if value:
        from brain import __version__

        typer.echo(f"brain {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> Any:
    """Brain: the memory nervous system for a fleet of AI coding agents.

    Example: brain tick --vault ~/vault --no-ai
    """


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

