"""Sustained ``POST /v1/send``: relaybox against a bare Starlette endpoint, SQLite against PostgreSQL
+ Redis, and what each extra paired device costs a send.

    .venv/bin/python bench/send.py [--duration 5] [--rounds 3] [--concurrency 32] [--extra-devices 20]
                                   [--access-log on|off] [--no-postgres] [--deadline 300] [--strict]

Every server is a subprocess served the same way: one process, relaybox's server class and uvicorn
configuration, and the SAME logging for all (``--access-log``: relaybox's logging configuration with
uvicorn's access log on for every server, as ``relaybox serve`` runs, or off for every server):

- bare Starlette: ``baselines.py starlette``, one route ``POST /bare`` that reads the JSON body and
  answers a small JSON object (no auth, storage or encryption): the framework's ceiling;
- bare + durable write: ``baselines.py durable``, the same route that also inserts two queue rows
  (one a device, an envelope's size) and commits them in a SQLite file set up as relaybox's, on the
  event loop: the least a durable send costs, a reference beside the ratio (not a goal);
- relaybox SQLite: ``relaybox serve`` on a temporary SQLite file, two accounts: a phone with one
  paired computer (each send seals and queues two envelopes) and a phone with 1 + ``--extra-devices``
  computers (the same send to that many more devices);
- relaybox PG+Redis: ``relaybox serve`` on a fresh PostgreSQL database and a Redis namespace of its
  own (``--postgres``, ``--redis``), one phone with one computer, as on SQLite.

Every send-class rate limit is raised for the run. The load: ``--concurrency`` keep-alive HTTP/1.1
connections from this process (a minimal asyncio client, not httpx), each sending the same body back
to back; every answer is checked (a 200 with a message id that reached every device of the account,
no warning; the bare one a 200 with its id and field count). Rounds of ``--duration`` s alternate
over the targets after a warm-up of each. Per target: median requests/s, p50/p99 latency, failed
answers, and CPU per request of the server process, of PostgreSQL + Redis (``store``) and of the load
generator; the share of a core every *other* process on the machine used during the rounds says
whether the machine was idle.

Goals (issue 20), all on CPU per request, the steadiest figure on a shared 2-core machine:
bare ÷ relaybox SQLite >= 0.5; PostgreSQL + Redis (server + store) <= 2x SQLite; each extra device
<= 15 µs. ``--scale-out`` measures instead one replica against two (see ``send_scale_out.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
from typing import Any

import checks
from devices import SEND_BODY, send_load, sender_accounts
from harness import (
    SEND_CLASS_LIMITS,
    SETUP_LIMITS,
    Server,
    baseline_command,
    logging_settings,
    raised_limits,
    relaybox_command,
)
from http1 import http_request
from lifecycle import Run, add_common_arguments, goal, run_bench
from loadgen import Load, Summary, measure_rounds, print_table, run_loop, summarize
from meter import total
from send_scale_out import add_scale_out_arguments, run_scale_out
from stores import add_store_arguments, analyze, shared_store

GOAL_CPU_RATIO = 0.5  # bare CPU/request ÷ relaybox's
GOAL_POSTGRES = 2.0  # PostgreSQL + Redis CPU/send ÷ SQLite's
GOAL_PER_DEVICE_US = 15.0
BARE, DURABLE, SQLITE, MANY, POSTGRES = (
    "bare Starlette",
    "bare + durable write",
    "relaybox SQLite",
    "relaybox SQLite +{n} dev",
    "relaybox PG+Redis",
)


def bare_load(label: str, server: Server, concurrency: int) -> Load:
    request = http_request("POST", "/bare", server.url.removeprefix("http://"), None, SEND_BODY)
    requests = tuple((server, request) for _ in range(concurrency))
    return Load(label, (server,), requests, checks.classifier(200, bare_answer))


def bare_answer(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and str(body.get("id", "")).startswith("msg_")
        and body.get("fields") == len(SEND_BODY)
    )


def benchmark(run: Run) -> bool:
    args = run.args
    if args.scale_out:
        return run_scale_out(run)
    logs = logging_settings(args.access_log == "on")
    limits = raised_limits(*SEND_CLASS_LIMITS, *SETUP_LIMITS)
    bare = run.start("bare", baseline_command("starlette"), logs)
    durable = run.start("durable", baseline_command("durable"), logs)
    relay = run.start("relaybox", relaybox_command("data"), logs | limits)
    many = MANY.format(n=args.extra_devices)
    after_warmup = None
    run.progress.start("setting up the accounts")
    small, large = run_loop(sender_accounts(relay, [1, 1 + args.extra_devices]))
    loads = [
        bare_load(BARE, bare, args.concurrency),
        bare_load(DURABLE, durable, args.concurrency),
        send_load(SQLITE, (relay,), [small], args.concurrency),
        send_load(many, (relay,), [large], args.concurrency),
    ]
    if args.postgres_on:
        store = run.cleanup.enter_context(shared_store(args.postgres, args.redis))
        pg = run.start("relaybox-pg", relaybox_command("data-pg"), logs | limits | store)
        loads.append(send_load(POSTGRES, (pg,), run_loop(sender_accounts(pg, [1])), args.concurrency))
        after_warmup = functools.partial(analyze, store["RELAYBOX_DATABASE_URL"])
    run.machine_note()
    run.progress.start("measuring")
    measuring = measure_rounds(loads, args.rounds, args.duration, args.warmup, after_warmup)
    rounds = run_loop(asyncio.wait_for(measuring, run.remaining()))
    summaries = [summarize(load.label, rounds) for load in loads]
    return report(summaries, args)


def report(summaries: list[Summary], args: argparse.Namespace) -> bool:
    """The table, the ratios and the goals; True when every goal was met and every answer was right."""
    by_label = {s.label: s for s in summaries}
    bare, sqlite, many = by_label[BARE], by_label[SQLITE], by_label[MANY.format(n=args.extra_devices)]
    print(
        f"\n{args.rounds} rounds x {args.duration:g} s per target, {args.concurrency} keep-alive "
        f"connections, access log {args.access_log} for every server"
    )
    print_table(summaries)
    cpu_ratio = bare.cpu_ms / sqlite.cpu_ms
    per_device_us = (many.cpu_ms - sqlite.cpu_ms) * 1000 / args.extra_devices
    results = [
        goal(
            f"send SQLite: bare CPU/request ÷ relaybox's >= {GOAL_CPU_RATIO}x",
            cpu_ratio >= GOAL_CPU_RATIO,
            f"{cpu_ratio:.2f}x ({bare.cpu_ms * 1000:.0f} ÷ {sqlite.cpu_ms * 1000:.0f} µs; requests/s "
            f"{sqlite.median / bare.median:.2f}x: {sqlite.median:,.0f} ÷ {bare.median:,.0f})",
        ),
        goal(
            f"each extra paired device <= {GOAL_PER_DEVICE_US:.0f} µs CPU a send",
            per_device_us <= GOAL_PER_DEVICE_US,
            f"{per_device_us:+.0f} µs ({many.cpu_ms:.2f} ms with {2 + args.extra_devices} devices, "
            f"{sqlite.cpu_ms:.2f} ms with 2)",
        ),
    ]
    if POSTGRES in by_label:
        pg = by_label[POSTGRES]
        pg_ratio = pg.total_cpu_ms / sqlite.total_cpu_ms
        results.append(
            goal(
                f"send PostgreSQL + Redis <= {GOAL_POSTGRES:.0f}x SQLite's CPU/send (server + store)",
                pg_ratio <= GOAL_POSTGRES,
                f"{pg_ratio:.1f}x ({pg.total_cpu_ms:.2f} ÷ {sqlite.total_cpu_ms:.2f} ms; the relaybox "
                f"process alone {pg.cpu_ms / sqlite.cpu_ms:.1f}x; req/s {pg.median / sqlite.median:.2f}x)",
            )
        )
    durable = by_label[DURABLE]
    print(
        f"reference: the bare route that also commits a send's two queue rows, on the event loop, "
        f"{durable.cpu_ms * 1000:.0f} µs CPU/request: bare ÷ it {bare.cpu_ms / durable.cpu_ms:.2f}x "
        "(the least a durable send costs here; not a goal)"
    )
    print(f"during the rounds: {total(s.cpu for s in summaries).others_note()}")
    return all(results) and not any(s.failures for s in summaries)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per round and target")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every target")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load per target before round 1")
    parser.add_argument("--concurrency", type=int, default=32, help="keep-alive connections per round")
    parser.add_argument(
        "--extra-devices", type=int, default=20, help="computers beyond the first on the per-device account"
    )
    parser.add_argument(
        "--access-log",
        choices=("on", "off"),
        default="on",
        help="uvicorn's access log, for every server alike",
    )
    parser.add_argument(
        "--no-postgres", dest="postgres_on", action="store_false", help="skip PostgreSQL + Redis"
    )
    add_store_arguments(parser)
    add_scale_out_arguments(parser)
    add_common_arguments(parser, deadline=300.0)
    args = parser.parse_args(argv)
    if (
        min(args.rounds, args.concurrency, args.extra_devices, args.accounts) < 1
        or min(args.duration, args.warmup, args.deadline) <= 0
    ):
        parser.error("rounds, concurrency, extra devices, accounts, durations and deadline must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    return run_bench(parse_args(argv), "relaybox-send-bench-", benchmark)


if __name__ == "__main__":
    sys.exit(main())
