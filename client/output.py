"""How ``relaybox tail`` and ``relaybox phone run`` print: results on stdout, notes on stderr, as
text lines or (``--json``) one JSON object per line, one locked write per line so that lines from
the reminder thread never interleave with other output."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TextIO


class Output:
    """Stdout for results, stderr for notes; one locked write per line (several threads print).

    ``as_json``: each result is one JSON object per line instead of its text lines. Streams default
    to ``sys.stdout`` / ``sys.stderr`` as they are when writing.
    """

    def __init__(
        self, *, as_json: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        self.as_json = as_json
        self._stdout = stdout
        self._stderr = stderr
        self._lock = threading.Lock()

    @property
    def stdout(self) -> TextIO:
        return self._stdout or sys.stdout

    @property
    def stderr(self) -> TextIO:
        return self._stderr or sys.stderr

    def line(self, text: str) -> None:
        self._write(self.stdout, text + "\n")

    def note(self, text: str) -> None:
        self._write(self.stderr, text + "\n")

    def show(self, lines: str | Sequence[str], record: Mapping[str, Any]) -> None:
        """The text ``lines`` (already one-line safe), or in JSON mode the ``record``."""
        if self.as_json:
            self.line(json.dumps(record, ensure_ascii=False))
        else:
            self.line(lines if isinstance(lines, str) else "\n".join(lines))

    def bell(self) -> None:
        """The terminal bell, on the first of stdout (text mode only) and stderr that is a terminal."""
        for stream, allowed in ((self.stdout, not self.as_json), (self.stderr, True)):
            if allowed and _is_terminal(stream):
                self._write(stream, "\a")
                return

    def _write(self, stream: TextIO, text: str) -> None:
        with self._lock:
            stream.write(text)
            stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):  # closed, or not a real file
        return False
