"""A server-sent events response that costs little per open stream.

Starlette's ``StreamingResponse`` notices a client that hangs up by listening for
``http.disconnect`` in an anyio task group beside the task that sends (on ASGI servers before spec
2.4, uvicorn among them): per open stream a task group, two tasks and their cancel scopes, about
6 KB of a 30 KB budget. ``EventStream`` sends from the request's own task and leaves one bare
task waiting for the disconnect, which cancels the scope the frames are sent in. Either way the
frames' iterator is closed before the response ends, so what it holds (a subscription, a count of
open streams) is let go as soon as the client is gone.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

MEDIA_TYPE = "text/event-stream; charset=utf-8"
HEADERS = (
    (b"content-type", MEDIA_TYPE.encode()),
    (b"cache-control", b"no-store"),
    (b"x-accel-buffering", b"no"),  # nginx: pass each frame on at once
)


class EventStream(Response):
    """``frames`` (SSE text, each ending in a blank line) as a ``text/event-stream`` response that
    ends when the frames end, or when the client disconnects (then the frames are closed)."""

    def __init__(self, frames: AsyncGenerator[str, None]) -> None:
        self.frames = frames
        self.status_code = 200
        self.background = None
        self.raw_headers = list(HEADERS)  # a list of its own: middleware adds headers to it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        watcher: asyncio.Task[None] | None = None
        try:
            with anyio.CancelScope() as sending:
                watcher = asyncio.get_running_loop().create_task(_cancel_on_disconnect(receive, sending))
                async for frame in self.frames:
                    await send({"type": "http.response.body", "body": frame.encode(), "more_body": True})
        finally:
            if watcher is not None:
                watcher.cancel()
            await self.frames.aclose()  # cancelled while sending: the generator still holds its resources
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _cancel_on_disconnect(receive: Receive, sending: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    sending.cancel()
