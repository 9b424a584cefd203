"""The MCP client side of ``mcp_calls.py``: an access token through relaybox's OAuth flow, the SDK
client's correctness check of a target, and the prepared raw ``tools/call`` requests of both protocol
eras with the check every answer gets (a 200 whose tool result lists exactly the bench's phone).

The scripts import it as ``mcp_client`` (``bench/`` is on ``sys.path``); it is not a benchmark.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import httpx2

import checks
from baselines import PHONE_NAME
from core.domain.keys import generate_keypair
from core.principal import CONNECTOR_SCOPES
from devices import pair_confirm_request, phone_request
from harness import BenchError, Server
from http1 import REQUEST_TIMEOUT_S, exchange_once, http_request

LEGACY = "legacy"
MODERN = "2026-07-28"
ERAS = (LEGACY, MODERN)
LEGACY_VERSION = "2025-11-25"  # what the legacy handshake asks for
TOOL = "list_devices"
SCOPES = list(CONNECTOR_SCOPES)  # every scope a connector grant may hold
REDIRECT_URI = "http://127.0.0.1:3030/callback"  # never listened on: the code is read from the redirect
CLIENT_INFO = {"name": "relaybox-bench", "version": "1.0.0"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@dataclass(frozen=True)
class Target:
    label: str
    server: Server
    token: str | None  # relaybox's access token; the bare tool takes none

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


def expect(response: httpx.Response, status: int, shape: checks.Shape) -> dict[str, Any]:
    request = response.request
    if response.status_code != status:
        raise BenchError(f"{request.method} {request.url.path}: {response.status_code} {response.text[:200]}")
    return checks.check_shape(f"{request.method} {request.url.path}", response.json(), shape)


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
        phone = expect(http.post("/v1/devices", json=phone_request(phone_key, PHONE_NAME)), 201, checks.PHONE)
        phone_auth = {"Authorization": f"Bearer {phone['device_token']}"}
        registration = {
            "client_name": "relaybox bench",
            "redirect_uris": [REDIRECT_URI],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
        }
        client_id = expect(http.post("/oauth/register", json=registration), 201, {"client_id": str})[
            "client_id"
        ]
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
        expect(http.post("/v1/pair/confirm", json=confirm, headers=phone_auth), 200, {"intent": str})
        expect(http.get(f"/oauth/consent/{session_id}/status", params={"wait": "0"}), 200, {})
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
        token: str = expect(http.post("/oauth/token", data=exchange), 200, {"access_token": str})[
            "access_token"
        ]
    return token


@dataclass(frozen=True)
class SdkSample:
    calls_per_s: float
    cpu_ms_per_call: float  # in this process


async def sdk_check(target: Target, era: str, calls: int) -> SdkSample:
    """``tools/list`` shows the tool and every call returns the phone, through the SDK's client;
    ``calls`` sequential calls also measure the client's own cost."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    where = f"{target.label} ({era})"
    async with httpx2.AsyncClient(headers=target.auth, timeout=httpx2.Timeout(REQUEST_TIMEOUT_S)) as http:
        transport = streamable_http_client(f"{target.server.url}/mcp", http_client=http)
        async with Client(transport, mode=era) as client:
            tools = await client.list_tools()
            if TOOL not in [tool.name for tool in tools.tools]:
                raise BenchError(f"{where}: tools/list has no {TOOL}")
            cpu, wall = time.process_time(), time.perf_counter()
            for _ in range(calls):
                result = await client.call_tool(TOOL, {})
                devices = (result.structured_content or {}).get("devices", [])
                if result.is_error or [device["name"] for device in devices] != [PHONE_NAME]:
                    raise BenchError(f"{where}: {TOOL} answered {result}")
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return SdkSample(calls / wall, cpu * 1000 / calls)


def mcp_request(target: Target, message: dict[str, Any], headers: dict[str, str]) -> bytes:
    host = target.server.url.removeprefix("http://")
    return http_request("POST", "/mcp", host, target.token, message, ACCEPT | headers)


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
    return mcp_request(target, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers)


def json_rpc(body: bytes) -> Any:
    """The JSON-RPC message of an answer: the body itself, or the data of its SSE event (legacy)."""
    if body.startswith(b"{"):
        return json.loads(body)
    for line in body.splitlines():
        if line.startswith(b"data:"):
            return json.loads(line[5:])
    raise ValueError("no JSON-RPC message")


def lists_the_phone(status: int, body: bytes) -> str:
    """For the load rounds: "ok" for a 200 tool result (not an error) listing exactly the phone."""
    if status != 200:
        return str(status)
    try:
        result = json_rpc(body).get("result") or {}
    except (ValueError, AttributeError):
        return "200 not JSON-RPC"
    devices = (result.get("structuredContent") or {}).get("devices") or []
    if result.get("isError") or [device.get("name") for device in devices] != [PHONE_NAME]:
        return "200 wrong tool result"
    return "ok"


async def legacy_session(target: Target) -> str:
    """``initialize`` and ``notifications/initialized``: the session id to reuse."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": CLIENT_INFO},
    }
    status, headers, body = await exchange_once(target.server.address, mcp_request(target, initialize, {}))
    session_id = headers.get(b"mcp-session-id", b"").decode()
    if status != 200 or not session_id or "result" not in json_rpc(body):
        raise BenchError(f"{target.label}: initialize answered {status} {body[:200]!r}")
    ready = {"MCP-Protocol-Version": LEGACY_VERSION, "Mcp-Session-Id": session_id}
    notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    status, _, body = await exchange_once(target.server.address, mcp_request(target, notification, ready))
    if status != 202:
        raise BenchError(f"{target.label}: notifications/initialized answered {status} {body[:200]!r}")
    return session_id


async def prepare_calls(target: Target, era: str, slots: int) -> list[bytes]:
    """One prepared call per connection slot (legacy: each its own session), each checked once."""
    if era == LEGACY:
        calls = [call_request(target, era, await legacy_session(target)) for _ in range(slots)]
    else:
        calls = [call_request(target, era, None)] * slots
    for call in calls:
        status, _, body = await exchange_once(target.server.address, call)
        if lists_the_phone(status, body) != "ok":
            raise BenchError(f"{target.label} ({era}): the raw call answered {status} {body[:300]!r}")
    return calls
