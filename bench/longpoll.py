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
import json
import math
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from core.domain.keys import generate_keypair
from devices import phone_request
from harness import (
    SEND_CLASS_LIMITS,
    STARTUP_TIMEOUT_S,
    BenchError,
    Server,
    describe,
    raise_fd_limit,
    raised_limits,
    remove_work_dir,
    server_health,
    start_relaybox,
    stop_on_sigterm,
    stop_servers,
)
from loadgen import Connection, Pool, bounded, http_request, percentile, run_loop

GOAL_KB_PER_POLL = 50.0
GOAL_P99_MS = 50.0
MAX_PENDING_PER_ACCOUNT = 10  # core.services.interactions.MAX_PENDING
MAX_WAIT_S = 45  # the server clamps ``wait`` to 0-45
RAISED_SETTINGS = (*SEND_CLASS_LIMITS, "REGISTER_PER_IP_PER_MINUTE")
REQUEST_TIMEOUT_S = 15.0
ANSWER_MARGIN_S = 5.0  # the last answer must go out this long before the first poll's wait ends
QUIET_CPU_S = 0.01  # server CPU over one QUIET_WINDOW_S that counts as "every poll is waiting"
QUIET_WINDOW_S = 0.25
QUIET_TIMEOUT_S = 30.0


@dataclass
class Progress:
    """What the run is doing, so a deadline or an error can say where it stopped."""

    phase: str = "starting"
    done: int = 0
    total: int = 0

    def start(self, phase: str, total: int) -> None:
        self.phase, self.done, self.total = phase, 0, total
        print(f"... {phase} ({total})", flush=True)

    def describe(self) -> str:
        return f"{self.phase}: {self.done}/{self.total} done"


# -- setup: accounts, tokens, questions ------------------------------------------------------------


@dataclass(frozen=True)
class Account:
    device_token: str  # the phone's credential: it answers
    sender_token: str  # the script's token: it asks and polls


@dataclass(frozen=True)
class Question:
    interaction_id: str
    account: Account
    choice: int


async def set_up(
    pool: Pool, polls: int, per_account: int, concurrency: int, progress: Progress
) -> list[Question]:
    """Register ceil(polls / per_account) phones, give each a sender token, ask the questions."""
    count = math.ceil(polls / per_account)
    accounts: list[Account | None] = [None] * count
    progress.start(f"registering {count} phones with a sender token each", count)

    async def register(index: int) -> None:
        body = phone_request(generate_keypair()[1], f"bench {index}")
        phone, _, _ = await pool.call("POST", "/v1/devices", None, body, 201)
        device_token = str(phone["device_token"])
        token, _, _ = await pool.call("POST", "/v1/tokens", device_token, {"label": "bench"}, 201)
        accounts[index] = Account(device_token, str(token["token"]))
        progress.done += 1

    await bounded(count, concurrency, register)
    questions: list[Question | None] = [None] * polls
    progress.start("asking the questions", polls)

    async def ask(index: int) -> None:
        account = accounts[index // per_account]
        assert account is not None
        body = {"question": f"bench question {index}: deploy?", "choices": ["Approve", "Deny"]}
        created, _, _ = await pool.call("POST", "/v1/interactions", account.sender_token, body, 201)
        questions[index] = Question(str(created["id"]), account, index % 2)
        progress.done += 1

    await bounded(polls, concurrency, ask)
    return [question for question in questions if question is not None]


# -- the polls and the answers -------------------------------------------------------------------


@dataclass
class Poll:
    question: Question
    connection: Connection | None = None
    task: asyncio.Task[None] | None = None
    answer_sent: float | None = None  # perf_counter just before the answer's POST was written
    answer_done: float | None = None  # its 200 read
    returned: float | None = None  # the poll's whole response read
    problem: str | None = None


async def open_poll(server: Server, poll: Poll, wait: int, timeout_s: float) -> None:
    """Connect, write ``GET /v1/interactions/{id}?wait=``, and leave a task reading the response."""
    poll.connection = await Connection.open(server.address)
    path = f"/v1/interactions/{poll.question.interaction_id}?wait={wait}"
    host = f"{server.address[0]}:{server.address[1]}"
    poll.connection.write(http_request("GET", path, host, poll.question.account.sender_token))
    poll.task = asyncio.create_task(read_poll(poll, timeout_s))


async def read_poll(poll: Poll, timeout_s: float) -> None:
    assert poll.connection is not None
    try:
        status, body = await poll.connection.response(timeout_s)
        poll.returned = time.perf_counter()
    except BenchError as exc:
        poll.problem = f"poll: {exc}"
        return
    finally:
        poll.connection.close()
    if status != 200 or body.get("status") != "answered" or body.get("choice_index") != poll.question.choice:
        poll.problem = f"poll answered {status} {json.dumps(body)[:200]}"
    elif poll.answer_sent is None:
        poll.problem = "poll returned before its answer was sent"


async def wait_for_steady_fds(server: Server) -> None:
    """Until the server's open file count stops changing (the setup connections are closed)."""
    deadline = time.monotonic() + QUIET_TIMEOUT_S
    last = server.open_fds()
    while time.monotonic() < deadline:
        await asyncio.sleep(QUIET_WINDOW_S)
        now = server.open_fds()
        if now == last:
            return
        last = now
    raise BenchError(f"the server's open files did not settle within {QUIET_TIMEOUT_S:.0f} s")


async def wait_until_polls_wait(server: Server, fds_before: int, polls: int, progress: Progress) -> None:
    """Until the server holds every poll's connection and its CPU is quiet: each poll has been read
    and checked and is waiting. Bounded by QUIET_TIMEOUT_S."""
    progress.start("waiting for the server to settle", polls)
    deadline = time.monotonic() + QUIET_TIMEOUT_S
    cpu = server.cpu_s()
    while time.monotonic() < deadline:
        await asyncio.sleep(QUIET_WINDOW_S)
        now_cpu = server.cpu_s()
        progress.done = max(0, server.open_fds() - fds_before)
        if progress.done >= polls and now_cpu - cpu <= QUIET_CPU_S:
            return
        cpu = now_cpu
    raise BenchError(f"the server did not settle within {QUIET_TIMEOUT_S:.0f} s ({progress.describe()})")


async def answer_all(pool: Pool, polls: list[Poll], rate: float, progress: Progress) -> None:
    """Answer every question in order, one every 1/rate s (each answer its own task, so a slow
    answer does not delay the next)."""
    progress.start(f"answering at {rate:g}/s", len(polls))
    started = time.perf_counter()

    async def answer(poll: Poll) -> None:
        question = poll.question
        path = f"/v1/interactions/{question.interaction_id}/answer"
        body = {"choice_index": question.choice}
        # The poll may be read before the call returns: mark the send time before the call.
        poll.answer_sent = time.perf_counter()
        _, sent, poll.answer_done = await pool.call("POST", path, question.account.device_token, body, 200)
        poll.answer_sent = sent
        progress.done += 1

    async with asyncio.TaskGroup() as group:
        for index, poll in enumerate(polls):
            delay = started + index / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            group.create_task(answer(poll))


# -- the run -------------------------------------------------------------------------------------


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
    answer_s: float  # first answer sent -> last poll response read
    server_cpu_s: float
    bench_cpu_s: float
    latencies_ms: list[float] = field(default_factory=list)
    answers_ms: list[float] = field(default_factory=list)

    @property
    def kb_per_poll(self) -> float:
        return (self.rss_waiting_kb - self.rss_before_kb) / self.polls


async def measure(server: Server, args: argparse.Namespace, progress: Progress) -> Result:
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
        rss_before, threads_before, fds_before = server.rss_kb(), server.threads(), server.open_fds()

        polls = [Poll(question) for question in questions]
        progress.start(f"opening {len(polls)} polls (wait={args.wait})", len(polls))
        read_timeout = args.wait + REQUEST_TIMEOUT_S
        first_opened = time.perf_counter()

        async def open_one(index: int) -> None:
            await open_poll(server, polls[index], args.wait, read_timeout)
            progress.done += 1

        await bounded(len(polls), args.open_concurrency, open_one)
        opened = time.perf_counter()
        print(f"    {len(polls)} polls written in {opened - first_opened:.1f} s", flush=True)
        await wait_until_polls_wait(server, fds_before, len(polls), progress)
        waiting_s = time.perf_counter() - first_opened
        await asyncio.sleep(args.settle)
        rss_waiting, threads_waiting, fds_waiting = server.rss_kb(), server.threads(), server.open_fds()
        early = [poll for poll in polls if poll.task is not None and poll.task.done()]
        if early:
            raise BenchError(f"{len(early)} poll(s) returned before any answer, e.g. {early[0].problem}")

        available = first_opened + args.wait - ANSWER_MARGIN_S - time.perf_counter()
        rate: float = args.answer_rate
        if len(polls) / rate > available:
            rate = len(polls) / max(available, 1.0)
            print(f"    answer pace raised to {rate:.0f}/s so every answer precedes the end of its wait")
        print(
            f"    load average before answering: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True
        )
        server_cpu, bench_cpu = server.cpu_s(), time.process_time()
        answering = time.perf_counter()
        await answer_all(pool, polls, rate, progress)
        pace = len(polls) / (time.perf_counter() - answering)
        progress.start("collecting the poll responses", len(polls))
        await asyncio.gather(*(poll.task for poll in polls if poll.task is not None))
        answer_s = time.perf_counter() - answering
        server_cpu, bench_cpu = server.cpu_s() - server_cpu, time.process_time() - bench_cpu
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
            open_s=opened - first_opened,
            waiting_s=waiting_s,
            pace=pace,
            answer_s=answer_s,
            server_cpu_s=server_cpu,
            bench_cpu_s=bench_cpu,
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


def report(result: Result, args: argparse.Namespace) -> bool:
    """Print the summary table and the goals; True when both were met."""
    latencies, answers = result.latencies_ms, result.answers_ms
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    memory_ok = result.kb_per_poll < GOAL_KB_PER_POLL
    latency_ok = p99 < GOAL_P99_MS
    server_cpu, bench_cpu = result.server_cpu_s / result.answer_s, result.bench_cpu_s / result.answer_s
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
        ("answer -> poll response p50", f"{p50:.1f} ms"),
        ("answer -> poll response p99", f"{p99:.1f} ms"),
        ("answer -> poll response max", f"{latencies[-1]:.1f} ms"),
        ("answer POST 200 p50/p99", f"{statistics.median(answers):.1f} / {percentile(answers, 0.99):.1f} ms"),
        ("CPU answering: server/bench", f"{server_cpu:.0%} / {bench_cpu:.0%} of a core"),
    ]
    print()
    for label, value in rows:
        print(f"{label:<31} {value:>22}")
    print()
    print(
        f"goal: < {GOAL_KB_PER_POLL:.0f} KB per waiting poll: {'met' if memory_ok else 'MISSED'} "
        f"({result.kb_per_poll:.2f} KB)"
    )
    print(
        f"goal: p99 answer -> poll response < {GOAL_P99_MS:.0f} ms: "
        f"{'met' if latency_ok else 'MISSED'} ({p99:.1f} ms)"
    )
    return memory_ok and latency_ok


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
    parser.add_argument("--deadline", type=float, default=180.0, help="seconds for the whole run")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir and server logs")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed")
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
    args = parse_args(argv)
    stop_on_sigterm("the server")
    started = time.monotonic()
    fd_limit = raise_fd_limit(args.polls + 200, f"{args.polls} polls")
    work_dir = Path(tempfile.mkdtemp(prefix="relaybox-longpoll-bench-"))
    progress = Progress()
    server: Server | None = None
    outcome = 2  # the run failed unless it gets as far as the report
    try:
        timeout = min(STARTUP_TIMEOUT_S, args.deadline)
        server = start_relaybox(work_dir, timeout, raised_limits(*RAISED_SETTINGS), fd_limit)
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
        if server is not None:
            stop_servers([server], server_health)
        remove_work_dir(work_dir, args.keep, f" (server log: {work_dir / 'logs'})")
    return outcome


if __name__ == "__main__":
    sys.exit(main())
