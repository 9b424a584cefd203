"""The /mcp gate over HTTP in process: audience-bound tokens, the challenge without an error code
when no token came (RFC 6750 §3.1), the step-up challenge for a tool whose scope the grant lacks,
and revocation taking effect at once."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import update
from sqlmodel import col
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.domain.secrets import digest
from core.runtime.core import Core
from oauth.tables import OAuthToken
from tests.helpers import register_phone
from tests.oauth.flow import ISSUER, RESOURCE, connect

ACCEPT = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def call(name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}}


@pytest.mark.parametrize("authorization", [None, "Basic dXNlcjpwYXNz", "Bearer", "Bearer "])
def test_a_request_without_a_bearer_token_is_challenged_without_an_error_code(
    client: TestClient, authorization: str | None
) -> None:
    headers = {**ACCEPT, **({"Authorization": authorization} if authorization is not None else {})}
    response = client.post("/mcp", json=call("list_devices"), headers=headers)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert f'resource_metadata="{ISSUER}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="' in challenge
    assert "error=" not in challenge and "error_description=" not in challenge
    assert response.json() == {
        "error": "missing_token",
        "message": "Send the token as 'Authorization: Bearer <token>'.",
    }


@pytest.mark.parametrize("token", ["nope", "rbx_" + "a" * 40])
def test_a_wrong_token_is_challenged_as_invalid_token(client: TestClient, token: str) -> None:
    response = client.post(
        "/mcp", json=call("list_devices"), headers={**ACCEPT, "Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith('Bearer error="invalid_token", ')
    assert "resource_metadata=" in challenge and 'scope="' in challenge
    assert response.json() == {"error": "invalid_token"}


def test_an_expired_token_is_challenged_as_invalid_token(client: TestClient, clock: ManualClock) -> None:
    phone = register_phone(client)
    _, tokens = connect(client, phone, scopes=["devices:read"])
    headers = {**ACCEPT, "Authorization": f"Bearer {tokens['access_token']}"}
    assert client.post("/mcp", json=call("list_devices"), headers=headers).status_code != 401
    clock.advance(tokens["expires_in"] + 1)
    response = client.post("/mcp", json=call("list_devices"), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token", ')


@pytest.mark.parametrize(
    ("audience", "taken"),
    [(RESOURCE + "/", True), ("https://other.example/mcp", False), ("not a url", False)],
    ids=["this resource spelled with a slash", "another resource", "no URL"],
)
def test_a_token_is_taken_only_for_this_resource(
    client: TestClient, core: Core, audience: str, taken: bool
) -> None:
    _, tokens = connect(client, register_phone(client), scopes=["devices:read"])
    with core.engine.begin() as connection:  # before its first use: nothing is cached yet
        connection.execute(
            update(OAuthToken)
            .where(col(OAuthToken.access_hash) == digest(tokens["access_token"]))
            .values(resource=audience)
        )
    headers = {**ACCEPT, "Authorization": f"Bearer {tokens['access_token']}"}
    for _ in range(2):  # the second from the verified-credential cache
        response = client.post("/mcp", json=call("list_devices"), headers=headers)
        assert (response.status_code != 401) is taken
        if not taken:
            assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token", ')


def test_a_tool_the_grant_has_no_scope_for_is_a_403_naming_the_scope(client: TestClient) -> None:
    phone = register_phone(client)
    _, tokens = connect(client, phone, scopes=["devices:read"])
    headers = {**ACCEPT, "Authorization": f"Bearer {tokens['access_token']}"}
    response = client.post("/mcp", json=call("find_my_phone"), headers=headers)
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="devices:read phone:control"' in challenge
    assert "resource_metadata=" in challenge


def test_a_batch_is_checked_call_by_call(client: TestClient) -> None:
    phone = register_phone(client)
    _, tokens = connect(client, phone, scopes=["devices:read"])
    headers = {**ACCEPT, "Authorization": f"Bearer {tokens['access_token']}"}
    response = client.post("/mcp", json=[call("list_devices"), call("send_file")], headers=headers)
    assert response.status_code == 403 and "files:send" in response.headers["www-authenticate"]


def test_an_unknown_or_revoked_token_is_401(client: TestClient) -> None:
    phone = register_phone(client)
    _, tokens = connect(client, phone, scopes=["devices:read"])
    headers = {**ACCEPT, "Authorization": f"Bearer {tokens['access_token']}"}
    assert (
        client.post(
            "/mcp", json=call("list_devices"), headers={**ACCEPT, "Authorization": "Bearer nope"}
        ).status_code
        == 401
    )
    assert client.post("/mcp", json=call("list_devices"), headers=headers).status_code != 401
    grants = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"]
    assert client.delete(f"/v1/connector-grants/{grants[0]['id']}", headers=phone.auth).status_code in (
        200,
        204,
    )
    assert client.post("/mcp", json=call("list_devices"), headers=headers).status_code == 401
