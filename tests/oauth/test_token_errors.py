"""Every error of the token endpoint (RFC 6749 §5.2, RFC 8707), in RFC 6749's JSON shape; a
malformed body is a 400 (or 413), never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from core.clock import ManualClock
from tests.helpers import register_phone
from tests.oauth.flow import (
    RESOURCE,
    Authorization,
    approve,
    connect,
    exchange,
    refresh,
    register_client,
    token_request,
)


@pytest.fixture
def pending(client: TestClient) -> tuple[Authorization, str]:
    """An authorization request and its unredeemed code."""
    phone = register_phone(client)
    request = Authorization(register_client(client)["client_id"])
    return request, approve(client, phone, request)["code"]


def assert_error(response: Any, error: str, status: int = 400) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == error
    assert set(body) <= {"error", "error_description", "error_uri"}
    assert response.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"code": None}, "invalid_request"),
        ({"code_verifier": None}, "invalid_request"),
        ({"code_verifier": "short"}, "invalid_request"),
        ({"client_id": None}, "invalid_client"),
        ({"client_id": "cli_unknown"}, "invalid_client"),
        ({"client_secret": "guessed"}, "invalid_client"),
        ({"code": "rbc_unknown"}, "invalid_grant"),
        ({"code_verifier": "v" * 60}, "invalid_grant"),
        ({"redirect_uri": "http://127.0.0.1:3030/other"}, "invalid_grant"),
        ({"redirect_uri": None}, "invalid_grant"),
        ({"resource": "https://other.example/mcp"}, "invalid_target"),
        ({"grant_type": "password"}, "unsupported_grant_type"),
        ({"grant_type": "client_credentials"}, "unsupported_grant_type"),
        ({"grant_type": None}, "invalid_request"),
    ],
    ids=[
        "no-code",
        "no-verifier",
        "malformed-verifier",
        "no-client",
        "unknown-client",
        "secret-from-a-public-client",
        "unknown-code",
        "wrong-verifier",
        "other-redirect",
        "missing-redirect",
        "other-resource",
        "password-grant",
        "client-credentials-grant",
        "no-grant-type",
    ],
)
def test_each_code_exchange_error_is_answered_in_rfc_6749_shape(
    client: TestClient, pending: tuple[Authorization, str], overrides: dict[str, str | None], error: str
) -> None:
    request, code = pending
    assert_error(exchange(client, request, code, **overrides), error)
    assert exchange(client, request, code).status_code == 200  # nothing was spent by the failures


def test_a_code_issued_to_another_client_is_invalid_grant(
    client: TestClient, pending: tuple[Authorization, str]
) -> None:
    request, code = pending
    thief = Authorization(register_client(client)["client_id"], pkce=request.pkce)
    assert_error(exchange(client, thief, code), "invalid_grant")


def test_a_repeated_parameter_is_invalid_request(
    client: TestClient, pending: tuple[Authorization, str]
) -> None:
    request, code = pending
    fields = [
        ("grant_type", "authorization_code"),
        ("code", code),
        ("code", code),
        ("client_id", request.client_id),
        ("code_verifier", request.pkce.verifier),
        ("redirect_uri", request.redirect_uri),
    ]
    assert_error(token_request(client, fields), "invalid_request")


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"refresh_token": None}, "invalid_request"),
        ({"refresh_token": "rbr_unknown"}, "invalid_grant"),
        ({"refresh_token": "not-even-ours"}, "invalid_grant"),
        ({"scope": "files:send admin"}, "invalid_scope"),
        ({"resource": "https://other.example/mcp"}, "invalid_target"),
        ({"client_id": "cli_unknown"}, "invalid_client"),
    ],
)
def test_each_refresh_error_is_answered_in_rfc_6749_shape(
    client: TestClient, overrides: dict[str, str | None], error: str
) -> None:
    request, tokens = connect(client, register_phone(client), scopes=["devices:read"])
    assert_error(refresh(client, request.client_id, tokens["refresh_token"], **overrides), error)


def test_a_refresh_token_used_by_another_client_is_invalid_grant(client: TestClient) -> None:
    _, tokens = connect(client, register_phone(client))
    other = register_client(client)["client_id"]
    assert_error(refresh(client, other, tokens["refresh_token"]), "invalid_grant")


def test_a_client_without_the_refresh_grant_is_unauthorized_to_refresh(client: TestClient) -> None:
    _, tokens = connect(client, register_phone(client))
    limited = register_client(client, grant_types=["authorization_code"])["client_id"]
    assert_error(refresh(client, limited, tokens["refresh_token"]), "unauthorized_client")


def test_an_expired_refresh_token_is_invalid_grant(client: TestClient, clock: ManualClock) -> None:
    request, tokens = connect(client, register_phone(client))
    clock.advance(30 * 86_400)
    assert_error(refresh(client, request.client_id, tokens["refresh_token"]), "invalid_grant")


@pytest.mark.parametrize(
    ("content", "content_type", "status"),
    [
        (b'{"grant_type": "authorization_code"}', "application/json", 400),
        (b"grant_type=authorization_code&code=%ff", "application/x-www-form-urlencoded", 400),
        (b"grant_type=\xff\xfe", "application/x-www-form-urlencoded", 400),
        (b"&".join(b"f%d=1" % n for n in range(100)), "application/x-www-form-urlencoded", 400),
        (b"code=" + b"a" * 20_000, "application/x-www-form-urlencoded", 413),
        (b"", "application/x-www-form-urlencoded", 400),
        (b"grant_type=authorization_code", "text/plain", 400),
    ],
    ids=["json", "bad-percent-encoding", "not-utf8", "too-many-fields", "too-large", "empty", "text"],
)
def test_a_malformed_token_request_is_a_client_error_never_a_500(
    client: TestClient, content: bytes, content_type: str, status: int
) -> None:
    response = client.post("/oauth/token", content=content, headers={"Content-Type": content_type})
    assert_error(response, "invalid_request", status)


@pytest.mark.parametrize("path", ["/oauth/token", "/oauth/revoke", "/oauth/register"])
def test_the_client_endpoints_take_only_post(client: TestClient, path: str) -> None:
    assert_error(client.get(path), "invalid_request", 405)


def test_the_token_endpoint_can_be_called_cross_origin(client: TestClient) -> None:
    preflight = client.options("/oauth/token")
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    response = token_request(client, {"grant_type": "password"})
    assert response.headers["access-control-allow-origin"] == "*"


def test_a_token_request_naming_the_resource_with_a_trailing_slash_is_accepted(
    client: TestClient, pending: tuple[Authorization, str]
) -> None:
    request, code = pending
    assert exchange(client, request, code, resource=RESOURCE + "/").status_code == 200
