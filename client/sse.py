"""A pure, incremental server-sent-events parser: feed it text in any chunks."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_LINE_CHARS = 1 << 20  # a 64 KiB envelope is ~88 KB of base64; anything near 1 MB is not ours


@dataclass(frozen=True, slots=True)
class SseEvent:
    """A dispatched event: its type (``message`` by default), data lines joined by ``\\n``, and
    the last event id in force when it was dispatched. ``own_id``: the event itself had an ``id``
    line (otherwise ``id`` is inherited from an earlier event)."""

    event: str
    data: str
    id: str | None
    own_id: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class SseComment:
    """A comment line (``: keep-alive``), text after the colon and one optional space."""

    text: str


SseItem = SseEvent | SseComment
_LINE_END = re.compile(r"\r\n|\r|\n")


class SseError(ValueError):
    """The stream is not server-sent events we can read (a line beyond ``MAX_LINE_CHARS``)."""


class SseParser:
    """The event-stream grammar of the HTML standard, incrementally: ``feed`` returns what each
    chunk completes. Lines end with CRLF, LF or CR (also split across chunks); a leading BOM is
    skipped; an event still open when the stream ends is never returned. A ``retry`` line is
    ignored like any unknown field: the client reconnects on its own schedule."""

    def __init__(self, max_line: int = MAX_LINE_CHARS) -> None:
        self._max_line = max_line
        self._pending = ""
        self._started = False
        self._after_cr = False
        self._event = ""
        self._data: list[str] = []
        self._id_buffer: str | None = None
        self._own_id = False
        self.last_event_id: str | None = None

    def feed(self, text: str) -> list[SseItem]:
        if not text:
            return []
        if not self._started:
            self._started = True
            text = text.removeprefix("\ufeff")
        if self._after_cr and text.startswith("\n"):
            text = text[1:]  # the LF of a CRLF split between two chunks
        self._after_cr = False
        buffer = self._pending + text
        items: list[SseItem] = []
        start = 0
        for end in _LINE_END.finditer(buffer):
            self._line(buffer[start : end.start()], items)
            start = end.end()
        self._pending = buffer[start:]
        self._after_cr = buffer.endswith("\r")
        if len(self._pending) > self._max_line:
            raise SseError(f"a line of more than {self._max_line} characters")
        return items

    def _line(self, line: str, items: list[SseItem]) -> None:
        if not line:
            self._dispatch(items)
        elif line.startswith(":"):
            items.append(SseComment(line[1:].removeprefix(" ")))
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self._event = value
            elif name == "data":
                self._data.append(value)
            elif name == "id" and "\0" not in value:
                self._id_buffer = value
                self._own_id = True

    def _dispatch(self, items: list[SseItem]) -> None:
        self.last_event_id = self._id_buffer
        if self._data:
            items.append(
                SseEvent(self._event or "message", "\n".join(self._data), self.last_event_id, self._own_id)
            )
        self._event, self._data, self._own_id = "", [], False
