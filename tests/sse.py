"""Reading server-sent events from a real HTTP stream in tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx


@dataclass
class Event:
    id: str | None
    event: str | None
    data: str
    comment: bool = False

    @property
    def json(self) -> Any:
        return json.loads(self.data)


async def events(response: httpx.Response) -> AsyncIterator[Event]:
    """Events in order; comment frames (keep-alives) come through with ``comment=True``."""
    fields: dict[str, str] = {}
    data: list[str] = []
    comment = False
    async for line in response.aiter_lines():
        if line == "":
            if data or fields:
                yield Event(fields.get("id"), fields.get("event"), "\n".join(data))
            elif comment:
                yield Event(None, None, "", comment=True)
            fields, data, comment = {}, [], False
            continue
        if line.startswith(":"):
            comment = True
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        else:
            fields[name] = value


async def next_data_event(stream: AsyncIterator[Event]) -> Event:
    async for event in stream:
        if not event.comment:
            return event
    raise AssertionError("stream ended")
