"""Ctrl-C and SIGTERM that wait for the event in hand (used by the followers)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Stopper:
    """Ctrl-C and SIGTERM stop a follower between events, never halfway through one, so the
    ``last_seq`` it saves is exactly the last event it printed."""

    def __init__(self) -> None:
        self._busy = False
        self._requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Stopper:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _on_signal(self, _signum: int, _frame: object) -> None:
        if self._busy:
            self._requested = True
        else:
            raise KeyboardInterrupt

    @contextmanager
    def deferred(self) -> Iterator[None]:
        self._busy = True
        try:
            yield
        finally:
            self._busy = False
        if self._requested:
            raise KeyboardInterrupt
