"""The /mcp gate over HTTP in process: audience-bound tokens, the step-up challenge for a tool whose
scope the grant lacks, and revocation taking effect at once."""

from __future__ import annotations

from typing import Any

from starlette.testclient import TestClient

from tests.helpers import register_phone
from tests.oauth.flow import connect

ACCEPT = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


def call(name: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {}}}


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
