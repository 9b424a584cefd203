"""/mcp from a browser on another origin (connector.cors): preflights answered for the origins the
transport admits, every response readable by them (session id, WWW-Authenticate exposed), and a
server on loopback admitting every loopback name, as host and as origin."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
from starlette.testclient import TestClient

from app.assembly import create_app
from connector.mcp_mount import allowed_hosts, mcp_origins
from core.bootstrap import build_core
from core.settings import explicit_settings
from tests.connector.test_mcp_token_cache import modern_call
from tests.helpers import register_phone
from tests.oauth.flow import connect

INSPECTOR = "http://localhost:6274"  # the MCP Inspector's page, beside a server on 127.0.0.1


def preflight(client: TestClient, origin: str) -> httpx2.Response:
    return client.options(
        "/mcp",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        },
    )


def test_a_preflight_from_a_loopback_origin_is_answered_for_a_loopback_server(client: TestClient) -> None:
    answer = preflight(client, INSPECTOR)
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == INSPECTOR
    assert {"POST", "GET", "DELETE"} <= set(answer.headers["access-control-allow-methods"].split(", "))
    allowed = answer.headers["access-control-allow-headers"].lower()
    assert all(name in allowed for name in ("authorization", "mcp-session-id", "mcp-protocol-version"))
    assert "access-control-allow-credentials" not in answer.headers


def test_a_preflight_from_another_origin_is_refused(client: TestClient) -> None:
    answer = preflight(client, "https://evil.example")
    assert answer.status_code == 403 and answer.json()["error"]["code"] == "forbidden"
    assert "access-control-allow-origin" not in answer.headers


def test_responses_to_an_allowed_origin_expose_what_an_mcp_client_reads(client: TestClient) -> None:
    refused = modern_call(client, "rba_not-a-token", {"Origin": INSPECTOR})
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == INSPECTOR
    exposed = {name.strip().lower() for name in refused.headers["access-control-expose-headers"].split(",")}
    assert {"www-authenticate", "mcp-session-id", "mcp-protocol-version"} <= exposed

    phone = register_phone(client)
    _, tokens = connect(client, phone)
    served = modern_call(client, tokens["access_token"], {"Origin": INSPECTOR})
    assert served.status_code == 200 and served.headers["access-control-allow-origin"] == INSPECTOR
    other = modern_call(client, tokens["access_token"], {"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers


def test_a_loopback_server_admits_every_loopback_name_as_host_and_origin(client: TestClient) -> None:
    phone = register_phone(client)
    _, tokens = connect(client, phone)
    for host in ("localhost:8787", "127.0.0.1:8787", "[::1]:8787"):
        for origin in ("http://localhost:5173", "http://127.0.0.1:6274", "http://[::1]:3000"):
            answer = modern_call(client, tokens["access_token"], {"Host": host, "Origin": origin})
            assert answer.status_code == 200, (host, origin, answer.text)


def test_a_public_server_admits_only_its_own_and_configured_origins(tmp_path: Path) -> None:
    settings = explicit_settings(
        data_dir=tmp_path / "data",
        public_url="https://relay.example",
        mcp_allowed_origins=["https://app.example"],
    )
    assert "localhost:*" not in allowed_hosts(settings.base_url, [])
    assert mcp_origins(settings) == ["https://app.example", "https://relay.example"]
    with TestClient(create_app(core=build_core(settings))) as client:
        assert preflight(client, "https://app.example").status_code == 204
        assert preflight(client, INSPECTOR).status_code == 403


@pytest.mark.parametrize("origin", ["http://localhost:6274x", "http://localhost.evil.example:80"])
def test_an_origin_that_only_looks_like_a_loopback_one_is_refused(client: TestClient, origin: str) -> None:
    assert preflight(client, origin).status_code == 403
