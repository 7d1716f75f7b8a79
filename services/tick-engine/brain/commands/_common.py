"""Shared CLI plumbing: settings at the edge, one error handler, exit codes.

The typer-free part lives in :mod:`brain.commands._base` (``brain tick`` runs without typer,
see :mod:`brain.launcher`); this module adds what the typer commands share.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import typer

from brain.commands._base import (
    EXIT_AI_FAILED,
    EXIT_FAILED,
    EXIT_LOCKED,
    EXIT_OK,
    EXIT_USAGE,
    STATE_DIR,
    BrainError,
    ProgressBar,
    UsageError,
    debug_enabled,
    enclosing_vault,
    log,
    outcome,
    require_vault,
    resolve_now,
    settings_from,
)

__all__ = [
    "EXIT_AI_FAILED", "EXIT_FAILED", "EXIT_LOCKED", "EXIT_OK", "EXIT_USAGE", "STATE_DIR", "BrainError", "FeedOpt",
    "NowOpt", "ProgressBar", "UsageError", "VaultOpt", "debug_enabled", "enclosing_vault", "log", "require_vault",
    "resolve_now", "run", "settings_from",
]


def run(body: Callable[[], int | None]) -> NoReturn:
    """Run a command body; turn errors into one line on stderr and an exit code, once."""
    raise typer.Exit(outcome(body, passthrough=(typer.Exit, typer.Abort)))


VaultOpt = typer.Option(None, "--vault", help="Vault root folder (env: BRAIN_VAULT).")
NowOpt = typer.Option(None, "--now", help="Use this ISO-8601 instant instead of the clock (env: BRAIN_NOW).")
FeedOpt = typer.Option(None, "--brain-feed", help="Brain-feed folder (default: V/brain-feed).")
