"""Worker threads for the writer's parallel fsyncs and its background unlinks.

Plain :mod:`threading` and :mod:`queue`, not :mod:`concurrent.futures`: that package imports
:mod:`logging` and more, 15-30 ms that every ``brain tick`` process would pay for a handful of
fsyncs (the 2-hourly tick writes a few dozen files).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any


def run_all(function: Callable[[Any], object], items: Sequence[Any], workers: int) -> None:
    """``function`` on every item, on up to ``workers`` threads; returns when all are done.
    Like ``list(ThreadPoolExecutor(workers).map(function, items))``: every item is tried,
    and the exception of the first item (in ``items`` order) that raised is raised."""
    count = max(1, min(workers, len(items)))
    errors: dict[int, BaseException] = {}

    def work(start: int) -> None:
        for index in range(start, len(items), count):
            try:
                function(items[index])
            except BaseException as exc:  # re-raised in the calling thread below
                errors[index] = exc

    threads = [threading.Thread(target=work, args=(start,)) for start in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[min(errors)]


class Workers:
    """A few daemon threads working through calls in the background; :meth:`wait` returns when
    every call submitted so far is done, with the exceptions they raised."""

    def __init__(self, count: int, name: str) -> None:
        self._calls: queue.Queue[tuple[Callable[..., object], tuple[Any, ...]]] = queue.Queue()
        self._errors: list[BaseException] = []
        for number in range(count):
            threading.Thread(target=self._work, name=f"{name}-{number}", daemon=True).start()

    def _work(self) -> None:
        while True:
            function, args = self._calls.get()
            try:
                function(*args)
            except BaseException as exc:  # handed to the caller by wait()
                self._errors.append(exc)
            finally:
                self._calls.task_done()

    def submit(self, function: Callable[..., object], *args: Any) -> None:
        self._calls.put((function, args))

    def wait(self) -> list[BaseException]:
        self._calls.join()
        errors, self._errors = self._errors, []
        return errors
