"""A send's sequence_id, icon and typed actions over real HTTP: each refusal has its code, the answer
names the sequence (the one given, else the message's id), the payload each device opens carries
it qualified by its sender (so senders of one account never replace or clear each other's), and
the fields in their documented order."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from core.runtime.core import Core
from tests.helpers import FakeDevice, error_code, pair_computer, queued_payloads

HOOK = "https://hooks.example/deploy"


def send(http: httpx.Client, caller: dict[str, str], **fields: Any) -> dict[str, Any]:
    sent = http.post("/v1/send", json={"message": "deploying", **fields}, headers=caller)
    assert sent.status_code == 200, sent.text
    return dict(sent.json())


def test_the_answer_names_the_sequence_the_given_one_or_the_id(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    plain = send(http, caller)
    assert plain["sequence_id"] == plain["id"]
    # The phone keys it by its sender (this token) and its id: docs/protocol.md, "Sequences".
    sender, _, sequence = queued_payloads(core, phone)[-1]["sequence_id"].partition(":")
    assert sender.startswith("tok_") and sequence == plain["id"]

    first = send(http, caller, sequence_id="deploy-42", message="1/3 building")
    second = send(http, caller, sequence_id="deploy-42", message="2/3 testing")
    assert first["sequence_id"] == second["sequence_id"] == "deploy-42" and first["id"] != second["id"]
    by_id = send(http, caller, sequence_id=plain["id"], message="replaces the plain one")
    assert by_id["sequence_id"] == plain["id"]
    assert [p["sequence_id"] for p in queued_payloads(core, phone)] == [
        f"{sender}:{plain['id']}",
        f"{sender}:deploy-42",
        f"{sender}:deploy-42",
        f"{sender}:{plain['id']}",
    ]


def test_every_spelling_of_a_send_takes_a_sequence_id(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    token = caller["Authorization"].removeprefix("Bearer ")
    form = http.post("/v1/send", data={"message": "m", "sequence_id": "backup.nightly"}, headers=caller)
    alias = http.post(f"/v1/send/{token}", json={"message": "m", "sequence_id": "backup.nightly"})
    aliased_form = http.post(f"/v1/send/{token}", data={"message": "m", "sequence_id": "a~b_c-1"})
    empty_form = http.post("/v1/send", data={"message": "m", "sequence_id": ""}, headers=caller)
    assert [r.status_code for r in (form, alias, aliased_form, empty_form)] == [200] * 4
    assert [r.json()["sequence_id"] for r in (form, alias, aliased_form)] == [
        "backup.nightly",
        "backup.nightly",
        "a~b_c-1",
    ]
    assert empty_form.json()["sequence_id"] == empty_form.json()["id"]  # an empty form field is absent
    sender = queued_payloads(core, phone)[0]["sequence_id"].partition(":")[0]
    assert [p["sequence_id"] for p in queued_payloads(core, phone)] == [
        f"{sender}:backup.nightly",
        f"{sender}:backup.nightly",
        f"{sender}:a~b_c-1",
        f"{sender}:{empty_form.json()['id']}",
    ]


@pytest.mark.parametrize(
    "value", ["x" * 65, "a b", "a/b", "deploy#1", "été", "a\n", 42, ["a"], {"a": 1}, True]
)
def test_a_sequence_id_outside_its_alphabet_or_length_is_400(
    http: httpx.Client, caller: dict[str, str], value: Any
) -> None:
    response = http.post("/v1/send", json={"message": "m", "sequence_id": value}, headers=caller)
    assert response.status_code == 400 and error_code(response) == "invalid_sequence_id", response.text


def test_sixty_four_characters_are_a_sequence_id(http: httpx.Client, caller: dict[str, str]) -> None:
    assert send(http, caller, sequence_id="A" * 64)["sequence_id"] == "A" * 64


def test_the_payload_carries_every_field_in_its_documented_order(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    computer = pair_computer(http, phone)
    actions = [
        {"label": "Open run", "url": "https://ci.example/run/7"},
        {"action": "http", "label": "Roll back", "url": HOOK, "method": "put", "body": '{"to": 41}'},
        {"action": "http", "label": "Ping", "url": HOOK, "method": "GET"},
    ]
    send(
        http,
        caller,
        sequence_id="deploy-42",
        title="Deploy",
        message="**done** in 3 min",
        tags=["white_check_mark", "prod"],
        url="https://ci.example/run/7",
        url_title="Run 7",
        icon="https://ci.example/icon.png",
        actions=actions,
        markdown=True,
    )
    for device in (phone, computer):
        [payload] = queued_payloads(core, device)
        assert list(payload) == [
            "type",
            "id",
            "sent_at",
            "sequence_id",
            "title",
            "message",
            "priority",
            "tags",
            "url",
            "url_title",
            "icon",
            "actions",
            "markdown",
        ]
        assert payload["icon"] == "https://ci.example/icon.png" and payload["markdown"] is True
        assert payload["actions"] == [
            {"action": "view", "label": "Open run", "url": "https://ci.example/run/7"},
            {"action": "http", "label": "Roll back", "url": HOOK, "method": "PUT", "body": '{"to": 41}'},
            {"action": "http", "label": "Ping", "url": HOOK, "method": "GET"},
        ]


def test_an_http_action_without_a_method_is_a_post(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    send(http, caller, actions=[{"action": "http", "label": "Ack", "url": HOOK}])
    assert queued_payloads(core, phone)[0]["actions"] == [
        {"action": "http", "label": "Ack", "url": HOOK, "method": "POST"}
    ]


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"icon": "http://ci.example/icon.png"}, "invalid_icon"),  # https only
        ({"icon": "https://ci.example/" + "i" * 495}, "invalid_icon"),
        ({"icon": "not a url"}, "invalid_icon"),
        ({"icon": 7}, "invalid_icon"),
        ({"actions": [{"action": "http", "label": "a", "url": HOOK}] * 4}, "invalid_action"),
        ({"actions": [{"action": "broadcast", "label": "a", "url": HOOK}]}, "invalid_action"),
        ({"actions": [{"action": "http", "label": "a", "url": HOOK, "method": "DELETE"}]}, "invalid_action"),
        (
            {"actions": [{"action": "http", "label": "a", "url": HOOK, "method": "GET", "body": "x"}]},
            "invalid_action",
        ),
        ({"actions": [{"action": "http", "label": "a", "url": HOOK, "body": "é" * 257}]}, "invalid_action"),
        ({"actions": [{"action": "http", "label": "a", "url": HOOK, "body": 5}]}, "invalid_action"),
        ({"actions": [{"action": "http", "label": "a", "url": HOOK, "headers": {}}]}, "invalid_action"),
        ({"actions": [{"label": "a", "url": HOOK, "method": "POST"}]}, "invalid_action"),  # a view's
        ({"actions": [{"action": "http", "label": "a", "url": "ftp://x.example"}]}, "invalid_action"),
        ({"actions": [{"action": "http", "label": "a" * 33, "url": HOOK}]}, "invalid_action"),
    ],
)
def test_icon_and_action_refusals_have_their_codes(
    http: httpx.Client, caller: dict[str, str], fields: dict[str, Any], code: str
) -> None:
    response = http.post("/v1/send", json={"message": "m", **fields}, headers=caller)
    assert response.status_code == 400 and error_code(response) == code, response.text


def test_an_http_action_body_may_be_512_bytes_and_no_more(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    fits = [{"action": "http", "label": "a", "url": HOOK, "body": "é" * 256}]
    send(http, caller, actions=fits)
    assert queued_payloads(core, phone)[0]["actions"][0]["body"] == "é" * 256
    over = [{"action": "http", "label": "a", "url": HOOK, "body": "é" * 256 + "x"}]
    refused = http.post("/v1/send", json={"message": "m", "actions": over}, headers=caller)
    assert refused.status_code == 400 and refused.json()["error"]["details"] == {"bytes": 513, "max": 512}


def test_a_refused_send_charges_nothing_and_sends_nothing(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    refused = http.post("/v1/send", json={"message": "m", "sequence_id": "no spaces"}, headers=caller)
    assert refused.status_code == 400
    assert queued_payloads(core, phone) == []
    ok = http.post("/v1/send", json={"message": "m"}, headers=caller)
    assert int(ok.headers["x-ratelimit-remaining"]) == int(ok.headers["x-ratelimit-limit"]) - 1
