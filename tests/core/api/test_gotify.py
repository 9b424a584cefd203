"""Gotify's message API over a real socket: the three ways of giving the token, JSON, form and
multipart bodies, priorities 0-10 as relaybox's five levels, extras, and Gotify's answer and error
shapes. What the phone received is read from its queue, opened with its key."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from core.runtime.core import Core
from tests.helpers import FakeDevice, create_token, queued_payloads


@pytest.fixture
def token(http: httpx.Client, phone: FakeDevice) -> str:
    return str(create_token(http, phone, label="backups")["token"])


def refused(response: httpx.Response, status: int, code: str) -> None:
    body = response.json()
    assert response.status_code == status, response.text
    assert (body["errorCode"], body["relaybox"]["code"]) == (status, code)
    assert body["error"] and body["errorDescription"]


def test_json_with_the_key_header_answers_gotifys_message(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    body = {"title": "Backup", "message": "**Backup** was successfully finished.", "priority": 2}
    response = http.post("/message", json=body, headers={"X-Gotify-Key": token})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert isinstance(answer["id"], int) and isinstance(answer["appid"], int)
    assert (answer["title"], answer["message"], answer["priority"]) == ("Backup", body["message"], 2)
    assert answer["date"].endswith("Z")
    payload = queued_payloads(core, phone)[-1]
    assert (payload["title"], payload["message"], payload["priority"]) == ("Backup", body["message"], "low")
    assert payload["id"] == answer["relaybox"]["id"]


def test_the_token_in_the_query_or_as_bearer_and_form_bodies(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    # Gotify's documented curl: ?token=<apptoken>, -F "title=my title" -F "message=my message" -F "priority=5"
    multipart = {"title": (None, "my title"), "message": (None, "my message"), "priority": (None, "5")}
    assert http.post(f"/message?token={token}", files=multipart).status_code == 200
    form = {"message": "form body", "priority": "8"}
    assert http.post("/message", data=form, headers={"Authorization": f"Bearer {token}"}).status_code == 200
    first, second = queued_payloads(core, phone)[-2:]
    assert (first["title"], first["message"], first["priority"]) == ("my title", "my message", "default")
    assert (second["title"], second["priority"]) == ("backups", "high")  # no title: the token's label


@pytest.mark.parametrize(
    ("priority", "level"),
    [
        (0, "min"),
        (1, "low"),
        (3, "low"),
        (4, "default"),
        (7, "default"),
        (8, "high"),
        (9, "high"),
        (10, "urgent"),
    ],
)
def test_priorities_map_onto_five_levels(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str, priority: int, level: str
) -> None:
    assert http.post(
        "/message", json={"message": "m", "priority": priority}, headers={"X-Gotify-Key": token}
    ).is_success
    assert queued_payloads(core, phone)[-1]["priority"] == level


def test_extras_are_read_and_the_others_named(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    extras: dict[str, Any] = {
        "client::display": {"contentType": "text/markdown"},
        "client::notification": {
            "click": {"url": "https://gotify.net"},
            "bigImageUrl": "https://placekitten.com/400/300",
        },
        "android::action": {"onReceive": {"intentUrl": "https://gotify.net"}},
    }
    response = http.post("/message", json={"message": "m", "extras": extras}, headers={"X-Gotify-Key": token})
    assert response.status_code == 200
    assert response.json()["extras"] == extras
    assert response.json()["relaybox"]["warnings"] == ["extras not read here: android::action"]
    payload = queued_payloads(core, phone)[-1]
    assert payload["markdown"] is True and payload["url"] == "https://gotify.net"
    assert payload["actions"] == [
        {"action": "view", "label": "Image", "url": "https://placekitten.com/400/300"}
    ]


def test_errors_in_gotifys_shape(http: httpx.Client, token: str) -> None:
    refused(http.post("/message", json={"message": "m"}), 401, "missing_token")
    refused(
        http.post("/message", json={"message": "m"}, headers={"X-Gotify-Key": "AbCdEf"}), 401, "invalid_token"
    )
    refused(
        http.post("/message", json={"title": "t"}, headers={"X-Gotify-Key": token}), 400, "invalid_message"
    )
    bad = {"message": "m", "priority": "high"}
    refused(http.post("/message", json=bad, headers={"X-Gotify-Key": token}), 400, "invalid_priority")
