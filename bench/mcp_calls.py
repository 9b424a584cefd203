"""MCP ``tools/call`` throughput: relaybox's ``list_devices`` behind OAuth against a bare tool.

    .venv/bin/python bench/mcp_calls.py [--duration 5] [--rounds 3] [--concurrency 32] [--deadline 180]

Two servers run side by side, each a subprocess served the same way: one Python process, uvicorn
with its default ("auto": uvloop + httptools) loop and HTTP implementation, ``proxy_headers``, the
access log ON (to a file), the collector tuned after start-up, as ``relaybox serve`` runs:

- relaybox: ``python -m app.cli serve --port 0`` with SQLite in a temporary data dir. A virtual
  phone registers over HTTP and completes the connector's OAuth flow (client registration, consent
  page, the phone confirms the page's code, Allow, code exchange with PKCE and ``resource``), so
  every call carries a real access token through the auth gate (verification, audience, scopes) and
  asks the core for the account's devices. Nothing is written during the rounds (but for the
  grant's last-use note now and then), so the device read is mostly answered from what the loop's
  reader kept (``@reusable``: SQLite's ``data_version`` is checked on every call); traffic that
  writes between two calls pays for the read.
- bare: this file with ``--serve-baseline``: an ``MCPServer`` with one ``list_devices`` tool that
  returns a fixed listing of the same shape, mounted the same way (``streamable_http_app``, the same
  transport-security settings), without auth or storage.

Both protocol eras are measured: legacy (``initialize`` once per connection slot, then its
``Mcp-Session-Id`` on every call; the answer comes as an SSE stream) and 2026-07-28 (sessionless:
``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` headers and the per-request ``_meta``).

First the SDK's own client (``mcp.Client`` over httpx2) checks each target and era: ``tools/list``
shows ``list_devices`` and a call returns the expected devices; it then makes ``--sdk-calls``
sequential calls to measure its own cost. The load itself comes from a minimal HTTP/1.1 client on
asyncio streams (uvloop when installed): ``--concurrency`` keep-alive connections, each sending the
same prepared call back to back. The SDK client spends several times the CPU per call that the bare
server does (the table shows both), so it would measure itself, not the servers.

Rounds of ``--duration`` seconds interleave (per round: legacy bare, legacy relaybox, 2026 bare,
2026 relaybox) after a warm-up of each. Reported per era and target: the median round throughput,
p50/p99 latency over every call of every round, calls that were not a 200 with a tool result, the
server's CPU per call and the CPU the server and the load generator used (100% = one core).

Goal: relaybox answers at least 0.8x the calls per second of the bare tool, on each era. Exits 0
whatever is measured (``--strict``: 1 when a goal is missed or a call failed); 2 when the run
itself failed. The servers are always stopped (SIGTERM, then SIGKILL) and the temporary directory
removed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import os
import re
import secrets
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2

from connector.outputs import DeviceInfo, DeviceListing  # the bare tool returns relaybox's shape
from core.domain.keys import generate_keypair
from devices import bearer, expect, pair_confirm_request, register_phone
from harness import (
    BASELINE_LISTENING,
    STARTUP_TIMEOUT_S,
    BenchError,
    Server,
    describe,
    free_socket,
    relaybox_command,
    remove_work_dir,
    serve_like_relaybox,
    start_server,
    stop_on_sigterm,
    stop_servers,
)
from loadgen import Round, Summary, read_response, run_loop, run_round, summarize

GOAL_RATIO = 0.8
LEGACY = "legacy"
MODERN = "2026-07-28"
ERAS = (LEGACY, MODERN)
LEGACY_VERSION = "2025-11-25"  # what the legacy handshake asks for
TOOL = "list_devices"
PHONE_NAME = "bench phone"
SCOPES = [
    "notifications:send",
    "devices:read",
    "reminders:write",
    "approvals:write",
    "phone:control",
    "files:send",
]
REDIRECT_URI = "http://127.0.0.1:3030/callback"  # never listened on: the code is read from the redirect
REQUEST_TIMEOUT_S = 10.0
CLIENT_INFO = {"name": "relaybox-bench", "version": "1.0.0"}


# -- the baseline server (its own process: ``--serve-baseline``) --------------------------------


def serve_baseline() -> int:
    """Serve a bare ``list_devices`` tool at ``/mcp`` on a free port, the way relaybox is served."""
    from mcp.server import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp.types import ToolAnnotations

    listing = DeviceListing(
        devices=[
            DeviceInfo(
                device_id=f"{0:08x}-0000-4000-8000-{0:012x}",
                name=PHONE_NAME,
                surface_kind="phone",
                reachable=False,
            )
        ]
    )
    mcp = MCPServer("bare", version="1.0.0")

    @mcp.tool(title="List devices", annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
    async def list_devices() -> DeviceListing:
        """List the user's paired devices."""
        return listing

    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    security = TransportSecuritySettings(
        allowed_hosts=[url.removeprefix("http://"), "127.0.0.1", "127.0.0.1:*"], allowed_origins=[url]
    )
    app = mcp.streamable_http_app(
        streamable_http_path="/mcp", transport_security=security, max_request_body_size=4 * 1024 * 1024
    )
    print(f"{BASELINE_LISTENING}{url}", flush=True)
    serve_like_relaybox(app, sock, timeout_keep_alive=30)
    return 0


# -- relaybox setup: a phone and a connector token through the OAuth flow -----------------------


def consent_page(html: str) -> tuple[str, str, str]:
    """The consent session id, the six-digit code the phone confirms, and the CSRF token."""
    session = re.search(r'data-status-url="/oauth/consent/([^/"]+)/status"', html)
    code = re.search(r'<output id="code">(\d{3}) (\d{3})</output>', html)
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', html)
    if not (session and code and csrf):
        raise BenchError("the consent page has no session, code or CSRF token")
    return session[1], code[1] + code[2], csrf[1]


def connector_token(url: str) -> str:
    """Register a phone, then act as an MCP client, a browser and the phone through the consent
    flow; returns an access token for ``<url>/mcp`` with every connector scope."""
    phone_key = generate_keypair()[1]
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    state, resource = secrets.token_urlsafe(12), f"{url}/mcp"
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as http:  # keeps cookies
        phone_auth = register_phone(http, phone_key, PHONE_NAME)
        registration = {
            "client_name": "relaybox bench",
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
        }
        client_id = expect(http.post("/oauth/register", json=registration), 201)["client_id"]
        authorize = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "scope": " ".join(SCOPES),
            "resource": resource,
        }
        page = http.get("/oauth/authorize", params=authorize)
        if page.status_code != 200:
            raise BenchError(f"GET /oauth/authorize: {page.status_code} {page.text[:200]}")
        session_id, code, csrf = consent_page(page.text)
        confirm = pair_confirm_request(code, phone_key) | {"intent": "connector"}
        expect(http.post("/v1/pair/confirm", json=confirm, headers=phone_auth), 200)
        expect(http.get(f"/oauth/consent/{session_id}/status", params={"wait": "0"}), 200)
        decision = http.post(
            f"/oauth/consent/{session_id}/decision",
            data={"csrf_token": csrf, "decision": "allow", "scope": SCOPES},
        )
        if decision.status_code != 302:
            raise BenchError(f"the consent decision: {decision.status_code} {decision.text[:200]}")
        redirect = parse_qs(urlsplit(decision.headers["location"]).query)
        if redirect.get("state") != [state] or "code" not in redirect:
            raise BenchError(f"the consent redirect: {decision.headers['location'][:200]}")
        exchange = {
            "grant_type": "authorization_code",
            "code": redirect["code"][0],
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": resource,
        }
        token: str = expect(http.post("/oauth/token", data=exchange), 200)["access_token"]
    return token


# -- targets and the correctness check with the SDK's client ------------------------------------


@dataclass(frozen=True)
class Target:
    label: str
    server: Server
    token: str | None  # relaybox's access token; the bare tool takes none

    @property
    def auth(self) -> dict[str, str]:
        return bearer(self.token) if self.token else {}


@dataclass(frozen=True)
class SdkSample:
    calls_per_s: float
    cpu_ms_per_call: float  # in this process


async def sdk_check(target: Target, era: str, calls: int) -> SdkSample:
    """``tools/list`` shows the tool and a call returns the phone, through the SDK's client; then
    ``calls`` sequential calls to measure the client's own cost."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    where = f"{target.label} ({era})"
    timeout = httpx2.Timeout(REQUEST_TIMEOUT_S)
    async with httpx2.AsyncClient(headers=target.auth, timeout=timeout) as http:
        transport = streamable_http_client(f"{target.server.url}/mcp", http_client=http)
        async with Client(transport, mode=era) as client:
            tools = await client.list_tools()
            if TOOL not in [tool.name for tool in tools.tools]:
                raise BenchError(f"{where}: tools/list has no {TOOL}")
            result = await client.call_tool(TOOL, {})
            devices = (result.structured_content or {}).get("devices", [])
            if result.is_error or [device["name"] for device in devices] != [PHONE_NAME]:
                raise BenchError(f"{where}: {TOOL} answered {result}")
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(calls):
                if (await client.call_tool(TOOL, {})).is_error:
                    raise BenchError(f"{where}: a {TOOL} call failed")
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return SdkSample(calls / wall, cpu * 1000 / calls)


# -- the minimal client -------------------------------------------------------------------------


def http_request(target: Target, body: dict[str, Any], headers: dict[str, str]) -> bytes:
    """One ``POST /mcp`` as raw HTTP/1.1 bytes."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: {target.server.url.removeprefix('http://')}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        *(f"{name}: {value}" for name, value in {**target.auth, **headers}.items()),
        f"Content-Length: {len(payload)}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def call_request(target: Target, era: str, session_id: str | None) -> bytes:
    """The prepared ``tools/call``: on legacy with the session, on 2026 with the routing headers
    and the per-request ``_meta`` (protocol version, client capabilities and info)."""
    params: dict[str, Any] = {"name": TOOL, "arguments": {}}
    if era == LEGACY:
        headers = {"MCP-Protocol-Version": LEGACY_VERSION, "Mcp-Session-Id": session_id or ""}
    else:
        headers = {"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": TOOL}
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
        }
    return http_request(
        target, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers
    )


def is_tool_result(status: int, body: bytes) -> bool:
    """A 200 whose JSON-RPC message is a tool result that is not an error (compact JSON)."""
    return status == 200 and b'"result":' in body and b'"isError":true' not in body


async def exchange(target: Target, request: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    reader, writer = await asyncio.open_connection(*target.server.address)
    try:
        writer.write(request)
        return await asyncio.wait_for(read_response(reader), REQUEST_TIMEOUT_S)
    finally:
        writer.close()


async def legacy_session(target: Target) -> str:
    """``initialize`` and ``notifications/initialized``: the session id to reuse."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
    }
    status, headers, body = await exchange(target, http_request(target, initialize, {}))
    session_id = headers.get(b"mcp-session-id", b"").decode()
    if status != 200 or not session_id or b'"result":' not in body:
        raise BenchError(f"{target.label}: initialize answered {status} {body[:200]!r}")
    ready = {"MCP-Protocol-Version": LEGACY_VERSION, "Mcp-Session-Id": session_id}
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, body = await exchange(target, http_request(target, notification, ready))
    if status != 202:
        raise BenchError(f"{target.label}: notifications/initialized answered {status} {body[:200]!r}")
    return session_id


async def prepare_calls(target: Target, era: str, slots: int) -> list[bytes]:
    """One prepared call per connection slot (legacy: each its own session), checked once."""
    if era == LEGACY:
        sessions = [await legacy_session(target) for _ in range(slots)]
        calls = [call_request(target, era, session) for session in sessions]
    else:
        calls = [call_request(target, era, None)] * slots
    status, _, body = await exchange(target, calls[0])
    if not is_tool_result(status, body) or PHONE_NAME.encode() not in body:
        raise BenchError(f"{target.label} ({era}): the raw call answered {status} {body[:300]!r}")
    return calls


# -- the load generator -------------------------------------------------------------------------


def tool_outcome(status: int, body: bytes) -> str:
    return "ok" if is_tool_result(status, body) else f"{status}" + (" tool error" if status == 200 else "")


async def load_round(target: Target, era: str, calls: list[bytes], seconds: float) -> Round:
    plan = [(target.server, request) for request in calls]
    return await run_round(Round(target.label, seconds, variant=era), [target.server], plan, tool_outcome)


@dataclass
class Measured:
    rounds: list[Round]
    sdk: dict[tuple[str, str], SdkSample]


async def measure(targets: list[Target], args: argparse.Namespace) -> Measured:
    """SDK checks, prepared calls, a warm-up of each (era, target), then the interleaved rounds."""
    sdk = {}
    for era in ERAS:
        for target in targets:
            sdk[target.label, era] = await sdk_check(target, era, args.sdk_calls)
    print("the SDK client checked both targets on both eras", flush=True)
    prepared = {
        (target.label, era): await prepare_calls(target, era, args.concurrency)
        for era in ERAS
        for target in targets
    }
    plan = [(era, target) for era in ERAS for target in targets]
    for era, target in plan:
        await load_round(target, era, prepared[target.label, era], args.warmup)
    rounds: list[Round] = []
    for number in range(1, args.rounds + 1):
        for era, target in plan:
            done = await load_round(target, era, prepared[target.label, era], args.duration)
            rounds.append(done)
            print(
                f"    round {number} {era:<10} {target.label:<9} {done.throughput:>8,.0f} calls/s", flush=True
            )
    return Measured(rounds, sdk)


# -- the report ---------------------------------------------------------------------------------


def print_era(bare: Summary, relay: Summary, sdk: dict[tuple[str, str], SdkSample]) -> bool:
    """The era's table and goal line; True when the goal was met and every call succeeded."""
    print(f"\n{bare.variant}:")
    print(
        f"  {'target':<9} {'calls/s':>8} {'per round':>20} {'p50 ms':>7} {'p99 ms':>7} {'failed':>6} "
        f"{'CPU ms/call':>11} {'server CPU':>10} {'load CPU':>8} {'raw client':>10} {'SDK client':>10}"
    )
    for s in (bare, relay):
        rounds = " ".join(f"{t:.0f}" for t in s.throughputs)
        client = sdk[s.label, s.variant].cpu_ms_per_call
        print(
            f"  {s.label:<9} {s.median:>8,.0f} {rounds:>20} {s.p50_ms:>7.1f} {s.p99_ms:>7.1f} "
            f"{s.failures:>6} {s.cpu_per_request_ms:>11.2f} {s.server_cpu:>10.0%} {s.bench_cpu:>8.0%} "
            f"{s.bench_cpu_per_request_ms:>8.2f}ms {client:>8.2f}ms"
        )
        for outcome, body in sorted(s.samples.items()):
            print(f"    {s.label}: {s.outcomes[outcome]} x {outcome}, e.g. {body}")
    ratio = relay.median / bare.median
    met = ratio >= GOAL_RATIO
    print(
        f"  goal ({bare.variant}): relaybox >= {GOAL_RATIO}x the bare tool's calls/s (medians): "
        f"{'met' if met else 'MISSED'} ({ratio:.2f}x; latency p50 {relay.p50_ms / bare.p50_ms:.1f}x, "
        f"p99 {relay.p99_ms / bare.p99_ms:.1f}x the bare tool's)"
    )
    return met and relay.failures == 0 and bare.failures == 0


def report(measured: Measured, args: argparse.Namespace) -> bool:
    print(
        f"\n{args.rounds} rounds x {args.duration:g} s per era and target, {args.concurrency} keep-alive "
        "connections, access log on for both; client columns: CPU per call in this process"
    )
    sdk_rates = ", ".join(f"{label} {era} {s.calls_per_s:.0f}/s" for (label, era), s in measured.sdk.items())
    print(f"SDK client, {args.sdk_calls} sequential calls each: {sdk_rates}")
    results = [
        print_era(
            summarize("bare", measured.rounds, era), summarize("relaybox", measured.rounds, era), measured.sdk
        )
        for era in ERAS
    ]
    return all(results)


# -- the run ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per round, era and target")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every era and target")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load per era and target first")
    parser.add_argument("--concurrency", type=int, default=32, help="keep-alive connections per round")
    parser.add_argument("--sdk-calls", type=int, default=200, help="sequential SDK-client calls per check")
    parser.add_argument("--deadline", type=float, default=180.0, help="seconds for the whole run")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (data and server logs)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is missed or a call fails")
    parser.add_argument("--serve-baseline", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if (
        min(args.rounds, args.concurrency, args.sdk_calls) < 1
        or min(args.duration, args.warmup, args.deadline) <= 0
    ):
        parser.error("rounds, concurrency, sdk-calls, duration, warmup and deadline must be positive")
    return args


def run(args: argparse.Namespace, work_dir: Path, servers: list[Server]) -> bool:
    """Start both servers, obtain the token, measure, report. ``servers`` collects what was
    started, for the caller to stop whatever happens."""
    deadline = time.monotonic() + args.deadline
    commands = {
        "relaybox": relaybox_command("data"),
        "bare": [sys.executable, str(Path(__file__).resolve()), "--serve-baseline"],
    }
    for name, command in commands.items():
        timeout = min(STARTUP_TIMEOUT_S, deadline - time.monotonic())
        servers.append(start_server(name, command, work_dir, timeout))
    relay, bare = servers
    targets = [Target("bare", bare, None), Target("relaybox", relay, connector_token(relay.url))]
    print(f"relaybox pid {relay.process.pid} at {relay.url}, bare pid {bare.process.pid} at {bare.url}")
    print(f"load average before the rounds: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    measured = run_loop(asyncio.wait_for(measure(targets, args), deadline - time.monotonic()))
    return report(measured, args)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_baseline:
        return serve_baseline()
    stop_on_sigterm("the servers")
    work_dir = Path(tempfile.mkdtemp(prefix="relaybox-mcp-bench-"))
    servers: list[Server] = []
    outcome = 2  # the run failed unless it gets as far as the report
    try:
        met = run(args, work_dir, servers)
        outcome = 1 if args.strict and not met else 0
    except TimeoutError:
        print(f"FAILED: the deadline of {args.deadline:.0f} s was reached")
    except (BenchError, httpx.HTTPError, httpx2.HTTPError, ExceptionGroup) as exc:
        print(f"FAILED: {describe(exc)}")
    finally:
        stop_servers(servers)
        remove_work_dir(work_dir, args.keep)
    return outcome


if __name__ == "__main__":
    sys.exit(main())
