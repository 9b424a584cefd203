"""Connector grants on the phone: listed (client, scopes, last use) by any device of the account,
revoked by the phone only; revoking kills every token of the grant at once."""

from __future__ import annotations

import time
from typing import Any

from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.services.maintenance import sweep_expired
from core.store.tables import ConnectorGrant
from oauth.tables import OAuthToken
from oauth.tokens import check_access_token, verify_access_token
from tests.helpers import FakeDevice, error_code, pair_computer, register_phone
from tests.oauth.flow import connect, refresh


def test_the_phone_lists_its_grants_with_client_scopes_and_last_use(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    request, tokens = connect(client, phone, scopes=["devices:read", "files:send"], client_name="ChatGPT")
    created = int(clock.now())
    listed = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"]
    assert listed == [
        {
            "id": listed[0]["id"],
            "client_id": request.client_id,
            "client_name": "ChatGPT",
            "scopes": ["devices:read", "files:send"],
            "created_at": created,
        }
    ]
    clock.advance(90)
    # Verified as the connector does, in the app's event loop; the use is written just after.
    assert client.portal is not None
    assert client.portal.call(verify_access_token, core, tokens["access_token"]) is not None
    deadline = time.monotonic() + 5
    while (last_used := first_grant(client, phone).get("last_used_at")) is None:
        assert time.monotonic() < deadline, "the grant's last use was never written"
        time.sleep(0.01)
    assert last_used == created + 90


def first_grant(client: TestClient, phone: FakeDevice) -> dict[str, Any]:
    grants: list[dict[str, Any]] = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"]
    return grants[0]


def test_any_device_of_the_account_lists_but_only_the_phone_revokes(client: TestClient) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    connect(client, phone)
    grant_id = client.get("/v1/connector-grants", headers=computer.auth).json()["grants"][0]["id"]
    refused = client.delete(f"/v1/connector-grants/{grant_id}", headers=computer.auth)
    assert refused.status_code == 403 and error_code(refused) == "not_a_phone"


def test_another_accounts_grant_is_not_found(client: TestClient) -> None:
    phone, stranger = register_phone(client), register_phone(client)
    connect(client, phone)
    grant_id = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"][0]["id"]
    response = client.delete(f"/v1/connector-grants/{grant_id}", headers=stranger.auth)
    assert response.status_code == 404 and error_code(response) == "not_found"
    assert client.delete("/v1/connector-grants/grt_nope", headers=phone.auth).status_code == 404
    assert client.delete("/v1/connector-grants/" + "x" * 100, headers=phone.auth).status_code == 404


def test_revoking_a_grant_kills_every_token_of_it_at_once(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    request, first = connect(client, phone)
    second = refresh(client, request.client_id, first["refresh_token"]).json()
    _, unrelated = connect(client, phone)
    verified = core.run_sync(check_access_token, Principal.system(), token=first["access_token"])
    assert verified is not None
    grant_id = verified.principal.grant_id
    response = client.delete(f"/v1/connector-grants/{grant_id}", headers=phone.auth)
    assert response.status_code == 200 and response.json()["revoked_at"] is not None
    for token in (first["access_token"], second["access_token"]):
        assert core.run_sync(check_access_token, Principal.system(), token=token) is None
    assert refresh(client, request.client_id, second["refresh_token"]).json()["error"] == "invalid_grant"
    assert core.run_sync(check_access_token, Principal.system(), token=unrelated["access_token"]) is not None
    remaining = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"]
    assert len(remaining) == 1 and remaining[0]["id"] != grant_id
    again = client.delete(f"/v1/connector-grants/{grant_id}", headers=phone.auth)
    assert again.status_code == 200  # idempotent


def test_revoked_grants_and_their_tokens_are_swept_after_the_retention(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    connect(client, phone)
    grant_id = client.get("/v1/connector-grants", headers=phone.auth).json()["grants"][0]["id"]
    client.delete(f"/v1/connector-grants/{grant_id}", headers=phone.auth)
    clock.advance(30 * 86_400)
    core.run_sync(sweep_expired, Principal.system())
    with Session(core.engine) as session:
        assert session.exec(select(ConnectorGrant)).all() == []
        assert session.exec(select(OAuthToken)).all() == []


def test_the_routes_need_a_device_credential(client: TestClient) -> None:
    assert client.get("/v1/connector-grants").status_code == 401
    assert error_code(client.delete("/v1/connector-grants/grt_x")) == "missing_token"
