"""What a long run reports as it goes, for a bar on a terminal: a step's name, how far it is, out
of how much (0: a step that does not count, such as waiting for the model).

The run calls it; the command decides whether anything is shown (only when stderr is a
terminal), so a CronJob's tick passes nothing and pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

#: ``step(name, done, total)``: ``name`` says what is counted ("files parsed"), ``total`` 0 when nothing is.
Step = Callable[[str, int, int], None]

#: Items between two reports inside a loop: a report per file would cost a cold tick more than it shows.
EVERY = 256

T = TypeVar("T")


def counted(items: Sequence[T], progress: Step | None, name: str, total: int | None = None) -> Iterator[T]:
    """``items`` one by one, ``progress`` told how many came every :data:`EVERY` and once all did
    (``total``: what they are counted out of, ``len(items)`` by default). Without ``progress``,
    the items' own iterator: a loop that nobody watches pays nothing."""
    if progress is None:
        return iter(items)
    return _reported(items, progress, name, len(items) if total is None else total)


def _reported(items: Sequence[T], progress: Step, name: str, total: int) -> Iterator[T]:
    for done, item in enumerate(items):
        if not done % EVERY:
            progress(name, done, total)
        yield item
    progress(name, len(items), total)
