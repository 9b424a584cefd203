"""RFC 7591 dynamic registration of public clients: no secret, checked redirect URIs, caps, a
per-IP limit, and expiry of clients that never complete a grant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.settings import Settings, explicit_settings
from oauth.maintenance import sweep_oauth
from oauth.tables import OAuthClient
from tests.helpers import register_phone
from tests.oauth.flow import REDIRECT_URI, Authorization, connect, register_client


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return explicit_settings(
        data_dir=tmp_path / "data", database_url=database_url, oauth_register_per_ip_per_minute=5
    )


def test_a_public_client_registers_and_gets_no_secret(client: TestClient, clock: ManualClock) -> None:
    body = register_client(client, client_name="Claude", application_type="native")
    assert body["client_id"].startswith("cli_")
    assert body["client_id_issued_at"] == int(clock.now())
    assert body["token_endpoint_auth_method"] == "none"
    assert body["redirect_uris"] == [REDIRECT_URI]
    assert body["client_name"] == "Claude"
    assert body["application_type"] == "native"
    assert "client_secret" not in body
    assert "client_secret_expires_at" not in body


@pytest.mark.parametrize(
    "asked", ["client_secret_post", "client_secret_basic", "private_key_jwt", "client_secret_jwt", "none"]
)
def test_any_auth_method_asked_for_is_registered_public_and_the_answer_says_so(
    client: TestClient, asked: str
) -> None:
    """RFC 7591 3.2.1: the server may replace requested values and answers with what it registered."""
    response = client.post(
        "/oauth/register", json={"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": asked}
    )
    assert response.status_code == 201, response.text
    assert response.json()["token_endpoint_auth_method"] == "none"
    assert "client_secret" not in response.json()


def test_omitted_fields_default_to_a_public_client_with_refresh_tokens(client: TestClient) -> None:
    response = client.post("/oauth/register", json={"redirect_uris": [REDIRECT_URI]})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none"
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["response_types"] == ["code"]
    assert "client_secret" not in body


@pytest.mark.parametrize(
    "uri",
    [
        "https://app.example/oauth/callback",
        "http://127.0.0.1:5555/callback",
        "http://localhost/callback",
        "http://[::1]:7000/cb",
        "cursor://anysphere.cursor-retrieval/oauth/user-abc/callback",
        "com.example.app://oauth/callback",
    ],
)
def test_https_loopback_http_and_private_use_schemes_with_a_host_are_accepted(
    client: TestClient, uri: str
) -> None:
    assert register_client(client, redirect_uris=[uri])["redirect_uris"] == [uri]


@pytest.mark.parametrize(
    "uri",
    [
        "http://app.example/callback",
        "http://192.168.1.20:8080/callback",
        "https://app.example/callback#fragment",
        "https://user@app.example/callback",
        "myapp:/callback",
        "javascript://app.example/%0aalert(1)",
        "data://app.example/x",
        "file:///etc/passwd",
        "https://app.example/call back",
        "/relative/callback",
        "",
        "https://app.example:99999/cb",
        42,
    ],
)
def test_other_redirect_uris_are_refused(client: TestClient, uri: Any) -> None:
    response = client.post("/oauth/register", json={"redirect_uris": [uri]})
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_redirect_uri"


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"redirect_uris": "https://app.example/cb"}, "invalid_redirect_uri"),
        ({"redirect_uris": [f"https://app.example/{n}" for n in range(9)]}, "invalid_redirect_uri"),
        ({"token_endpoint_auth_method": 7}, "invalid_client_metadata"),
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata"),
        ({"grant_types": ["authorization_code", "password"]}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
        ({"scope": "notifications:send admin"}, "invalid_client_metadata"),
        ({"client_name": "x" * 129}, "invalid_client_metadata"),
        ({"client_name": 7}, "invalid_client_metadata"),
        ({"client_name": "evil\u202ename"}, "invalid_client_metadata"),
        ({"client_uri": "x" * 3000}, "invalid_client_metadata"),
        ({"client_uri": "not a url"}, "invalid_client_metadata"),
        ({"contacts": ["a@example.org"] * 11}, "invalid_client_metadata"),
        ({"application_type": "browser"}, "invalid_client_metadata"),
    ],
)
def test_unsupported_or_oversized_metadata_is_refused(
    client: TestClient, metadata: dict[str, Any], error: str
) -> None:
    document = {"client_name": "x", "redirect_uris": [REDIRECT_URI], **metadata}
    response = client.post("/oauth/register", json=document)
    assert response.status_code == 400, response.text
    assert response.json()["error"] == error
    assert response.headers["cache-control"] == "no-store"


def test_offline_access_in_a_registration_scope_is_tolerated(client: TestClient) -> None:
    body = register_client(client, scope="notifications:send offline_access")
    assert body["scope"] == "notifications:send"


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b"{not json", "application/json", 400),
        (b"[1, 2]", "application/json", 400),
        (b'"text"', "application/json", 400),
        (b"\xff\xfe{}", "application/json", 400),
        (b"redirect_uris=x", "application/x-www-form-urlencoded", 400),
        (b"{}", "application/json", 400),
        (b'{"redirect_uris": ["' + b"a" * 20_000 + b'"]}', "application/json", 413),
    ],
    ids=["bad-json", "array", "string", "not-utf8", "form", "empty", "too-large"],
)
def test_a_malformed_registration_body_is_a_client_error_never_a_500(
    client: TestClient, content: bytes, content_type: str, status: int
) -> None:
    response = client.post("/oauth/register", content=content, headers={"Content-Type": content_type})
    assert response.status_code == status, response.text
    assert response.json()["error"] in ("invalid_client_metadata", "invalid_redirect_uri", "invalid_request")


def test_registration_is_limited_per_ip(client: TestClient, clock: ManualClock) -> None:
    for _ in range(5):
        register_client(client)
    limited = client.post("/oauth/register", json={"redirect_uris": [REDIRECT_URI]})
    assert limited.status_code == 429
    assert limited.json()["error"] == "temporarily_unavailable"
    assert int(limited.headers["retry-after"]) > 0
    clock.advance(61)
    register_client(client)


def test_registration_can_be_called_cross_origin(client: TestClient) -> None:
    preflight = client.options("/oauth/register")
    assert preflight.status_code == 204
    assert "Content-Type" in preflight.headers["access-control-allow-headers"]
    response = client.post("/oauth/register", json={"redirect_uris": [REDIRECT_URI]})
    assert response.headers["access-control-allow-origin"] == "*"


def test_a_client_that_never_completes_a_grant_expires_and_is_swept(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    unused = register_client(client)["client_id"]
    clock.advance(86_400)
    page = client.get(Authorization(unused).url())
    assert page.status_code == 400
    assert "invalid_client" in page.text and "registration expired" in page.text
    core.run_sync(sweep_oauth, Principal.system())  # (the app's own sweep may have come first)
    with Session(core.engine) as session:
        assert session.get(OAuthClient, unused) is None


def test_a_client_that_completed_a_grant_does_not_expire(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    request, _ = connect(client, phone)
    clock.advance(10 * 86_400)
    core.run_sync(sweep_oauth, Principal.system())
    with Session(core.engine) as session:
        row = session.get(OAuthClient, request.client_id)
        assert row is not None and row.expires_at is None
    assert client.get(request.url()).status_code == 200
