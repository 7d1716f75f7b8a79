"""Shared CLI plumbing without typer: settings at the edge, one error handler, exit codes.

Command modules keep their heavy imports inside the command functions so that
``brain hook session-start`` starts fast; ``brain tick`` runs its body from here without
building the typer command tree (:mod:`brain.launcher`). :mod:`brain.commands._common`
adds the typer parts.
"""

from __future__ import annotations

import errno
import os
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from brain.settings import Settings, SettingsError

EXIT_OK = 0
EXIT_FAILED = 1  # verify failed or an unexpected error
EXIT_USAGE = 2  # usage / configuration error
EXIT_LOCKED = 3  # another tick holds the vault lock
EXIT_AI_FAILED = 4  # AI phase failed; phases 1 and 5 succeeded

class BrainError(Exception):
    """An error the user should read as one line: ``Error: <what> (<path>): <why>``."""

    exit_code = EXIT_FAILED

    def __init__(self, what: str, why: str = "", *, path: Path | str | None = None, exit_code: int | None = None):
        self.what, self.why, self.path = what, why, path
        if exit_code is not None:
            self.exit_code = exit_code
        super().__init__(self.line())

    def line(self) -> str:
        where = f" ({self.path})" if self.path else ""
        why = f": {self.why}" if self.why else ""
        return f"{self.what}{where}{why}"


class UsageError(BrainError):
    exit_code = EXIT_USAGE


def log(message: str) -> None:
    """Human-facing log line: always stderr, never stdout."""
    print(message, file=sys.stderr, flush=True)


def debug_enabled() -> bool:
    return os.environ.get("BRAIN_DEBUG", "") not in ("", "0", "false")


def settings_from(**flags: Any) -> Settings:
    try:
        return Settings.from_env(os.environ, **flags)
    except SettingsError as exc:
        raise UsageError("configuration", str(exc)) from None


def resolve_now(settings: Settings) -> datetime:
    from brain.core.timeutil import TimeParseError, require_instant, wall_clock

    if settings.now:
        try:
            return require_instant(settings.now, what="--now")
        except TimeParseError as exc:
            raise UsageError("bad --now", str(exc)) from None
    return wall_clock()


def require_vault(settings: Settings, *, must_exist: bool = True) -> Path:
    """The vault root of the command; only ``brain init`` (``must_exist=False``) may create one.

    Any other command refuses a folder without ``.brain/`` (exit 2), so a mistyped ``--vault``
    never turns ``/etc`` or a vault's subfolder into a vault; the hint names the way out.
    """
    if settings.vault is None:
        raise UsageError("no vault given", "use --vault V or set BRAIN_VAULT")
    vault = settings.vault
    if must_exist:
        if not vault.is_dir():
            raise UsageError("vault not found", f"not a folder; create it with `brain init --vault {vault}`", path=vault)
        if not (vault / STATE_DIR).is_dir():
            root = enclosing_vault(vault)
            if root is not None:
                raise UsageError("not a Brain vault", f"it is a folder inside the vault {root}; use --vault {root}",
                                 path=vault)
            raise UsageError("not a Brain vault", f"run `brain init --vault {vault}`", path=vault)
    return vault


STATE_DIR = ".brain"  # what `brain init` creates and every other command requires


def enclosing_vault(folder: Path) -> Path | None:
    """The nearest folder above ``folder`` that is a vault (holds ``.brain/``), if any."""
    for parent in folder.resolve().parents:
        if (parent / STATE_DIR).is_dir():
            return parent
    return None


def _as_brain_error(exc: Exception) -> BrainError | None:
    """Domain exceptions raised below the CLI, as the one-line error users read."""
    from brain.io.atomic import ConfinementError  # imported on the error path only: hooks stay fast
    from brain.io.writer import LockHeld

    if isinstance(exc, ConfinementError):  # e.g. a .brain/ that is a symlink out of the vault
        return BrainError("unsafe vault", str(exc), exit_code=EXIT_USAGE)
    if isinstance(exc, LockHeld):  # every command that takes the vault lock: exit 3, naming the holder
        return BrainError("vault is locked", f"held by {exc.holder}", path=exc.path, exit_code=EXIT_LOCKED)
    # A rename names its target second: the file the operator knows, not the temporary one.
    named = getattr(exc, "filename2", None) or getattr(exc, "filename", None)
    if isinstance(exc, OSError) and exc.errno in _STORAGE_ERRORS:
        # A full disk, a quota, a read-only mount: what the operator fixes, not a crash. A tick or a
        # cluster run stopped here left its journal pending: the next run rolls back what it began.
        return BrainError("cannot write", f"{exc.strerror}" + (f": {named}" if named else "")
                          + "; free space or fix the permissions (a tick or cluster run stopped here is rolled "
                            "back by the next one)")
    if isinstance(exc, OSError) and exc.errno in _PATH_ERRORS and named:
        # A file where the vault needs a folder (brain-feed, a path under a file), a symlink loop.
        return BrainError("unusable path", f"{exc.strerror}: {named}", exit_code=EXIT_USAGE)
    return None


_STORAGE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO})
_PATH_ERRORS = frozenset({errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ELOOP, errno.ENAMETOOLONG})


def outcome(body: Callable[[], int | None], passthrough: tuple[type[Exception], ...] = ()) -> int:
    """Run a command body; its exit code, with an error turned into one line on stderr, once.
    ``passthrough``: exceptions that carry their own exit (typer's)."""
    try:
        return body() or EXIT_OK
    except passthrough:
        raise
    except Exception as exc:  # the one catch-all: a short line for users, a traceback under BRAIN_DEBUG
        if debug_enabled():
            raise
        error = exc if isinstance(exc, BrainError) else _as_brain_error(exc)
        if error is None:
            log(f"Error: unexpected {type(exc).__name__}: {exc} (set BRAIN_DEBUG=1 for a traceback)")
            return EXIT_FAILED
        log(f"Error: {error.line()}")
        return error.exit_code


def bar_text(done: int, total: int, width: int = 30) -> str:
    """``[####....] 3/12``: ``done`` of ``total`` (nothing to count: full)."""
    filled = width if total <= 0 else min(width, width * done // total)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total}"


class ProgressBar:
    """``[####....] 3/12 <unit><detail>`` on stderr, redrawn at most ten times a second.

    Build one only when stderr is a terminal (:meth:`on_terminal`); ``close`` ends the line.
    """

    def __init__(self, unit: str) -> None:
        self.unit = unit
        self.last = 0.0
        self.drawn = False

    @classmethod
    def on_terminal(cls, unit: str) -> ProgressBar | None:
        return cls(unit) if sys.stderr.isatty() else None

    def update(self, done: int, total: int, detail: str = "") -> None:
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        sys.stderr.write(f"\r{bar_text(done, total)} {self.unit}{detail}")
        sys.stderr.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


class StepBar:
    """A run of steps on one stderr line (:mod:`brain.core.progress`): ``[####....] 3/12 files parsed``
    for a step that counts, ``… verifying what was written`` for one that does not. Nothing is
    drawn in the run's first ``delay`` seconds (a 2-hourly tick ends before), then at most ten
    times a second and at each new step; :meth:`close` clears the line for the summary.

    Build one only when stderr is a terminal (:meth:`on_terminal`)."""

    #: Seconds from the start of the run before anything is drawn.
    DELAY = 0.5

    def __init__(self, label: str, delay: float | None = None) -> None:
        self.label = label
        self.started = time.monotonic()
        self.delay = self.DELAY if delay is None else delay
        self.step = ""
        self.last = 0.0
        self.width = 0  # of the line drawn last

    @classmethod
    def on_terminal(cls, label: str) -> StepBar | None:
        return cls(label) if sys.stderr.isatty() else None

    def __call__(self, step: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.started < self.delay or (step == self.step and done < total and now - self.last < 0.1):
            return
        self.step, self.last = step, now
        line = f"{self.label}: {bar_text(done, total) if total > 0 else '…'} {step}"
        sys.stderr.write("\r" + line.ljust(self.width))
        sys.stderr.flush()
        self.width = max(self.width, len(line))  # what the line holds now

    def close(self) -> None:
        if self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            sys.stderr.flush()
            self.width = 0
