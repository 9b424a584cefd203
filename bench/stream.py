"""N open sync streams: server memory per open stream, and the time until ALL of them have a relay.

    .venv/bin/python bench/stream.py [--streams 1000] [--rounds 3] [--relays] [--deadline 300]

Starts one real ``relaybox serve`` (SQLite in a temporary data dir; the per-IP register and
pair-init limits, the devices per account and every send-class rate limit raised so one client
address may set all of it up and send), registers one phone, pairs N computers with it and gives it
a sender token. Then:

- memory: the server's RSS (VmRSS) with every device paired and no stream open, then again with N
  ``GET /v1/sync`` streams open (each has received its opening comment, plus ``--settle``).
  ``per open stream`` = the difference / N, in KB of 1024 bytes. Goal: under 30 KB.
- fan-out, in each of R rounds: ONE ``POST /v1/send`` to the account (the phone and the N
  computers). What counts is the time from the send's answer (its 200 read) until the LAST of the N
  streams yielded the notification. Goal: under 100 ms, in every round (the slowest is judged).
  Also shown: the send's own round trip (sealing and queueing N + 1 envelopes), when the first
  and the median stream had it, and the server's CPU for the round, per send and per delivery.
- ``--relays`` adds R relay rounds: the phone relays one envelope to each computer (``POST
  /v1/envelopes``, at most ``--concurrency`` in flight); shown: first POST until every stream had
  its envelope, relays per second and the server's CPU per relay (no goal).

Every event checked: each stream's next event after a send is the notification of that send's id,
sealed by the server to that very device (opened with its key), and after a relay its own envelope
with the seq the POST returned. The client (N streams on one asyncio loop) shares the machine with
the server, so the times are an upper bound of the server's share; the share of a core every other
process used is shown. Exits 0 whatever is measured (``--strict``: 1 when a goal is missed), 2 when
the run failed; the server is always stopped and the temporary directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import dataclass

from devices import Account, mint_sender_token, pair_computers, register_phone
from fanout import Round, fan_out_round, relay_round
from followers import StreamSet, close_streams, open_streams
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
from loadgen import run_loop
from meter import machine_note, per_op, total

GOAL_ALL_MS = 100.0
GOAL_KB_PER_STREAM = 30.0


# Raised for the run: sending, registering and pairing from 127.0.0.1, N computers on one account.
RAISED_SETTINGS = (*SEND_CLASS_LIMITS, *SETUP_LIMITS, "MAX_DEVICES_PER_ACCOUNT")


@dataclass
class Result:
    streams: int
    rss_before_kb: int
    rss_after_kb: int
    fds_open: int
    fd_limit: str
    fan_outs: list[Round]
    relays: list[Round]

    @property
    def kb_per_stream(self) -> float:
        return (self.rss_after_kb - self.rss_before_kb) / self.streams


async def set_up(server: Server, run: Run) -> Account:
    args, progress = run.args, run.progress
    api = Pool(server.address, timeout_s=30)
    try:
        progress.start("registering the phone, minting its sender token")
        account = Account(await register_phone(api))
        account.sender_token = await mint_sender_token(api, account.phone.token)
        started = time.perf_counter()
        progress.start("pairing computers", args.streams)
        account.computers = await pair_computers(
            api, account.phone, args.streams, args.concurrency, progress.step
        )
        print(f"    paired {args.streams} computers in {time.perf_counter() - started:.1f} s", flush=True)
    finally:
        api.close()
    return account


async def measure(server: Server, run: Run) -> Result:
    args, progress = run.args, run.progress
    account = await set_up(server, run)
    await asyncio.sleep(args.settle)
    rss_before = server.rss_kb()
    streams: StreamSet | None = None
    try:
        started = time.perf_counter()
        streams = await open_streams(server.address, account.computers, args.open_concurrency, progress)
        print(f"    {args.streams} streams open in {time.perf_counter() - started:.1f} s", flush=True)
        await asyncio.sleep(args.settle)
        rss_after, fds = server.rss_kb(), server.open_fds()
        print(f"machine: {await asyncio.to_thread(machine_note, [server.pid])}", flush=True)
        fan_outs, relays = [], []
        for number in range(1, args.rounds + 1):
            progress.start(f"round {number}: one send to all {args.streams} streams")
            fan_outs.append(await fan_out_round(server, account, streams.followers, args.delivery_timeout))
            await asyncio.sleep(0.5)
            if args.relays:
                progress.start(f"round {number}: a relay to each stream", args.streams)
                relay = relay_round(
                    server, account.phone, streams.followers, args.concurrency, args.delivery_timeout, number
                )
                relays.append(await relay)
                await asyncio.sleep(0.5)
        if streams.ended:
            raise BenchError(f"{streams.ended} stream(s) ended during the run")
    finally:
        progress.start("closing streams")
        await close_streams(streams)
    return Result(args.streams, rss_before, rss_after, fds, server.fd_limit(), fan_outs, relays)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def report(result: Result, args: argparse.Namespace) -> bool:
    """Print the summary and the goals; True when both were met."""
    n, fan = result.streams, result.fan_outs
    rows = [
        ("open streams", f"{n}"),
        ("server fds open / limit", f"{result.fds_open} / {result.fd_limit}"),
        ("RSS, paired, no streams", f"{result.rss_before_kb / 1024:.1f} MiB"),
        ("RSS, all streams open", f"{result.rss_after_kb / 1024:.1f} MiB"),
        ("per open stream", f"{result.kb_per_stream:.2f} KB"),
        ("send answered in, per round", "  ".join(ms(r.request_s[0]) for r in fan) + " ms"),
        ("answer -> first stream", "  ".join(ms(min(r.arrivals_s)) for r in fan) + " ms"),
        ("answer -> median stream", "  ".join(ms(statistics.median(r.arrivals_s)) for r in fan) + " ms"),
        (f"answer -> ALL {n} streams", "  ".join(ms(r.all_s) for r in fan) + " ms"),
        ("server CPU per send", "  ".join(f"{per_op(r.cpu.server_s, 1):.0f}" for r in fan) + " ms"),
        ("  per delivery", "  ".join(f"{per_op(r.cpu.server_s, n, 1e6):.0f}" for r in fan) + " µs"),
    ]
    for r in result.relays:
        rows.append(("relays: first POST -> all", f"{ms(r.all_s)} ms, {n / r.all_s:,.0f} relays/s"))
        rows.append(("  server CPU per relay", f"{per_op(r.cpu.server_s, n):.2f} ms"))
    print_rows(rows)
    print(f"during the rounds: {total(r.cpu for r in [*fan, *result.relays]).others_note()}")
    print()
    slowest = max(r.all_s for r in fan) * 1000
    latency_ok = goal(
        f"one send: its answer -> all {n} streams have it < {GOAL_ALL_MS:.0f} ms, every round",
        slowest < GOAL_ALL_MS,
        f"slowest {slowest:.0f} ms",
    )
    memory_ok = goal(
        f"< {GOAL_KB_PER_STREAM:.0f} KB per open stream",
        result.kb_per_stream < GOAL_KB_PER_STREAM,
        f"{result.kb_per_stream:.2f} KB",
    )
    return latency_ok and memory_ok


def benchmark(run: Run) -> bool:
    args = run.args
    fd_limit = raise_fd_limit(args.streams * 2 + 100, f"{args.streams} streams")
    server = run.start("server", relaybox_command("data"), raised_limits(*RAISED_SETTINGS), fd_limit)
    result = run_loop(asyncio.wait_for(measure(server, run), run.remaining()))
    return report(result, args)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--streams", type=int, default=1000, help="computers paired, one open stream each")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of one send to every stream")
    parser.add_argument(
        "--relays", action="store_true", help="also relay one envelope to each stream per round"
    )
    parser.add_argument(
        "--concurrency", type=int, default=50, help="requests in flight while pairing/relaying"
    )
    parser.add_argument("--open-concurrency", type=int, default=100, help="streams connecting at once")
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait before measuring RSS")
    parser.add_argument("--delivery-timeout", type=float, default=10.0, help="seconds one delivery may take")
    add_common_arguments(parser, deadline=300.0)
    args = parser.parse_args(argv)
    if min(args.streams, args.rounds, args.concurrency, args.open_concurrency) < 1 or args.deadline <= 0:
        parser.error("streams, rounds, concurrencies and deadline must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    return run_bench(parse_args(argv), "relaybox-stream-bench-", benchmark)


if __name__ == "__main__":
    sys.exit(main())
