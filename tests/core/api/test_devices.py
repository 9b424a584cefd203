"""Phone registration, the device's own record, status reports and disconnect, over HTTP in process."""

from __future__ import annotations

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.runtime.core import Core
from core.store.tables import Account, Device
from tests.helpers import b64, error_code, pair_computer, register_phone


def test_a_registered_phone_gets_a_credential_that_is_stored_only_as_a_hash(
    client: TestClient, core: Core
) -> None:
    phone = register_phone(client)
    assert phone.token.startswith("rbd_")
    with Session(core.engine) as session:
        row = session.get(Device, phone.device_id)
        assert row is not None
        assert phone.token not in row.credential_hash
        assert row.surface_kind == "phone" and row.account_id == phone.account_id
        assert session.get(Account, phone.account_id) is not None


def test_registration_returns_the_server_public_key(client: TestClient, core: Core) -> None:
    body = client.post("/v1/devices", json={"public_key": b64(bytes(32))}).json()
    assert body["server_public_key"] == core.keys.public_key_b64


@pytest.mark.parametrize(
    "public_key",
    ["not base64!", b64(bytes(31)), b64(bytes(33)), "", "A" * 120],
)
def test_a_public_key_that_is_not_base64_of_32_bytes_is_refused(
    client: TestClient, core: Core, public_key: str
) -> None:
    response = client.post("/v1/devices", json={"public_key": public_key})
    assert response.status_code == 400
    assert error_code(response) in {"invalid_public_key", "invalid_body"}
    with Session(core.engine) as session:
        assert session.exec(select(Device)).all() == []
        assert session.exec(select(Account)).all() == []


@pytest.mark.parametrize(
    "body",
    [
        {"public_key": b64(bytes(32)), "surface_kind": "cli"},
        {"public_key": b64(bytes(32)), "device_type": "toaster"},
        {"public_key": b64(bytes(32)), "name": "x" * 65},
        {"public_key": b64(bytes(32)), "unexpected": 1},
        {"public_key": 5},
        {},
    ],
)
def test_malformed_registrations_are_400_with_no_rows_written(
    client: TestClient, core: Core, body: dict[str, object]
) -> None:
    response = client.post("/v1/devices", json=body)
    assert response.status_code == 400
    assert error_code(response) == "invalid_body"
    with Session(core.engine) as session:
        assert session.exec(select(Device)).all() == []


def test_a_body_that_is_not_json_is_400_invalid_json(client: TestClient) -> None:
    response = client.post("/v1/devices", content=b"{nope", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"


def test_json_nested_deeper_than_the_decoder_goes_is_400_invalid_json(client: TestClient) -> None:
    """Found by fuzzing: the decoder's RecursionError was a 500."""
    response = client.post("/v1/devices", content=b"[" * 50_000, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert error_code(response) == "invalid_json"


def test_a_json_array_body_is_400_invalid_body(client: TestClient) -> None:
    response = client.post("/v1/devices", json=[1, 2])
    assert error_code(response) == "invalid_body"


def test_a_non_json_content_type_is_415(client: TestClient) -> None:
    response = client.post("/v1/devices", content=b"public_key=x", headers={"content-type": "text/plain"})
    assert response.status_code == 415
    assert error_code(response) == "unsupported_content_type"


def test_a_body_over_the_cap_is_refused_before_it_is_read(client: TestClient, core: Core) -> None:
    huge = b"{" + b" " * (core.settings.max_body_bytes + 1) + b"}"
    response = client.post("/v1/devices", content=huge, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert error_code(response) == "body_too_large"


def test_registration_is_limited_per_ip(client: TestClient, core: Core) -> None:
    for _ in range(core.settings.register_per_ip_per_minute):
        register_phone(client)
    response = client.post("/v1/devices", json={"public_key": b64(bytes(32))})
    assert response.status_code == 429
    assert error_code(response) == "rate_limit_exceeded"
    assert int(response.headers["retry-after"]) >= 1


def test_a_device_reads_and_updates_its_own_record(client: TestClient) -> None:
    phone = register_phone(client)
    me = client.get("/v1/devices/me", headers=phone.auth).json()
    assert me["device_id"] == phone.device_id and me["push"] == "stream"
    updated = client.patch("/v1/devices/me", json={"name": "Work phone", "app_build": 42}, headers=phone.auth)
    assert updated.status_code == 200
    assert updated.json()["name"] == "Work phone" and updated.json()["app_build"] == 42


def test_an_fcm_token_without_fcm_configured_leaves_the_device_on_its_stream(client: TestClient) -> None:
    phone = register_phone(client, fcm_token="abc")
    me = client.get("/v1/devices/me", headers=phone.auth).json()
    assert me["push"] == "stream"


def test_status_reports_are_accepted_once_per_60_seconds(client: TestClient, clock: ManualClock) -> None:
    phone = register_phone(client)
    report = {"battery_percent": 80, "charging": True, "ringer": "silent", "network": "wifi"}
    first = client.post("/v1/devices/me/status", json=report, headers=phone.auth)
    assert first.status_code == 202 and first.json()["accepted"] is True
    clock.advance(59)
    assert client.post("/v1/devices/me/status", json=report, headers=phone.auth).status_code == 204
    clock.advance(1)
    assert client.post("/v1/devices/me/status", json=report, headers=phone.auth).status_code == 202


def test_an_out_of_range_status_report_is_400(client: TestClient) -> None:
    phone = register_phone(client)
    response = client.post("/v1/devices/me/status", json={"battery_percent": 101}, headers=phone.auth)
    assert response.status_code == 400


@pytest.mark.parametrize(
    "report",
    [{"battery_percent": False}, {"battery_percent": "80"}, {"battery_percent": 80.5}, {"charging": 0}],
)
def test_a_status_report_takes_json_integers_and_booleans_only(
    client: TestClient, report: dict[str, object]
) -> None:
    """Found by fuzzing: the documented integer took false (as 0 %) and the boolean took 0.0."""
    phone = register_phone(client)
    response = client.post("/v1/devices/me/status", json=report, headers=phone.auth)
    assert response.status_code == 400 and error_code(response) == "invalid_body"


def test_a_whole_number_written_with_a_fraction_is_that_integer(client: TestClient) -> None:
    """JSON Schema's integer: 80.0 is 80 (the document says integer, so clients may send either)."""
    phone = register_phone(client)
    response = client.post("/v1/devices/me/status", json={"battery_percent": 80.0}, headers=phone.auth)
    assert response.status_code == 202
    updated = client.patch("/v1/devices/me", json={"app_build": 42.0}, headers=phone.auth)
    assert updated.status_code == 200 and updated.json()["app_build"] == 42


def test_a_device_without_an_app_build_omits_it_as_the_document_allows(client: TestClient) -> None:
    """Found by fuzzing: None is omitted from every response, but DeviceOut required app_build."""
    computer = pair_computer(client, register_phone(client))
    me = client.get("/v1/devices/me", headers=computer.auth).json()
    assert "app_build" not in me
    schema = client.get("/openapi.json").json()["components"]["schemas"]["DeviceOut"]
    assert "app_build" not in schema["required"]


def test_disconnect_unpairs_and_kills_the_credential(client: TestClient, core: Core) -> None:
    phone = register_phone(client)
    computer = pair_computer(client, phone)
    assert client.delete("/v1/devices/me", headers=computer.auth).status_code == 204
    response = client.get("/v1/devices/me", headers=computer.auth)
    assert response.status_code == 401 and error_code(response) == "invalid_token"
    with Session(core.engine) as session:
        assert session.get(Device, computer.device_id) is None
    assert client.get("/v1/devices/me", headers=phone.auth).status_code == 200
