"""What ``relaybox demo`` prints: numbered steps, their details and results, the phone's own lines,
and a failure as the one line the demo ends with (``DemoError``, ``describe``)."""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, TextIO


class DemoError(Exception):
    """A step that did not go as it should; the message is the one line the demo prints."""


class Narrator:
    """Numbered steps, indented details and the phone's own lines; one locked write per line."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = total
        self.number = 0
        self.name = ""
        self._stream = stream
        self._lock = threading.Lock()

    def step(self, title: str, name: str | None = None) -> None:
        """Start the next step; ``name`` (default: ``title`` up to a colon) is how errors name it."""
        self.number += 1
        self.name = name or title.split(":")[0]
        self.line(f"\n[{self.number}/{self.total}] {title}")

    def say(self, text: str) -> None:
        self.line(f"    {text}")

    def result(self, value: Any) -> None:
        self.line(f"    → {compact(value)}")

    def phone(self, text: str) -> None:
        self.line(f"    phone │ {text}")

    def line(self, text: str) -> None:
        with self._lock:
            stream = self._stream or sys.stdout
            stream.write(text + "\n")
            stream.flush()


def compact(value: Any, limit: int = 160) -> str:
    """``key=value, …`` with nulls left out and nested values in braces, cut at ``limit``."""
    text = _render(value)
    if isinstance(value, dict):
        text = text[1:-1]
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _render(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_render(v)}" for k, v in value.items() if v is not None) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_render(item) for item in value) + "]"
    if isinstance(value, str):
        return value if value.isprintable() else json.dumps(value, ensure_ascii=False)
    return json.dumps(value)


def describe(error: BaseException) -> str:
    """An unexpected error as one line: its type and message (a lone error unwrapped from a group)."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
