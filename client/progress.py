"""A one-line progress bar on a terminal: ``[#####.....]  45%  9.0/20.0 MB``. Silent elsewhere."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 30
REDRAW_S = 0.1


class Progress:
    """Counts bytes towards ``total`` and redraws at most every ``REDRAW_S`` on ``stream``, only
    when ``stream`` is a terminal (pipes and logs never get carriage returns)."""

    def __init__(
        self, label: str, total: int, stream: TextIO, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self._stream = stream
        self._clock = clock
        self._drawn_at: float | None = None
        try:
            self.visible = stream.isatty()
        except (ValueError, OSError):
            self.visible = False

    def advance(self, count: int) -> None:
        self.done += count
        now = self._clock()
        if self.visible and (
            self._drawn_at is None or now - self._drawn_at >= REDRAW_S or self.done >= self.total
        ):
            self._drawn_at = now
            self._stream.write("\r" + self.render())
            self._stream.flush()

    def render(self) -> str:
        fraction = 1.0 if self.total <= 0 else min(1.0, self.done / self.total)
        filled = int(fraction * WIDTH)
        return (
            f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {fraction * 100:3.0f}%  "
            f"{self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB"
        )

    def finish(self) -> None:
        """End the bar's line (if one was drawn)."""
        if self.visible and self._drawn_at is not None:
            self._stream.write("\n")
            self._stream.flush()
