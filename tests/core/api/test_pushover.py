"""The Pushover-compatible shim: field set, encodings, priorities, shapes and headers."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.settings import Settings
from tests.helpers import create_token, pair_computer, register_phone


@pytest.fixture
def token(client: TestClient) -> str:
    phone = register_phone(client, name="Pixel")
    pair_computer(client, phone, name="laptop")
    return str(create_token(client, phone, priority_cap="high")["token"])


def test_an_urlencoded_pushover_message_succeeds_with_status_1(client: TestClient, token: str) -> None:
    form = {
        "token": token,
        "user": "uQiRzpo4DXghDmr9QzzfQu27cmVRsG",
        "message": "backup done",
        "sound": "pushover",
        "timestamp": "1700000000",
        "html": "1",
    }
    response = client.post("/v1/messages.json", data=form)
    assert response.status_code == 200
    assert response.json()["status"] == 1 and response.json()["request"].startswith("msg_")
    for header in ("x-limit-app-limit", "x-limit-app-remaining", "x-limit-app-reset", "x-ratelimit-limit"):
        assert header in response.headers
    assert response.headers["x-limit-app-remaining"] == str(int(response.headers["x-limit-app-limit"]) - 1)


def test_json_multipart_and_query_string_fields_are_all_read(client: TestClient, token: str) -> None:
    assert client.post("/v1/messages.json", json={"token": token, "message": "json"}).json()["status"] == 1
    multipart = client.post(
        "/v1/messages.json", files={"token": (None, token), "message": (None, "multipart")}
    )
    assert multipart.json()["status"] == 1
    query = client.post("/v1/messages.json", params={"token": token, "message": "query"})
    assert query.json()["status"] == 1
    token_in_query = client.post("/v1/messages.json", params={"token": token}, data={"message": "mixed"})
    assert token_in_query.json()["status"] == 1


@pytest.mark.parametrize(
    ("priority", "ok"), [("-2", True), ("-1", True), ("0", True), ("1", True), (1, True)]
)
def test_pushover_priorities_map_to_ours(client: TestClient, token: str, priority: object, ok: bool) -> None:
    response = client.post("/v1/messages.json", json={"token": token, "message": "p", "priority": priority})
    assert (response.json()["status"] == 1) is ok


def test_emergency_priority_needs_retry_and_expire_and_the_tokens_cap(client: TestClient, token: str) -> None:
    response = client.post("/v1/messages.json", data={"token": token, "message": "m", "priority": "2"})
    assert response.status_code == 400
    assert response.json()["status"] == 0 and response.json()["errors"] == ["invalid_repeat"]
    no_expire = {"token": token, "message": "m", "priority": "2", "retry": "30"}
    assert client.post("/v1/messages.json", data=no_expire).json()["errors"] == ["invalid_expire"]
    capped = client.post("/v1/messages.json", data={**no_expire, "expire": "60"})  # this token's cap: high
    assert capped.status_code == 403 and capped.json()["errors"] == ["priority_capped"]


def test_failures_have_the_status_send_would_give(client: TestClient) -> None:
    phone = register_phone(client)
    capped = str(create_token(client, phone, priority_cap="default")["token"])
    cases = [
        ({"token": "rfk_live_" + "a" * 32, "message": "m"}, 401, "invalid_token"),
        ({"token": "garbage", "message": "m"}, 401, "invalid_token"),
        ({"message": "no token"}, 401, "invalid_token"),
        ({"token": capped, "message": "m", "priority": "1"}, 403, "priority_capped"),
        (
            {
                "token": capped,
                "message": "m" * 1500,
                "title": "t" * 100,
                "url": "https://x.example/" + "p" * 480,
            },
            413,
            "payload_too_large",
        ),
        ({"token": capped, "message": ""}, 400, "invalid_message"),
        ({"token": capped, "message": "m", "priority": "7"}, 400, "invalid_priority"),
    ]
    for form, status, code in cases:
        response = client.post("/v1/messages.json", data=form)
        assert (response.status_code, response.json()["status"], response.json()["errors"]) == (
            status,
            0,
            [code],
        )


def test_an_unsupported_content_type_is_415_in_the_shim_shape(client: TestClient, token: str) -> None:
    response = client.post("/v1/messages.json", content=b"<x/>", headers={"content-type": "application/xml"})
    assert response.status_code == 415 and response.json()["errors"] == ["unsupported_content_type"]


def test_ttl_may_be_a_number_or_a_string(client: TestClient, token: str) -> None:
    assert (
        client.post("/v1/messages.json", json={"token": token, "message": "m", "ttl": 60}).json()["status"]
        == 1
    )
    assert (
        client.post("/v1/messages.json", data={"token": token, "message": "m", "ttl": "60"}).json()["status"]
        == 1
    )


def test_the_token_burst_limit_is_reported_by_name(settings: Settings, clock: ManualClock) -> None:
    core = build_core(
        settings.model_copy(update={"limit_ip_minute": 1000, "limit_token_burst": 2}), clock=clock
    )
    with TestClient(create_app(core=core)) as client:
        token = create_token(client, register_phone(client))["token"]
        for _ in range(2):
            assert client.post("/v1/messages.json", data={"token": token, "message": "m"}).status_code == 200
        refused = client.post("/v1/messages.json", data={"token": token, "message": "m"})
    core.engine.dispose()
    assert refused.status_code == 429 and refused.json()["errors"] == ["rate_limit_exceeded"]
    assert refused.headers["x-ratelimit-resource"] == "token_burst"
    assert refused.headers["x-limit-app-remaining"] == str(core.settings.limit_token_monthly - 2)
    assert int(refused.headers["retry-after"]) >= 1


def test_sounds_and_user_validation_answer_in_pushover_shapes(client: TestClient, token: str) -> None:
    sounds = client.get("/v1/sounds.json", params={"token": token}).json()
    assert sounds["status"] == 1 and "pushover" in sounds["sounds"]
    validated = client.post("/v1/users/validate.json", data={"token": token, "user": "anything"}).json()
    assert validated["status"] == 1 and validated["devices"] == ["Pixel", "laptop"]
    assert client.get("/v1/sounds.json", params={"token": "bad"}).json()["errors"] == ["invalid_token"]


def test_the_document_describes_the_shim_shape_and_every_code_send_gives(
    client: TestClient, token: str
) -> None:
    """Found by fuzzing: the document gave shim failures the standard error shape and left out the
    codes of the fields passed on to /v1/send; validate.json's fields were undocumented."""
    document = client.get("/openapi.json").json()
    paths = document["paths"]
    bad_url = client.post("/v1/messages.json", json={"token": token, "message": "m", "url": "ftp://x"})
    assert bad_url.status_code == 400 and bad_url.json()["errors"] == ["invalid_url"]
    documented = paths["/v1/messages.json"]["post"]["responses"]["400"]
    assert "invalid_url" in documented["description"]
    for path, method in (
        ("/v1/messages.json", "post"),
        ("/v1/sounds.json", "get"),
        ("/v1/users/validate.json", "post"),
    ):
        responses = paths[path][method]["responses"]
        assert responses["401"]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ShimError"
        }
        assert "429" in responses
    validate_body = paths["/v1/users/validate.json"]["post"]["requestBody"]["content"]["application/json"]
    assert validate_body["schema"] == {"$ref": "#/components/schemas/ValidateRequest"}
    assert document["components"]["schemas"]["ValidateRequest"]["required"] == ["token"]


def test_a_json_priority_written_with_a_fraction_is_that_priority(client: TestClient, token: str) -> None:
    """Found by fuzzing: the documented integer 1.0 was refused as invalid_priority."""
    response = client.post("/v1/messages.json", json={"token": token, "message": "p", "priority": 1.0})
    assert response.json()["status"] == 1
    emergency = client.post("/v1/messages.json", json={"token": token, "message": "p", "priority": 2.0})
    assert emergency.json()["errors"] == ["invalid_repeat"]  # read as 2, which needs retry and expire


def test_the_device_field_targets_like_send(client: TestClient, token: str) -> None:
    response = client.post("/v1/messages.json", data={"token": token, "message": "m", "device": "laptop"})
    assert response.json()["status"] == 1
