"""Waits that shutdown ends early: open streams and long polls answer with what they have when the
server begins to stop, instead of being cut when the server's grace period runs out."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
from anyio.lowlevel import EventLoopToken


class Waits:
    def __init__(self) -> None:
        self.long_polls = 0  # long polls waiting for an answer on this process
        self._stopping = False
        self._scopes: set[anyio.CancelScope] = set()
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
        for scope in tuple(self._scopes):
            scope.cancel()

    @property
    def shutting_down(self) -> bool:
        return self._stopping

    @contextmanager
    def until_shutdown(self) -> Iterator[anyio.CancelScope]:
        """A scope around a wait that ends (without error) when shutdown begins; wrap only a wait,
        never a ``yield`` of an async generator."""
        scope = anyio.CancelScope()
        if self._stopping:
            scope.cancel()
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)

    @contextmanager
    def long_poll(self) -> Iterator[None]:
        """Around a long poll's wait: counted in ``long_polls`` and ended when shutdown begins."""
        self.long_polls += 1
        try:
            with self.until_shutdown():
                yield
        finally:
            self.long_polls -= 1
