"""A count that threads add to at once without losing an increment."""

from __future__ import annotations

import threading


class Tally:
    """Counted from any thread (the group writers', a session's commit); read without the lock."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        return self._count

    def counted(self) -> None:
        with self._lock:
            self._count += 1
