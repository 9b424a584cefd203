"""Discovery: RFC 8414 and RFC 9728 documents, and the issuer checked at start-up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from app.assembly import create_app
from core.bootstrap import build_core
from core.settings import explicit_settings
from oauth.metadata import IssuerError, issuer_of
from tests.oauth.flow import ALL_SCOPES, ISSUER, RESOURCE


def test_the_authorization_server_metadata_names_the_issuer_and_what_it_supports(client: TestClient) -> None:
    response = client.get("/.well-known/oauth-authorization-server")
    assert response.status_code == 200
    document = response.json()
    assert document["issuer"] == ISSUER
    assert document["authorization_endpoint"] == f"{ISSUER}/oauth/authorize"
    assert document["token_endpoint"] == f"{ISSUER}/oauth/token"
    assert document["registration_endpoint"] == f"{ISSUER}/oauth/register"
    assert document["revocation_endpoint"] == f"{ISSUER}/oauth/revoke"
    assert document["code_challenge_methods_supported"] == ["S256"]
    assert document["authorization_response_iss_parameter_supported"] is True
    assert document["client_id_metadata_document_supported"] is True
    assert document["scopes_supported"] == ALL_SCOPES
    assert document["response_types_supported"] == ["code"]
    assert document["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert document["token_endpoint_auth_methods_supported"] == ["none"]
    assert "offline_access" not in document["scopes_supported"]


@pytest.mark.parametrize(
    "path", ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
)
def test_the_protected_resource_metadata_names_mcp_and_the_identical_issuer_string(
    client: TestClient, path: str
) -> None:
    document = client.get(path).json()
    issuer = client.get("/.well-known/oauth-authorization-server").json()["issuer"]
    assert document["resource"] == RESOURCE
    assert document["authorization_servers"] == [issuer]
    assert document["scopes_supported"] == ALL_SCOPES
    assert document["bearer_methods_supported"] == ["header"]


def test_discovery_documents_can_be_read_cross_origin(client: TestClient) -> None:
    preflight = client.options("/.well-known/oauth-authorization-server")
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    document = client.get("/.well-known/oauth-protected-resource/mcp", headers={"Origin": "http://x.test"})
    assert document.headers["access-control-allow-origin"] == "*"


def test_an_unknown_well_known_document_is_a_plain_404(client: TestClient) -> None:
    response = client.get("/.well-known/openid-configuration")
    assert response.status_code == 404
    assert response.content == b""


@pytest.mark.parametrize(
    "values",
    [
        {"public_url": "http://relay.example"},
        {"host": "0.0.0.0"},  # noqa: S104  (the point: not loopback)
        {"public_url": "https://relay.example/relaybox"},
        {"public_url": "https://relay.example?x=1"},
        {"public_url": "ftp://relay.example"},
    ],
    ids=["http-public-host", "http-any-address", "with-path", "with-query", "not-http"],
)
def test_an_unusable_issuer_stops_the_app_at_start_up(tmp_path: Path, values: dict[str, Any]) -> None:
    settings = explicit_settings(data_dir=tmp_path, **values)
    with pytest.raises(IssuerError, match=r"public URL|issuer"):
        issuer_of(settings)
    core = build_core(settings)
    try:
        with pytest.raises(IssuerError):
            create_app(core=core)
    finally:
        core.engine.dispose()


@pytest.mark.parametrize(
    ("values", "issuer"),
    [
        ({"public_url": "https://relay.example/"}, "https://relay.example"),
        ({"public_url": "http://localhost:9000"}, "http://localhost:9000"),
        ({"host": "127.0.0.1", "port": 8123}, "http://127.0.0.1:8123"),
        ({"host": "::1", "port": 8123, "public_url": "http://[::1]:8123"}, "http://[::1]:8123"),
    ],
)
def test_https_or_loopback_http_is_the_issuer(tmp_path: Path, values: dict[str, Any], issuer: str) -> None:
    settings = explicit_settings(data_dir=tmp_path, **values)
    assert issuer_of(settings) == issuer
    core = build_core(settings)
    try:
        with TestClient(create_app(core=core)) as http:
            assert http.get("/.well-known/oauth-authorization-server").json()["issuer"] == issuer
            prm = http.get("/.well-known/oauth-protected-resource/mcp").json()
            assert prm["resource"] == f"{issuer}/mcp"
    finally:
        core.engine.dispose()
