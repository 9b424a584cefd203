"""Where the last run stopped: the last handled sequence id is kept in the state file as
``last_seq``, so the next run resumes where this one stopped."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from client.state_file import update_fields

LAST_SEQ = "last_seq"


def load_last_seq(path: Path) -> int | None:
    """``last_seq`` from the state file, or ``None`` when absent or unusable."""
    try:
        raw: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = raw.get(LAST_SEQ) if isinstance(raw, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def save_last_seq(path: Path, device_id: str, seq: int) -> None:
    """Record ``seq`` in the state file, changing nothing else (read fresh, so fields another
    command wrote meanwhile survive). A file that now holds another device is left alone."""
    update_fields(path, device_id, {LAST_SEQ: seq})


class Position:
    """Keeps ``last_seq`` in the state file without a disk write per event: at most one write per
    ``interval`` while events stream in, one when the stream goes quiet, and one at ``flush``."""

    def __init__(
        self,
        path: Path,
        device_id: str,
        seq: int | None,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.seq = seq
        self._device_id = device_id
        self._saved = seq
        self._interval = interval
        self._clock = clock
        self._saved_at = clock()

    def advance(self, seq: int) -> None:
        self.seq = seq
        if self._clock() - self._saved_at >= self._interval:
            self.flush()

    def flush(self) -> None:
        if self.seq is not None and self.seq != self._saved:
            save_last_seq(self.path, self._device_id, self.seq)
            self._saved = self.seq
        self._saved_at = self._clock()
