"""Plans: what a phase wants done to the vault, as values. The writer executes them.

A phase never writes; it returns a :class:`Plan`. Dry run prints the plan; a real run hands
it to a transaction (:mod:`brain.io.transaction`), which journals before-images and writes atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Expect:
    """The file as the scanner saw it; the writer refuses to replace anything else."""

    size: int
    mtime_ns: int
    sha1: str


@dataclass(frozen=True)
class WriteFile:
    """Create or replace ``path``.

    ``expect`` None means the file must not exist yet (or already hold exactly ``content``).
    ``owned`` files (feed files, dashboards) belong to the brain and are replaced whatever
    they hold.
    """

    path: str
    content: bytes
    expect: Expect | None = None
    owned: bool = False
    reason: str = ""
    #: The bytes the planner read (they match ``expect``); saves the writer a second read
    #: when the file's size and mtime still match and the mtime is not racily recent.
    before: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class MoveFile:
    """Move an arc ``src`` -> ``dst`` (never a copy), optionally with new content."""

    src: str
    dst: str
    expect: Expect
    content: bytes | None = None
    reason: str = ""
    before: bytes | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class DeleteFile:
    path: str
    expect: Expect | None = None
    owned: bool = False
    reason: str = ""


Operation = WriteFile | MoveFile | DeleteFile


@dataclass
class Plan:
    operations: list[Operation] = field(default_factory=list)

    def add(self, operation: Operation) -> None:
        self.operations.append(operation)

    def __bool__(self) -> bool:
        return bool(self.operations)
