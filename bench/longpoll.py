"""Waiting long polls: server memory per waiting ``GET /v1/interactions/{id}?wait=``, and answer-to-
response latency.

    .venv/bin/python bench/longpoll.py [--polls 2000] [--wait 40] [--answer-rate 100] [--deadline 180]

Starts one real ``relaybox serve`` (SQLite in a temporary data dir; every send-class rate limit and
the per-IP register limit raised so one client address may set up this many accounts and
questions). An account may have at most 10 pending interactions, so the N interactions are spread
over ceil(N / --per-account) accounts: each is a phone registered over HTTP (``POST /v1/devices``,
one account each) with its own sender token (``POST /v1/tokens``) that asks its questions
(``POST /v1/interactions``). Then:

- memory: the server's RSS (VmRSS of its process) with every interaction created and no poll
  open, then again with N ``GET /v1/interactions/{id}?wait=W`` polls waiting, each on its own
  connection (all requests written, the server's file descriptors up by N and its CPU quiet, plus
  ``--settle``). ``per waiting poll`` = (with - before) / N, in KB of 1024 bytes as /proc reports
  them. Goal: under 50 KB per waiting poll.
- latency: the phones answer the questions (``POST /v1/interactions/{id}/answer`` with their
  device credentials) at a steady ``--answer-rate`` per second, in the order the polls were
  opened. A poll's latency runs from just before its answer's POST is written to the moment the
  poll's whole response (``status: answered``) has been read. Goal: p99 under 50 ms. Also shown:
  the answer POST's own round trip, the pace achieved, and the CPU the server and this process
  used while answering (100% = one core).

The client is a minimal HTTP/1.1 client on asyncio streams (uvloop when installed), not httpx:
with N connections open it costs far less CPU per request, and it shares the machine with the
server, so the latencies are an upper bound of what the server adds. Exits 0 whatever is measured
(``--strict``: 1 when a goal is missed); 2 when the run itself failed (a refused request, a poll
that returned before its answer or never, the deadline). Everything is cleaned up in all cases:
connections closed, server stopped (SIGTERM, then SIGKILL), temporary directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import sys
import time
from dataclasses import dataclass, field

from harness import (
    SEND_CLASS_LIMITS,
    SETUP_LIMITS,
    BenchError,
    Server,
    raise_fd_limit,
    raised_limits,
    relaybox_command,
)
from http1 import Pool
from lifecycle import Run, add_common_arguments, goal, print_rows, run_bench
from loadgen import bounded, run_loop
from meter import CpuMeter, CpuUse, machine_note, per_op, percentile
from polls import Poll, answer_all, open_poll, set_up, wait_for_steady_fds, wait_until_polls_wait

GOAL_KB_PER_POLL = 50.0
GOAL_P99_MS = 50.0
MAX_PENDING_PER_ACCOUNT = 10  # core.services.interactions.MAX_PENDING
MAX_WAIT_S = 45  # the server clamps ``wait`` to 0-45
RAISED_SETTINGS = (*SEND_CLASS_LIMITS, *SETUP_LIMITS)
REQUEST_TIMEOUT_S = 15.0
ANSWER_MARGIN_S = 5.0  # the last answer must go out this long before the first poll's wait ends


@dataclass
class Result:
    polls: int
    accounts: int
    rss_before_kb: int
    rss_waiting_kb: int
    rss_after_kb: int
    threads_before: int
    threads_waiting: int
    fds_waiting: int
    fd_limit: str
    open_s: float  # first poll connecting -> last poll written
    waiting_s: float  # first poll connecting -> the server quiet with every poll's connection
    pace: float  # answers per second achieved
    cpu: CpuUse  # first answer sent -> last poll response read
    latencies_ms: list[float] = field(default_factory=list)
    answers_ms: list[float] = field(default_factory=list)

    @property
    def kb_per_poll(self) -> float:
        return (self.rss_waiting_kb - self.rss_before_kb) / self.polls


async def open_polls(server: Server, polls: list[Poll], run: Run) -> tuple[float, float, float]:
    """Open every poll and wait until the server holds them all, quiet: when the first was opened
    (perf_counter), and the seconds until all were written and until all were waiting."""
    args, progress = run.args, run.progress
    fds_before = server.open_fds()
    progress.start(f"opening {len(polls)} polls (wait={args.wait})", len(polls))
    first_opened = time.perf_counter()

    async def open_one(index: int) -> None:
        await open_poll(server, polls[index], args.wait, args.wait + REQUEST_TIMEOUT_S)
        progress.step()

    await bounded(len(polls), args.open_concurrency, open_one)
    opened = time.perf_counter() - first_opened
    print(f"    {len(polls)} polls written in {opened:.1f} s", flush=True)
    await wait_until_polls_wait(server, fds_before, len(polls), progress)
    return first_opened, opened, time.perf_counter() - first_opened


def answer_rate(polls: int, wait: int, requested: float, first_opened: float) -> float:
    """The pace: ``requested``, or faster if the answers would not all go out before the first
    poll's wait ends (less the margin)."""
    available = first_opened + wait - ANSWER_MARGIN_S - time.perf_counter()
    if polls / requested <= available:
        return requested
    rate = polls / max(available, 1.0)
    print(f"    answer pace raised to {rate:.0f}/s so every answer precedes the end of its wait")
    return rate


async def measure(server: Server, run: Run) -> Result:
    args, progress = run.args, run.progress
    pool = Pool(server.address, REQUEST_TIMEOUT_S)
    polls: list[Poll] = []
    try:
        started = time.perf_counter()
        questions = await set_up(pool, args.polls, args.per_account, args.concurrency, progress)
        accounts = math.ceil(args.polls / args.per_account)
        took = time.perf_counter() - started
        print(f"    {len(questions)} questions over {accounts} accounts in {took:.1f} s", flush=True)
        pool.close()  # idle keep-alive connections would count as polls in the server's fds
        await wait_for_steady_fds(server)
        await asyncio.sleep(args.settle)
        rss_before, threads_before = server.rss_kb(), server.threads()

        polls = [Poll(question) for question in questions]
        first_opened, open_s, waiting_s = await open_polls(server, polls, run)
        await asyncio.sleep(args.settle)
        rss_waiting, threads_waiting, fds_waiting = server.rss_kb(), server.threads(), server.open_fds()
        early = [poll for poll in polls if poll.task is not None and poll.task.done()]
        if early:
            raise BenchError(f"{len(early)} poll(s) returned before any answer, e.g. {early[0].problem}")

        print(f"machine: {await asyncio.to_thread(machine_note, [server.pid])}", flush=True)
        rate = answer_rate(len(polls), args.wait, args.answer_rate, first_opened)
        meter = CpuMeter([server.pid])
        start = meter.snapshot()
        await answer_all(pool, polls, rate, progress)
        pace = len(polls) / (time.perf_counter() - start.at)
        progress.start("collecting the poll responses", len(polls))
        await asyncio.gather(*(poll.task for poll in polls if poll.task is not None))
        cpu = meter.since(start)
        problems = [poll.problem for poll in polls if poll.problem is not None]
        if problems:
            raise BenchError(f"{len(problems)} poll(s) failed, first: {problems[:3]}")
        await asyncio.sleep(args.settle)
        result = Result(
            polls=len(polls),
            accounts=accounts,
            rss_before_kb=rss_before,
            rss_waiting_kb=rss_waiting,
            rss_after_kb=server.rss_kb(),
            threads_before=threads_before,
            threads_waiting=threads_waiting,
            fds_waiting=fds_waiting,
            fd_limit=server.fd_limit(),
            open_s=open_s,
            waiting_s=waiting_s,
            pace=pace,
            cpu=cpu,
        )
        for poll in polls:
            assert poll.answer_sent is not None
            assert poll.answer_done is not None
            assert poll.returned is not None
            result.latencies_ms.append((poll.returned - poll.answer_sent) * 1000)
            result.answers_ms.append((poll.answer_done - poll.answer_sent) * 1000)
        result.latencies_ms.sort()
        result.answers_ms.sort()
        return result
    finally:
        for poll in polls:
            if poll.task is not None:
                poll.task.cancel()
            if poll.connection is not None:
                poll.connection.close()
        await asyncio.gather(*(poll.task for poll in polls if poll.task is not None), return_exceptions=True)
        pool.close()


def report(result: Result) -> bool:
    """Print the summary table and the goals; True when both were met."""
    latencies, answers, cpu = result.latencies_ms, result.answers_ms, result.cpu
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    rows = [
        ("waiting polls / accounts", f"{result.polls} / {result.accounts}"),
        ("polls written / all waiting", f"{result.open_s:.1f} s / {result.waiting_s:.1f} s"),
        ("server fds open / limit", f"{result.fds_waiting} / {result.fd_limit}"),
        ("server threads before/waiting", f"{result.threads_before} / {result.threads_waiting}"),
        ("RSS, questions asked, no poll", f"{result.rss_before_kb / 1024:.1f} MiB"),
        ("RSS, all polls waiting", f"{result.rss_waiting_kb / 1024:.1f} MiB"),
        ("RSS, after the polls ended", f"{result.rss_after_kb / 1024:.1f} MiB"),
        ("per waiting poll", f"{result.kb_per_poll:.2f} KB"),
        ("answers, pace achieved", f"{len(latencies)}, {result.pace:.0f}/s"),
        ("server CPU per answer", f"{per_op(cpu.server_s, len(latencies)):.2f} ms (answer + poll response)"),
        ("answer -> poll response p50", f"{p50:.1f} ms"),
        ("answer -> poll response p99", f"{p99:.1f} ms"),
        ("answer -> poll response max", f"{latencies[-1]:.1f} ms"),
        ("answer POST 200 p50/p99", f"{statistics.median(answers):.1f} / {percentile(answers, 0.99):.1f} ms"),
        (
            "CPU answering: server/bench",
            f"{cpu.share(cpu.server_s):.0%} / {cpu.share(cpu.bench_s):.0%} of a core",
        ),
    ]
    print_rows(rows)
    print(f"while answering: {cpu.others_note()}")
    print()
    memory_ok = goal(
        f"< {GOAL_KB_PER_POLL:.0f} KB per waiting poll",
        result.kb_per_poll < GOAL_KB_PER_POLL,
        f"{result.kb_per_poll:.2f} KB",
    )
    latency_ok = goal(
        f"p99 answer -> poll response < {GOAL_P99_MS:.0f} ms", p99 < GOAL_P99_MS, f"{p99:.1f} ms"
    )
    return memory_ok and latency_ok


def benchmark(run: Run) -> bool:
    args = run.args
    fd_limit = raise_fd_limit(args.polls + 200, f"{args.polls} polls")
    server = run.start("server", relaybox_command("data"), raised_limits(*RAISED_SETTINGS), fd_limit)
    return report(run_loop(asyncio.wait_for(measure(server, run), run.remaining())))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--polls", type=int, default=2000, help="interactions, one waiting poll each")
    parser.add_argument(
        "--per-account",
        type=int,
        default=MAX_PENDING_PER_ACCOUNT,
        help=f"interactions per account (at most {MAX_PENDING_PER_ACCOUNT}, the pending cap)",
    )
    parser.add_argument(
        "--wait", type=int, default=40, help=f"the polls' wait, seconds (at most {MAX_WAIT_S})"
    )
    parser.add_argument("--answer-rate", type=float, default=100.0, help="answers per second")
    parser.add_argument("--concurrency", type=int, default=50, help="requests in flight during setup")
    parser.add_argument("--open-concurrency", type=int, default=100, help="polls connecting at once")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait before measuring RSS")
    add_common_arguments(parser, deadline=180.0)
    args = parser.parse_args(argv)
    if (
        min(args.polls, args.concurrency, args.open_concurrency) < 1
        or min(args.answer_rate, args.deadline) <= 0
    ):
        parser.error("polls, concurrencies, answer rate and deadline must be positive")
    if not 1 <= args.per_account <= MAX_PENDING_PER_ACCOUNT:
        parser.error(f"--per-account must be 1-{MAX_PENDING_PER_ACCOUNT}")
    if not ANSWER_MARGIN_S < args.wait <= MAX_WAIT_S:
        parser.error(f"--wait must be more than {ANSWER_MARGIN_S:.0f} and at most {MAX_WAIT_S}")
    if args.settle < 0:
        parser.error("--settle must not be negative")
    return args


def main(argv: list[str] | None = None) -> int:
    return run_bench(parse_args(argv), "relaybox-longpoll-bench-", benchmark)


if __name__ == "__main__":
    sys.exit(main())
