"""Pairing: init, confirm, result; single use, expiry, guessing limits."""

from __future__ import annotations

import re

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.runtime.core import Core
from core.store.tables import Device, Pair, PairingCode
from tests.helpers import b64, error_code, pair_computer, register_phone, start_pairing


def test_init_returns_a_six_digit_code_valid_300_seconds(client: TestClient, clock: ManualClock) -> None:
    response = client.post("/v1/pair/init", json={"public_key": b64(bytes(32)), "surface_kind": "cli"})
    assert response.status_code == 201
    body = response.json()
    assert re.fullmatch(r"[0-9]{6}", body["code"])
    assert body["expires_at"] == int(clock.now()) + 300
    assert body["device_token"].startswith("rbd_")


def test_the_code_is_not_stored_in_plaintext(client: TestClient, core: Core) -> None:
    _, code = start_pairing(client)
    with Session(core.engine) as session:
        row = session.exec(select(PairingCode)).one()
        assert code not in row.code_digest


def test_confirm_writes_both_devices_and_the_pair_and_deletes_the_code(
    client: TestClient, core: Core
) -> None:
    phone = register_phone(client)
    computer, code = start_pairing(client, name="laptop")
    response = client.post(
        "/v1/pair/confirm", json={"code": code, "public_key": phone.public_b64}, headers=phone.auth
    )
    assert response.status_code == 200
    body = response.json()
    assert body["intent"] == "pair"
    assert body["device"] == {
        "device_id": computer.device_id,
        "name": "laptop",
        "surface_kind": "cli",
        "public_key": computer.public_b64,
    }
    with Session(core.engine) as session:
        assert session.exec(select(PairingCode)).all() == []
        pair = session.exec(select(Pair)).one()
        assert (pair.phone_device_id, pair.device_id) == (phone.device_id, computer.device_id)
        row = session.get(Device, computer.device_id)
        assert row is not None and row.account_id == phone.account_id and row.ever_paired == 1


def test_the_computer_sees_pending_then_the_phone_key(client: TestClient) -> None:
    phone = register_phone(client, name="Pixel 9")
    computer, code = start_pairing(client)
    assert client.get("/v1/pair/result", headers=computer.auth).json()["status"] == "pending"
    client.post("/v1/pair/confirm", json={"code": code, "public_key": phone.public_b64}, headers=phone.auth)
    result = client.get("/v1/pair/result", headers=computer.auth).json()
    assert result["status"] == "paired"
    assert result["phone_device_id"] == phone.device_id
    assert result["phone_name"] == "Pixel 9"
    assert result["phone_public_key"] == phone.public_b64


def test_the_result_is_kept_24_hours(client: TestClient, clock: ManualClock) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    clock.advance(86_399)
    assert client.get("/v1/pair/result", headers=computer.auth).json()["status"] == "paired"
    clock.advance(1)
    response = client.get("/v1/pair/result", headers=computer.auth)
    assert response.status_code == 410 and error_code(response) == "pairing_expired"


def test_a_pending_computer_can_use_nothing_but_the_result_route(client: TestClient) -> None:
    computer, _ = start_pairing(client)
    response = client.get("/v1/tokens", headers=computer.auth)
    assert response.status_code == 401


def test_a_code_is_single_use(client: TestClient) -> None:
    phone = register_phone(client)
    other_phone = register_phone(client)
    _, code = start_pairing(client)
    first = client.post(
        "/v1/pair/confirm", json={"code": code, "public_key": phone.public_b64}, headers=phone.auth
    )
    assert first.status_code == 200
    again = client.post(
        "/v1/pair/confirm",
        json={"code": code, "public_key": other_phone.public_b64},
        headers=other_phone.auth,
    )
    assert again.status_code == 400 and error_code(again) == "invalid_code"


def test_an_expired_code_is_refused_and_the_computer_is_told(client: TestClient, clock: ManualClock) -> None:
    phone = register_phone(client)
    computer, code = start_pairing(client)
    clock.advance(300)
    response = client.post(
        "/v1/pair/confirm", json={"code": code, "public_key": phone.public_b64}, headers=phone.auth
    )
    assert response.status_code == 400 and error_code(response) == "invalid_code"
    result = client.get("/v1/pair/result", headers=computer.auth)
    assert result.status_code == 410 and error_code(result) == "pairing_expired"


@pytest.mark.parametrize("code", ["12345", "1234567", "abcdef", "", " 12345"])
def test_malformed_codes_are_invalid_code(client: TestClient, code: str) -> None:
    phone = register_phone(client)
    response = client.post(
        "/v1/pair/confirm", json={"code": code, "public_key": phone.public_b64}, headers=phone.auth
    )
    assert response.status_code == 400 and error_code(response) == "invalid_code"


def test_the_phone_must_confirm_with_its_own_registered_key(client: TestClient) -> None:
    phone = register_phone(client)
    _, code = start_pairing(client)
    response = client.post(
        "/v1/pair/confirm", json={"code": code, "public_key": b64(bytes(32))}, headers=phone.auth
    )
    assert response.status_code == 400 and error_code(response) == "invalid_public_key"


def test_only_a_phone_can_confirm(client: TestClient) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    _, code = start_pairing(client)
    response = client.post(
        "/v1/pair/confirm", json={"code": code, "public_key": computer.public_b64}, headers=computer.auth
    )
    assert response.status_code == 403 and error_code(response) == "not_a_phone"


def test_wrong_codes_are_limited_per_phone_so_guessing_stops(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    _, live = start_pairing(client)
    wrong = f"{(int(live) + 1) % 1_000_000:06d}"
    for _ in range(core.settings.pairing_failures_per_device):
        response = client.post(
            "/v1/pair/confirm", json={"code": wrong, "public_key": phone.public_b64}, headers=phone.auth
        )
        assert error_code(response) == "invalid_code"
    blocked = client.post(
        "/v1/pair/confirm", json={"code": live, "public_key": phone.public_b64}, headers=phone.auth
    )
    assert blocked.status_code == 429 and error_code(blocked) == "too_many_attempts"


def test_wrong_codes_are_limited_per_ip_across_phones(client: TestClient, core: Core) -> None:
    phones = [register_phone(client) for _ in range(3)]
    attempts = 0
    while attempts < core.settings.pairing_failures_per_ip:
        phone = phones[attempts % 3]
        client.post(
            "/v1/pair/confirm", json={"code": "999999", "public_key": phone.public_b64}, headers=phone.auth
        )
        attempts += 1
    fresh = register_phone(client)
    blocked = client.post(
        "/v1/pair/confirm", json={"code": "999999", "public_key": fresh.public_b64}, headers=fresh.auth
    )
    assert blocked.status_code == 429 and error_code(blocked) == "too_many_attempts"


def test_a_refused_guess_says_when_to_try_again(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    for _ in range(core.settings.pairing_failures_per_device):
        client.post(
            "/v1/pair/confirm", json={"code": "999999", "public_key": phone.public_b64}, headers=phone.auth
        )
    blocked = client.post(
        "/v1/pair/confirm", json={"code": "999999", "public_key": phone.public_b64}, headers=phone.auth
    )
    assert blocked.status_code == 429
    assert 0 < int(blocked.headers["Retry-After"]) <= core.settings.pairing_failure_window_s


def test_the_failure_budget_frees_up_after_its_window(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    for _ in range(core.settings.pairing_failures_per_device):
        client.post(
            "/v1/pair/confirm", json={"code": "999999", "public_key": phone.public_b64}, headers=phone.auth
        )
    clock.advance(core.settings.pairing_failure_window_s)
    _, code = start_pairing(client)
    response = client.post(
        "/v1/pair/confirm", json={"code": code, "public_key": phone.public_b64}, headers=phone.auth
    )
    assert response.status_code == 200


def test_pair_init_is_limited_per_ip(client: TestClient, core: Core) -> None:
    for _ in range(core.settings.pair_init_per_ip_per_minute):
        start_pairing(client)
    response = client.post("/v1/pair/init", json={"public_key": b64(bytes(32)), "surface_kind": "cli"})
    assert response.status_code == 429


@pytest.mark.parametrize(
    "body",
    [
        {"public_key": b64(bytes(32)), "surface_kind": "phone"},
        {"public_key": b64(bytes(32))},
        {"public_key": b64(bytes(32)), "surface_kind": "cli", "intent": "Bad Intent"},
        {"public_key": "%%%", "surface_kind": "cli"},
    ],
)
def test_malformed_inits_are_400_with_no_code_stored(
    client: TestClient, core: Core, body: dict[str, object]
) -> None:
    response = client.post("/v1/pair/init", json=body)
    assert response.status_code == 400
    with Session(core.engine) as session:
        assert session.exec(select(PairingCode)).all() == []
