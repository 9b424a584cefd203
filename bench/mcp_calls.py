"""MCP ``tools/call`` throughput: relaybox's ``list_devices`` behind OAuth against a bare tool.

    .venv/bin/python bench/mcp_calls.py [--duration 5] [--rounds 3] [--concurrency 32] [--access-log on|off]

Two servers run side by side, each a subprocess served the same way: one Python process, uvicorn
with its default ("auto": uvloop + httptools) loop and HTTP implementation, relaybox's logging
configuration with the access log on for both (``--access-log off``: off for both), the collector
tuned after start-up, as ``relaybox serve`` runs:

- relaybox: ``python -m app.cli serve --port 0`` with SQLite in a temporary data dir. A virtual
  phone registers over HTTP and completes the connector's OAuth flow (client registration, consent
  page, the phone confirms the page's code, Allow, code exchange with PKCE and ``resource``), so
  every call carries a real access token through the auth gate (verification, audience, scopes) and
  asks the core for the account's devices. Nothing is written during the rounds (but for the
  grant's last-use note now and then), so the device read is mostly answered from what the loop's
  reader kept (``@reusable``: SQLite's ``data_version`` is asked after this process's commits and
  every 10 ms, ``core/runtime/loop_reader.py``); traffic that writes between two calls pays for
  the read.
- bare: ``baselines.py mcp``: an ``MCPServer`` with one ``list_devices`` tool that returns a fixed
  listing of the same shape, mounted the same way (``streamable_http_app``, the same
  transport-security settings), without auth or storage, served with relaybox's server class and
  uvicorn configuration.

Both protocol eras are measured: legacy (``initialize`` once per connection slot, then its
``Mcp-Session-Id`` on every call; the answer comes as an SSE stream) and 2026-07-28 (sessionless:
``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` headers and the per-request ``_meta``).

First the SDK's own client (``mcp.Client`` over httpx2) checks each target and era: ``tools/list``
shows ``list_devices`` and each of ``--sdk-calls`` sequential calls returns the expected devices
(they also measure the SDK client's own cost). The load itself comes from a minimal HTTP/1.1 client on
asyncio streams (uvloop when installed): ``--concurrency`` keep-alive connections, each sending the
same prepared call back to back. The SDK client spends several times the CPU per call that the bare
server does (the table shows both), so it would measure itself, not the servers.

Rounds of ``--duration`` seconds interleave (per round: legacy bare, legacy relaybox, 2026 bare,
2026 relaybox) after a warm-up of each. Reported per era and target: the median round throughput,
p50/p99 latency over every call of every round, failed calls (every answer is checked: a 200 whose
JSON-RPC tool result is no error and lists exactly the bench's phone), the CPU per call of the
server and of the load generator, and the share of a core every other process used meanwhile.

Goals: relaybox answers at least 0.9x the calls per second of the bare tool on 2026-07-28 (issue
20) and 0.8x on legacy (medians; the ratio of CPU per call, bare ÷ relaybox, is shown beside). Exits 0
whatever is measured (``--strict``: 1 when a goal is missed or a call failed); 2 when the run
itself failed. The servers are always stopped (SIGTERM, then SIGKILL) and the temporary directory
removed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

import httpx
import httpx2

from harness import baseline_command, logging_settings, relaybox_command
from lifecycle import Run, add_common_arguments, goal, run_bench
from loadgen import Load, Round, Summary, measure_rounds, print_table, run_loop, summarize
from mcp_client import (
    ERAS,
    MODERN,
    SdkSample,
    Target,
    connector_token,
    lists_the_phone,
    prepare_calls,
    sdk_check,
)
from meter import total

GOALS = {"legacy": 0.8, MODERN: 0.9}  # relaybox's calls/s ÷ the bare tool's, per era


async def measure(
    targets: list[Target], args: argparse.Namespace
) -> tuple[list[Round], dict[str, SdkSample]]:
    """SDK checks, prepared calls, then the interleaved rounds (a warm-up of each era and target)."""
    sdk = {}
    for era in ERAS:
        for target in targets:
            sdk[f"{target.label} {era}"] = await sdk_check(target, era, args.sdk_calls)
    print("    the SDK client checked both targets on both eras", flush=True)
    loads = []
    for era in ERAS:
        for target in targets:
            calls = await prepare_calls(target, era, args.concurrency)
            plan = tuple((target.server, call) for call in calls)
            loads.append(Load(target.label, (target.server,), plan, lists_the_phone, variant=era))
    return await measure_rounds(loads, args.rounds, args.duration, args.warmup), sdk


def print_era(bare: Summary, relay: Summary) -> bool:
    """The era's table and goal line; True when the goal was met and every call succeeded."""
    print(f"\n{bare.variant}:")
    print_table([bare, relay], unit="call")
    ratio, target = relay.median / bare.median, GOALS[bare.variant]
    met = goal(
        f"{bare.variant}: relaybox >= {target}x the bare tool's calls/s (medians)",
        ratio >= target,
        f"{ratio:.2f}x: {relay.median:,.0f} ÷ {bare.median:,.0f}; CPU per call bare ÷ relaybox "
        f"{bare.cpu_ms / relay.cpu_ms:.2f}x ({bare.cpu_ms:.2f} ÷ {relay.cpu_ms:.2f} ms); "
        f"latency p50 {relay.p50_ms / bare.p50_ms:.1f}x, p99 {relay.p99_ms / bare.p99_ms:.1f}x",
    )
    return met and relay.failures == 0 and bare.failures == 0


def report(rounds: list[Round], sdk: dict[str, SdkSample], args: argparse.Namespace) -> bool:
    print(
        f"\n{args.rounds} rounds x {args.duration:g} s per era and target, {args.concurrency} keep-alive "
        f"connections, access log {args.access_log} for both"
    )
    sdk_rates = ", ".join(
        f"{name} {s.calls_per_s:.0f}/s {s.cpu_ms_per_call:.2f} ms CPU" for name, s in sdk.items()
    )
    print(f"SDK client, {args.sdk_calls} sequential calls each (CPU in this process): {sdk_rates}")
    met = [print_era(summarize("bare", rounds, era), summarize("relaybox", rounds, era)) for era in ERAS]
    print(f"during the rounds: {total(r.cpu for r in rounds).others_note()}")
    return all(met)


def benchmark(run: Run) -> bool:
    args = run.args
    logs = logging_settings(args.access_log == "on")
    bare = run.start("bare", baseline_command("mcp"), logs)
    relay = run.start("relaybox", relaybox_command("data"), logs)
    run.progress.start("the OAuth flow")
    targets = [Target("bare", bare, None), Target("relaybox", relay, connector_token(relay.url))]
    run.machine_note()
    run.progress.start("measuring")
    rounds, sdk = run_loop(asyncio.wait_for(measure(targets, args), run.remaining()))
    return report(rounds, sdk, args)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per round, era and target")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every era and target")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of load per era and target first")
    parser.add_argument("--concurrency", type=int, default=32, help="keep-alive connections per round")
    parser.add_argument("--sdk-calls", type=int, default=200, help="sequential SDK-client calls per check")
    parser.add_argument(
        "--access-log",
        choices=("on", "off"),
        default="on",
        help="uvicorn's access log, for both servers alike",
    )
    add_common_arguments(parser, deadline=180.0)
    args = parser.parse_args(argv)
    if (
        min(args.rounds, args.concurrency, args.sdk_calls) < 1
        or min(args.duration, args.warmup, args.deadline) <= 0
    ):
        parser.error("rounds, concurrency, sdk-calls, duration, warmup and deadline must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    errors = (httpx.HTTPError, httpx2.HTTPError)
    return run_bench(parse_args(argv), "relaybox-mcp-bench-", benchmark, errors=errors)


if __name__ == "__main__":
    sys.exit(main())
