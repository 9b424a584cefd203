"""Waits that shutdown ends early: open streams and long polls answer with what they have when the
server begins to stop, instead of being cut when the server's grace period runs out."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
from anyio.lowlevel import EventLoopToken


class Waits:
    def __init__(self) -> None:
        self.long_polls = 0  # long polls waiting for an answer on this process
        self._stopping = False
        self._interrupts: set[Callable[[], None]] = set()  # what ends each wait, called at shutdown
        self._loop: tuple[int, EventLoopToken] | None = None  # (thread id, token) while running

    def started(self) -> None:
        """Called on the event loop when the Core starts."""
        self._stopping = False
        self._loop = (threading.get_ident(), anyio.lowlevel.current_token())

    def stopped(self) -> None:
        self._loop = None

    def in_loop(self) -> bool:
        """Called from the event loop the Core runs in (not another loop, not a worker thread)."""
        return self._loop is not None and self._loop[0] == threading.get_ident()

    @property
    def running(self) -> bool:
        return self._loop is not None

    def begin_shutdown(self) -> None:
        """The server is stopping: end every wait now. Callable from any thread."""
        self._stopping = True
        if self._loop is not None and self._loop[0] != threading.get_ident():
            anyio.from_thread.run_sync(self._end_all, token=self._loop[1])
        else:
            self._end_all()

    def _end_all(self) -> None:
        for interrupt in tuple(self._interrupts):
            interrupt()

    @property
    def shutting_down(self) -> bool:
        return self._stopping

    @contextmanager
    def until_shutdown(self) -> Iterator[anyio.CancelScope]:
        """A scope around a wait that ends (without error) when shutdown begins; wrap only a wait,
        never a ``yield`` of an async generator."""
        scope = anyio.CancelScope()
        with self.interrupting(scope.cancel), scope:
            yield scope

    @contextmanager
    def interrupting(self, interrupt: Callable[[], None]) -> Iterator[None]:
        """Within: ``interrupt`` is called (on the event loop) when shutdown begins, at once if it
        has. For a wait that ends itself more cheaply than a cancel scope (an open stream's
        ``receive_until``, registered once for the stream's life rather than for each wait)."""
        if self._stopping:
            interrupt()
        self._interrupts.add(interrupt)
        try:
            yield
        finally:
            self._interrupts.discard(interrupt)

    @contextmanager
    def long_poll(self) -> Iterator[None]:
        """Around a long poll's wait: counted in ``long_polls`` and ended when shutdown begins."""
        self.long_polls += 1
        try:
            with self.until_shutdown():
                yield
        finally:
            self.long_polls -= 1
