"""Pushover's priority 2 as relaybox's urgent until acknowledged, over real HTTP: the receipt in the
answer, Pushover's receipt and cancel routes, the callback POSTed (Pushover's form) to a real TLS
receiver once a device acknowledges, html, monospace, sounds, timestamp and the app limits."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import httpx
import pytest

from core.adapters.outbound.resolver import StaticResolver
from core.bootstrap import build_core
from core.clock import ManualClock
from core.runtime.core import Core
from core.services import callback_delivery
from core.settings import Settings
from tests.fakes.webhook_receiver import HOST_NAME, WebhookReceiver, wait_until
from tests.helpers import FakeDevice, create_token, queued_payloads

EMERGENCY = {"message": "db-1 is down", "priority": "2", "retry": "30", "expire": "600"}


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[WebhookReceiver]:
    with WebhookReceiver(tmp_path) as running:
        yield running


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(float(int(time.time())))


@pytest.fixture
def core(settings: Settings, clock: ManualClock, receiver: WebhookReceiver) -> Iterator[Core]:
    allowed = settings.model_copy(
        update={"callbacks_allow_private": True, "callbacks_ca_file": receiver.ca_file}
    )
    built = build_core(allowed, clock=clock, resolver=StaticResolver({HOST_NAME: ["127.0.0.1"]}))
    yield built
    built.engine.dispose()


@pytest.fixture
def token(http: httpx.Client, phone: FakeDevice) -> str:
    return str(create_token(http, phone)["token"])


def send(http: httpx.Client, token: str, **fields: Any) -> dict[str, Any]:
    response = http.post("/v1/messages.json", data={"token": token, **fields})
    assert response.status_code == 200, response.text
    return dict(response.json())


def receipt_of(http: httpx.Client, token: str, receipt: str) -> dict[str, Any]:
    response = http.get(f"/v1/receipts/{receipt}.json", params={"token": token})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_priority_2_repeats_until_acknowledged_with_pushovers_receipt(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    answer = send(http, token, **EMERGENCY)
    receipt = answer["receipt"]
    assert answer["status"] == 1 and receipt.startswith("rcp_")
    payload = queued_payloads(core, phone)[-1]
    assert (payload["priority"], payload["receipt"], payload["repeat"]) == ("urgent", receipt, 30)
    assert payload["expire_at"] == payload["sent_at"] + 600
    pending = receipt_of(http, token, receipt)
    assert {k: pending[k] for k in ("status", "acknowledged", "expired", "called_back")} == {
        "status": 1,
        "acknowledged": 0,
        "expired": 0,
        "called_back": 0,
    }
    assert pending["expires_at"] == payload["expire_at"]
    acked = http.post(f"/v1/receipts/{receipt}/acknowledge", headers=phone.auth)
    assert acked.status_code == 200
    done = receipt_of(http, token, receipt)
    assert (done["acknowledged"], done["acknowledged_by"], done["acknowledged_by_device"]) == (
        1,
        phone.device_id,
        "Pixel",
    )
    assert done["acknowledged_at"] > 0


def test_cancel_json_stops_the_alerts(http: httpx.Client, core: Core, phone: FakeDevice, token: str) -> None:
    receipt = send(http, token, **EMERGENCY)["receipt"]
    cancelled = http.post(f"/v1/receipts/{receipt}/cancel.json", data={"token": token})
    assert cancelled.status_code == 200 and cancelled.json()["status"] == 1
    assert queued_payloads(core, phone, "urgent_stop")[-1] == {
        "type": "urgent_stop",
        "receipt": receipt,
        "reason": "cancelled",
    }
    assert receipt_of(http, token, receipt)["expired"] == 1  # it alerts no more
    unknown = http.get("/v1/receipts/rcp_" + "0" * 32 + ".json", params={"token": token})
    assert unknown.status_code == 404 and unknown.json()["errors"] == ["receipt_not_found"]


def test_the_callback_is_posted_in_pushovers_form_once_acknowledged(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str, receiver: WebhookReceiver
) -> None:
    receipt = send(http, token, **EMERGENCY, callback=receiver.url("/ack"))["receipt"]
    assert anyio.run(callback_delivery.deliver_due, core) == 0  # not due before the acknowledgement
    assert http.post(f"/v1/receipts/{receipt}/acknowledge", headers=phone.auth).status_code == 200
    anyio.run(callback_delivery.deliver_due, core)
    [posted] = receiver.wait_for("/ack", 1)
    assert posted.headers["content-type"] == "application/x-www-form-urlencoded"
    form = {key: values[0] for key, values in parse_qs(posted.body.decode()).items()}
    assert {k: form[k] for k in ("receipt", "acknowledged", "acknowledged_by", "acknowledged_by_device")} == {
        "receipt": receipt,
        "acknowledged": "1",
        "acknowledged_by": phone.device_id,
        "acknowledged_by_device": "Pixel",
    }

    # The receiver has the POST before the server has recorded its outcome: wait for the record.
    def called_back() -> dict[str, Any] | None:
        shown = receipt_of(http, token, receipt)
        return shown if shown["called_back"] else None

    assert wait_until(called_back)["called_back_at"] > 0


@pytest.mark.parametrize(
    ("callback", "code"),
    [("http://hooks.test/ack", "invalid_callback_url"), ("https://user@hooks.test/", "invalid_callback_url")],
)
def test_a_callback_the_outbound_rules_refuse_sends_nothing(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str, callback: str, code: str
) -> None:
    refused = http.post("/v1/messages.json", data={"token": token, **EMERGENCY, "callback": callback})
    assert refused.status_code == 400 and refused.json()["errors"] == [code]
    assert queued_payloads(core, phone) == []


def test_html_monospace_sound_and_timestamp(
    http: httpx.Client, core: Core, phone: FakeDevice, token: str
) -> None:
    html = '<b>Disk</b> on <font color="#f00">db-1</font>: <a href="https://x.example/g">graph</a> *95%*'
    send(http, token, message=html, html="1", timestamp="1700000000")
    payload = queued_payloads(core, phone)[-1]
    assert payload["message"] == r"**Disk** on db-1: [graph](https://x.example/g) \*95%\*"
    assert payload["markdown"] is True and payload["sent_at"] == 1700000000
    send(http, token, message="a  b\n1  2", monospace="1")
    assert queued_payloads(core, phone)[-1]["message"] == "```\na  b\n1  2\n```"
    send(http, token, message="quiet", sound="none")
    assert queued_payloads(core, phone)[-1]["priority"] == "min"  # relaybox's silent level
    for fields, code in (
        ({"sound": "siren"}, "invalid_sound"),
        ({"sound": "none", "priority": "1"}, "invalid_sound"),
        ({"html": "1", "monospace": "1"}, "invalid_body"),
        ({"encrypted": "1"}, "pushover_feature_unsupported"),
        ({"tags": "db"}, "pushover_feature_unsupported"),
    ):
        refused = http.post("/v1/messages.json", data={"token": token, "message": "m", **fields})
        assert refused.status_code == 400 and refused.json()["errors"] == [code], fields
    sounds = http.get("/v1/sounds.json", params={"token": token}).json()["sounds"]
    assert sorted(sounds) == ["none", "pushover"]


def test_app_limits_are_the_tokens_month(http: httpx.Client, token: str) -> None:
    before = http.get("/v1/apps/limits.json", params={"token": token}).json()
    send(http, token, message="m")
    after = http.get("/v1/apps/limits.json", params={"token": token}).json()
    assert before["status"] == 1 and before["limit"] > 0 and before["reset"] > 0
    assert after["remaining"] == before["remaining"] - 1
    refused = http.get("/v1/apps/limits.json", params={"token": "nope"})
    assert refused.status_code == 401 and refused.json()["errors"] == ["invalid_token"]
