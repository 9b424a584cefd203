"""/mcp is served straight from the app (``app.front.RelayboxApp``), and still gets
what every route gets: a request id, metrics under its template, errors in the spec's shape, 405
for a method it does not take. A grant holding every tool's scope has its body capped by the
transport instead of read by the gate."""

from __future__ import annotations

from typing import cast

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from app.assembly import create_app
from connector.auth_gate import MAX_BODY_BYTES, McpAuthGate
from core.runtime.core import Core
from tests.connector.test_mcp_token_cache import modern_call
from tests.connector.test_operations import sample
from tests.helpers import register_phone
from tests.oauth.flow import connect


def gate(client: TestClient) -> McpAuthGate:
    mcp_route = next(r for r in cast(Starlette, client.app).routes if getattr(r, "path", "") == "/mcp")
    found = getattr(mcp_route, "app", None)
    assert isinstance(found, McpAuthGate)
    return found


def test_a_tool_call_has_a_request_id_and_is_counted_under_mcp(client: TestClient) -> None:
    phone = register_phone(client)
    _, tokens = connect(client, phone)
    answered = modern_call(client, tokens["access_token"], {"X-Request-ID": "assistant-7.a"})
    assert answered.status_code == 200 and '"devices"' in answered.text, answered.text
    assert answered.headers["x-request-id"] == "assistant-7.a"
    refused = modern_call(client, "rba_not-a-token")
    assert refused.status_code == 401 and len(refused.headers["x-request-id"]) == 32

    text = client.get("/metrics").text
    assert sample(text, "relaybox_requests_total", route="/mcp", method="POST", status="200") == 1
    assert sample(text, "relaybox_requests_total", route="/mcp", method="POST", status="401") == 1
    assert sample(text, "relaybox_request_seconds_count", route="/mcp", method="POST") == 2


def test_a_method_mcp_does_not_take_is_405_in_the_spec_shape(client: TestClient) -> None:
    response = client.put("/mcp", content=b"{}")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert set(response.headers["allow"].split(", ")) == {"GET", "HEAD", "POST", "DELETE"}
    assert "x-request-id" in response.headers


def test_an_unexpected_error_behind_the_gate_is_a_500_internal_error(core: Core) -> None:
    with TestClient(create_app(core=core), raise_server_exceptions=False) as client:
        phone = register_phone(client)
        _, tokens = connect(client, phone)

        async def broken_transport(scope: Scope, receive: Receive, send: Send) -> None:
            raise RuntimeError("the transport broke")

        gate(client).app = broken_transport
        response = modern_call(client, tokens["access_token"])
    assert response.status_code == 500
    assert response.json()["error"]["code"] == "internal_error"
    assert "broke" not in response.text
    assert len(response.headers["x-request-id"]) == 32


@pytest.mark.parametrize("scopes", [None, ["devices:read"]], ids=["every scope", "one scope"])
def test_an_oversized_body_is_413_whatever_the_grant_holds(
    client: TestClient, scopes: list[str] | None
) -> None:
    phone = register_phone(client)
    _, tokens = connect(client, phone, scopes=scopes)
    oversized = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + b"a" * MAX_BODY_BYTES + b'"}'
    response = client.post(
        "/mcp",
        content=oversized,
        headers={
            "Authorization": f"Bearer {tokens['access_token']}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "Host": "127.0.0.1",
        },
    )
    assert response.status_code == 413
