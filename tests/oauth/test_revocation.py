"""RFC 7009 revocation: an access token ends its own pair, a refresh token its whole grant."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.testclient import TestClient

from core.principal import Principal
from core.runtime.core import Core
from oauth.tokens import check_access_token
from tests.helpers import register_phone
from tests.oauth.flow import connect, refresh, register_client


def revoke(client: TestClient, **fields: str) -> Any:
    return client.post(
        "/oauth/revoke",
        content=urlencode(fields),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )


def alive(core: Core, token: str) -> bool:
    return core.run_sync(check_access_token, Principal.system(), token=token) is not None


def test_revoking_an_access_token_ends_it_and_its_refresh_token(client: TestClient, core: Core) -> None:
    request, tokens = connect(client, register_phone(client))
    response = revoke(client, token=tokens["access_token"], client_id=request.client_id)
    assert response.status_code == 200 and response.json() == {}
    assert not alive(core, tokens["access_token"])
    assert refresh(client, request.client_id, tokens["refresh_token"]).json()["error"] == "invalid_grant"


def test_revoking_a_refresh_token_ends_the_whole_grant(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    request, first = connect(client, phone)
    second = refresh(client, request.client_id, first["refresh_token"]).json()
    response = revoke(
        client, token=second["refresh_token"], token_type_hint="refresh_token", client_id=request.client_id
    )
    assert response.status_code == 200
    assert not alive(core, first["access_token"]) and not alive(core, second["access_token"])
    assert client.get("/v1/connector-grants", headers=phone.auth).json() == {"grants": []}


def test_an_unknown_token_is_answered_200_as_rfc_7009_says(client: TestClient) -> None:
    client_id = register_client(client)["client_id"]
    assert revoke(client, token="rba_unknown", client_id=client_id).status_code == 200


def test_a_client_cannot_revoke_another_clients_token(client: TestClient, core: Core) -> None:
    _, tokens = connect(client, register_phone(client))
    other = register_client(client)["client_id"]
    response = revoke(client, token=tokens["access_token"], client_id=other)
    assert response.status_code == 400 and response.json()["error"] == "invalid_grant"
    assert alive(core, tokens["access_token"])


def test_revocation_errors_are_in_rfc_6749_shape(client: TestClient) -> None:
    client_id = register_client(client)["client_id"]
    missing = revoke(client, client_id=client_id)
    assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"
    hint = revoke(client, token="rba_x", token_type_hint="id_token", client_id=client_id)
    assert hint.json()["error"] == "unsupported_token_type"
    unknown_client = revoke(client, token="rba_x", client_id="cli_unknown")
    assert unknown_client.status_code == 400 and unknown_client.json()["error"] == "invalid_client"
    malformed = client.post("/oauth/revoke", content=b"\xff", headers={"Content-Type": "text/plain"})
    assert malformed.status_code == 400 and malformed.json()["error"] == "invalid_request"
