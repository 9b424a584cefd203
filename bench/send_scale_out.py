"""``send.py --scale-out``: what a second relaybox replica adds, on PostgreSQL + Redis.

    .venv/bin/python bench/send.py --scale-out [--accounts 16] [--postgres URL] [--redis URL]

Two ``relaybox serve`` replicas share what production replicas share (``stores.shared_store``: a
fresh PostgreSQL database, a Redis namespace of the run's own, one server key). Rounds alternate
"1 replica" (every connection to the first) and "2 replicas (rr)" (connection i to replica i mod 2:
round robin by connection, as a layer-4 balancer spreads keep-alive connections, done by the load
generator itself so that no proxy process competes for the CPU). Both use the same client path and
store; only the number of replicas serving differs. The connections send for ``--accounts`` accounts
in turn (connection i for account i mod N): one account's sends write its two devices' queues under
their row locks, so they are serial on any number of replicas. The server CPU columns add up the
replicas serving. The replicas, PostgreSQL, Redis and the load generator share this machine's
cores, so the ratio says what a second process gives here, not a second machine; the goal (issue
20: 1.6x "where cores allow") is read against what the cores allow, which the run prints: at two
replicas' CPU a send (replicas, PostgreSQL, Redis and the load generator), how many sends/s this
machine's CPUs would carry, as a multiple of one replica's.

Imported by ``send.py``; not a benchmark of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os

from devices import send_load, sender_accounts
from harness import SEND_CLASS_LIMITS, SETUP_LIMITS, logging_settings, raised_limits, relaybox_command
from lifecycle import Run
from loadgen import Summary, measure_rounds, print_table, run_loop, summarize
from meter import per_op
from stores import analyze, shared_store


def add_scale_out_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--scale-out",
        action="store_true",
        help="measure 1 against 2 relaybox replicas on PostgreSQL + Redis instead",
    )
    parser.add_argument(
        "--accounts",
        type=int,
        default=16,
        help="--scale-out: accounts (phone + computer + sender token) the connections send for, in turn",
    )


def run_scale_out(run: Run) -> bool:
    args = run.args
    settings = logging_settings(args.access_log == "on") | raised_limits(*SEND_CLASS_LIMITS, *SETUP_LIMITS)
    store = run.cleanup.enter_context(shared_store(args.postgres, args.redis))
    settings |= store
    first = run.start("replica-1", relaybox_command("data-1"), settings)
    second = run.start("replica-2", relaybox_command("data-2"), settings)
    run.progress.start(f"setting up {args.accounts} accounts")
    accounts = run_loop(sender_accounts(first, [1] * args.accounts))
    loads = [
        send_load("1 replica", (first,), accounts, args.concurrency),
        send_load("2 replicas (rr)", (first, second), accounts, args.concurrency),
    ]
    run.machine_note()
    run.progress.start("measuring")
    after_warmup = functools.partial(analyze, store["RELAYBOX_DATABASE_URL"])
    measuring = measure_rounds(loads, args.rounds, args.duration, args.warmup, after_warmup)
    rounds = run_loop(asyncio.wait_for(measuring, run.remaining()))
    one, two = (summarize(load.label, rounds) for load in loads)
    print(
        f"\n{args.rounds} rounds x {args.duration:g} s per target, {args.concurrency} keep-alive connections "
        f"sending for {args.accounts} accounts, PostgreSQL + Redis, access log {args.access_log}"
    )
    print_table([one, two])
    print(
        f"2 replicas ÷ 1 replica: {two.median / one.median:.2f}x the sends per second (medians), CPU per "
        f"send {one.cpu_ms:.2f} -> {two.cpu_ms:.2f} ms, on {os.cpu_count()} CPUs shared by the replicas, "
        f"PostgreSQL, Redis and the load generator; {(one.cpu + two.cpu).others_note()}"
    )
    print(cores_allow(one, two, os.cpu_count() or 1))
    return one.failures == two.failures == 0


def cores_allow(one: Summary, two: Summary, cpus: int) -> str:
    """What ``cpus`` would carry at two replicas' CPU a send, against one replica's sends/s, and how
    much of it two replicas reached. A send's CPU is everything measured: the replicas, the store,
    the load generator, and the machine's interrupt handling over the rounds (the loopback traffic
    of the sends, charged to no process). The machine's idle share in the 2-replica rounds says
    whether the cores were the limit there."""
    used = two.cpu
    interrupts_ms = per_op(used.interrupts_s, two.answers)
    per_send_ms = two.total_cpu_ms + two.bench_cpu_ms + interrupts_ms
    carried = cpus * 1000 / per_send_ms
    idle = used.idle_s / (used.wall_s * cpus) if used.wall_s > 0 else 0.0
    return (
        f"where cores allow: at {per_send_ms:.2f} ms of CPU a send with 2 replicas ({interrupts_ms:.2f} ms "
        f"of it interrupt handling), {cpus} CPUs would carry {carried:,.0f} sends/s, "
        f"{carried / one.median:.2f}x one replica's; 2 replicas reached {two.median / carried:.0%} of it, "
        f"the machine {idle:.0%} idle meanwhile (goal: 1.6x where that allows it)"
    )
