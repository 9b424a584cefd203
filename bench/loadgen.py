"""The client side the benchmark scripts share: a minimal HTTP/1.1 reader on asyncio streams, the
keep-alive load rounds of ``send.py`` and ``mcp_calls.py`` and their summary, the statistics and
the event loop.

The scripts import it as ``loadgen`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import asyncio
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


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes], bytes]:
    """One HTTP/1.1 response with a Content-Length or chunked body (legacy MCP answers are SSE)."""
    head = (await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")
    headers: dict[bytes, bytes] = {}
    for line in head[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip()
    status = int(head[0].split(b" ", 2)[1])
    if b"content-length" in headers:
        return status, headers, await reader.readexactly(int(headers[b"content-length"]))
    if headers.get(b"transfer-encoding") != b"chunked":
        raise BenchError(f"a response without Content-Length or chunked body: {head[0]!r}")
    chunks: list[bytes] = []
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
    await reader.readuntil(b"\r\n")  # the empty trailer section
    return status, headers, b"".join(chunks)


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
