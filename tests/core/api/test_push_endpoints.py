"""A web-push endpoint is where the server POSTs on a device's say-so, so it is held to the outbound
policy when it is registered: https on a push service's host, no address that is not public in
any form. Anything else is 400 ``push_endpoint_not_allowed`` on POST /v1/devices and PATCH
/v1/devices/me, by either field, and nothing is stored; one stored before the rule (a row written
here by hand) is dropped at the first push, and a listener on loopback receives nothing."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.runtime.core import Core
from core.settings import Settings
from core.store.tables import Account, PushRegistration
from tests.helpers import b64, create_token, error_code, register_phone

KEYS = {"p256dh": "BKey", "auth": "secret"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"register_per_ip_per_minute": 100})  # many refusals from one address


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener on loopback that nobody should reach: connections would queue in its backlog."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        yield sock


def refused_endpoints(port: int) -> list[str]:
    return [
        f"http://127.0.0.1:{port}/push/1",
        "http://fcm.googleapis.com/fcm/send/1",
        f"https://127.0.0.1:{port}/push/1",
        f"https://localhost:{port}/push/1",
        f"https://[::1]:{port}/push/1",
        f"https://[::ffff:127.0.0.1]:{port}/push/1",
        f"https://[::ffff:0:7f00:1]:{port}/push/1",  # SIIT
        f"https://[::127.0.0.1]:{port}/push/1",  # IPv4-compatible
        f"https://[64:ff9b::7f00:1]:{port}/push/1",  # NAT64
        f"https://[2002:7f00:1::1]:{port}/push/1",  # 6to4
        f"https://[2002:a9fe:a9fe::1]:{port}/latest/meta-data",  # 6to4 of the metadata address
        "https://10.0.0.1/push/1",
        "https://169.254.169.254/latest/meta-data",
        "https://push.example/push/1",  # a host that is not a push service's
        "https://fcm.googleapis.com.evil.example/fcm/send/1",
        "https://fcm.googleapis.com/fcm/send/1\x00",
        "https://user@fcm.googleapis.com/fcm/send/1",
    ]


def accepted(listener: socket.socket) -> int:
    count = 0
    while True:
        try:
            connection, _ = listener.accept()
        except BlockingIOError:
            return count
        connection.close()
        count += 1


def test_a_phone_registering_a_bad_endpoint_by_either_field_is_400_and_nothing_is_written(
    client: TestClient, core: Core, listener: socket.socket
) -> None:
    for endpoint in refused_endpoints(listener.getsockname()[1]):
        subscription = {"endpoint": endpoint, **KEYS}
        for extra in ({"web_push": subscription}, {"push_registrations": {"web_push": subscription}}):
            response = client.post("/v1/devices", json={"public_key": b64(bytes(32)), **extra})
            assert (response.status_code, error_code(response)) == (400, "push_endpoint_not_allowed"), (
                endpoint
            )
            assert "fcm.googleapis.com" in response.json()["error"]["details"]["hosts"]
    with Session(core.engine) as session:
        assert session.exec(select(Account)).all() == []
    assert accepted(listener) == 0


def test_a_device_updating_to_a_bad_endpoint_is_400_and_keeps_its_registration(
    client: TestClient, core: Core, listener: socket.socket
) -> None:
    good = {"endpoint": "https://fcm.googleapis.com/fcm/send/abc", **KEYS}
    phone = register_phone(client, device_type="web", web_push=good)
    for endpoint in refused_endpoints(listener.getsockname()[1]):
        for body in (
            {"web_push": {**good, "endpoint": endpoint}},
            {"push_registrations": {"web_push": {**good, "endpoint": endpoint}}},
        ):
            response = client.patch("/v1/devices/me", json=body, headers=phone.auth)
            assert (response.status_code, error_code(response)) == (400, "push_endpoint_not_allowed"), (
                endpoint
            )
    with Session(core.engine) as session:
        [row] = session.exec(select(PushRegistration)).all()
    assert json.loads(row.registration)["endpoint"] == good["endpoint"]


@pytest.mark.parametrize(
    "endpoint",
    [
        "https://fcm.googleapis.com/fcm/send/abc:APA91b",
        "https://updates.push.services.mozilla.com/wpush/v2/gAAAAA",
        "https://web.push.apple.com/QGuQyavXutnMH",
        "https://wns2-par02p.notify.windows.com/w/?token=BQYAAAB",
    ],
)
def test_the_push_services_browsers_use_are_taken(client: TestClient, endpoint: str) -> None:
    phone = register_phone(client, device_type="web", web_push={"endpoint": endpoint, **KEYS})
    assert client.get("/v1/devices/me", headers=phone.auth).json()["push"] == "web_push"


def test_an_endpoint_stored_before_the_rule_is_never_reached_and_is_dropped(
    client: TestClient, core: Core, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    phone = register_phone(client, device_type="web")
    token = create_token(client, phone)["token"]
    for endpoint in (f"http://127.0.0.1:{port}/push/1", f"https://127.0.0.1:{port}/push/1"):
        with Session(core.engine) as session:  # as an older server kept it
            registration = json.dumps({"endpoint": endpoint, **KEYS})
            session.merge(
                PushRegistration(
                    device_id=phone.device_id, service="web_push", registration=registration, created_at=0
                )
            )
            session.commit()
        assert client.get("/v1/devices/me", headers=phone.auth).json()["push"] == "web_push"
        sent = client.post("/v1/send", json={"message": "hi"}, headers={"Authorization": f"Bearer {token}"})
        assert sent.status_code == 200, sent.text
        deadline = time.monotonic() + 10
        while client.get("/v1/devices/me", headers=phone.auth).json()["push"] != "stream":
            assert time.monotonic() < deadline, "the registration was not dropped"
            time.sleep(0.02)
    assert accepted(listener) == 0
