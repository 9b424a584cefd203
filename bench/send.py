"""Sustained ``POST /v1/send`` throughput and latency, against a bare Starlette JSON endpoint.

    .venv/bin/python bench/send.py [--duration 5] [--rounds 3] [--concurrency 32] [--deadline 120]

Two servers run side by side, each a subprocess served the same way: one Python process, uvicorn
with its default ("auto": uvloop + httptools) loop and HTTP implementation, ``proxy_headers``, and
the access log ON, written to a file (the way ``relaybox serve`` runs):

- relaybox: ``python -m app.cli serve --port 0`` with SQLite in a temporary data dir and every
  send-class rate limit (and the per-IP register / pair-init limits) raised for the run. A phone
  registers, pairs one computer and mints a sender token over HTTP, so each send seals one
  envelope per device (two) and queues both.
- bare: this file with ``--serve-baseline``, a Starlette app whose only route ``POST /bare`` reads
  the JSON body and answers a small JSON object (no auth, no storage, no encryption).

The load comes from this process alone (the machine's other core): ``--concurrency`` keep-alive
HTTP/1.1 connections on one asyncio loop (uvloop when installed), each sending the same JSON send
body back to back. The client is a minimal one on asyncio streams, not httpx: httpx spends far
more CPU per request than the bare server does, so it would measure itself, not the servers.
Rounds of ``--duration`` seconds alternate bare, relaybox, bare, relaybox, ... after a warm-up of
each. Reported per target: the median of the round throughputs (responses completed within the
round per second), p50/p99 latency over every request of every round (sent -> whole response
read), the count of non-200 answers, the server's CPU per request, and the CPU the server and the
load generator used (100% = one core; a load generator near 100% would mean the number is the
client's limit, not the server's).

Goal: relaybox answers at least 0.6x the requests per second of the bare endpoint.

``--scale-out`` measures instead what a second replica adds: two ``relaybox serve`` processes share
a fresh PostgreSQL database (created on the server of ``--postgres``, dropped afterwards) and a
Redis key namespace of their own (on ``--redis``), as replicas in production do. Rounds alternate
"1 replica" (every connection to the first) and "2 replicas" (connection i to replica i mod 2:
round robin by connection, as a layer-4 balancer spreads keep-alive connections, done by the
load generator itself so that no proxy process competes for the CPU). Both run the same client
path and the same store, PostgreSQL + Redis; only the number of replicas serving differs. The
connections send for ``--accounts`` accounts in turn (default 16; connection i for account
i mod N): every send to one account writes its two devices' queues under their row locks, so
one account's sends are serial on any number of replicas (and a real account's sender tokens are
limited to 60 a minute each). The server CPU columns add up every replica. No goal: it shows
what this machine gives.

Exits 0
whatever is measured (``--strict``: 1 when the goal is missed or a send was not a 200); 2 when the
run itself failed. The servers are always stopped (SIGTERM, then SIGKILL) and the temporary
directory removed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from core.domain.keys import generate_keypair
from devices import b64, bearer, expect, pair_confirm_request, pair_init_request, register_phone
from harness import (
    BASELINE_LISTENING,
    RAISED_LIMIT,
    SEND_CLASS_LIMITS,
    STARTUP_TIMEOUT_S,
    BenchError,
    Server,
    describe,
    free_socket,
    raised_limits,
    relaybox_command,
    remove_work_dir,
    serve_like_relaybox,
    start_server,
    stop_on_sigterm,
    stop_servers,
)
from loadgen import Round, Summary, run_loop, run_round, summarize

GOAL_RATIO = 0.6
RAISED_SETTINGS = (*SEND_CLASS_LIMITS, "REGISTER_PER_IP_PER_MINUTE", "PAIR_INIT_PER_IP_PER_MINUTE")
REQUEST_TIMEOUT_S = 10.0
SEND_BODY = {
    "message": "Backup of build-01 finished: 41.2 GB in 12 min, 0 errors.",
    "title": "relaybox bench",
    "priority": "default",
    "tags": ["bench", "backup"],
}


# -- the baseline server (its own process: ``--serve-baseline``) --------------------------------


async def bare(request: Request) -> JSONResponse:
    body = await request.json()
    return JSONResponse({"id": f"msg_{uuid.uuid4().hex}", "fields": len(body)})


def serve_baseline() -> int:
    """Serve ``POST /bare`` on a free port the way ``app.serve`` serves relaybox."""
    sock = free_socket()
    print(f"{BASELINE_LISTENING}http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
    app = Starlette(routes=[Route("/bare", bare, methods=["POST"])])
    serve_like_relaybox(app, sock)
    return 0


# -- relaybox setup: a phone, one paired computer, a sender token -------------------------------


def sender_token(url: str) -> str:
    """Register a phone, pair a computer, mint a sender token; check one send reaches both devices
    and that the limits really were raised. Returns the token."""
    phone_key, computer_key = generate_keypair()[1], generate_keypair()[1]
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S) as api:
        phone_auth = register_phone(api, phone_key, "bench")
        init = pair_init_request(computer_key, "bench laptop")
        code = expect(api.post("/v1/pair/init", json=init), 201)["code"]
        confirm = pair_confirm_request(code, phone_key)
        expect(api.post("/v1/pair/confirm", json=confirm, headers=phone_auth), 200)
        token: str = expect(api.post("/v1/tokens", json={"label": "bench"}, headers=phone_auth), 201)["token"]
        probe = api.post("/v1/send", json=SEND_BODY, headers=bearer(token))
    if len(expect(probe, 200)["delivered_to"]) != 2:
        raise BenchError(f"the probe send did not reach the phone and the computer: {probe.text}")
    if int(probe.headers.get("x-ratelimit-limit", "0")) < RAISED_LIMIT:
        raise BenchError(f"the rate limits were not raised: {dict(probe.headers)}")
    return token


# -- what replicas share (--scale-out) ----------------------------------------------------------


@contextmanager
def shared_store(postgres_url: str, redis_url: str) -> Iterator[dict[str, str]]:
    """A fresh PostgreSQL database (on the server of ``postgres_url``), a Redis key namespace and a
    server key, as the ``RELAYBOX_*`` settings of every replica; afterwards the database is
    dropped and the namespace's keys deleted."""
    from sqlalchemy import create_engine, text  # only here: the default run needs no extras

    from core.adapters.limits.redis import RedisRateLimiter

    name = f"relaybox_bench_{secrets.token_hex(4)}"
    namespace = f"relaybox-bench-{secrets.token_hex(4)}"
    admin = create_engine(
        postgres_url.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT"
    )
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield {
                "RELAYBOX_DATABASE_URL": f"{postgres_url.rpartition('/')[0]}/{name}",
                "RELAYBOX_REDIS_URL": redis_url,
                "RELAYBOX_REDIS_NAMESPACE": namespace,
                "RELAYBOX_SERVER_SECRET_KEY": b64(generate_keypair()[0]),
            }
        finally:
            with admin.connect() as connection:
                connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
            limits = RedisRateLimiter(redis_url, namespace=namespace)
            limits.reset()
            limits.close()
    finally:
        admin.dispose()


# -- the load generator -------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What one round loads: connection i goes to ``servers[i % len(servers)]`` (round robin) and
    sends with ``tokens[i % len(tokens)]``."""

    label: str
    servers: tuple[Server, ...]
    path: str
    tokens: tuple[str, ...]

    def request(self, token: str) -> bytes:
        """One ``POST`` with the send body and ``token``, as raw HTTP/1.1 bytes."""
        body = json.dumps(SEND_BODY).encode()
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.servers[0].url.removeprefix('http://')}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        )
        return head.encode() + body


def status_outcome(status: int, _body: bytes) -> str:
    return "ok" if status == 200 else str(status)


async def load_round(target: Target, seconds: float, concurrency: int) -> Round:
    """Run ``concurrency`` connections against ``target`` for ``seconds``; measure what came back."""
    requests = [target.request(token) for token in target.tokens]
    plan = [
        (target.servers[n % len(target.servers)], requests[n % len(requests)]) for n in range(concurrency)
    ]
    return await run_round(Round(target.label, seconds), target.servers, plan, status_outcome)


async def measure(targets: list[Target], args: argparse.Namespace) -> list[Round]:
    """A warm-up of each target, then ``rounds`` x every target, one after the other."""
    for target in targets:
        await load_round(target, args.warmup, args.concurrency)
    rounds: list[Round] = []
    for number in range(1, args.rounds + 1):
        for target in targets:
            done = await load_round(target, args.duration, args.concurrency)
            rounds.append(done)
            print(f"    round {number} {target.label:<18} {done.throughput:>8,.0f} req/s", flush=True)
    return rounds


# -- the report ---------------------------------------------------------------------------------


def print_table(summaries: list[Summary]) -> None:
    print(
        f"{'target':<18} {'req/s':>7} {'per round':>20} {'p50 ms':>7} {'p99 ms':>7} {'non-200':>7} "
        f"{'CPU ms/req':>10} {'server CPU':>10} {'load CPU':>8}"
    )
    for s in summaries:
        rounds = " ".join(f"{t:.0f}" for t in s.throughputs)
        print(
            f"{s.label:<18} {s.median:>7,.0f} {rounds:>20} {s.p50_ms:>7.1f} {s.p99_ms:>7.1f} {s.failures:>7} "
            f"{s.cpu_per_request_ms:>10.2f} {s.server_cpu:>10.0%} {s.bench_cpu:>8.0%}"
        )
    for s in summaries:
        for outcome, body in sorted(s.samples.items()):
            print(f"  {s.label}: {s.outcomes[outcome]} x {outcome}, e.g. {body}")
            if outcome == "429":
                print("  (a 429: a rate limit was not raised enough for the run)")


def report(bare: Summary, relay: Summary, args: argparse.Namespace) -> bool:
    """Print the table and the goal line; True when the goal was met and every send was a 200."""
    print()
    print(
        f"{args.rounds} rounds x {args.duration:g} s per target, {args.concurrency} keep-alive "
        "connections, access log on for both"
    )
    print_table([bare, relay])
    ratio = relay.median / bare.median
    met = ratio >= GOAL_RATIO
    print()
    print(
        f"goal: relaybox >= {GOAL_RATIO}x the bare endpoint's req/s (medians): "
        f"{'met' if met else 'MISSED'} ({ratio:.2f}x; relaybox latency "
        f"p50 {relay.p50_ms / bare.p50_ms:.0f}x, p99 {relay.p99_ms / bare.p99_ms:.0f}x the bare endpoint's)"
    )
    return met and relay.failures == 0


# -- the run ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per round and target")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs bare, then relaybox")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load per target before round 1")
    parser.add_argument("--concurrency", type=int, default=32, help="keep-alive connections per round")
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds for the whole run")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (data and server logs)")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when the goal is missed or a send fails"
    )
    parser.add_argument(
        "--scale-out",
        action="store_true",
        help="measure 1 against 2 relaybox replicas on PostgreSQL + Redis (no bare endpoint)",
    )
    parser.add_argument(
        "--accounts",
        type=int,
        default=16,
        help="--scale-out: accounts (phone + computer + sender token) the connections send for, in turn "
        "(default %(default)s; sends to one account queue one after another)",
    )
    parser.add_argument(
        "--postgres",
        default=os.environ.get("RELAYBOX_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test"),
        help="--scale-out: a database on the server to create the run's own database on (%(default)s)",
    )
    parser.add_argument(
        "--redis",
        default=os.environ.get("RELAYBOX_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"),
        help="--scale-out: the Redis the replicas share, under a namespace of the run's own (%(default)s)",
    )
    parser.add_argument("--serve-baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if (
        min(args.rounds, args.concurrency, args.accounts) < 1
        or min(args.duration, args.warmup, args.deadline) <= 0
    ):
        parser.error("rounds, concurrency, duration, warmup and deadline must be positive")
    return args


def run(args: argparse.Namespace, work_dir: Path, servers: list[Server], cleanup: ExitStack) -> bool:
    """Start both servers, set up the sender, measure, report. ``servers`` collects what was
    started, for the caller to stop whatever happens (and then to close ``cleanup``)."""
    if args.scale_out:
        return run_scale_out(args, work_dir, servers, cleanup)
    deadline = time.monotonic() + args.deadline
    commands = {
        "relaybox": relaybox_command("data"),
        "bare": [sys.executable, str(Path(__file__).resolve()), "--serve-baseline"],
    }
    for name, command in commands.items():
        timeout = min(STARTUP_TIMEOUT_S, deadline - time.monotonic())
        servers.append(start_server(name, command, work_dir, timeout, raised_limits(*RAISED_SETTINGS)))
    relay, bare = servers
    token = sender_token(relay.url)
    print(f"relaybox pid {relay.process.pid} at {relay.url}, bare pid {bare.process.pid} at {bare.url}")
    print(f"load average before the rounds: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    targets = [
        Target("bare Starlette", (bare,), "/bare", (token,)),
        Target("relaybox /v1/send", (relay,), "/v1/send", (token,)),
    ]
    remaining = deadline - time.monotonic()
    rounds = run_loop(asyncio.wait_for(measure(targets, args), remaining))
    return report(summarize(targets[0].label, rounds), summarize(targets[1].label, rounds), args)


def run_scale_out(
    args: argparse.Namespace, work_dir: Path, servers: list[Server], cleanup: ExitStack
) -> bool:
    """Two replicas on a fresh shared PostgreSQL database and Redis namespace; rounds of one
    replica and of both, round robin by connection."""
    deadline = time.monotonic() + args.deadline
    shared = cleanup.enter_context(shared_store(args.postgres, args.redis))
    for n in (1, 2):
        command = relaybox_command(f"data-{n}")
        timeout = min(STARTUP_TIMEOUT_S, deadline - time.monotonic())
        settings = raised_limits(*RAISED_SETTINGS) | shared
        servers.append(start_server(f"replica-{n}", command, work_dir, timeout, settings))
    first, second = servers
    tokens = tuple(sender_token(first.url) for _ in range(args.accounts))
    print(
        f"replica 1 pid {first.process.pid} at {first.url}, replica 2 pid {second.process.pid} at "
        f"{second.url}; PostgreSQL + Redis shared"
    )
    print(f"load average before the rounds: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    targets = [
        Target("1 replica", (first,), "/v1/send", tokens),
        Target("2 replicas (rr)", (first, second), "/v1/send", tokens),
    ]
    rounds = run_loop(asyncio.wait_for(measure(targets, args), deadline - time.monotonic()))
    one, two = (summarize(target.label, rounds) for target in targets)
    print()
    print(
        f"{args.rounds} rounds x {args.duration:g} s per target, {args.concurrency} keep-alive connections "
        f"(round robin over the replicas) sending for {args.accounts} accounts, PostgreSQL + Redis, "
        "access log on"
    )
    print_table([one, two])
    print()
    print(
        f"2 replicas / 1 replica: {two.median / one.median:.2f}x the sends per second (medians), "
        f"on {os.cpu_count()} CPUs shared by the replicas, PostgreSQL, Redis and the load generator"
    )
    return one.failures == two.failures == 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_baseline:
        return serve_baseline()
    stop_on_sigterm("the servers")
    work_dir = Path(tempfile.mkdtemp(prefix="relaybox-send-bench-"))
    servers: list[Server] = []
    cleanup = ExitStack()  # closed after the servers stopped: the database they use is dropped
    outcome = 2  # the run failed unless it gets as far as the report
    try:
        met = run(args, work_dir, servers, cleanup)
        outcome = 1 if args.strict and not met else 0
    except TimeoutError:
        print(f"FAILED: the deadline of {args.deadline:.0f} s was reached")
    except (BenchError, httpx.HTTPError, ExceptionGroup) as exc:
        print(f"FAILED: {describe(exc)}")
    finally:
        stop_servers(servers)
        cleanup.close()
        remove_work_dir(work_dir, args.keep)
    return outcome


if __name__ == "__main__":
    sys.exit(main())
