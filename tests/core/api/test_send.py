"""POST /v1/send and /v1/send/{token}: bodies, fields, limits, selectors, encryption, priorities."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.runtime.core import Core
from core.store.tables import QueuedEnvelope
from tests.helpers import FakeDevice, create_token, error_code, pair_computer, queued_payloads, register_phone


@pytest.fixture
def account(client: TestClient) -> tuple[FakeDevice, FakeDevice, str]:
    phone = register_phone(client, name="Pixel")
    computer = pair_computer(client, phone, name="laptop")
    token = str(create_token(client, phone)["token"])
    return phone, computer, token


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_plain_text_body_is_the_message_and_reaches_every_device(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, computer, token = account
    response = client.post("/v1/send", content="disk is full ✓".encode(), headers=bearer(token))
    assert response.status_code == 200
    body = response.json()
    assert body["id"].startswith("msg_") and len(body["id"]) == 36
    assert body["delivered_to"] == [
        {"device_id": phone.device_id, "type": "phone"},
        {"device_id": computer.device_id, "type": "cli"},
    ]
    assert body["warnings"] == []
    for device in (phone, computer):
        [payload] = queued_payloads(core, device)
        assert payload["message"] == "disk is full ✓" and payload["id"] == body["id"]
        assert list(payload) == ["type", "id", "sent_at", "sequence_id", "message", "priority"]


def test_json_and_form_bodies_carry_every_field(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    _, computer, token = account
    fields = {
        "message": "build failed",
        "title": "CI",
        "priority": "high",
        "tags": ["ci", "red"],
        "url": "https://ci.example/run/1",
        "url_title": "open run",
        "actions": [{"label": "Retry", "url": "https://ci.example/retry"}],
        "markdown": True,
        "device": "laptop",
    }
    assert client.post("/v1/send", json=fields, headers=bearer(token)).status_code == 200
    form = {"message": "via form", "tags": "a,b", "markdown": "1", "device": "desktop", "ttl": "60"}
    assert client.post("/v1/send", data=form, headers=bearer(token)).status_code == 200
    first, second = queued_payloads(core, computer)
    assert first["title"] == "CI" and first["tags"] == ["ci", "red"] and first["markdown"] is True
    assert first["actions"] == [{"action": "view", "label": "Retry", "url": "https://ci.example/retry"}]
    assert second["message"] == "via form" and second["tags"] == ["a", "b"]


def test_the_path_alias_behaves_identically(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    _, _, token = account
    response = client.post(f"/v1/send/{token}", json={"message": "hi", "device": "phone"})
    assert response.status_code == 200 and len(response.json()["delivered_to"]) == 1
    bad = client.post("/v1/send/rfk_live_" + "x" * 32, json={"message": "hi"})
    assert bad.status_code == 401 and bad.json() == {"error": "invalid_token"}


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({}, "invalid_message"),
        ({"message": ""}, "invalid_message"),
        ({"message": 5}, "invalid_message"),
        ({"message": "x" * 1501}, "message_too_long"),
        ({"message": "é" * 751}, "message_too_long"),
        ({"message": "m", "title": ""}, "invalid_title"),
        ({"message": "m", "title": "t" * 101}, "invalid_title"),
        ({"message": "m", "priority": "loud"}, "invalid_priority"),
        ({"message": "m", "url": "ftp://x.example"}, "invalid_url"),
        ({"message": "m", "url": "https://" + "a" * 510}, "invalid_url"),
        ({"message": "m", "url": "not a url"}, "invalid_url"),
        ({"message": "m", "url": "https://x.example/\x00"}, "invalid_url"),
        ({"message": "m", "url": "https://x.example/a\x1bb"}, "invalid_url"),
        ({"message": "m", "url": "https://x.example/\x7f"}, "invalid_url"),
        ({"message": "m", "url": "https://x.example/\u202egpj.exe"}, "invalid_url"),  # shown reversed
        ({"message": "m", "icon": "https://x.example/i\x00.png"}, "invalid_icon"),
        ({"message": "m", "actions": [{"label": "a", "url": "https://x.example/\x07"}]}, "invalid_action"),
        ({"message": "m", "url_title": "u" * 101}, "invalid_url_title"),
        ({"message": "m", "actions": [{"label": "a", "url": "https://x.example"}] * 4}, "invalid_action"),
        ({"message": "m", "actions": [{"label": "", "url": "https://x.example"}]}, "invalid_action"),
        ({"message": "m", "actions": [{"label": "a", "url": "javascript:alert(1)"}]}, "invalid_action"),
        ({"message": "m", "actions": "nope"}, "invalid_action"),
        ({"message": "m", "tags": 5}, "invalid_tags"),
        ({"message": "m", "markdown": "maybe"}, "invalid_markdown"),
        ({"message": "m", "ttl": "soon"}, "invalid_ttl"),
        ({"message": "m", "device": 7}, "invalid_device"),
    ],
)
def test_each_bad_field_has_its_own_400_code(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str], fields: dict[str, Any], code: str
) -> None:
    response = client.post("/v1/send", json=fields, headers=bearer(account[2]))
    assert response.status_code == 400
    assert error_code(response) == code


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"message": "m", "tags": ["ok", "\ud800"]}, "invalid_tags"),
        ({"message": "m", "url": "https://x.example/\ud800"}, "invalid_url"),
        ({"message": "m", "actions": [{"label": "\udfff", "url": "https://x.example"}]}, "invalid_action"),
        ({"message": "m", "actions": [{"label": "a", "url": "https://x.example/\ud800"}]}, "invalid_action"),
    ],
)
def test_text_with_a_lone_surrogate_is_refused_with_the_field_code(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str], fields: dict[str, Any], code: str
) -> None:
    """Found by fuzzing: JSON can escape a lone surrogate, UTF-8 cannot encode it; these fields let
    one through to the payload's encoding, a 500."""
    headers = {**bearer(account[2]), "content-type": "application/json"}
    response = client.post("/v1/send", content=json.dumps(fields).encode(), headers=headers)
    assert response.status_code == 400
    assert error_code(response) == code


def test_byte_length_errors_carry_bytes_and_max(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    response = client.post("/v1/send", json={"message": "é" * 751}, headers=bearer(account[2]))
    assert response.json()["error"]["details"] == {"bytes": 1502, "max": 1500}


def test_a_serialized_envelope_over_2048_bytes_is_413_with_size(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    fields = {"message": "m" * 1500, "title": "t" * 100, "url": "https://x.example/" + "p" * 480}
    response = client.post("/v1/send", json=fields, headers=bearer(account[2]))
    assert response.status_code == 413 and error_code(response) == "payload_too_large"
    details = response.json()["error"]["details"]
    assert details["max"] == 2048 and details["size"] > 2048


def test_tags_and_ttl_are_trimmed_with_warnings_not_errors(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    _, computer, token = account
    fields = {
        "message": "m",
        "tags": [f"t{n}" for n in range(7)] + ["x" * 40],
        "ttl": 10**9,
        "device": "laptop",
    }
    response = client.post("/v1/send", json=fields, headers=bearer(token))
    assert response.status_code == 200
    assert len(response.json()["warnings"]) == 2
    assert queued_payloads(core, computer)[0]["tags"] == ["t0", "t1", "t2", "t3", "t4"]


def test_unknown_device_selectors_become_warnings(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, _, token = account
    response = client.post("/v1/send", json={"message": "m", "device": "phone,fridge"}, headers=bearer(token))
    assert response.status_code == 200
    assert response.json()["delivered_to"] == [{"device_id": phone.device_id, "type": "phone"}]
    assert response.json()["warnings"] == ["device: nothing matches 'fridge'"]


@pytest.mark.parametrize("device", ["fridge", "fridge,toaster", "desktop"])
def test_a_send_that_would_reach_no_device_is_refused_and_charges_nothing(
    client: TestClient, core: Core, device: str
) -> None:
    phone = register_phone(client)  # no computer: "desktop" matches nothing either
    token = str(create_token(client, phone)["token"])
    response = client.post("/v1/send", json={"message": "m", "device": device}, headers=bearer(token))
    assert response.status_code == 400 and error_code(response) == "no_matching_device"
    assert response.json()["error"]["details"] == {"device": device.split(",")}
    assert queued_payloads(core, phone) == []
    ok = client.post("/v1/send", json={"message": "m"}, headers=bearer(token))
    assert int(ok.headers["x-ratelimit-remaining"]) == int(ok.headers["x-ratelimit-limit"]) - 1  # the first


def test_selectors_by_id_and_name_are_deduplicated(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    _, computer, token = account
    selector = f"{computer.device_id},LAPTOP,desktop"
    response = client.post("/v1/send", json={"message": "m", "device": selector}, headers=bearer(token))
    assert response.json()["delivered_to"] == [{"device_id": computer.device_id, "type": "cli"}]


def test_a_priority_above_the_cap_is_403_priority_capped(client: TestClient) -> None:
    phone = register_phone(client)
    token = str(create_token(client, phone, priority_cap="default")["token"])
    response = client.post("/v1/send", json={"message": "m", "priority": "high"}, headers=bearer(token))
    assert response.status_code == 403 and error_code(response) == "priority_capped"
    ok = client.post("/v1/send", json={"message": "m", "priority": "low"}, headers=bearer(token))
    assert ok.status_code == 200


def test_an_account_without_a_phone_is_409(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, _, token = account
    assert client.delete("/v1/devices/me", headers=phone.auth).status_code == 204
    response = client.post("/v1/send", json={"message": "m"}, headers=bearer(token))
    assert response.status_code == 409 and error_code(response) == "no_phone_device"


@pytest.mark.parametrize(
    ("content", "content_type", "code", "status"),
    [
        (b"{nope", "application/json", "invalid_json", 400),
        (b"[1]", "application/json", "invalid_body", 400),
        (b"\xff\xfe", "text/plain", "invalid_body", 400),
        (b"<m/>", "application/xml", "unsupported_content_type", 415),
        (b"message=" + b"%ff", "application/x-www-form-urlencoded", "invalid_body", 400),
        (b"[" * 50_000, "application/json", "invalid_json", 400),  # found by fuzzing: was a 500
    ],
)
def test_malformed_bodies_are_4xx_never_500(
    client: TestClient,
    account: tuple[FakeDevice, FakeDevice, str],
    content: bytes,
    content_type: str,
    code: str,
    status: int,
) -> None:
    response = client.post(
        "/v1/send", content=content, headers={**bearer(account[2]), "content-type": content_type}
    )
    assert response.status_code == status and error_code(response) == code


def test_a_body_over_the_server_cap_is_refused_before_it_is_read(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    def chunks() -> Any:
        for _ in range(core.settings.max_body_bytes // 1024 + 2):
            yield b"x" * 1024

    response = client.post(
        "/v1/send", content=chunks(), headers={**bearer(account[2]), "content-type": "text/plain"}
    )
    assert response.status_code == 413 and error_code(response) == "body_too_large"


def test_the_plaintext_is_not_stored_anywhere_in_the_database(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    marker = "PLAINTEXT-MARKER-7f3a"
    client.post("/v1/send", json={"message": marker, "title": marker}, headers=bearer(account[2]))
    with Session(core.engine) as session:
        for row in session.exec(select(QueuedEnvelope)).all():
            assert marker.encode() not in row.blob
    if core.engine.dialect.name == "sqlite":
        database = core.engine.url.database
        assert database is not None
        core.engine.dispose()
        for suffix in ("", "-wal"):
            try:
                with open(database + suffix, "rb") as handle:
                    assert marker.encode() not in handle.read()
            except FileNotFoundError:
                continue


def test_curl_dash_d_with_bare_text_is_taken_as_the_message(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    _, computer, token = account
    response = client.post(
        "/v1/send",
        content=b"disk almost full",
        headers={**bearer(token), "content-type": "application/x-www-form-urlencoded"},
    )
    assert response.status_code == 200
    assert queued_payloads(core, computer)[-1]["message"] == "disk almost full"


def test_fields_a_send_does_not_know_are_named_in_warnings(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, _, token = account
    body = {"message": "m", "attach": "https://x.example/a.png", "colour": "red"}
    response = client.post("/v1/send", json=body, headers=bearer(token))
    assert response.status_code == 200
    assert response.json()["warnings"] == ["ignored fields a send does not know: attach, colour"]
    assert queued_payloads(core, phone)[0]["message"] == "m"


def test_ntfy_headers_on_a_send_are_named_in_warnings_not_read(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, _, token = account
    headers = {**bearer(token), "Title": "from a header", "X-Tags": "warning", "Priority": "u=3, i"}
    response = client.post("/v1/send", content=b"body text", headers=headers)
    assert response.status_code == 200
    assert response.json()["warnings"] == [
        "ignored ntfy headers (a send reads its body; ntfy's are read at /{topic}): Title, X-Tags"
    ]
    assert "title" not in queued_payloads(core, phone)[0]


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ({"message": "m", "delay": "10m"}, {}),
        ({"message": "m", "delay": 600}, {}),
        ({"message": "m", "at": "2027-01-15T08:10:00Z"}, {}),
        ({"message": "m"}, {"X-Delay": "10m"}),
        ({"message": "m"}, {"In": "600"}),
    ],
    ids=["delay duration", "delay seconds", "at ISO time", "ntfy X-Delay header", "ntfy In header"],
)
def test_a_send_asked_for_later_is_scheduled_never_delivered_at_once(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str], body: Any, headers: Any
) -> None:
    phone, _, token = account
    now = int(core.clock.now())
    if "at" in body:  # ten minutes from the test clock's now
        body = {**body, "at": datetime.fromtimestamp(now + 600, UTC).isoformat()}
    response = client.post("/v1/send", json=body, headers={**bearer(token), **headers})
    assert response.status_code == 202, response.text
    assert response.json()["scheduled"] is True and response.json()["deliver_at"] == now + 600
    assert queued_payloads(core, phone) == []


@pytest.mark.parametrize(
    "body",
    [
        {"message": "m", "delay": "tomorrow, 10am"},
        {"message": "m", "delay": "5s"},
        {"message": "m", "delay": "4d"},
        {"message": "m", "at": "2027-01-15T08:10:00"},
        {"message": "m", "delay": "10m", "at": "2000000000"},
        {"message": "m", "delay": True},
    ],
    ids=["natural language", "too soon", "too far", "no zone", "both", "not a time"],
)
def test_a_delivery_time_that_cannot_be_read_is_invalid_delay(
    client: TestClient, account: tuple[FakeDevice, FakeDevice, str], body: Any
) -> None:
    _, _, token = account
    response = client.post("/v1/send", json=body, headers=bearer(token))
    assert response.status_code == 400 and error_code(response) == "invalid_delay"


def test_timestamp_is_the_time_the_notification_says_it_was_sent(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, _, token = account
    response = client.post(
        "/v1/send", data={"message": "m", "timestamp": "1700000000"}, headers=bearer(token)
    )
    assert response.status_code == 200 and response.json()["warnings"] == []
    assert queued_payloads(core, phone)[0]["sent_at"] == 1700000000
    refused = client.post("/v1/send", json={"message": "m", "timestamp": -5}, headers=bearer(token))
    assert refused.status_code == 400 and error_code(refused) == "invalid_timestamp"
