"""Following ``GET /v1/sync`` for one device: one streaming request at a time; on any drop it
reconnects with ``Last-Event-ID`` set to the last event it handed out, after a bounded exponential
backoff, so nothing is missed or repeated. A 401 ends it (the credential was revoked); so does
Ctrl-C."""

from __future__ import annotations

import codecs
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final

import httpx

from client.api import CONNECT_TIMEOUT_S, USER_AGENT, ApiError
from client.lifecycle import Closing
from client.sse import SseComment, SseError, SseEvent, SseParser
from client.sync_connection import OpenStream, ServerBusyError

# The server sends a keep-alive comment after 15 s of silence; a read that waits this long means
# the connection is dead even though no error was reported.
READ_TIMEOUT_S = 60.0
BACKOFF_FIRST_S = 0.5
BACKOFF_CAP_S = 10.0


@dataclass(frozen=True, slots=True)
class SyncEvent:
    """One ``/v1/sync`` frame: ``seq`` (its id), ``event`` (envelope, push, token_update) and the
    raw JSON ``data``.

    ``live``: a push sent only to open streams and never queued (ring, reminders), a frame without
    an ``id`` line. It has no sequence id of its own: ``seq`` is the last id handed out before it
    (0 if none), and it never moves the position.
    """

    seq: int
    event: str
    data: str
    live: bool = False


@dataclass(frozen=True, slots=True)
class KeepAlive:
    """A comment arrived: the stream is up and, for now, quiet."""


KEEP_ALIVE: Final = KeepAlive()
StreamItem = SyncEvent | KeepAlive


class Backoff:
    """Reconnection delays: ``first``, doubling up to ``cap``; ``reset`` after a good connection."""

    def __init__(self, first: float = BACKOFF_FIRST_S, cap: float = BACKOFF_CAP_S) -> None:
        self.first = first
        self.cap = cap
        self._next = first

    def next_delay(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * 2)
        return delay

    def reset(self) -> None:
        self._next = self.first


class SyncFollower(Closing):
    """Follows ``GET /v1/sync`` for one device across reconnects. Use as a context manager.

    ``after``: start after this sequence id (``None``: everything still queued). ``idle``: end the
    iteration once no event has arrived for that many seconds (``--once``); otherwise it runs
    until the credential is revoked (``ClientError``) or the caller stops. ``max_failures``:
    give up after that many failed connection attempts in a row (``None``: never).
    """

    def __init__(
        self,
        server: str,
        token: str,
        *,
        after: int | None = None,
        idle: float | None = None,
        read_timeout: float = READ_TIMEOUT_S,
        backoff: Backoff | None = None,
        max_failures: int | None = None,
        notice: Callable[[str], None] = lambda _message: None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.last_seq = after
        self.connections = 0
        self._token = token
        self._idle = idle
        self._read_timeout = read_timeout if idle is None else min(read_timeout, idle)
        self._backoff = backoff or Backoff()
        self._max_failures = max_failures
        self._notice = notice
        self._sleep = sleep
        self._clock = clock
        self._http = httpx.Client(
            base_url=server,
            transport=transport,
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
        )
        self._server = server

    def close(self) -> None:
        self._http.close()

    def events(self) -> Iterator[StreamItem]:
        """Events in order, each once, plus ``KEEP_ALIVE`` for every comment (quiet moments)."""
        failures = 0
        last_event_at = self._clock()
        while True:
            try:
                with self._open() as response:
                    failures = 0
                    self._backoff.reset()
                    self.connections += 1
                    if self.connections > 1:
                        self._notice(f"reconnected, resuming after seq {self.last_seq or 0}")
                    parser = SseParser()
                    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                    try:
                        for chunk in response.iter_bytes():
                            for item in parser.feed(decoder.decode(chunk)):
                                if isinstance(item, SseComment):
                                    if self._idle is not None and self._clock() - last_event_at >= self._idle:
                                        return
                                    yield KEEP_ALIVE
                                    continue
                                event = self._accept(item)
                                if event is not None:
                                    last_event_at = self._clock()
                                    yield event
                    except httpx.ReadTimeout:
                        if self._idle is not None:
                            return  # nothing at all for `idle` seconds: the queue is drained
                        raise
                problem = "the server ended the stream"
            except (httpx.TransportError, SseError, ServerBusyError) as error:
                failures += 1
                problem = f"connection lost ({_describe(error)})"
                if self._max_failures is not None and failures >= self._max_failures:
                    raise ApiError(
                        0, "connection_failed", f"cannot follow {self._server}: {problem}"
                    ) from error
            delay = self._backoff.next_delay()
            self._notice(f"{problem}; reconnecting in {delay:g} s")
            self._sleep(delay)

    def _open(self) -> OpenStream:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Accept": "text/event-stream",
            "Cache-Control": "no-store",
        }
        if self.last_seq is not None:
            headers["Last-Event-ID"] = str(self.last_seq)
        timeout = httpx.Timeout(self._read_timeout, connect=CONNECT_TIMEOUT_S)
        request = self._http.build_request("GET", "/v1/sync", headers=headers, timeout=timeout)
        return OpenStream(self._http, request, revoked=self.connections > 0)

    def _accept(self, item: SseEvent) -> SyncEvent | None:
        if item.event == "push" and not item.own_id:
            return SyncEvent(self.last_seq or 0, item.event, item.data, live=True)
        seq_text = item.id or ""
        if not (seq_text.isascii() and seq_text.isdigit()):
            self._notice(f"ignored a {item.event!r} event without a numeric id")
            return None
        seq = int(seq_text)
        if self.last_seq is not None and seq <= self.last_seq:
            return None  # already handed out: never repeat
        self.last_seq = seq
        return SyncEvent(seq, item.event, item.data)


def _describe(error: Exception) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
