"""Work done by a forked child while this process goes on: a cold tick builds its search index
on the second core while the writer commits ten thousand files on the first.

A fork, not a thread (the work is Python, the GIL would serialise it) and not a fresh process
(the child starts with the parent's notes in memory, shared copy-on-write, instead of reading,
parsing and pickling them again). Forked only when it is safe and can pay: a platform with
``fork``, more than one CPU, and no thread but this one (a child forked beside a running thread
may find a lock that thread held, and never get it).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # imported where used: a tick that forks nothing (every 2-hourly one) never loads them
    import mmap

T = TypeVar("T")


#: Children that said they were done and were still leaving: reaped by :func:`reap_children`.
_LEAVING: list[int] = []


class Forked:
    """A child process running one function; :meth:`wait` tells whether it returned, and
    :meth:`output` reads the bytes it returned.

    The child says it is done on a pipe before it exits, and this process goes on from there:
    the kernel tears the child's address space down before ``waitpid`` would return (2 ms for a
    2-hourly tick's listing child on 10 000 arcs, 11-15 ms for a cold tick's). The child is
    reaped later (:func:`reap_children`)."""

    def __init__(self, pid: int, out: int, done: int) -> None:
        self.pid = pid
        self._out = out  # a scratch file both processes share: the child's bytes, read back here
        self._done = done  # the pipe the child writes one byte to when its bytes are all in ``out``
        self._ended: bool | None = None

    @classmethod
    def start(cls, function: Callable[[], bytes | None]) -> Forked | None:
        """``function()`` in a forked child; None when this process cannot fork safely, or the
        system refuses a process (then the caller does the work itself). The child never returns
        into the caller's code: it exits with 0 when ``function`` returned (its bytes kept for
        :meth:`output`), 1 when it raised (its error on stderr), whatever happens."""
        if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or threading.active_count() > 1:
            return None
        reap_children(wait=False)
        try:
            out = _scratch()
        except OSError:
            return None
        try:
            done, said = os.pipe()
        except OSError:
            os.close(out)
            return None
        sys.stderr.flush()  # nothing buffered goes out twice
        try:
            pid = os.fork()
        except OSError:  # no process to spare (a pod's pid limit, memory): the caller does the work
            for fd in (out, done, said):
                os.close(fd)
            return None
        if pid:
            os.close(said)  # the child's end: when the child is gone, a read here sees the end of the pipe
            return cls(pid, out, done)
        code = 1
        try:
            os.close(done)
            data = memoryview(function() or b"")
            while data:
                data = data[os.write(out, data):]
            code = 0
        except BaseException as exc:  # reported, then the child ends: never the parent's path
            with contextlib.suppress(BaseException):
                print(f"brain: background work failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            with contextlib.suppress(BaseException):
                os.write(said, b"\0" if code == 0 else b"\1")
            os._exit(code)

    def said_done(self) -> bool:
        """Whether the child has said it is done (or ended), without waiting for it."""
        if self._ended is not None:
            return True
        import select

        poller = select.poll()  # not select(): no limit on the descriptor's number
        poller.register(self._done, select.POLLIN)
        return bool(poller.poll(0))  # its byte, or the end of the pipe (POLLHUP) when it ended

    def wait(self) -> bool:
        """Block until the child is done; True when its function returned."""
        ended = self._reap()
        self._close()
        return ended

    def output(self, load: Callable[[mmap.mmap], T]) -> T | None:
        """``load`` of the bytes the child's function returned, read where they lie (mapped, not
        copied into this process's heap), once it ended; None when it failed or returned nothing."""
        try:
            if not self._reap():
                return None
            size = os.fstat(self._out).st_size
            if not size:
                return None
            import mmap

            with mmap.mmap(self._out, size, prot=mmap.PROT_READ) as mapped:
                return load(mapped)
        finally:
            self._close()

    def cancel(self) -> None:
        """End the child now (the run it was working for failed) and reap it."""
        if self._ended is None:
            import signal

            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
        self.wait()
        reap_children()  # gone, not leaving

    def _reap(self) -> bool:
        if self._ended is None:
            said = b""
            with contextlib.suppress(OSError):
                said = os.read(self._done, 1)  # b"": the child ended without a word (killed)
            os.close(self._done)
            self._done = -1
            if said == b"\0":  # its bytes are all written: it is only leaving now
                self._ended = True
                _LEAVING.append(self.pid)
            else:
                try:
                    _, status = os.waitpid(self.pid, 0)
                    self._ended = said != b"\1" and os.waitstatus_to_exitcode(status) == 0
                except ChildProcessError:
                    self._ended = False
        return self._ended

    def _close(self) -> None:
        if self._out >= 0:
            os.close(self._out)
            self._out = -1


def reap_children(*, wait: bool = True) -> None:
    """Reap the children that said they were done (:class:`Forked`); ``wait`` False: only those
    gone already. A run calls it at its end, so it leaves no zombie behind."""
    for pid in list(_LEAVING):
        try:
            ended, _ = os.waitpid(pid, 0 if wait else os.WNOHANG)
        except ChildProcessError:  # reaped already (a waitpid(-1) elsewhere)
            ended = pid
        if ended:
            _LEAVING.remove(pid)


def _scratch() -> int:
    """An anonymous file (in memory where the system has ``memfd_create``), gone once closed."""
    if hasattr(os, "memfd_create"):
        with contextlib.suppress(OSError):
            return os.memfd_create("brain-background", os.MFD_CLOEXEC)
    import tempfile  # only here: not an import every tick pays for

    with tempfile.TemporaryFile() as handle:
        return os.dup(handle.fileno())
