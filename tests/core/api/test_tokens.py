"""Sender tokens: minted on the phone, hash at rest, listed, revoked, announced to devices."""

from __future__ import annotations

import re

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.services.maintenance import sweep_expired
from core.store.tables import QueuedEnvelope, SenderToken
from tests.helpers import create_token, error_code, pair_computer, register_phone


def test_a_token_is_rfk_live_plus_32_alphanumerics_shown_once(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    created = create_token(client, phone, label="cron", scope="phone:control", priority_cap="high")
    token = str(created["token"])
    assert re.fullmatch(r"rfk_live_[A-Za-z0-9]{32}", token)
    assert (created["label"], created["scope"], created["priority_cap"]) == ("cron", "phone:control", "high")
    listed = client.get("/v1/tokens", headers=phone.auth).json()["tokens"]
    assert [t["id"] for t in listed] == [created["id"]]
    assert token not in str(listed)
    with Session(core.engine) as session:
        row = session.exec(select(SenderToken)).one()
        assert token not in row.token_hash and len(row.token_hash) == 64


def test_a_token_without_a_scope_omits_it_as_the_document_allows(client: TestClient) -> None:
    """Found by fuzzing: None is omitted from every response, but the document required scope."""
    phone = register_phone(client)
    created = create_token(client, phone)
    assert "scope" not in created
    listed = client.get("/v1/tokens", headers=phone.auth).json()["tokens"]
    assert "scope" not in listed[0]
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert (
        "scope" not in schemas["TokenOut"]["required"] and "scope" not in schemas["TokenCreated"]["required"]
    )


def test_files_send_can_never_be_held_by_a_sender_token(client: TestClient) -> None:
    phone = register_phone(client)
    response = client.post("/v1/tokens", json={"label": "x", "scope": "files:send"}, headers=phone.auth)
    assert response.status_code == 400 and error_code(response) == "invalid_scope"


def test_an_unknown_priority_cap_is_invalid_priority(client: TestClient) -> None:
    phone = register_phone(client)
    response = client.post("/v1/tokens", json={"label": "x", "priority_cap": "loud"}, headers=phone.auth)
    assert error_code(response) == "invalid_priority"


@pytest.mark.parametrize("body", [{}, {"label": ""}, {"label": "x" * 65}, {"label": 3}])
def test_a_bad_label_is_invalid_body(client: TestClient, body: dict[str, object]) -> None:
    phone = register_phone(client)
    assert error_code(client.post("/v1/tokens", json=body, headers=phone.auth)) == "invalid_body"


def test_only_the_phone_creates_and_revokes_but_any_device_lists(client: TestClient) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    created = create_token(client, phone)
    assert error_code(client.post("/v1/tokens", json={"label": "x"}, headers=computer.auth)) == "not_a_phone"
    assert error_code(client.delete(f"/v1/tokens/{created['id']}", headers=computer.auth)) == "not_a_phone"
    assert len(client.get("/v1/tokens", headers=computer.auth).json()["tokens"]) == 1


def test_revoking_is_idempotent_and_hides_the_token(client: TestClient) -> None:
    phone = register_phone(client)
    created = create_token(client, phone)
    first = client.delete(f"/v1/tokens/{created['id']}", headers=phone.auth)
    assert first.status_code == 200 and first.json()["revoked_at"]
    assert client.delete(f"/v1/tokens/{created['id']}", headers=phone.auth).status_code == 200
    assert client.get("/v1/tokens", headers=phone.auth).json()["tokens"] == []


def test_another_accounts_token_is_not_found(client: TestClient) -> None:
    phone = register_phone(client)
    stranger = register_phone(client)
    created = create_token(client, phone)
    response = client.delete(f"/v1/tokens/{created['id']}", headers=stranger.auth)
    assert response.status_code == 404 and error_code(response) == "not_found"


def test_create_and_revoke_queue_an_encrypted_token_update_for_paired_devices(
    client: TestClient, core: Core
) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    created = create_token(client, phone, label="backup-job")
    client.delete(f"/v1/tokens/{created['id']}", headers=phone.auth)
    with Session(core.engine) as session:
        rows = session.exec(select(QueuedEnvelope).order_by(QueuedEnvelope.seq)).all()  # type: ignore[arg-type]
    assert [(r.recipient_device_id, r.sender, r.type) for r in rows] == [
        (computer.device_id, "server", "token_update"),
        (computer.device_id, "server", "token_update"),
    ]
    assert all(b"backup-job" not in r.blob for r in rows)


def test_revocation_audit_rows_are_removed_after_30_days(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    created = create_token(client, phone)
    client.delete(f"/v1/tokens/{created['id']}", headers=phone.auth)
    clock.advance(30 * 86_400 - 1)
    core.run_sync(sweep_expired, Principal.system())
    with Session(core.engine) as session:
        assert session.get(SenderToken, str(created["id"])) is not None
    clock.advance(1)
    assert core.run_sync(sweep_expired, Principal.system()).removed["revoked_tokens"] == 1


def test_a_phone_can_hold_at_most_the_configured_number_of_tokens(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    for _ in range(core.settings.max_tokens_per_account):
        create_token(client, phone)
    response = client.post("/v1/tokens", json={"label": "one too many"}, headers=phone.auth)
    assert response.status_code == 409 and error_code(response) == "limit_reached"
