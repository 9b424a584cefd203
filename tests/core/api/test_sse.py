"""EventStream, the /v1/sync response, driven as an ASGI app with a scripted client."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import anyio
import pytest
from starlette.types import Message

from core.api.sse import EventStream

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Client:
    """The server side of one connection: what the response sent, and a hang-up on demand."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.hung_up = anyio.Event()
        self.asked = 0

    async def receive(self) -> Message:
        self.asked += 1
        if self.asked == 1:
            return {"type": "http.request", "body": b"", "more_body": False}
        await self.hung_up.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")


class Frames:
    """Frames to send, then a wait that only a cancellation ends; notes when it was closed."""

    def __init__(self, *frames: str, then_wait: bool) -> None:
        self.frames = frames
        self.then_wait = then_wait
        self.closed = False
        self.waiting = anyio.Event()
        self.closing = anyio.Event()

    async def __call__(self) -> AsyncGenerator[str, None]:
        try:
            for frame in self.frames:
                yield frame
            if self.then_wait:
                self.waiting.set()
                await anyio.sleep_forever()
        finally:
            self.closed = True
            self.closing.set()


async def test_the_frames_go_out_as_an_event_stream_that_ends_when_they_do() -> None:
    client, frames = Client(), Frames(": hello\n\n", "id: 1\ndata: {}\n\n", then_wait=False)
    with anyio.fail_after(2):
        await EventStream(frames())({"type": "http"}, client.receive, client.send)
    start, *_, end = client.sent
    assert start["status"] == 200
    assert dict(start["headers"]) == {
        b"content-type": b"text/event-stream; charset=utf-8",
        b"cache-control": b"no-store",
        b"x-accel-buffering": b"no",
    }
    assert client.body == b": hello\n\nid: 1\ndata: {}\n\n"
    assert end == {"type": "http.response.body", "body": b"", "more_body": False}
    assert frames.closed


async def test_a_hang_up_while_the_frames_wait_closes_them_at_once() -> None:
    client, frames = Client(), Frames(": hello\n\n", then_wait=True)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(EventStream(frames()), {"type": "http"}, client.receive, client.send)
        with anyio.fail_after(2):
            await frames.waiting.wait()
            assert not frames.closed
            client.hung_up.set()
            await frames.closing.wait()
    assert client.body == b": hello\n\n"
    assert client.sent[-1]["more_body"] is False


async def test_a_hang_up_while_a_frame_is_being_sent_still_closes_the_frames() -> None:
    client, frames = Client(), Frames(": hello\n\n", "data: {}\n\n", then_wait=False)
    writable = anyio.Event()  # a send that blocks, as on a full socket buffer

    async def send(message: Message) -> None:
        if message.get("body") == b"data: {}\n\n":
            client.hung_up.set()
            await writable.wait()
        await client.send(message)

    with anyio.fail_after(2):
        await EventStream(frames())({"type": "http"}, client.receive, send)
    assert frames.closed
    assert client.body == b": hello\n\n"  # the blocked frame never went out
    assert client.sent[-1]["more_body"] is False
