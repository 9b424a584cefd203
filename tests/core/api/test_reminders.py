"""Reminders: bounds on `at`, the id format, the capability gate, and that nothing is stored."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.context import Core
from tests.helpers import FakeDevice, create_token, error_code, register_phone, tables_containing


def setup(client: TestClient, **phone_fields: Any) -> tuple[FakeDevice, dict[str, str]]:
    phone = register_phone(client, **phone_fields)
    return phone, {"Authorization": f"Bearer {create_token(client, phone)['token']}"}


def test_a_reminder_gets_an_rmd_id_and_echoes_its_time(client: TestClient, clock: ManualClock) -> None:
    _, headers = setup(client, app_build=3)
    at = int(clock.now()) + 3600
    response = client.post("/v1/reminders", json={"message": "stretch", "at": at}, headers=headers)
    assert response.status_code == 201
    body = response.json()
    assert re.fullmatch(r"rmd_[0-9a-f]{32}", body["reminder_id"])
    assert body["fire_at"] == at and "warnings" not in body
    assert response.headers["x-ratelimit-resource"]


def test_warnings_appear_only_when_the_phone_never_reported_a_build(
    client: TestClient, clock: ManualClock
) -> None:
    _, headers = setup(client)
    body = client.post(
        "/v1/reminders", json={"message": "m", "at": int(clock.now()) + 60}, headers=headers
    ).json()
    assert body["warnings"] and "version" in body["warnings"][0]


@pytest.mark.parametrize(
    ("ahead", "code"),
    [(59, "fire_at_too_soon"), (-5, "fire_at_too_soon"), (365 * 86_400 + 1, "fire_at_too_far")],
)
def test_at_must_be_60_seconds_to_365_days_ahead(
    client: TestClient, clock: ManualClock, ahead: int, code: str
) -> None:
    _, headers = setup(client)
    response = client.post(
        "/v1/reminders", json={"message": "m", "at": int(clock.now()) + ahead}, headers=headers
    )
    assert response.status_code == 400 and error_code(response) == code


def test_the_bounds_themselves_are_allowed(client: TestClient, clock: ManualClock) -> None:
    _, headers = setup(client)
    for ahead in (60, 365 * 86_400):
        response = client.post(
            "/v1/reminders", json={"message": "m", "at": int(clock.now()) + ahead}, headers=headers
        )
        assert response.status_code == 201


def test_at_written_as_a_whole_number_with_a_fraction_is_that_time(
    client: TestClient, clock: ManualClock
) -> None:
    """Found by fuzzing: JSON Schema's integer includes 1800003600.0, which was refused."""
    _, headers = setup(client)
    at = int(clock.now()) + 3600
    response = client.post("/v1/reminders", json={"message": "m", "at": float(at)}, headers=headers)
    assert response.status_code == 201 and response.json()["fire_at"] == at


@pytest.mark.parametrize(
    "body",
    [
        {"at": 2_000_000_000},
        {"message": "", "at": 2_000_000_000},
        {"message": "x" * 501, "at": 2_000_000_000},
        {"message": "m"},
        {"message": "m", "at": "tomorrow"},
        {"message": "m", "at": 1.5},
    ],
)
def test_malformed_reminders_are_invalid_body(client: TestClient, body: dict[str, object]) -> None:
    _, headers = setup(client)
    assert error_code(client.post("/v1/reminders", json=body, headers=headers)) == "invalid_body"


def test_an_outdated_phone_gets_426_and_nothing_is_sent(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    core.settings = core.settings.model_copy(update={"min_build_reminders": 10})
    _, headers = setup(client, app_build=9)
    response = client.post(
        "/v1/reminders", json={"message": "m", "at": int(clock.now()) + 120}, headers=headers
    )
    assert response.status_code == 426 and error_code(response) == "phone_app_outdated"


def test_no_phone_is_409(client: TestClient, clock: ManualClock) -> None:
    phone, headers = setup(client)
    client.delete("/v1/devices/me", headers=phone.auth)
    response = client.post(
        "/v1/reminders", json={"message": "m", "at": int(clock.now()) + 120}, headers=headers
    )
    assert response.status_code == 409 and error_code(response) == "no_phone_device"
    cancel = client.delete("/v1/reminders/rmd_" + "0" * 32, headers=headers)
    assert cancel.status_code == 409 and error_code(cancel) == "no_phone_device"


def test_any_well_formed_id_cancels_with_202(client: TestClient) -> None:
    _, headers = setup(client)
    response = client.delete("/v1/reminders/rmd_" + "ab" * 16, headers=headers)
    assert response.status_code == 202 and response.json() == {"status": "cancel_requested"}


@pytest.mark.parametrize(
    "reminder_id", ["rmd_" + "A" * 32, "rmd_" + "a" * 31, "int_" + "a" * 32, "rmd_", "x"]
)
def test_a_malformed_id_is_400_invalid_reminder_id(client: TestClient, reminder_id: str) -> None:
    _, headers = setup(client)
    response = client.delete(f"/v1/reminders/{reminder_id}", headers=headers)
    assert response.status_code == 400 and error_code(response) == "invalid_reminder_id"


def test_the_server_keeps_nothing_about_a_reminder(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    _, headers = setup(client)
    marker = "REMINDER-MARKER-31c9"
    body = client.post(
        "/v1/reminders", json={"message": marker, "at": int(clock.now()) + 120}, headers=headers
    ).json()
    assert tables_containing(core.engine, marker) == []
    assert tables_containing(core.engine, body["reminder_id"]) == []
