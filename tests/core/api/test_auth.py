"""The authentication layer: flat 401s, before the body is parsed."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.helpers import create_token, register_phone


def test_no_authorization_header_is_401_missing_token_naming_the_header(client: TestClient) -> None:
    response = client.get("/v1/tokens")
    assert response.status_code == 401
    body = response.json()
    assert body["error"] == "missing_token"
    assert "Authorization: Bearer" in body["message"]
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("header", ["Basic abc", "Bearer", "Bearer   ", "token"])
def test_a_header_that_is_not_a_bearer_token_is_missing_token(client: TestClient, header: str) -> None:
    response = client.get("/v1/tokens", headers={"Authorization": header})
    assert response.json() == {"error": "missing_token", "message": response.json()["message"]}


@pytest.mark.parametrize(
    "token",
    [
        "nonsense",
        "rbd_" + "A" * 43,
        "rfk_live_" + "A" * 32,
        "rfk_test_" + "A" * 32,
        "rfd_live_" + "A" * 32,
        "rfk_live_short",
    ],
)
def test_an_unknown_or_malformed_token_is_401_invalid_token_without_message(
    client: TestClient, token: str
) -> None:
    response = client.get("/v1/tokens", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.json() == {"error": "invalid_token"}


def test_auth_runs_before_the_body_is_parsed(client: TestClient) -> None:
    response = client.post(
        "/v1/tokens",
        content=b"{not json",
        headers={"content-type": "application/json", "Authorization": "Bearer x"},
    )
    assert response.status_code == 401
    assert response.json() == {"error": "invalid_token"}


def test_a_sender_token_cannot_use_device_routes(client: TestClient) -> None:
    phone = register_phone(client)
    token = create_token(client, phone)["token"]
    response = client.get("/v1/tokens", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 401
    assert response.json() == {"error": "invalid_token"}
