"""The Pushover shim's device forms and attachments: Pushover's "every device" forms reach every
device, an unknown name is status 0, and an image travels end to end encrypted beside the text —
parked as one ciphertext whose key only the notified devices hold."""

from __future__ import annotations

import base64
import os
from typing import Any

import pytest
from starlette.testclient import TestClient

from core.domain.attachments import open_attachment
from core.runtime.core import Core
from core.services.attachments import MAX_BYTES
from tests.helpers import (
    FakeDevice,
    create_token,
    pair_computer,
    queued_payloads,
    register_phone,
    tables_containing,
)

IMAGE = b"\x89PNG\r\n\x1a\n" + os.urandom(3000)


@pytest.fixture
def account(client: TestClient) -> tuple[FakeDevice, FakeDevice, str]:
    phone = register_phone(client, name="Pixel")
    computer = pair_computer(client, phone, name="laptop")
    return phone, computer, str(create_token(client, phone)["token"])


@pytest.mark.parametrize("device", ["ALL_DEVICES", "all_devices", "", "Pixel,ALL_DEVICES", None])
def test_pushovers_every_device_forms_reach_every_device(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str], device: str | None
) -> None:
    phone, computer, token = account
    form = {"token": token, "user": "u" * 30, "message": "to all"} | (
        {"device": device} if device is not None else {}
    )
    assert client.post("/v1/messages.json", data=form).json()["status"] == 1
    assert [n["message"] for n in queued_payloads(core, phone)] == ["to all"]
    assert [n["message"] for n in queued_payloads(core, computer)] == ["to all"]


def test_a_named_device_gets_it_alone_and_an_unknown_name_is_status_0(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, computer, token = account
    named = client.post(
        "/v1/messages.json", data={"token": token, "message": "laptop only", "device": "laptop"}
    )
    assert named.json()["status"] == 1
    unknown = client.post("/v1/messages.json", data={"token": token, "message": "lost?", "device": "fridge"})
    assert unknown.status_code == 400
    assert (unknown.json()["status"], unknown.json()["errors"]) == (0, ["no_matching_device"])
    assert queued_payloads(core, phone) == []
    assert [n["message"] for n in queued_payloads(core, computer)] == ["laptop only"]


def opened_attachment(client: TestClient, core: Core, device: FakeDevice) -> tuple[dict[str, Any], bytes]:
    (note,) = queued_payloads(core, device)
    reference = note["attachment"]
    pulled = client.get(f"/v1/attachments/{reference['id']}", headers=device.auth)
    assert pulled.status_code == 200 and pulled.headers["content-type"] == "application/octet-stream"
    return note, open_attachment(base64.b64decode(reference["key"]), pulled.content)


def test_a_file_part_travels_encrypted_beside_the_text(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, computer, token = account
    response = client.post(
        "/v1/messages.json",
        data={"token": token, "message": "the camera saw this"},
        files={"attachment": ("front door.png", IMAGE, "image/png")},
    )
    assert response.json()["status"] == 1
    for device in (phone, computer):  # one ciphertext, the key in each device's own envelope
        note, data = opened_attachment(client, core, device)
        assert note["message"] == "the camera saw this" and data == IMAGE
        assert {k: note["attachment"][k] for k in ("format", "name", "type", "size")} == {
            "format": "secretbox-v1",
            "name": "front door.png",
            "type": "image/png",
            "size": len(IMAGE),
        }
    assert tables_containing(core.engine, IMAGE[:64].hex()) == []  # no plaintext at rest
    assert tables_containing(core.engine, "the camera saw this") == []


def test_base64_with_its_type_is_read_too(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, _, token = account
    fields = {
        "token": token,
        "message": "base64",
        "device": "Pixel",
        "attachment_base64": base64.b64encode(IMAGE).decode(),
        "attachment_type": "image/png",
    }
    assert client.post("/v1/messages.json", data=fields).json()["status"] == 1
    _, data = opened_attachment(client, core, phone)
    assert data == IMAGE


@pytest.mark.parametrize(
    ("fields", "files", "name"),
    [
        ({"attachment_base64": base64.b64encode(IMAGE).decode()}, {}, "attachment.png"),
        ({}, {"attachment": ("camera.png", IMAGE)}, "camera.png"),  # a part without a type, as Apprise sends
        ({}, {"attachment": ("camera", IMAGE, "application/octet-stream")}, "camera"),
    ],
    ids=["base64 without a type", "part without a type", "octet-stream"],
)
def test_a_file_without_its_type_keeps_its_name_and_gets_its_sniffed_type(
    client: TestClient,
    core: Core,
    account: tuple[FakeDevice, FakeDevice, str],
    fields: dict[str, str],
    files: dict[str, Any],
    name: str,
) -> None:
    phone, _, token = account
    data = {"token": token, "message": "m", "device": "Pixel", **fields}
    assert client.post("/v1/messages.json", data=data, files=files or None).json()["status"] == 1
    attachment = queued_payloads(core, phone)[-1]["attachment"]
    assert (attachment["name"], attachment["type"]) == (name, "image/png")


def test_only_the_accounts_devices_can_pull_it(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, _, token = account
    client.post(
        "/v1/messages.json",
        data={"token": token, "message": "m", "device": "Pixel"},
        files={"attachment": ("a.png", IMAGE, "image/png")},
    )
    (note,) = queued_payloads(core, phone)
    stranger = register_phone(client, name="Other")
    assert client.get(f"/v1/attachments/{note['attachment']['id']}", headers=stranger.auth).status_code == 404
    assert client.get(f"/v1/attachments/{note['attachment']['id']}").status_code == 401
    assert client.get("/v1/attachments/att_" + "0" * 32, headers=phone.auth).status_code == 404


@pytest.mark.parametrize(
    ("fields", "files", "status", "code"),
    [
        ({}, {"attachment": ("big.png", b"x" * (MAX_BYTES + 1), "image/png")}, 413, "attachment_too_large"),
        ({}, {"attachment": ("empty.png", b"", "image/png")}, 400, "invalid_attachment"),
        ({"attachment_base64": "not base64!"}, {}, 400, "invalid_attachment"),
        ({"attachment_base64": "§4", "attachment_type": "image/png"}, {}, 400, "invalid_attachment"),
        (
            {"attachment_base64": base64.b64encode(b"x").decode(), "attachment_type": "not a type"},
            {},
            400,
            "invalid_attachment",
        ),
    ],
)
def test_a_bad_attachment_is_status_0_and_nothing_is_sent(
    client: TestClient,
    core: Core,
    account: tuple[FakeDevice, FakeDevice, str],
    fields: dict[str, str],
    files: dict[str, Any],
    status: int,
    code: str,
) -> None:
    phone, _, token = account
    response = client.post(
        "/v1/messages.json", data={"token": token, "message": "m", **fields}, files=files or None
    )
    assert response.status_code == status
    assert (response.json()["status"], response.json()["errors"]) == (0, [code])
    assert queued_payloads(core, phone) == []


def test_parked_attachments_are_bounded_per_account(
    client: TestClient, core: Core, account: tuple[FakeDevice, FakeDevice, str]
) -> None:
    phone, _, token = account
    core.settings = core.settings.model_copy(update={"attachment_quota_bytes": len(IMAGE) * 2})
    for expected in (1, 0):
        response = client.post(
            "/v1/messages.json",
            data={"token": token, "message": "m", "device": "Pixel"},
            files={"attachment": ("a.png", IMAGE, "image/png")},
        )
        assert response.json()["status"] == expected
    assert response.json()["errors"] == ["storage_quota_exceeded"]
    assert len(queued_payloads(core, phone)) == 1
