"""The soak: mixed traffic at a steady rate against a real ``relaybox serve`` with its rate limits
on, for a set time; at the end zero 5xx, zero lost envelopes, memory flat within a bound.

Each simulated caller is its own account behind its own address (``X-Forwarded-For`` from the
loopback proxy the server trusts by default): a phone and a computer that both follow their
streams, and a sender token. Every ``--interval`` seconds a caller does the next step of
``STEPS``: a send, a relayed envelope, a question the phone answers while the caller long-polls,
a ring. One assistant calls MCP tools through the real SDK client with an OAuth token.

Rate limits: the minute windows keep their defaults (per token 60, per address 20) and the steady
rate stays under them; the hour, day and month windows are raised to fit the run, since a steady
rate under the minute limits exhausts them in a long run by design. 429s are counted apart from
5xx; at the default rate none is expected.

    .venv/bin/python -m tests.soak.soak --duration 600 [--callers 6] [--interval 2] \\
        [--database-url postgresql://…] [--redis-url redis://…] [--memory-bound-mb 40]

prints one summary line and exits 1 if any promise was broken.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from demo.oauth_client import ConsentBrowser, MemoryStorage, oauth_provider
from tests.e2e.conftest import TRACEBACK, RelayboxServer
from tests.reliability.traffic import (
    FAST_KEEPALIVE_ENV,
    Account,
    Follower,
    gauge,
    make_account,
    post_envelope,
)
from tests.services import replica_env

STEPS = ("send", "envelope", "question", "envelope", "ring", "envelope")
SEND_CLASS_PER_CYCLE = 3  # send, question, ring
MCP_TOOLS = ("list_devices", "list_devices", "list_devices", "send_notification")
REQUEST_TIMEOUT_S = 30.0
WARM_UP_FRACTION = 0.25  # memory is measured from here to the end


@dataclass
class SoakConfig:
    duration_s: float = 15.0
    callers: int = 4
    interval_s: float = 2.0  # per caller, between steps
    mcp_interval_s: float = 1.0
    memory_bound_mb: float = 40.0
    database_url: str | None = None
    redis_url: str | None = None

    def server_env(self, workdir: Path) -> dict[str, str]:
        per_caller = math.ceil(self.duration_s / self.interval_s * SEND_CLASS_PER_CYCLE / len(STEPS))
        mcp_sends = math.ceil(self.duration_s / self.mcp_interval_s / len(MCP_TOOLS))
        roomy = str(4 * (per_caller + mcp_sends) + 100)
        env = FAST_KEEPALIVE_ENV | {
            "RELAYBOX_LIMIT_TOKEN_MONTHLY": roomy,
            "RELAYBOX_LIMIT_RECEIVER_DAILY": roomy,
            "RELAYBOX_LIMIT_IP_HOUR": roomy,
        }
        if self.database_url:
            env["RELAYBOX_DATABASE_URL"] = self.database_url
            env |= replica_env(workdir / "objects")  # what serve on PostgreSQL requires
        if self.redis_url:
            env["RELAYBOX_REDIS_URL"] = self.redis_url
        return env


@dataclass
class SoakResult:
    config: SoakConfig
    statuses: Counter[str] = field(default_factory=Counter)  # "send 200", "question 201", …
    transport_errors: list[str] = field(default_factory=list)
    tool_errors: list[str] = field(default_factory=list)
    accepted: dict[str, set[int]] = field(default_factory=dict)  # computer id -> accepted seqs
    delivered: dict[str, set[int]] = field(default_factory=dict)
    rss_mb: list[float] = field(default_factory=list)
    elapsed_s: float = 0.0
    tracebacks: int = 0
    open_streams_after: float = 0.0

    def count(self, predicate: str) -> int:
        return sum(n for key, n in self.statuses.items() if key.split()[1].startswith(predicate))

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    @property
    def lost(self) -> int:
        return sum(len(seqs - self.delivered.get(device, set())) for device, seqs in self.accepted.items())

    @property
    def memory_growth_mb(self) -> float:
        warm = self.rss_mb[int(len(self.rss_mb) * WARM_UP_FRACTION)] if self.rss_mb else 0.0
        return max(self.rss_mb[-1] - warm, 0.0) if self.rss_mb else 0.0

    def problems(self) -> list[str]:
        found = []
        if self.count("5"):
            found.append(f"{self.count('5')} responses were 5xx")
        if self.count("429"):
            found.append(f"{self.count('429')} responses were 429 at a rate under the limits")
        if self.transport_errors:
            found.append(f"{len(self.transport_errors)} requests failed: {self.transport_errors[:3]}")
        if self.tool_errors:
            found.append(f"{len(self.tool_errors)} MCP calls failed: {self.tool_errors[:3]}")
        if self.lost:
            found.append(f"{self.lost} accepted envelopes never reached their device")
        if self.memory_growth_mb > self.config.memory_bound_mb:
            growth, bound = self.memory_growth_mb, self.config.memory_bound_mb
            found.append(f"memory grew {growth:.1f} MB after warm-up (bound {bound:g} MB)")
        if self.tracebacks:
            found.append("the server logged a traceback")
        if self.open_streams_after:
            found.append(f"{self.open_streams_after:g} streams still open after every device left")
        return found

    def summary_line(self) -> str:
        rss = f"{self.rss_mb[0]:.0f}->{self.rss_mb[-1]:.0f} MB" if self.rss_mb else "n/a"
        accepted = sum(len(seqs) for seqs in self.accepted.values())
        verdict = "OK" if not self.problems() else "FAILED: " + "; ".join(self.problems())
        errors = len(self.transport_errors) + len(self.tool_errors)
        return (
            f"soak: {self.elapsed_s:.0f} s, {self.config.callers} callers, {self.requests} requests "
            f"({self.requests / max(self.elapsed_s, 1e-9):.1f}/s) + {self.statuses['mcp ok']} MCP calls, "
            f"5xx {self.count('5')}, 429 {self.count('429')}, errors {errors}, "
            f"envelopes {accepted} accepted / {self.lost} lost, RSS {rss} "
            f"(+{self.memory_growth_mb:.1f} MB after warm-up, bound {self.config.memory_bound_mb:g}) "
            f"— {verdict}"
        )


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Caller:
    """One account at its own address, stepping through ``STEPS`` every ``interval`` seconds."""

    def __init__(
        self, url: str, account: Account, address: str, result: SoakResult, lock: threading.Lock
    ) -> None:
        self.account = account
        self.result = result
        self.lock = lock
        self.http = httpx.Client(
            base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False, headers={"X-Forwarded-For": address}
        )
        self.accepted: set[int] = set()

    def step(self, kind: str) -> None:
        account = self.account
        try:
            if kind == "send":
                self._record(
                    kind, self.http.post("/v1/send", json={"message": "soak"}, headers=account.token_auth)
                )
            elif kind == "envelope":
                response = post_envelope(self.http, account.phone, account.computer)
                self._record(kind, response)
                if response.status_code == 202:
                    self.accepted.add(response.json()["seq"])
            elif kind == "question":
                self._question()
            elif kind == "ring":
                path = f"/v1/devices/{account.phone.device_id}/ring"
                self._record(kind, self.http.post(path, headers=account.token_auth))
        except httpx.HTTPError as error:
            with self.lock:
                self.result.transport_errors.append(f"{kind}: {type(error).__name__}")

    def _question(self) -> None:
        """Ask, long-poll while the phone answers half a second later, expect the answer."""
        asked = self.http.post(
            "/v1/interactions", json={"question": "soak?"}, headers=self.account.token_auth
        )
        self._record("question", asked)
        if asked.status_code != 201:
            return
        interaction = asked.json()["id"]
        tap = threading.Timer(0.5, self._answer, args=(interaction,))
        tap.start()
        polled = self.http.get(
            f"/v1/interactions/{interaction}", params={"wait": 20}, headers=self.account.token_auth
        )
        tap.join()
        self._record("long-poll", polled)
        if polled.status_code == 200 and polled.json()["status"] != "answered":
            with self.lock:
                self.result.transport_errors.append("long-poll: returned before the answer")

    def _answer(self, interaction: str) -> None:
        try:
            body = {"choice_index": 0}
            self._record(
                "answer",
                self.http.post(
                    f"/v1/interactions/{interaction}/answer", json=body, headers=self.account.phone.auth
                ),
            )
        except httpx.HTTPError as error:
            with self.lock:
                self.result.transport_errors.append(f"answer: {type(error).__name__}")

    def _record(self, kind: str, response: httpx.Response) -> None:
        with self.lock:
            self.result.statuses[f"{kind} {response.status_code}"] += 1

    def close(self) -> None:
        self.http.close()


async def _assistant(url: str, account: Account, result: SoakResult, until: float, interval: float) -> None:
    """One MCP client through the full OAuth flow (the phone confirms the consent code), calling
    ``MCP_TOOLS`` in turn every ``interval`` seconds until ``until``."""
    phone = account.phone

    async def confirm(code: str) -> str:
        def post() -> str:
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as http:
                response = http.post(
                    "/v1/pair/confirm",
                    json={"code": code, "public_key": phone.public_b64},
                    headers=phone.auth,
                )
            assert response.status_code == 200, response.text
            return response.text

        return await anyio.to_thread.run_sync(post)

    async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser_http:
        provider = oauth_provider(
            url, MemoryStorage(), ConsentBrowser(url, browser_http, confirm), "relaybox soak"
        )
        async with (
            httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30, read=60)) as http,
            Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client,
        ):
            for name in itertools.cycle(MCP_TOOLS):
                if time.monotonic() >= until:
                    return
                arguments = {"message": "soak"} if name == "send_notification" else {}
                try:
                    with anyio.fail_after(REQUEST_TIMEOUT_S):
                        called = await client.call_tool(name, arguments)
                except Exception as error:  # counted, and the run goes on
                    result.tool_errors.append(f"{name}: {type(error).__name__}")
                else:
                    if called.is_error:
                        result.tool_errors.append(f"{name}: {called.content}")
                    else:
                        result.statuses["mcp ok"] += 1
                await anyio.sleep(interval)


def run_soak(config: SoakConfig, workdir: Path, progress: bool = False) -> SoakResult:
    result = SoakResult(config)
    lock = threading.Lock()
    with RelayboxServer(workdir / "server", env=config.server_env(workdir)) as server:
        url = server.wait_until_ready()
        pid = server.process.pid
        callers: list[Caller] = []
        followers: list[Follower] = []
        with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as setup:
            for n in range(config.callers):
                setup.headers["X-Forwarded-For"] = f"10.77.{n // 250}.{n % 250 + 1}"
                account = make_account(setup)
                callers.append(Caller(url, account, setup.headers["X-Forwarded-For"], result, lock))
                followers += [Follower(url, account.computer), Follower(url, account.phone)]
            started = time.monotonic()
            until = started + config.duration_s
            assistant = threading.Thread(
                target=anyio.run,
                args=(_assistant, url, callers[0].account, result, until, config.mcp_interval_s),
                daemon=True,
            )
            assistant.start()
            threads = [
                threading.Thread(target=_drive, args=(caller, until, config.interval_s, n), daemon=True)
                for n, caller in enumerate(callers)
            ]
            for thread in threads:
                thread.start()
            while time.monotonic() < until:
                result.rss_mb.append(rss_mb(pid))
                if progress:
                    elapsed = time.monotonic() - started
                    line = f"{elapsed:5.0f} s  {result.requests} requests  RSS {result.rss_mb[-1]:.0f} MB"
                    print(line, file=sys.stderr)
                time.sleep(min(1.0, max(0.0, until - time.monotonic())))
            for thread in [*threads, assistant]:
                thread.join(REQUEST_TIMEOUT_S + 10)
            result.elapsed_s = time.monotonic() - started
            result.rss_mb.append(rss_mb(pid))
            for caller in callers:
                result.accepted[caller.account.computer.device_id] = caller.accepted
                caller.close()
            computers = followers[::2]
            deadline = time.monotonic() + 30
            for follower, caller in zip(computers, callers, strict=True):
                while not caller.accepted <= set(follower.seqs) and time.monotonic() < deadline:
                    time.sleep(0.1)
                result.delivered[caller.account.computer.device_id] = set(follower.seqs)
            for follower in followers:
                follower.close()
            deadline = time.monotonic() + 10
            while (open_now := gauge(setup, "relaybox_open_streams")) and time.monotonic() < deadline:
                time.sleep(0.1)
            result.open_streams_after = open_now
        server.stop()
    result.tracebacks = server.stderr().count(TRACEBACK)
    return result


def _drive(caller: Caller, until: float, interval: float, offset: int) -> None:
    """Steps at a steady rate; callers start staggered so the load is even."""
    next_at = time.monotonic() + (offset % 10) * interval / 10
    for kind in itertools.cycle(STEPS):
        time.sleep(max(0.0, next_at - time.monotonic()))
        if time.monotonic() >= until:
            return
        caller.step(kind)
        next_at += interval


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--duration", type=float, default=600.0, help="seconds of traffic (default: %(default)g)"
    )
    parser.add_argument(
        "--callers",
        type=int,
        default=6,
        help="simulated callers, each its own account (default: %(default)d)",
    )
    parser.add_argument(
        "--interval", type=float, default=2.0, help="seconds between a caller's steps (default: %(default)g)"
    )
    parser.add_argument(
        "--mcp-interval", type=float, default=1.0, help="seconds between MCP calls (default: %(default)g)"
    )
    parser.add_argument(
        "--memory-bound-mb",
        type=float,
        default=40.0,
        help="allowed RSS growth after warm-up (default: %(default)g)",
    )
    parser.add_argument("--database-url", help="PostgreSQL URL (default: SQLite in a temporary folder)")
    parser.add_argument("--redis-url", help="Redis URL for limits and fan-out (default: in-process)")
    args = parser.parse_args(argv)
    config = SoakConfig(
        args.duration,
        args.callers,
        args.interval,
        args.mcp_interval,
        args.memory_bound_mb,
        args.database_url,
        args.redis_url,
    )
    with tempfile.TemporaryDirectory(prefix="relaybox-soak-") as folder:
        result = run_soak(config, Path(folder), progress=True)
    print(result.summary_line())
    return 0 if not result.problems() else 1


if __name__ == "__main__":
    sys.exit(main())
