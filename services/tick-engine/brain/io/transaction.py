"""One transaction for every command that writes into a vault (SPEC §9).

    with transaction(vault, "tick", tick_id, now) as tx:
        result = tx.apply(plan)      # journaled, atomic, conflict-checked
        ...
    # complete: the journal is marked done when the block ends without an exception

In order: refuse a vault whose own folders are symlinks out of it, take the vault lock
(``flock``; exit 3 elsewhere when held), roll back journals a crashed run left pending
(reported in :attr:`Transaction.recovered`), journal before-images of every plan applied,
mark the journal complete. Used by tick, cluster, apply (through the tick), undo and the
amygdala's alarm files.

Dry run is not a mode of the transaction: a dry run never opens one. It builds the same
plans and hands them to a :class:`Preview` where the transaction would be (both are a
:data:`Target`), which says what they would change and writes nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from brain.core.model import Problem
from brain.core.plan import Plan
from brain.core.progress import Step
from brain.io import writer
from brain.io.atomic import ConfinementError, atomic_write


class UnsafeVault(ConfinementError):
    """One of the vault's own folders (``.brain``) leads out of the vault."""


def check_state_dir(vault: Path) -> None:
    """``.brain`` must be a real folder of the vault: the lock, cache and journals never leave it."""
    state = vault / writer.STATE_DIR
    if os.path.islink(state):
        raise UnsafeVault(f"{state} is a symbolic link; the brain keeps its state only inside the vault")
    if state.exists() and not state.resolve().is_relative_to(vault.resolve()):
        raise UnsafeVault(f"{state} resolves outside the vault")


@dataclass
class Transaction:
    vault: Path
    tick_id: str
    journal: writer.Journal
    recovered: list[Problem] = field(default_factory=list)
    #: Edits that reached a swapped-out old image after its commit, kept when the block ended.
    late: list[Problem] = field(default_factory=list)
    #: Hears of the files each plan commits (a bar on a terminal; :mod:`brain.core.progress`).
    progress: Step | None = None

    def apply(self, plan: Plan) -> writer.ApplyResult:
        """Execute ``plan`` under this transaction's journal."""
        return writer.apply_plan(self.vault, plan, journal=self.journal, dry_run=False, progress=self.progress)

    def write_outside(self, files: Mapping[Path, bytes]) -> list[str]:
        """Files kept outside the vault (a feed folder elsewhere): atomic writes, no journal."""
        for path, data in files.items():
            atomic_write(path, data)
        return [str(path) for path in files]

    def undo(self, tick_id: str, *, force: bool) -> writer.UndoResult:
        return writer.undo(self.vault, tick_id, force=force)


@dataclass
class Preview:
    """A dry run, where a transaction would be: each plan is checked against the files as they
    are and reported as it would apply; nothing is locked, journalled or written."""

    vault: Path
    journal: None = None

    def apply(self, plan: Plan) -> writer.ApplyResult:
        return preview(self.vault, plan)

    def write_outside(self, files: Mapping[Path, bytes]) -> list[str]:
        return [str(path) for path in files]


#: Where a run's plans go: carried out (:class:`Transaction`) or only reported (:class:`Preview`).
Target = Transaction | Preview


def preview(vault: Path, plan: Plan) -> writer.ApplyResult:
    """What ``plan`` would change, without writing anything (dry run)."""
    return writer.apply_plan(vault, plan, journal=None, dry_run=True)


@contextlib.contextmanager
def transaction(vault: Path, command: str, tick_id: str, now: datetime, *,
                recover: bool = True, wait_seconds: float = 0.0) -> Iterator[Transaction]:
    """Lock, recover, journal; the journal is completed when the block ends normally.

    An exception inside the block leaves the journal pending: the next transaction rolls it
    back, exactly as after a crash. ``wait_seconds`` waits for a holder of the lock (a tick)
    instead of failing at once.
    """
    check_state_dir(vault)
    with writer.vault_lock(vault, command, wait_seconds=wait_seconds):
        tx = Transaction(vault, tick_id, writer.Journal(vault, tick_id, now))
        if recover:
            for done in writer.recover(vault):
                if done.damaged is not None:
                    tx.recovered.append(Problem(f"{writer.JOURNAL_DIR}/{done.tick_id}", None,
                                                f"a damaged journal, not rolled back: {done.damaged}; "
                                                "the files it names are left as they are"))
                    continue
                tx.recovered.append(Problem(
                    f"{writer.JOURNAL_DIR}/{done.tick_id}", None,
                    f"rolled back an interrupted run ({len(done.restored)} files restored"
                    + (f"; kept edits made since in {', '.join(done.conflicts)}" if done.conflicts else "")
                    + ")",
                ))
        try:
            yield tx
        finally:
            # old images swapped out by the commits: gone (or kept, if written to) before the lock is
            writer.flush_discards()
            tx.late.extend(writer.take_kept())
        tx.journal.complete()
        writer.mark_swept(tx.journal)  # its old images are gone: recovery has nothing of it to clear
