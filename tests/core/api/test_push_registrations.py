"""push_registrations on POST /v1/devices and PATCH /v1/devices/me: a registration with any push
service this server has configured, validated by that service's model, stored in one table; what
the document says the field takes is exactly what the server accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlmodel import Session, select
from starlette.testclient import TestClient

from app.assembly import create_app
from core.bootstrap import build_core
from core.runtime.core import Core
from core.settings import Settings, explicit_settings
from core.store.tables import Account, PushRegistration
from tests.helpers import b64, create_token, error_code, pair_computer, register_phone

SUBSCRIPTION = {"endpoint": "https://push.example/p/1", "p256dh": "BKey", "auth": "secret"}
EXTRA_HOSTS = {"web_push_hosts": ["push.example"]}  # a self-hosted push service, as an operator adds one


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update=EXTRA_HOSTS)


def stored(core: Core) -> list[tuple[str, str, dict[str, Any]]]:
    with Session(core.engine) as session:
        rows = session.exec(select(PushRegistration)).all()
    return [(row.device_id, row.service, json.loads(row.registration)) for row in rows]


@pytest.mark.parametrize("field", ["push_registrations", "web_push"])
def test_a_phone_registers_with_web_push_by_either_field(client: TestClient, core: Core, field: str) -> None:
    if field == "push_registrations":
        phone = register_phone(client, push_registrations={"web_push": SUBSCRIPTION})
    else:
        phone = register_phone(client, web_push=SUBSCRIPTION)

    assert client.get("/v1/devices/me", headers=phone.auth).json()["push"] == "web_push"
    assert stored(core) == [(phone.device_id, "web_push", SUBSCRIPTION)]


def test_a_device_replaces_its_registration_with_a_service(client: TestClient, core: Core) -> None:
    phone = register_phone(client, push_registrations={"web_push": SUBSCRIPTION})
    newer = {**SUBSCRIPTION, "endpoint": "https://push.example/p/2"}

    response = client.patch(
        "/v1/devices/me", json={"push_registrations": {"web_push": newer}}, headers=phone.auth
    )

    assert response.status_code == 200 and response.json()["push"] == "web_push"
    assert stored(core) == [(phone.device_id, "web_push", newer)]


@pytest.mark.parametrize("service", ["apns", "fcm", "stream"])
def test_a_service_this_server_takes_no_registration_for_is_400_and_nothing_is_written(
    client: TestClient, core: Core, service: str
) -> None:
    body = {"public_key": b64(bytes(32)), "push_registrations": {service: {"token": "t"}}}

    response = client.post("/v1/devices", json=body)

    assert response.status_code == 400 and error_code(response) == "unsupported_push_service"
    assert response.json()["error"]["details"] == {"service": service, "supported": ["web_push"]}
    with Session(core.engine) as session:
        assert session.exec(select(Account)).all() == []


@pytest.mark.parametrize(
    ("fields", "problem_at"),
    [
        ({**SUBSCRIPTION, "endpoint": "short"}, "push_registrations.web_push.endpoint"),
        ({"endpoint": SUBSCRIPTION["endpoint"], "p256dh": "BKey"}, "push_registrations.web_push.auth"),
        ({**SUBSCRIPTION, "auth": 5}, "push_registrations.web_push.auth"),
        ({**SUBSCRIPTION, "extra": "x"}, "push_registrations.web_push.extra"),
    ],
)
def test_fields_the_services_model_refuses_are_400_invalid_body_naming_them(
    client: TestClient, core: Core, fields: dict[str, object], problem_at: str
) -> None:
    phone = register_phone(client)

    response = client.patch(
        "/v1/devices/me", json={"push_registrations": {"web_push": fields}}, headers=phone.auth
    )

    assert response.status_code == 400 and error_code(response) == "invalid_body"
    assert [problem["field"] for problem in response.json()["error"]["details"]["errors"]] == [problem_at]
    assert stored(core) == []


def test_the_document_lists_the_configured_services_and_nothing_else(client: TestClient) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]

    registrations = schemas["PushRegistrations"]
    assert registrations["properties"] == {"web_push": {"$ref": "#/components/schemas/WebPushSubscription"}}
    assert registrations["additionalProperties"] is False
    for body in ("DeviceCreate", "DevicePatch"):
        assert {"$ref": "#/components/schemas/PushRegistrations"} in (
            schemas[body]["properties"]["push_registrations"]["anyOf"]
        )


def test_with_web_push_off_only_the_web_apps_own_field_still_takes_a_subscription(tmp_path: Path) -> None:
    """The web app's ``web_push`` is kept as it always was; the device is served over its stream."""
    settings = explicit_settings(data_dir=tmp_path / "data", web_push_enabled=False, **EXTRA_HOSTS)
    with TestClient(create_app(core=build_core(settings))) as client:
        assert (
            client.get("/openapi.json").json()["components"]["schemas"]["PushRegistrations"]["properties"]
            == {}
        )
        phone = register_phone(client, web_push=SUBSCRIPTION)
        assert client.get("/v1/devices/me", headers=phone.auth).json()["push"] == "stream"
        response = client.patch(
            "/v1/devices/me", json={"push_registrations": {"web_push": SUBSCRIPTION}}, headers=phone.auth
        )
        assert error_code(response) == "unsupported_push_service"
        assert response.json()["error"]["details"]["supported"] == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)  # SQLite's trace callback counts
def test_a_send_reads_every_devices_push_registrations_in_its_one_statement(core: Core) -> None:
    statements: list[str] = []

    def trace(dbapi_connection: Any, *_: object) -> None:
        dbapi_connection.set_trace_callback(statements.append)

    event.listen(core.engine, "checkout", trace)
    with TestClient(create_app(core=core)) as client:
        phone = register_phone(client, push_registrations={"web_push": SUBSCRIPTION})
        for name in ("laptop", "desk"):
            pair_computer(client, phone, name=name)
        token = create_token(client, phone)["token"]
        statements.clear()
        sent = client.post("/v1/send", json={"message": "hi"}, headers={"Authorization": f"Bearer {token}"})
    assert sent.status_code == 200 and len(sent.json()["delivered_to"]) == 3
    assert len([sql for sql in statements if "push_registrations" in sql]) == 1
