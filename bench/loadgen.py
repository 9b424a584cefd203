"""The keep-alive load rounds of ``send.py`` and ``mcp_calls.py``: connections sending a prepared
request back to back for a round's duration, every answer checked, the CPU of the servers, the
store, the load generator and the rest of the machine measured per round; the warm-up and the
interleaved rounds; the summary per target and its table. Also the event loop and a bounded
``gather`` the other scripts use.

The scripts import it as ``loadgen`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from checks import Classify
from harness import BenchError, Server
from http1 import REQUEST_TIMEOUT_S, read_response
from meter import CpuMeter, CpuUse, per_op, percentile, total

T = TypeVar("T")


@dataclass(frozen=True)
class Load:
    """What one round loads: connection i sends ``plan[i]``'s request to its server, every answer is
    judged by ``classify``; the CPU of ``servers`` is the server CPU of the round."""

    label: str
    servers: tuple[Server, ...]
    plan: tuple[tuple[Server, bytes], ...]
    classify: Classify
    variant: str = ""  # what else tells rounds apart (mcp_calls.py: the protocol era)


@dataclass
class Round:
    load: Load
    seconds: float
    completed: int = 0  # responses read before the round's end
    latencies_s: list[float] = field(default_factory=list)  # every response, the tail included
    outcomes: Counter[str] = field(default_factory=Counter)  # "ok", "429", "200 bad body", ...
    samples: dict[str, str] = field(default_factory=dict)  # one body per failed outcome
    cpu: CpuUse = field(default_factory=CpuUse)

    @property
    def throughput(self) -> float:
        return self.completed / self.seconds


async def connection(server: Server, request: bytes, until: float, result: Round) -> None:
    """One keep-alive connection to ``server`` sending ``request`` back to back until ``until``."""
    classify = result.load.classify
    reader, writer = await asyncio.open_connection(*server.address)
    try:
        while (sent := time.perf_counter()) < until:
            writer.write(request)
            try:
                status, _, body = await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT_S)
            except TimeoutError:
                raise BenchError(
                    f"{result.load.label}: no response within {REQUEST_TIMEOUT_S:.0f} s"
                ) from None
            done = time.perf_counter()
            result.latencies_s.append(done - sent)
            result.completed += done <= until
            outcome = classify(status, body)
            result.outcomes[outcome] += 1
            if outcome != "ok":
                result.samples.setdefault(outcome, body[:200].decode(errors="replace"))
    except (OSError, asyncio.IncompleteReadError) as exc:
        raise BenchError(f"{result.load.label}: {type(exc).__name__} {exc}") from exc
    finally:
        writer.close()


async def run_round(load: Load, seconds: float) -> Round:
    """Every connection of ``load`` for ``seconds``; what came back and the CPU used meanwhile."""
    result = Round(load, seconds)
    meter = CpuMeter([server.pid for server in load.servers])
    start = meter.snapshot()
    until = time.perf_counter() + seconds
    async with asyncio.TaskGroup() as group:
        for server, request in load.plan:
            group.create_task(connection(server, request, until, result))
    result.cpu = meter.since(start)
    return result


async def measure_rounds(
    loads: Sequence[Load],
    rounds: int,
    duration: float,
    warmup: float,
    after_warmup: Callable[[], None] | None = None,
) -> list[Round]:
    """A warm-up of each load, ``after_warmup()``, then ``rounds`` x every load, one after the other."""
    for load in loads:
        await run_round(load, warmup)
    if after_warmup is not None:
        after_warmup()
    done: list[Round] = []
    for number in range(1, rounds + 1):
        for load in loads:
            measured = await run_round(load, duration)
            done.append(measured)
            cpu = per_op(measured.cpu.server_s, len(measured.latencies_s))
            print(
                f"    round {number} {load.variant:<10} {load.label:<22} {measured.throughput:>8,.0f}/s "
                f"{cpu:>6.2f} ms CPU each; others {measured.cpu.others:.0%} of a core",
                flush=True,
            )
    return done


@dataclass(frozen=True)
class Summary:
    label: str
    variant: str
    throughputs: list[float]
    p50_ms: float
    p99_ms: float
    answers: int
    outcomes: Counter[str]
    samples: dict[str, str]
    cpu: CpuUse  # summed over the target's rounds

    @property
    def median(self) -> float:
        return statistics.median(self.throughputs)

    @property
    def failures(self) -> int:
        return sum(count for outcome, count in self.outcomes.items() if outcome != "ok")

    @property
    def cpu_ms(self) -> float:
        """The server's CPU per answer, ms."""
        return per_op(self.cpu.server_s, self.answers)

    @property
    def store_cpu_ms(self) -> float:
        """PostgreSQL's and Redis's CPU per answer, ms (what else ran on them counted too)."""
        return per_op(self.cpu.store_s, self.answers)

    @property
    def total_cpu_ms(self) -> float:
        """The server's and the store's CPU per answer, ms."""
        return self.cpu_ms + self.store_cpu_ms

    @property
    def bench_cpu_ms(self) -> float:
        return per_op(self.cpu.bench_s, self.answers)


def summarize(label: str, rounds: list[Round], variant: str = "") -> Summary:
    mine = [r for r in rounds if r.load.label == label and r.load.variant == variant]
    latencies = sorted(s * 1000 for r in mine for s in r.latencies_s)
    outcomes: Counter[str] = Counter()
    samples: dict[str, str] = {}
    for r in mine:
        outcomes.update(r.outcomes)
        for outcome, body in r.samples.items():
            samples.setdefault(outcome, body)
    return Summary(
        label=label,
        variant=variant,
        throughputs=[r.throughput for r in mine],
        p50_ms=statistics.median(latencies),
        p99_ms=percentile(latencies, 0.99),
        answers=len(latencies),
        outcomes=outcomes,
        samples=samples,
        cpu=total(r.cpu for r in mine),
    )


def print_table(summaries: Sequence[Summary], unit: str = "req") -> None:
    """Per target: the median rate and each round's, latency, failed answers, the CPU per answer
    (server, store, load generator) and the CPU shares over the rounds (100% = one core)."""
    print(
        f"  {'target':<22} {unit + '/s':>8} {'per round':>20} {'p50 ms':>7} {'p99 ms':>7} {'failed':>6} "
        f"{'CPU ms/' + unit:>11} {'store ms':>8} {'load ms':>7} {'server':>6} {'load':>5} {'others':>6}"
    )
    for s in summaries:
        rounds = " ".join(f"{t:.0f}" for t in s.throughputs)
        server, load = s.cpu.share(s.cpu.server_s), s.cpu.share(s.cpu.bench_s)
        print(
            f"  {s.label:<22} {s.median:>8,.0f} {rounds:>20} {s.p50_ms:>7.1f} {s.p99_ms:>7.1f} "
            f"{s.failures:>6} {s.cpu_ms:>11.3f} {s.store_cpu_ms:>8.3f} {s.bench_cpu_ms:>7.3f} "
            f"{server:>6.0%} {load:>5.0%} {s.cpu.others:>6.0%}"
        )
    for s in summaries:
        for outcome, body in sorted(s.samples.items()):
            print(f"    {s.label}: {s.outcomes[outcome]} x {outcome}, e.g. {body}")
    print(
        "  (store: the CPU of every PostgreSQL and Redis process; others: every other process on the "
        "machine, as a share of one core)"
    )


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
