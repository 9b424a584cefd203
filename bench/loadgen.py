"""The client side the benchmark scripts share: a minimal HTTP/1.1 reader on asyncio streams, the
keep-alive load rounds of ``send.py`` and ``mcp_calls.py`` and their summary, the statistics and
the event loop.

The scripts import it as ``loadgen`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from harness import BenchError, Server

REQUEST_TIMEOUT_S = 10.0  # for one response during a round

T = TypeVar("T")
Classify = Callable[[int, bytes], str]  # (status, body) -> "ok", or what went wrong ("429", ...)


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


# -- requests on keep-alive connections ---------------------------------------------------------


def http_request(method: str, path: str, host: str, token: str | None, body: Any = None) -> bytes:
    """One request as raw bytes: a bearer token unless None, a JSON body unless None."""
    payload = b"" if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}\r\n"
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    return (head + "\r\n").encode() + payload


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

    async def response(self, timeout_s: float) -> tuple[int, dict[str, Any]]:
        """The next response (it must have a Content-Length): status and JSON body."""
        try:
            async with asyncio.timeout(timeout_s):
                status, _, raw = await read_response(self.reader)
        except TimeoutError:
            raise BenchError(f"no response within {timeout_s:.0f} s") from None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            raise BenchError(f"connection failed: {type(exc).__name__} {exc}") from exc
        decoded: dict[str, Any] = json.loads(raw) if raw else {}
        return status, decoded

    async def call(self, request: bytes, timeout_s: float = REQUEST_TIMEOUT_S) -> tuple[int, dict[str, Any]]:
        self.write(request)
        return await self.response(timeout_s)

    def close(self) -> None:
        self.writer.close()


class Pool:
    """Keep-alive connections handed out one request at a time, opened on demand."""

    def __init__(self, address: tuple[str, int], timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.host = f"{address[0]}:{address[1]}"
        self._idle: list[Connection] = []
        self._all: list[Connection] = []

    async def call(
        self, method: str, path: str, token: str | None, body: Any, expected: int
    ) -> tuple[dict[str, Any], float, float]:
        """Send one request on an idle connection (or a new one); the JSON answer, and the
        perf_counter times just before the request was written and once its response was read."""
        request = http_request(method, path, self.host, token, body)
        connection = self._idle.pop() if self._idle else await self._open()
        sent = time.perf_counter()
        try:
            status, answer = await connection.call(request, self.timeout_s)
        except BenchError as exc:
            raise BenchError(f"{method} {path}: {exc}") from exc
        done = time.perf_counter()
        self._idle.append(connection)
        if status != expected:
            raise BenchError(f"{method} {path}: {status} {json.dumps(answer)[:200]}")
        return answer, sent, done

    async def _open(self) -> Connection:
        connection = await Connection.open(self.address)
        self._all.append(connection)
        return connection

    def close(self) -> None:
        for connection in self._all:
            connection.close()
        self._all.clear()
        self._idle.clear()


# -- keep-alive load rounds ---------------------------------------------------------------------


@dataclass
class Round:
    target: str
    seconds: float
    variant: str = ""  # what else tells one target's rounds apart (mcp_calls.py: the protocol era)
    completed: int = 0  # responses read before the round's end
    latencies_s: list[float] = field(default_factory=list)  # every response, the tail included
    outcomes: Counter[str] = field(default_factory=Counter)  # "ok", "429", "200 tool error", ...
    samples: dict[str, str] = field(default_factory=dict)  # one body per failed outcome
    server_cpu_s: float = 0.0
    bench_cpu_s: float = 0.0

    @property
    def throughput(self) -> float:
        return self.completed / self.seconds


async def connection(server: Server, request: bytes, until: float, result: Round, classify: Classify) -> None:
    """One keep-alive connection to ``server`` sending ``request`` back to back until ``until``."""
    reader, writer = await asyncio.open_connection(*server.address)
    try:
        while (sent := time.perf_counter()) < until:
            writer.write(request)
            try:
                status, _, body = await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT_S)
            except TimeoutError:
                raise BenchError(f"{result.target}: no response within {REQUEST_TIMEOUT_S:.0f} s") from None
            done = time.perf_counter()
            result.latencies_s.append(done - sent)
            result.completed += done <= until
            outcome = classify(status, body)
            result.outcomes[outcome] += 1
            if outcome != "ok":
                result.samples.setdefault(outcome, body[:200].decode(errors="replace"))
    except (OSError, asyncio.IncompleteReadError) as exc:
        raise BenchError(f"{result.target}: {type(exc).__name__} {exc}") from exc
    finally:
        writer.close()


async def run_round(
    result: Round, servers: Sequence[Server], plan: list[tuple[Server, bytes]], classify: Classify
) -> Round:
    """One connection per (server, request) of ``plan`` for ``result.seconds``; measure what came
    back, and the CPU of ``servers`` and of this process meanwhile."""
    server_cpu, bench_cpu = sum(s.cpu_s() for s in servers), time.process_time()
    until = time.perf_counter() + result.seconds
    async with asyncio.TaskGroup() as group:
        for server, request in plan:
            group.create_task(connection(server, request, until, result, classify))
    result.server_cpu_s = sum(s.cpu_s() for s in servers) - server_cpu
    result.bench_cpu_s = time.process_time() - bench_cpu
    return result


@dataclass(frozen=True)
class Summary:
    label: str
    variant: str
    throughputs: list[float]
    p50_ms: float
    p99_ms: float
    outcomes: Counter[str]
    samples: dict[str, str]
    server_cpu: float  # share of one core over the rounds
    bench_cpu: float
    cpu_per_request_ms: float  # the server's
    bench_cpu_per_request_ms: float

    @property
    def median(self) -> float:
        return statistics.median(self.throughputs)

    @property
    def failures(self) -> int:
        return sum(count for outcome, count in self.outcomes.items() if outcome != "ok")


def summarize(label: str, rounds: list[Round], variant: str = "") -> Summary:
    mine = [r for r in rounds if r.target == label and r.variant == variant]
    latencies = sorted(s * 1000 for r in mine for s in r.latencies_s)
    outcomes: Counter[str] = Counter()
    samples: dict[str, str] = {}
    for r in mine:
        outcomes.update(r.outcomes)
        for outcome, body in r.samples.items():
            samples.setdefault(outcome, body)
    wall = sum(r.seconds for r in mine)
    server_cpu, bench_cpu = sum(r.server_cpu_s for r in mine), sum(r.bench_cpu_s for r in mine)
    return Summary(
        label=label,
        variant=variant,
        throughputs=[r.throughput for r in mine],
        p50_ms=statistics.median(latencies),
        p99_ms=percentile(latencies, 0.99),
        outcomes=outcomes,
        samples=samples,
        server_cpu=server_cpu / wall,
        bench_cpu=bench_cpu / wall,
        cpu_per_request_ms=server_cpu * 1000 / len(latencies),
        bench_cpu_per_request_ms=bench_cpu * 1000 / len(latencies),
    )


# -- statistics and the event loop --------------------------------------------------------------


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    return sorted_values[max(0, math.ceil(fraction * len(sorted_values)) - 1)]


async def bounded(count: int, limit: int, job: Callable[[int], Awaitable[None]]) -> None:
    """Run ``job(0..count-1)`` with at most ``limit`` running at once; the first error propagates."""
    gate = asyncio.Semaphore(limit)

    async def one(index: int) -> None:
        async with gate:
            await job(index)

    async with asyncio.TaskGroup() as group:
        for index in range(count):
            group.create_task(one(index))


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """Run on uvloop when it is installed (as the servers are)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
