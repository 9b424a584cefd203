"""Open sync streams: server memory per open stream, and relay-to-stream delivery latency.

    .venv/bin/python bench/stream.py [--streams N] [--rounds R] [--concurrency C] [--deadline S]

Starts one real ``relaybox serve`` (SQLite in a temporary data dir, per-IP limits raised so one
client address may register and pair this many devices), registers one phone and pairs N
computers with it, then:

- memory: the server's RSS (VmRSS of its process) with every device paired and no stream open,
  then again with N ``GET /v1/sync`` streams open (each has received its opening comment frame,
  plus a short settle). ``per open stream`` = (after - before) / N, in KB of 1024 bytes as /proc
  reports them. Goal: under 30 KB per open stream.
- latency: in each of R rounds the phone relays one sealed ``clipboard`` envelope to every
  computer (``POST /v1/envelopes``, at most C in flight). A delivery's latency runs from just
  before its POST is sent to the moment the recipient's stream yields the event whose ``id:`` is
  the ``seq`` the POST returned; p50 and p99 are over all N x R deliveries. Goal: p99 under
  100 ms. Also shown: the POST's own round trip (sent -> 202), ``all delivered`` (a round's first
  POST to its last delivery; N / that time is the server's relay throughput) and the CPU the
  server and this process used during the rounds (100% = one core).

The client side (N streams plus C posts on one asyncio loop in this process) shares the machine
with the server, so the latencies are an upper bound of what the server alone adds. Exits 0
whatever is measured (``--strict``: 1 when a goal is missed); 2 when the run itself failed
(server errors, a stream that never opened, the deadline). Everything is cleaned up in all cases:
streams closed, server stopped (SIGTERM, then SIGKILL), temporary directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.domain.envelope import seal
from core.domain.keys import generate_keypair
from devices import b64, pair_confirm_request, pair_init_request, phone_request
from harness import (
    BenchError,
    Server,
    raise_fd_limit,
    remove_work_dir,
    server_health,
    start_relaybox,
    stop_on_sigterm,
    stop_servers,
)
from loadgen import Pool, bounded, http_request, percentile, read_chunk, read_head, run_loop

GOAL_P99_MS = 100.0
GOAL_KB_PER_STREAM = 30.0
OPENING_COMMENT = ": relaybox stream"


@dataclass
class Device:
    device_id: str
    token: str
    secret_key: bytes
    public_key: bytes


@dataclass
class Progress:
    """What the run is doing, so a deadline or an error can say where it stopped."""

    phase: str = "starting"
    done: int = 0
    total: int = 0
    errors: list[str] = field(default_factory=list)

    def start(self, phase: str, total: int) -> None:
        self.phase, self.done, self.total = phase, 0, total
        print(f"... {phase} ({total})", flush=True)

    def fail(self, what: str) -> None:
        self.errors.append(f"{self.phase}: {what}")

    def describe(self) -> str:
        return f"{self.phase}: {self.done}/{self.total} done"


# -- the server process ------------------------------------------------------------------------


def server_settings(streams: int) -> dict[str, str]:
    """The ``RELAYBOX_*`` limits sized for the run (the environment is otherwise inherited)."""
    allowance = str(streams * 2 + 100)
    return {
        "RELAYBOX_PAIR_INIT_PER_IP_PER_MINUTE": allowance,  # every computer pairs from 127.0.0.1
        "RELAYBOX_REGISTER_PER_IP_PER_MINUTE": allowance,
        "RELAYBOX_MAX_DEVICES_PER_ACCOUNT": allowance,  # all N computers join the phone's account
    }


# -- devices -----------------------------------------------------------------------------------


async def register_phone(api: Pool) -> Device:
    secret, public = generate_keypair()
    body, _, _ = await api.call("POST", "/v1/devices", None, phone_request(public, "bench phone"), 201)
    return Device(body["device_id"], body["device_token"], secret, public)


async def pair_computer(api: Pool, phone: Device, number: int) -> Device:
    secret, public = generate_keypair()
    request = pair_init_request(public, f"bench {number}")
    started, _, _ = await api.call("POST", "/v1/pair/init", None, request, 201)
    confirm = pair_confirm_request(started["code"], phone.public_key)
    await api.call("POST", "/v1/pair/confirm", phone.token, confirm, 200)
    return Device(started["device_id"], started["device_token"], secret, public)


async def pair_all(api: Pool, phone: Device, count: int, limit: int, progress: Progress) -> list[Device]:
    computers: list[Device | None] = [None] * count
    progress.start("pairing computers", count)

    async def job(index: int) -> None:
        computers[index] = await pair_computer(api, phone, index)
        progress.done += 1

    await bounded(count, limit, job)
    return [computer for computer in computers if computer is not None]


# -- streams -----------------------------------------------------------------------------------


class Arrivals:
    """When each ``seq`` came out of a stream; a waiter may come before or after the arrival."""

    def __init__(self) -> None:
        self._futures: dict[int, asyncio.Future[float]] = {}

    def _future(self, seq: int) -> asyncio.Future[float]:
        future = self._futures.get(seq)
        if future is None:
            future = self._futures[seq] = asyncio.get_running_loop().create_future()
        return future

    def arrived(self, seq: int, at: float) -> None:
        future = self._future(seq)
        if not future.done():
            future.set_result(at)

    async def wait(self, seq: int, timeout_s: float) -> float:
        try:
            return await asyncio.wait_for(asyncio.shield(self._future(seq)), timeout_s)
        except TimeoutError:
            raise BenchError(f"seq {seq} did not come out of its stream within {timeout_s} s") from None


@dataclass
class StreamSet:
    """N open ``GET /v1/sync`` streams, each read by its own task on a raw HTTP/1.1 connection
    (a chunked body whose chunks carry the SSE frames)."""

    address: tuple[str, int]
    arrivals: Arrivals
    progress: Progress
    opened: int = 0
    all_open: asyncio.Event = field(default_factory=asyncio.Event)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)
    ended: int = 0

    async def follow(self, device: Device, gate: asyncio.Semaphore, total: int) -> None:
        """Hold a connecting slot until the opening comment arrives, then read the stream until cancelled."""
        released = False

        def opened() -> None:
            nonlocal released
            if not released:
                released = True
                gate.release()
                self._mark_open(total)

        await gate.acquire()
        writer: asyncio.StreamWriter | None = None
        try:
            reader, writer = await asyncio.open_connection(*self.address)
            host = f"{self.address[0]}:{self.address[1]}"
            writer.write(http_request("GET", "/v1/sync", host, device.token))
            status, headers = await read_head(reader)
            if status != 200 or headers.get(b"transfer-encoding") != b"chunked":
                self.progress.fail(f"stream got {status} {headers.get(b'content-type', b'')!r}")
                return
            await self._read(reader, opened)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            self.progress.fail(f"stream {type(exc).__name__}: {exc}")
        finally:
            if writer is not None:
                writer.close()
            if not released:
                released = True
                gate.release()
            self.ended += 1

    async def _read(self, reader: asyncio.StreamReader, opened: Callable[[], None]) -> None:
        """Split the body into SSE frames; note when each frame with an ``id:`` arrived."""
        pending = ""
        while chunk := await read_chunk(reader):
            arrived = time.perf_counter()
            pending += chunk.decode()
            while "\n\n" in pending:
                frame, _, pending = pending.partition("\n\n")
                if frame.startswith(OPENING_COMMENT):
                    opened()
                elif frame.startswith("id:"):
                    self.arrivals.arrived(int(frame[3:].partition("\n")[0]), arrived)
        self.progress.fail("a stream ended")  # the server closed it

    def _mark_open(self, total: int) -> None:
        self.opened += 1
        self.progress.done = self.opened
        if self.opened == total:
            self.all_open.set()


async def open_streams(
    address: tuple[str, int], devices: list[Device], limit: int, progress: Progress
) -> StreamSet:
    """Open a stream per device (at most ``limit`` connecting at once) and wait until all are up."""
    streams = StreamSet(address, Arrivals(), progress)
    progress.start("opening streams", len(devices))
    gate = asyncio.Semaphore(limit)
    for device in devices:
        streams.tasks.append(asyncio.create_task(streams.follow(device, gate, len(devices))))
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


# -- latency -----------------------------------------------------------------------------------


@dataclass
class Round:
    latencies_s: list[float]  # POST sent -> event out of the recipient's stream
    posts_s: list[float]  # POST sent -> its 202 received
    all_delivered_s: float
    server_cpu_s: float
    bench_cpu_s: float


async def relay_round(
    server: Server,
    phone: Device,
    computers: list[Device],
    arrivals: Arrivals,
    args: argparse.Namespace,
    progress: Progress,
    number: int,
) -> Round:
    """The phone relays one envelope to every computer; returns each delivery's latency."""
    blobs = [
        b64(seal(f"clipboard {number}/{i}".encode(), phone.secret_key, c.public_key))
        for i, c in enumerate(computers)
    ]
    progress.start(f"round {number}: relaying to every stream", len(computers))
    latencies: list[float] = [0.0] * len(computers)
    posts: list[float] = [0.0] * len(computers)
    last_arrival = 0.0
    server_cpu, bench_cpu = server.cpu_s(), time.process_time()
    gate = asyncio.Semaphore(args.concurrency)
    api = Pool(server.address)  # a fresh one each round: uvicorn closes connections idle for 5 s
    first_post = time.perf_counter()

    async def deliver(index: int) -> None:
        nonlocal last_arrival
        async with gate:
            body = {"to": computers[index].device_id, "type": "clipboard", "blob": blobs[index]}
            accepted, sent, done = await api.call("POST", "/v1/envelopes", phone.token, body, 202)
            posts[index] = done - sent
        arrived = await arrivals.wait(int(accepted["seq"]), args.delivery_timeout)
        latencies[index] = arrived - sent
        last_arrival = max(last_arrival, arrived)
        progress.done += 1

    try:
        async with asyncio.TaskGroup() as group:
            for index in range(len(computers)):
                group.create_task(deliver(index))
    finally:
        api.close()
    server_cpu, bench_cpu = server.cpu_s() - server_cpu, time.process_time() - bench_cpu
    return Round(latencies, posts, last_arrival - first_post, server_cpu, bench_cpu)


# -- the run -----------------------------------------------------------------------------------


@dataclass
class Result:
    streams: int
    rss_before_kb: int
    rss_after_kb: int
    fds_open: int
    fd_limit: str
    rounds: list[Round]

    @property
    def kb_per_stream(self) -> float:
        return (self.rss_after_kb - self.rss_before_kb) / self.streams

    @property
    def latencies_ms(self) -> list[float]:
        return sorted(s * 1000 for r in self.rounds for s in r.latencies_s)

    @property
    def posts_ms(self) -> list[float]:
        return sorted(s * 1000 for r in self.rounds for s in r.posts_s)


async def measure(server: Server, args: argparse.Namespace, progress: Progress) -> Result:
    n: int = args.streams
    setup = Pool(server.address, timeout_s=30)
    try:
        progress.start("registering the phone", 1)
        phone = await register_phone(setup)
        started = time.perf_counter()
        computers = await pair_all(setup, phone, n, args.concurrency, progress)
        print(f"    paired {len(computers)} computers in {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        setup.close()
    await asyncio.sleep(args.settle)
    rss_before = server.rss_kb()
    streams: StreamSet | None = None
    try:
        started = time.perf_counter()
        streams = await open_streams(server.address, computers, args.open_concurrency, progress)
        print(f"    {n} streams open in {time.perf_counter() - started:.1f} s", flush=True)
        await asyncio.sleep(args.settle)
        rss_after, fds = server.rss_kb(), server.open_fds()
        rounds = []
        for number in range(1, args.rounds + 1):
            measured = await relay_round(server, phone, computers, streams.arrivals, args, progress, number)
            rounds.append(measured)
            await asyncio.sleep(0.5)
        if streams.ended:
            raise BenchError(f"{streams.ended} stream(s) ended during the run")
    finally:
        progress.start("closing streams", n)
        await close_streams(streams)
    return Result(n, rss_before, rss_after, fds, server.fd_limit(), rounds)


def report(result: Result, args: argparse.Namespace) -> bool:
    """Print the summary table; True when both goals were met."""
    latencies, posts = result.latencies_ms, result.posts_ms
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    wall = sum(r.all_delivered_s for r in result.rounds)
    server_cpu = sum(r.server_cpu_s for r in result.rounds) / wall
    bench_cpu = sum(r.bench_cpu_s for r in result.rounds) / wall
    slowest_all = max(r.all_delivered_s for r in result.rounds) * 1000
    memory_ok = result.kb_per_stream < GOAL_KB_PER_STREAM
    latency_ok = p99 < GOAL_P99_MS
    rows = [
        ("open streams", f"{result.streams}"),
        ("server fds open / limit", f"{result.fds_open} / {result.fd_limit}"),
        ("RSS, paired, no streams", f"{result.rss_before_kb / 1024:.1f} MiB"),
        ("RSS, all streams open", f"{result.rss_after_kb / 1024:.1f} MiB"),
        ("per open stream", f"{result.kb_per_stream:.2f} KB"),
        (f"deliveries ({args.rounds} rounds)", f"{len(latencies)}"),
        ("delivery latency p50", f"{p50:.1f} ms"),
        ("delivery latency p99", f"{p99:.1f} ms"),
        ("delivery latency max", f"{latencies[-1]:.1f} ms"),
        ("POST 202 round trip p50/p99", f"{statistics.median(posts):.0f} / {percentile(posts, 0.99):.0f} ms"),
        (
            "all delivered, per round",
            "  ".join(f"{r.all_delivered_s * 1000:.0f}" for r in result.rounds) + " ms",
        ),
        ("CPU in rounds: server/bench", f"{server_cpu:.0%} / {bench_cpu:.0%} of a core"),
    ]
    print()
    for label, value in rows:
        print(f"{label:<28} {value:>22}")
    print()
    print(f"goal: p99 delivery < {GOAL_P99_MS:.0f} ms: {'met' if latency_ok else 'MISSED'} ({p99:.1f} ms)")
    print(
        f"goal: < {GOAL_KB_PER_STREAM:.0f} KB per open stream: {'met' if memory_ok else 'MISSED'} "
        f"({result.kb_per_stream:.2f} KB)"
    )
    print(f"(slowest round: all {result.streams} delivered {slowest_all:.0f} ms after its first post)")
    return memory_ok and latency_ok


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=1000, help="computers paired, one open stream each")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of one envelope to every stream")
    parser.add_argument(
        "--concurrency", type=int, default=50, help="requests in flight while pairing/posting"
    )
    parser.add_argument("--open-concurrency", type=int, default=100, help="streams connecting at once")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait before measuring RSS")
    parser.add_argument("--delivery-timeout", type=float, default=10.0, help="seconds one delivery may take")
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds for the whole run")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir and server logs")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args(argv)
    if min(args.streams, args.rounds, args.concurrency, args.open_concurrency) < 1 or args.deadline <= 0:
        parser.error("streams, rounds, concurrencies and deadline must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop_on_sigterm("the server")
    started = time.monotonic()
    fd_limit = raise_fd_limit(args.streams * 2 + 100, f"{args.streams} streams")
    work_dir = Path(tempfile.mkdtemp(prefix="relaybox-bench-"))
    progress = Progress()
    server: Server | None = None
    outcome = 2  # the run failed unless it gets as far as the report
    try:
        server = start_relaybox(work_dir, min(30.0, args.deadline), server_settings(args.streams), fd_limit)
        print(f"server pid {server.pid} at {server.url} (data in {work_dir})", flush=True)
        remaining = args.deadline - (time.monotonic() - started)
        result = run_loop(asyncio.wait_for(measure(server, args, progress), remaining))
        met = report(result, args)
        outcome = 1 if args.strict and not met else 0
    except TimeoutError:
        print(f"FAILED: deadline of {args.deadline:.0f} s reached during {progress.describe()}")
    except (BenchError, OSError, ExceptionGroup) as exc:
        print(f"FAILED during {progress.describe()}: {describe(exc)}")
    finally:
        if progress.errors:
            print(f"{len(progress.errors)} error(s), first: {progress.errors[:3]}")
        if server is not None:
            stop_servers([server], server_health)
        remove_work_dir(work_dir, args.keep, f" (server log: {work_dir / 'logs'})")
    return outcome


def describe(exc: BaseException) -> str:
    """The first leaf of an exception group, or the exception itself."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    causes: list[str] = []
    cause = exc.__cause__ or exc.__context__
    while cause is not None and len(causes) < 4:
        causes.append(f"{type(cause).__module__}.{type(cause).__name__}: {cause!r}")
        cause = cause.__cause__ or cause.__context__
    return f"{type(exc).__name__}: {exc!r}" + "".join(f"\n  caused by {c}" for c in causes)


if __name__ == "__main__":
    sys.exit(main())
