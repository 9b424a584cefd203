"""The minimal HTTP/1.1 client every benchmark talks to the servers with, on asyncio streams (uvloop
when installed): reading responses (Content-Length or chunked bodies), building requests, one
keep-alive connection, and a pool of them whose every answer is checked (status and shape).

Not httpx: httpx spends more CPU per request than the bare servers do, so a benchmark driven by it
measures its client. The scripts import this as ``http1`` (``bench/`` is on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from typing import Any

from checks import Shape, check_shape
from harness import BenchError

REQUEST_TIMEOUT_S = 10.0  # for one response


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
    """The status line and headers of an HTTP/1.1 response (names lower-cased)."""
    head = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
    headers: dict[bytes, bytes] = {}
    for line in head[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    return int(head[0].split(b" ", 2)[1]), headers


async def read_chunk(reader: asyncio.StreamReader) -> bytes:
    """The next chunk of a chunked body; b"" for the last one (its trailer section read too)."""
    size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
    if size == 0:
        await reader.readuntil(b"\r\n")  # the empty trailer section
        return b""
    chunk = await reader.readexactly(size + 2)
    return chunk[:-2]


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes], bytes]:
    """One HTTP/1.1 response with a Content-Length or chunked body (legacy MCP answers are SSE)."""
    status, headers = await read_head(reader)
    if b"content-length" in headers:
        return status, headers, await reader.readexactly(int(headers[b"content-length"]))
    if headers.get(b"transfer-encoding") != b"chunked":
        raise BenchError(f"a response without Content-Length or chunked body: status {status}")
    chunks: list[bytes] = []
    while chunk := await read_chunk(reader):
        chunks.append(chunk)
    return status, headers, b"".join(chunks)


def http_request(
    method: str,
    path: str,
    host: str,
    token: str | None = None,
    body: Any = None,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """One request as raw bytes: a bearer token unless None, a compact JSON body unless None."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
    payload = b""
    if body is not None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


class Connection:
    """One keep-alive HTTP/1.1 connection; a request is written, then its response read."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, address: tuple[str, int]) -> Connection:
        reader, writer = await asyncio.open_connection(*address)
        return cls(reader, writer)

    def write(self, request: bytes) -> None:
        self.writer.write(request)

    async def raw_response(self, timeout_s: float) -> tuple[int, dict[bytes, bytes], bytes]:
        try:
            async with asyncio.timeout(timeout_s):
                return await read_response(self.reader)
        except TimeoutError:
            raise BenchError(f"no response within {timeout_s:.0f} s") from None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise BenchError(f"connection failed: {type(exc).__name__} {exc}") from exc

    async def response(self, timeout_s: float) -> tuple[int, Any]:
        """The next response: status and JSON body (None when empty)."""
        status, _, raw = await self.raw_response(timeout_s)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            raise BenchError(f"a {status} answer that is not JSON: {raw[:200]!r}") from None

    async def exchange(self, request: bytes, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[int, Any]:
        self.write(request)
        return await self.response(timeout_s)

    def close(self) -> None:
        self.writer.close()


async def exchange_once(
    address: tuple[str, int], request: bytes, timeout_s: float = REQUEST_TIMEOUT_S
) -> tuple[int, dict[bytes, bytes], bytes]:
    """One request on a connection of its own: status, headers and raw body."""
    connection = await Connection.open(address)
    try:
        connection.write(request)
        return await connection.raw_response(timeout_s)
    finally:
        connection.close()


class Pool:
    """Keep-alive connections handed out one request at a time, opened on demand; every answer is
    checked against the expected status and shape."""

    def __init__(self, address: tuple[str, int], timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.host = f"{address[0]}:{address[1]}"
        self._idle: list[Connection] = []
        self._all: list[Connection] = []

    async def call(
        self, method: str, path: str, token: str | None, body: Any, expected: int, shape: Shape
    ) -> tuple[dict[str, Any], float, float]:
        """Send one request on an idle connection (or a new one); the checked JSON answer, and the
        perf_counter times just before the request was written and once its response was read."""
        request = http_request(method, path, self.host, token, body)
        connection = self._idle.pop() if self._idle else await self._open()
        sent = time.perf_counter()
        try:
            status, answer = await connection.exchange(request, self.timeout_s)
        except BenchError as exc:
            raise BenchError(f"{method} {path}: {exc}") from exc
        done = time.perf_counter()
        self._idle.append(connection)
        if status != expected:
            raise BenchError(f"{method} {path}: {status} {json.dumps(answer)[:200]}")
        return check_shape(f"{method} {path}", answer, shape), sent, done

    async def _open(self) -> Connection:
        connection = await Connection.open(self.address)
        self._all.append(connection)
        return connection

    def close(self) -> None:
        for connection in self._all:
            connection.close()
        self._all.clear()
        self._idle.clear()
