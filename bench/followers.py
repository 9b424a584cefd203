"""Open ``GET /v1/sync`` streams for ``stream.py``: one raw HTTP/1.1 connection and one reading task
per device, the chunked body split into SSE frames, every event with an ``id:`` kept with the time
its chunk was read, and a way to wait for a stream's next event.

The scripts import it as ``followers`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from devices import Device
from harness import BenchError
from http1 import http_request, read_chunk, read_head
from lifecycle import Progress

OPENING_COMMENT = ": relaybox stream"


@dataclass(frozen=True)
class Event:
    at: float  # perf_counter when the chunk that completed it was read
    seq: int
    kind: str  # the ``event:`` field
    data: str


def parse_frame(frame: str, at: float) -> Event | None:
    """An SSE frame with an ``id:`` as an Event; None for a comment or a frame without one."""
    fields: dict[str, str] = {}
    for line in frame.split("\n"):
        name, _, value = line.partition(":")
        if name:
            fields[name] = value.removeprefix(" ")
    if "id" not in fields:
        return None
    return Event(at, int(fields["id"]), fields.get("event", "message"), fields.get("data", ""))


class Follower:
    """One device's stream: every event it yielded, in order; a waiter may come before the event."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.events: list[Event] = []
        self._waiting: dict[int, asyncio.Future[Event]] = {}

    def add(self, event: Event) -> None:
        self.events.append(event)
        waiter = self._waiting.pop(len(self.events) - 1, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(event)

    async def event(self, index: int, timeout_s: float) -> Event:
        """The stream's event number ``index`` (0 = its first), once it has come."""
        if index < len(self.events):
            return self.events[index]
        waiter = self._waiting.setdefault(index, asyncio.get_running_loop().create_future())
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), timeout_s)
        except TimeoutError:
            raise BenchError(f"{self.device.device_id}: no event within {timeout_s} s") from None


@dataclass
class StreamSet:
    """N open streams, each read by its own task."""

    address: tuple[str, int]
    progress: Progress
    followers: list[Follower] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    opened: int = 0
    ended: int = 0
    all_open: asyncio.Event = field(default_factory=asyncio.Event)

    async def follow(self, follower: Follower, gate: asyncio.Semaphore) -> None:
        """Hold a connecting slot until the opening comment arrives, then read until cancelled."""
        released = False

        def opened() -> None:
            nonlocal released
            if not released:
                released = True
                gate.release()
                self.opened += 1
                self.progress.done = self.opened
                if self.opened == len(self.followers):
                    self.all_open.set()

        await gate.acquire()
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(*self.address)
            host = f"{self.address[0]}:{self.address[1]}"
            writer.write(http_request("GET", "/v1/sync", host, follower.device.token))
            status, headers = await read_head(reader)
            if status != 200 or headers.get(b"transfer-encoding") != b"chunked":
                self.progress.fail(f"stream got {status} {headers.get(b'content-type', b'')!r}")
                return
            await self._read(reader, follower, opened)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            self.progress.fail(f"stream {type(exc).__name__}: {exc}")
        finally:
            if writer is not None:
                writer.close()
            if not released:
                released = True
                gate.release()
            self.ended += 1

    async def _read(
        self, reader: asyncio.StreamReader, follower: Follower, opened: Callable[[], None]
    ) -> None:
        """Split the body into SSE frames; keep each event with an ``id:``."""
        pending = ""
        while chunk := await read_chunk(reader):
            arrived = time.perf_counter()
            pending += chunk.decode()
            while "\n\n" in pending:
                frame, _, pending = pending.partition("\n\n")
                if frame.startswith(OPENING_COMMENT):
                    opened()
                elif (event := parse_frame(frame, arrived)) is not None:
                    follower.add(event)
        self.progress.fail("a stream ended")  # the server closed it


async def open_streams(
    address: tuple[str, int], devices: list[Device], limit: int, progress: Progress
) -> StreamSet:
    """Open a stream per device (at most ``limit`` connecting at once) and wait until all are up."""
    streams = StreamSet(address, progress, [Follower(device) for device in devices])
    progress.start("opening streams", len(devices))
    gate = asyncio.Semaphore(limit)
    for follower in streams.followers:
        streams.tasks.append(asyncio.create_task(streams.follow(follower, gate)))
    while not streams.all_open.is_set():
        if streams.ended:
            raise BenchError(f"{streams.ended} stream(s) ended before all were open")
        try:
            await asyncio.wait_for(streams.all_open.wait(), 0.2)
        except TimeoutError:
            continue
    return streams


async def close_streams(streams: StreamSet | None) -> None:
    if streams is None:
        return
    for task in streams.tasks:
        task.cancel()
    await asyncio.gather(*streams.tasks, return_exceptions=True)
