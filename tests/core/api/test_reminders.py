"""Reminders: bounds on `at` (epoch or ISO 8601), the id format, the capability gate, warnings when
delivery is uncertain, queue entries that a cancel deletes and trimming never does, and that the
server keeps nothing it can read."""

from __future__ import annotations

import base64
import re
from datetime import datetime
from typing import Any
from unittest.mock import patch

import pytest
from sqlmodel import Session, col, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.queue import QUEUE_CAP
from core.runtime.core import Core
from core.services.reminders import LATE_FIRE_S
from core.store.tables import QueuedEnvelope
from tests.helpers import (
    FakeDevice,
    create_token,
    error_code,
    pair_computer,
    register_phone,
    tables_containing,
)


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
    assert body["fire_at"] == at
    # The phone has no push service and no stream open: the setup waits in its queue, and says so.
    assert body["warnings"] == [
        "the phone has no push service and no open connection: the reminder waits in its queue and "
        "reaches it only if it connects within 25 hours"
    ]
    assert response.headers["x-ratelimit-resource"]


def test_a_phone_that_never_reported_a_build_is_named_in_the_warnings(
    client: TestClient, clock: ManualClock
) -> None:
    _, headers = setup(client)
    body = client.post(
        "/v1/reminders", json={"message": "m", "at": int(clock.now()) + 60}, headers=headers
    ).json()
    assert "version" in body["warnings"][0] and "no open connection" in body["warnings"][1]


@pytest.mark.parametrize(
    "written", ["2027-01-16T08:00:00Z", "2027-01-16T09:00:00+01:00", "2027-01-16T08:00:00.750+00:00"]
)
def test_at_may_be_an_iso_8601_time_with_its_offset(
    client: TestClient, clock: ManualClock, written: str
) -> None:
    _, headers = setup(client)
    expected = int(datetime.fromisoformat("2027-01-16T08:00:00+00:00").timestamp())
    assert 0 < expected - clock.now() < 2 * 86_400
    response = client.post("/v1/reminders", json={"message": "m", "at": written}, headers=headers)
    assert response.status_code == 201 and response.json()["fire_at"] == expected


@pytest.mark.parametrize("written", ["2027-01-15T08:00:00", "2027-01-15", "next tuesday", "1800003600"])
def test_an_iso_time_without_an_offset_or_another_string_is_invalid_body(
    client: TestClient, written: str
) -> None:
    _, headers = setup(client)
    response = client.post("/v1/reminders", json={"message": "m", "at": written}, headers=headers)
    assert response.status_code == 400 and error_code(response) == "invalid_body"
    assert response.json()["error"]["details"]["errors"][0]["field"] == "at"


def test_too_soon_names_the_configured_minimum(client: TestClient, core: Core, clock: ManualClock) -> None:
    core.settings = core.settings.model_copy(update={"reminder_min_lead_s": 300})
    _, headers = setup(client)
    response = client.post(
        "/v1/reminders", json={"message": "m", "at": int(clock.now()) + 299}, headers=headers
    )
    assert error_code(response) == "fire_at_too_soon"
    assert response.json()["error"]["message"] == "at must be at least 300 seconds from now."
    assert response.json()["error"]["details"] == {"min_seconds_ahead": 300}


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
        {"message": "m", "at": True},
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
    assert response.status_code == 202 and response.json()["status"] == "cancel_requested"


def queue_of(core: Core, device_id: str) -> list[QueuedEnvelope]:
    with Session(core.engine) as session:
        return list(
            session.exec(
                select(QueuedEnvelope)
                .where(col(QueuedEnvelope.recipient_device_id) == device_id)
                .order_by(col(QueuedEnvelope.seq))
            ).all()
        )


def test_a_cancel_deletes_its_queued_set_and_outlives_it(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone, headers = setup(client)
    at = int(clock.now()) + 7 * 86_400
    reminder_id = client.post("/v1/reminders", json={"message": "m", "at": at}, headers=headers).json()[
        "reminder_id"
    ]
    (queued_set,) = queue_of(core, phone.device_id)
    assert (queued_set.type, queued_set.expires_at) == ("reminder", at + LATE_FIRE_S)
    assert client.delete(f"/v1/reminders/{reminder_id}", headers=headers).status_code == 202
    (cancel,) = queue_of(core, phone.device_id)  # the set, text and all, is gone from the server
    assert (cancel.type, cancel.tag, cancel.expires_at) == (
        "reminder_cancel",
        queued_set.tag,
        at + LATE_FIRE_S,
    )
    assert cancel.seq is not None and queued_set.seq is not None and cancel.seq > queued_set.seq


def test_reminder_entries_are_never_trimmed_to_the_newest_200(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone, headers = setup(client)
    at = int(clock.now()) + 3600
    client.post("/v1/reminders", json={"message": "keep me", "at": at}, headers=headers)
    computer = pair_computer(client, phone)
    for _ in range(QUEUE_CAP + 5):  # a flood of envelopes from the computer
        body = {
            "to": phone.device_id,
            "type": "clipboard",
            "blob": base64.b64encode(b"\x01" + b"x" * 40).decode(),
        }
        assert client.post("/v1/envelopes", json=body, headers=computer.auth).status_code == 202
    entries = queue_of(core, phone.device_id)
    assert entries[0].type == "reminder" and len(entries) == QUEUE_CAP + 1


def test_a_phone_holds_at_most_so_many_waiting_reminders(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    core.settings = core.settings.model_copy(
        update={"limit_token_burst": 10_000, "limit_token_monthly": 10_000}
    )
    _, headers = setup(client)
    at = int(clock.now()) + 3600
    with patch("core.services.reminders.MAX_PINNED", 3):
        for _ in range(3):
            assert (
                client.post("/v1/reminders", json={"message": "m", "at": at}, headers=headers).status_code
                == 201
            )
        refused = client.post("/v1/reminders", json={"message": "m", "at": at}, headers=headers)
    assert refused.status_code == 409 and error_code(refused) == "limit_reached"


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
