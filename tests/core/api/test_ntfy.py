"""ntfy's publish API over a real socket: headers and their aliases, query parameters, JSON publish,
ntfy's ways of sending a token, files and linked files, sequences, and what is refused, in ntfy's
shapes. What the phone received is read from its queue, opened with its key."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from core.api.ntfy import RESERVED_TOPICS
from core.runtime.core import Core
from tests.helpers import FakeDevice, create_token, queued_payloads

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


@pytest.fixture
def token(http: httpx.Client, phone: FakeDevice) -> str:
    return str(create_token(http, phone)["token"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def last(core: Core, phone: FakeDevice) -> dict[str, Any]:
    return queued_payloads(core, phone)[-1]


def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The ntfy error shape, relaybox's code under ``relaybox``."""
    body: dict[str, Any] = response.json()
    assert response.status_code == status, response.text
    assert (body["http"], body["code"], body["relaybox"]["code"]) == (status, status * 100, code)
    assert isinstance(body["error"], str) and body["error"]
    return body


def test_the_documented_headers_become_the_notification(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    headers = {
        **bearer(token),
        "Title": "Unauthorized access detected",
        "Priority": "urgent",
        "Tags": "warning,skull",
        "Click": "https://home.example/cam",
        "Icon": "https://home.example/icon.png",
        "Markdown": "yes",
        "Actions": "view, Open portal, https://home.nest.com/, clear=true; "
        "http, Turn down, https://api.nest.com/, method=PUT, body='{\"temp\": 65}'",
    }
    response = http.post(
        "/phil_alerts", content="Remote access to **phils-laptop** detected.", headers=headers
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["event"], answer["topic"], answer["priority"]) == ("message", "phil_alerts", 5)
    assert answer["tags"] == ["warning", "skull"] and answer["content_type"] == "text/markdown"
    assert answer["id"] == answer["sequence_id"] and answer["id"].startswith("msg_")
    assert answer["relaybox"]["delivered_to"] == [{"device_id": phone.device_id, "type": "phone"}]
    payload = last(core, phone)
    assert payload["id"] == answer["id"]
    assert (payload["title"], payload["priority"], payload["tags"]) == (
        "Unauthorized access detected",
        "urgent",
        ["warning", "skull"],
    )
    assert (payload["url"], payload["icon"], payload["markdown"]) == (
        "https://home.example/cam",
        "https://home.example/icon.png",
        True,
    )
    assert payload["actions"] == [
        {"action": "view", "label": "Open portal", "url": "https://home.nest.com/"},
        {
            "action": "http",
            "label": "Turn down",
            "url": "https://api.nest.com/",
            "method": "PUT",
            "body": '{"temp": 65}',
        },
    ]


@pytest.mark.parametrize(
    ("headers", "priority"),
    [
        ({"X-Priority": "1", "X-Title": "t", "X-Tags": "a"}, "min"),
        ({"Prio": "2", "Ti": "t", "Tag": "a"}, "low"),
        ({"p": "4", "t": "t", "ta": "a"}, "high"),
        ({"Priority": "max", "Title": "t", "Tags": "a"}, "urgent"),
        ({"Priority": "u=1, i", "Title": "t", "Tags": "a"}, "default"),  # RFC 9218's, from a proxy
    ],
    ids=["x-", "short", "shortest", "names", "http priority ignored"],
)
def test_every_alias_of_a_header_is_read(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str, headers: dict[str, str], priority: str
) -> None:
    assert http.put("/aliases", content="m", headers={**bearer(token), **headers}).status_code == 200
    payload = last(core, phone)
    assert (payload["title"], payload["tags"], payload["priority"]) == ("t", ["a"], priority)


def test_query_parameters_stand_for_headers_and_get_publishes(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    query = "title=Webhook&p=high&tags=warning,skull&click=https://x.example/&md=1&message=Line+1\\nLine+2"
    assert http.get(f"/mywebhook/publish?{query}", headers=bearer(token)).status_code == 200
    payload = last(core, phone)
    assert (payload["title"], payload["priority"], payload["message"]) == (
        "Webhook",
        "high",
        "Line 1\nLine 2",
    )
    assert payload["url"] == "https://x.example/" and payload["markdown"] is True
    assert http.get("/mywebhook/trigger", headers=bearer(token)).status_code == 200
    assert last(core, phone)["message"] == "triggered"  # ntfy's message when none is given
    assert last(core, phone)["title"] == "mywebhook"  # the topic names a notification without a title


def test_a_header_wins_over_the_query_and_encoded_titles_are_read(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    headers = {**bearer(token), "Title": "=?UTF-8?B?" + base64.b64encode("Büro ✓".encode()).decode() + "?="}
    assert http.post("/t?title=query", content="m", headers=headers).status_code == 200
    assert last(core, phone)["title"] == "Büro ✓"
    raw = {**bearer(token), "Title": "Ünïcode".encode()}  # raw UTF-8 in a header, as curl sends it
    assert http.post("/t?title=query", content="m", headers=raw).status_code == 200  # type: ignore[arg-type]
    assert last(core, phone)["title"] == "Ünïcode"


def test_json_publish_at_the_root(http: httpx.Client, core: Core, phone: FakeDevice, token: str) -> None:
    body = {
        "topic": "mytopic",
        "message": "Disk space is low at 5.1 GB",
        "title": "Low disk space alert",
        "tags": ["warning", "cd"],
        "priority": 4,
        "attach": "https://filesrv.lan/space.jpg",
        "filename": "diskspace.jpg",
        "click": "https://homecamera.lan/xasds1h2xsSsa/",
        "actions": [{"action": "view", "label": "Admin panel", "url": "https://filesrv.lan/admin"}],
    }
    response = http.post("/", json=body, headers=bearer(token))
    assert response.status_code == 200, response.text
    assert response.json()["attachment"] == {"name": "diskspace.jpg", "url": "https://filesrv.lan/space.jpg"}
    payload = last(core, phone)
    assert (payload["title"], payload["priority"], payload["tags"]) == (
        "Low disk space alert",
        "high",
        ["warning", "cd"],
    )
    assert payload["actions"] == [  # the linked file is a button that opens it: the server never fetches it
        {"action": "view", "label": "Admin panel", "url": "https://filesrv.lan/admin"},
        {"action": "view", "label": "diskspace.jpg", "url": "https://filesrv.lan/space.jpg"},
    ]
    refused(http.post("/", json={"message": "no topic"}, headers=bearer(token)), 400, "invalid_topic")
    # Headers go on applying beside the JSON fields (Apprise sends its priority and tags so): a
    # field wins over its header.
    headers = {**bearer(token), "X-Priority": "5", "X-Tags": "a,b", "X-Title": "header title"}
    assert http.post(
        "/", json={"topic": "t", "message": "both", "title": "field"}, headers=headers
    ).is_success
    payload = last(core, phone)
    assert (payload["priority"], payload["tags"], payload["title"]) == ("urgent", ["a", "b"], "field")


def test_ntfys_ways_of_giving_a_token(http: httpx.Client, core: Core, phone: FakeDevice, token: str) -> None:
    def basic(user: str, password: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    auth = base64.urlsafe_b64encode(f"Bearer {token}".encode()).decode().rstrip("=")
    basic_auth = base64.urlsafe_b64encode(basic("", token)["Authorization"].encode()).decode().rstrip("=")
    for url, headers in (
        ("/t", basic("", token)),
        ("/t", basic("anyone", token)),
        ("/t", basic(token, "")),
        (f"/t?auth={auth}", {}),
        (f"/t?auth={basic_auth}", {}),
    ):
        assert http.post(url, content="m", headers=headers).status_code == 200, (url, headers)
    assert len(queued_payloads(core, phone)) == 5
    refused(http.post("/t", content="m"), 401, "missing_token")
    refused(http.post("/t", content="m", headers=basic("", "rfk_live_" + "x" * 32)), 401, "invalid_token")
    refused(http.post("/t?auth=%%%", content="m"), 401, "invalid_token")


def test_a_file_body_travels_as_an_attachment(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    response = http.put("/files", content=PNG, headers={**bearer(token), "Filename": "flower.png"})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["message"] == "You received a file: flower.png"
    assert {key: answer["attachment"][key] for key in ("name", "type", "size")} == {
        "name": "flower.png",
        "type": "image/png",
        "size": len(PNG),
    }
    attachment = last(core, phone)["attachment"]
    assert (attachment["name"], attachment["type"], attachment["size"]) == (
        "flower.png",
        "image/png",
        len(PNG),
    )
    # No file name: binary bytes are a file all the same, named by their sniffed type; a message given.
    http.put("/files?m=Look", content=PNG, headers=bearer(token))
    payload = last(core, phone)
    assert payload["message"] == "Look" and payload["attachment"]["name"] == "attachment.png"
    # Text longer than a message may be (1500 bytes) is a file too, as ntfy does past its limit.
    http.put("/files", content=b"log line\n" * 300, headers=bearer(token))
    assert last(core, phone)["attachment"]["type"] == "text/plain"


@pytest.mark.parametrize(
    ("headers", "feature"),
    [
        ({"Email": "phil@example.com"}, "email"),
        ({"X-E-Mail": "phil@example.com"}, "email"),
        ({"Call": "yes"}, "call"),
        ({"X-UnifiedPush": "1"}, "unifiedpush"),
        ({"Template": "yes"}, "template"),
        ({"Poll-ID": "abc"}, "poll_id"),
        ({"Firebase": "no"}, "firebase"),
    ],
)
def test_features_without_meaning_here_are_refused_by_name(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str, headers: dict[str, str], feature: str
) -> None:
    body = refused(
        http.post("/t", content="m", headers={**bearer(token), **headers}), 400, "ntfy_feature_unsupported"
    )
    assert body["relaybox"]["details"] == {"feature": feature}
    refused(http.post("/t?up=1", content="m", headers=bearer(token)), 400, "ntfy_feature_unsupported")
    assert queued_payloads(core, phone) == []


def test_subscribing_is_refused(http: httpx.Client, token: str) -> None:
    for kind in ("json", "sse", "raw", "ws"):
        body = refused(http.get(f"/t/{kind}", headers=bearer(token)), 400, "ntfy_feature_unsupported")
        assert body["relaybox"]["details"] == {"feature": "subscribe"}


@pytest.mark.parametrize("topic", sorted(RESERVED_TOPICS))
def test_a_topic_named_like_relayboxs_own_paths_is_refused(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str, topic: str
) -> None:
    """The JSON publish refuses it in ntfy's shape; a path keeps relaybox's own answer there."""
    refused(
        http.post("/", json={"topic": topic, "message": "m"}, headers=bearer(token)), 400, "invalid_topic"
    )
    for path in (f"/{topic}", f"/{topic}/seq-1"):  # 404, 405, or /app's redirect to /app/
        assert http.put(path, content=b"m", headers=bearer(token)).status_code in (307, 404, 405), path
    assert queued_payloads(core, phone) == []


def test_a_topic_outside_ntfys_names_is_refused(http: httpx.Client, token: str) -> None:
    refused(
        http.post("/", json={"topic": "a.b", "message": "m"}, headers=bearer(token)), 400, "invalid_topic"
    )
    assert http.post("/" + "t" * 65, content="m", headers=bearer(token)).status_code == 404


def test_delay_schedules_the_message_and_the_answer_says_when(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    now = int(core.clock.now())
    sent = [
        ({"Delay": "30min"}, "/t", now + 1800),
        ({"X-At": str(now + 3600)}, "/t", now + 3600),
        ({"In": "1h"}, "/t", now + 3600),
        ({}, "/t?in=2h", now + 7200),
    ]
    for headers, path, expected in sent:
        answer = http.post(path, content="m", headers={**bearer(token), **headers})
        body = answer.json()
        assert answer.status_code == 200 and body["time"] == expected, answer.text  # ntfy's: when it goes
        assert body["relaybox"]["scheduled"] is True and body["relaybox"]["deliver_at"] == expected
    assert queued_payloads(core, phone) == []  # nothing yet: each waits for its time
    refused(http.post("/t?delay=tomorrow,+10am", content="m", headers=bearer(token)), 400, "invalid_delay")
    refused(http.post("/", json={"topic": "t", "delay": "5s"}, headers=bearer(token)), 400, "invalid_delay")
    assert queued_payloads(core, phone) == []


def test_sequences_update_and_clear_a_notification(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    assert (
        http.put("/builds/build-42", content="Building…", headers=bearer(token)).json()["sequence_id"]
        == "build-42"
    )
    assert (
        http.post(
            "/builds", content="Done", headers={**bearer(token), "X-Sequence-ID": "build-42"}
        ).status_code
        == 200
    )
    # Both of one sequence, qualified by their sender (docs/protocol.md "Sequences").
    first, second = [p["sequence_id"] for p in queued_payloads(core, phone)]
    shown = second
    assert first == second and shown.startswith("tok_") and shown.endswith(":build-42")
    cleared = http.put("/builds/build-42/clear", headers=bearer(token))
    assert cleared.status_code == 200 and cleared.json()["event"] == "message_clear"
    deleted = http.delete("/builds/build-42", headers=bearer(token))
    assert deleted.status_code == 200 and deleted.json()["event"] == "message_delete"
    clears = queued_payloads(core, phone, "notification_clear")
    assert {c["sequence_id"] for c in clears} == {shown}


def test_cache_no_keeps_it_for_connected_devices_only(http: httpx.Client, token: str) -> None:
    answer = http.post("/t", content="m", headers={**bearer(token), "Cache": "no"}).json()
    assert answer["expires"] == answer["time"]


def test_a_bad_action_or_priority_is_refused_in_ntfys_shape(http: httpx.Client, token: str) -> None:
    refused(http.post("/t", content="m", headers={**bearer(token), "Priority": "6"}), 400, "invalid_priority")
    broadcast = {**bearer(token), "Actions": "broadcast, Take picture, extras.cmd=pic"}
    refused(http.post("/t", content="m", headers=broadcast), 400, "invalid_action")
    with_headers = {**bearer(token), "Actions": "http, Open door, https://door.lan/, headers.Authorization=x"}
    refused(http.post("/t", content="m", headers=with_headers), 400, "invalid_action")
