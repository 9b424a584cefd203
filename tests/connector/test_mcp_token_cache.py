"""Verified access tokens are cached in process, in the core's one verified-credential cache: /mcp
verifies a token once while the cache keeps it, the gate keeps nothing of its own, and every way of
ending a token still ends it at once: the very next /mcp call with it is 401, even when the call
before was served from the cache."""

from __future__ import annotations

import functools
import time
from typing import Any, cast
from urllib.parse import urlsplit

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

import connector.auth_gate
import oauth.tokens
from connector.auth_gate import McpAuthGate
from core.clock import ManualClock
from core.credentials import DEFAULT_TTL_S, USE_GRANULARITY_S
from core.domain.secrets import digest
from core.runtime.core import Core
from tests.connector.test_mcp_auth import call
from tests.helpers import FakeDevice, register_phone
from tests.oauth.flow import Authorization, connect, refresh
from tests.oauth.test_revocation import revoke

MODERN = "2026-07-28"


def modern_call(client: TestClient, token: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    """A stateless (2026-07-28) ``list_devices`` call with ``token``."""
    sent = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
        "Host": urlsplit(cast(Starlette, client.app).state.core.settings.base_url).netloc,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "list_devices",
        **(headers or {}),
    }
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    body = call("list_devices")
    body["params"]["_meta"] = meta
    return client.post("/mcp", json=body, headers=sent)


def mcp_status(client: TestClient, token: str) -> int:
    """A stateless ``list_devices`` call's status; 200 only with the tool's result."""
    response = modern_call(client, token)
    if response.status_code == 200:
        assert '"devices"' in response.text and '"isError":true' not in response.text, response.text
    return response.status_code


def warmed(client: TestClient, core: Core) -> tuple[FakeDevice, Authorization, dict[str, Any]]:
    """A connected assistant whose access token has been verified and is now cached."""
    phone = register_phone(client)
    request, tokens = connect(client, phone, scopes=["devices:read"])
    assert mcp_status(client, tokens["access_token"]) == 200
    assert mcp_status(client, tokens["access_token"]) == 200  # from the cache
    assert cached(core, tokens["access_token"])
    return phone, request, tokens


def cached(core: Core, token: str) -> bool:
    return core.credentials.get(digest(token)) is not None


def counted(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[object]:
    """Count the calls of ``module.name`` (marks and all kept)."""
    calls: list[object] = []
    real = getattr(module, name)

    @functools.wraps(real)
    def counting(*args: Any, **kw: Any) -> Any:
        calls.append(args)
        return real(*args, **kw)

    monkeypatch.setattr(module, name, counting)
    return calls


def test_mcp_verifies_a_token_once_while_the_credential_cache_keeps_it(
    client: TestClient, core: Core, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, tokens = connect(client, register_phone(client), scopes=["devices:read"])
    token = tokens["access_token"]
    verifications = counted(monkeypatch, oauth.tokens, "check_access_token")
    made = counted(monkeypatch, connector.auth_gate, "grant_access_token")
    for _ in range(3):
        assert mcp_status(client, token) == 200
    assert len(verifications) == len(made) == 1  # the SDK's AccessToken too is made once
    assert digest(token) in core.credentials._entries  # the phone's credential is there too
    assert all(token not in key for key in core.credentials._entries)
    clock.advance(DEFAULT_TTL_S)  # the entry's lifetime is over: verified (and made) again, once
    for _ in range(2):
        assert mcp_status(client, token) == 200
    assert len(verifications) == len(made) == 2


def test_the_gate_keeps_no_token_of_its_own(client: TestClient) -> None:
    _, tokens = connect(client, register_phone(client), scopes=["devices:read"])
    assert mcp_status(client, tokens["access_token"]) == 200
    gate = mcp_gate(client)
    assert [value for value in vars(gate).values() if isinstance(value, dict | list | set)] == []
    assert tokens["access_token"] not in repr(vars(gate))


def mcp_gate(client: TestClient) -> McpAuthGate:
    route = next(r for r in cast(Starlette, client.app).routes if getattr(r, "path", "") == "/mcp")
    found = getattr(route, "app", None)
    assert isinstance(found, McpAuthGate)
    return found


def test_a_cached_token_is_401_right_after_its_grant_is_revoked_on_the_phone(
    client: TestClient, core: Core
) -> None:
    phone, _, tokens = warmed(client, core)
    grant_id = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"][0]["id"]
    assert client.delete(f"/v1/connector-grants/{grant_id}", headers=phone.auth).status_code == 200
    assert mcp_status(client, tokens["access_token"]) == 401
    assert not cached(core, tokens["access_token"])


def test_a_cached_token_is_401_right_after_it_is_revoked_rfc_7009(client: TestClient, core: Core) -> None:
    _, request, tokens = warmed(client, core)
    _, other = connect(client, register_phone(client), scopes=["devices:read"])
    assert mcp_status(client, other["access_token"]) == 200
    assert revoke(client, token=tokens["access_token"], client_id=request.client_id).status_code == 200
    assert mcp_status(client, tokens["access_token"]) == 401
    assert mcp_status(client, other["access_token"]) == 200  # only that token was dropped


def test_a_cached_token_is_401_right_after_its_refresh_token_is_revoked(
    client: TestClient, core: Core
) -> None:
    _, request, tokens = warmed(client, core)
    response = revoke(
        client, token=tokens["refresh_token"], token_type_hint="refresh_token", client_id=request.client_id
    )
    assert response.status_code == 200
    assert mcp_status(client, tokens["access_token"]) == 401


def test_a_cached_token_is_401_right_after_a_refresh_token_replay_revokes_its_family(
    client: TestClient, core: Core
) -> None:
    _, request, first = warmed(client, core)
    second = refresh(client, request.client_id, first["refresh_token"]).json()
    assert mcp_status(client, second["access_token"]) == 200
    replay = refresh(client, request.client_id, first["refresh_token"])  # spent: the family ends
    assert replay.json()["error"] == "invalid_grant"
    assert mcp_status(client, first["access_token"]) == 401
    assert mcp_status(client, second["access_token"]) == 401


def test_a_cached_token_expires_with_the_token(client: TestClient, core: Core, clock: ManualClock) -> None:
    _, _, tokens = warmed(client, core)
    clock.advance(tokens["expires_in"])
    assert mcp_status(client, tokens["access_token"]) == 401


def test_the_last_use_of_a_grant_is_still_noted_when_its_token_comes_from_the_cache(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone, _, tokens = warmed(client, core)
    first = last_used(client, phone)
    assert first is not None
    clock.advance(USE_GRANULARITY_S - 1)  # read again (the entry expired), not yet worth noting
    assert mcp_status(client, tokens["access_token"]) == 200
    clock.advance(2)  # served from the cache: a minute after the last noted use
    assert DEFAULT_TTL_S > 2 and mcp_status(client, tokens["access_token"]) == 200
    deadline = time.monotonic() + 5
    while last_used(client, phone) == first:  # written just after the call, in the background
        assert time.monotonic() < deadline, "the grant's use was never noted"
        time.sleep(0.01)
    assert last_used(client, phone) == first + USE_GRANULARITY_S + 1


def last_used(client: TestClient, phone: FakeDevice) -> int | None:
    grants: list[dict[str, Any]] = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"]
    used: int | None = grants[0]["last_used_at"]
    return used
