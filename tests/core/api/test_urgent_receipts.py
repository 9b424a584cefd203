"""Urgent until acknowledged over real HTTP: ``repeat``/``expire`` on ``/v1/send`` (JSON, form,
path token), their refusals, the receipt's lifecycle (acknowledged by a device, cancelled, expired
by the core's clock, swept), the ``urgent_stop`` each recipient gets, and who may see a receipt."""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest
from sqlmodel import Session

from core.clock import ManualClock
from core.principal import Principal
from core.runtime.core import Core
from core.services.maintenance import sweep_expired
from core.store.tables import Receipt
from tests.helpers import FakeDevice, create_token, error_code, pair_computer, queued_payloads, register_phone

URGENT = {"message": "prod is down", "title": "PagerDuty", "priority": "urgent"}


def send(http: httpx.Client, caller: dict[str, str], **fields: Any) -> dict[str, Any]:
    sent = http.post("/v1/send", json=URGENT | fields, headers=caller)
    assert sent.status_code == 200, sent.text
    return dict(sent.json())


def receipt(http: httpx.Client, caller: dict[str, str], receipt_id: str, wait: int = 0) -> dict[str, Any]:
    read = http.get(f"/v1/receipts/{receipt_id}", params={"wait": wait}, headers=caller)
    assert read.status_code == 200, read.text
    return dict(read.json())


def acknowledge(http: httpx.Client, device: FakeDevice, receipt_id: str) -> httpx.Response:
    return http.post(f"/v1/receipts/{receipt_id}/acknowledge", headers=device.auth)


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"priority": "high", "repeat": 60}, "repeat_requires_urgent"),
        ({"priority": "default", "expire": 600}, "repeat_requires_urgent"),
        ({"repeat": 29}, "invalid_repeat"),
        ({"repeat": 3601}, "invalid_repeat"),
        ({"repeat": "soon"}, "invalid_repeat"),
        ({"repeat": True}, "invalid_repeat"),
        ({"repeat": 60.5}, "invalid_repeat"),
        ({"repeat": 60, "expire": 59}, "invalid_expire"),
        ({"repeat": 60, "expire": 10_801}, "invalid_expire"),
        ({"expire": 600}, "invalid_expire"),
    ],
)
def test_repeat_and_expire_are_refused_with_their_codes(
    http: httpx.Client,
    core: Core,
    phone: FakeDevice,
    caller: dict[str, str],
    fields: dict[str, Any],
    code: str,
) -> None:
    refused = http.post("/v1/send", json=URGENT | fields, headers=caller)
    assert (refused.status_code, error_code(refused)) == (400, code), refused.text
    assert queued_payloads(core, phone, "notification") == []  # nothing was sent
    if code == "invalid_repeat":
        assert refused.json()["error"]["details"] == {"min": 30, "max": 3600}


def test_an_urgent_send_without_repeat_is_as_before(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    sent = send(http, caller)
    assert "receipt" not in sent
    [payload] = queued_payloads(core, phone, "notification")
    assert payload["priority"] == "urgent" and not {"receipt", "repeat", "expire_at"} & set(payload)


def test_form_json_text_and_path_token_sends_take_repeat_too(
    http: httpx.Client, phone: FakeDevice, caller: dict[str, str]
) -> None:
    token = caller["Authorization"].removeprefix("Bearer ")
    form = {"message": "disk full", "priority": "urgent", "repeat": "60", "expire": "120"}
    by_form = http.post("/v1/send", data=form, headers=caller)
    as_json_text = http.post("/v1/send", json=form | {"repeat": 60.0}, headers=caller)
    by_path = http.post(f"/v1/send/{token}", data=form)
    for answer in (by_form, as_json_text, by_path):
        assert answer.status_code == 200, answer.text
        state = receipt(http, caller, answer.json()["receipt"])
        assert state["status"] == "pending" and state["expires_at"] - state["created_at"] == 120


def test_the_phone_acknowledges_and_the_long_poll_hears_it(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    laptop = pair_computer(http, phone, name="laptop")
    sent = send(http, caller, repeat=60, expire=600)
    receipt_id = sent["receipt"]
    assert receipt_id.startswith("rcp_") and len(receipt_id) == 36
    [payload] = queued_payloads(core, phone, "notification")
    assert (payload["receipt"], payload["repeat"]) == (receipt_id, 60)
    pending = receipt(http, caller, receipt_id)
    assert pending == {
        "receipt": receipt_id,
        "status": "pending",
        "expires_at": pending["created_at"] + 600,
        "created_at": pending["created_at"],
    }
    assert payload["expire_at"] == pending["expires_at"]

    polled: list[dict[str, Any]] = []
    waiter = threading.Thread(target=lambda: polled.append(receipt(http, caller, receipt_id, wait=20)))
    waiter.start()
    acked = acknowledge(http, phone, receipt_id)
    waiter.join(25)
    assert acked.status_code == 200, acked.text
    assert acked.json()["acknowledged_by"] == {"device_id": phone.device_id, "name": "Pixel"}
    assert polled and polled[0]["status"] == "acknowledged"
    assert polled[0]["acknowledged_at"] == acked.json()["acknowledged_at"]

    # First acknowledgement wins; the later ones, and a cancel, change nothing.
    later = acknowledge(http, laptop, receipt_id).json()
    assert later["acknowledged_by"]["device_id"] == phone.device_id
    cancelled = http.post(f"/v1/receipts/{receipt_id}/cancel", headers=caller).json()
    assert cancelled["status"] == "acknowledged" and "cancelled_at" not in cancelled
    stop = {"type": "urgent_stop", "receipt": receipt_id, "reason": "acknowledged"}
    assert queued_payloads(core, phone, "urgent_stop") == [stop]  # the same phone may run twice
    assert queued_payloads(core, laptop, "urgent_stop") == [stop]


def test_the_sender_cancels_and_every_device_is_told(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    laptop = pair_computer(http, phone, name="laptop")
    receipt_id = send(http, caller, repeat=30)["receipt"]
    cancelled = http.post(f"/v1/receipts/{receipt_id}/cancel", headers=caller)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
    again = http.post(f"/v1/receipts/{receipt_id}/cancel", headers=caller).json()
    assert again == cancelled.json()  # idempotent
    stop = {"type": "urgent_stop", "receipt": receipt_id, "reason": "cancelled"}
    assert queued_payloads(core, phone, "urgent_stop") == [stop] and queued_payloads(
        core, laptop, "urgent_stop"
    ) == [stop]
    late = acknowledge(http, phone, receipt_id).json()
    assert late["status"] == "cancelled" and "acknowledged_at" not in late
    assert (
        receipt(http, caller, receipt_id)["expires_at"] - receipt(http, caller, receipt_id)["created_at"]
        == 3600
    )


def test_a_receipt_expires_by_the_clock_and_is_swept_a_day_later(
    http: httpx.Client, core: Core, clock: ManualClock, phone: FakeDevice, caller: dict[str, str]
) -> None:
    receipt_id = send(http, caller, repeat=60, expire=120)["receipt"]
    clock.advance(119)
    assert receipt(http, caller, receipt_id)["status"] == "pending"
    clock.advance(1)
    assert receipt(http, caller, receipt_id)["status"] == "expired"
    assert receipt(http, caller, receipt_id, wait=5)["status"] == "expired"  # no wait once settled
    late = acknowledge(http, phone, receipt_id).json()
    assert late["status"] == "expired" and queued_payloads(core, phone, "urgent_stop") == []
    clock.advance(86_399)
    assert core.run_sync(sweep_expired, Principal.system()).removed["receipts"] == 0
    clock.advance(1)
    assert core.run_sync(sweep_expired, Principal.system()).removed["receipts"] == 1
    gone = http.get(f"/v1/receipts/{receipt_id}", headers=caller)
    assert (gone.status_code, error_code(gone)) == (404, "receipt_not_found")


def test_another_account_sees_no_receipt(
    http: httpx.Client, phone: FakeDevice, caller: dict[str, str]
) -> None:
    receipt_id = send(http, caller, repeat=60)["receipt"]
    stranger = register_phone(http, name="Other")
    strangers_token = {"Authorization": f"Bearer {create_token(http, stranger)['token']}"}
    for answer in (
        http.get(f"/v1/receipts/{receipt_id}", headers=strangers_token),
        http.post(f"/v1/receipts/{receipt_id}/cancel", headers=strangers_token),
        acknowledge(http, stranger, receipt_id),
        http.get("/v1/receipts/rcp_" + "0" * 32, headers=caller),
    ):
        assert (answer.status_code, error_code(answer)) == (404, "receipt_not_found"), answer.text
    assert receipt(http, caller, receipt_id)["status"] == "pending"
    assert http.get(f"/v1/receipts/{receipt_id}", headers=phone.auth).status_code == 401  # a device token


def test_another_sender_of_the_same_account_sees_no_receipt(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    """Token A's receipt is out of token B's reach, as A's questions are: B can neither read nor
    cancel it, and A's alarm keeps going; any device of the account may still acknowledge it."""
    receipt_id = send(http, caller, repeat=60)["receipt"]
    other = {"Authorization": f"Bearer {create_token(http, phone, label='other')['token']}"}
    for answer in (
        http.get(f"/v1/receipts/{receipt_id}", headers=other),
        http.get(f"/v1/receipts/{receipt_id}", params={"wait": 1}, headers=other),
        http.post(f"/v1/receipts/{receipt_id}/cancel", headers=other),
    ):
        assert (answer.status_code, error_code(answer)) == (404, "receipt_not_found"), answer.text
    assert receipt(http, caller, receipt_id)["status"] == "pending"
    assert queued_payloads(core, phone, "urgent_stop") == []
    assert acknowledge(http, phone, receipt_id).json()["status"] == "acknowledged"
    assert receipt(http, caller, receipt_id)["status"] == "acknowledged"


def test_a_receipt_kept_before_receipts_had_owners_is_its_accounts(
    http: httpx.Client, core: Core, phone: FakeDevice, caller: dict[str, str]
) -> None:
    receipt_id = send(http, caller, repeat=60)["receipt"]
    with Session(core.engine) as session:  # as migration 0024 left it
        row = session.get(Receipt, receipt_id)
        assert row is not None and (row.owner or "").startswith("token:tok_")
        row.owner = None
        session.add(row)
        session.commit()
    other = {"Authorization": f"Bearer {create_token(http, phone, label='other')['token']}"}
    assert receipt(http, other, receipt_id)["status"] == "pending"


def test_the_priority_cap_still_applies(http: httpx.Client, phone: FakeDevice) -> None:
    capped = {"Authorization": f"Bearer {create_token(http, phone, priority_cap='high')['token']}"}
    refused = http.post("/v1/send", json=URGENT | {"repeat": 60}, headers=capped)
    assert (refused.status_code, error_code(refused)) == (403, "priority_capped")


def test_an_old_phone_app_and_too_many_repeating_are_refused(
    http: httpx.Client, core: Core, caller: dict[str, str]
) -> None:
    core.settings = core.settings.model_copy(update={"limit_ip_minute": 100})
    for _ in range(20):
        send(http, caller, repeat=60)
    refused = http.post("/v1/send", json=URGENT | {"repeat": 60}, headers=caller)
    assert (refused.status_code, error_code(refused)) == (429, "too_many_urgent")
    assert int(refused.headers["Retry-After"]) >= 1
    assert "receipt" not in send(http, caller)  # alerting once is still fine

    old = register_phone(http, name="Old", app_build=3)
    old_caller = {"Authorization": f"Bearer {create_token(http, old)['token']}"}
    core.settings = core.settings.model_copy(update={"min_build_urgent_repeat": 4})
    refused = http.post("/v1/send", json=URGENT | {"repeat": 60}, headers=old_caller)
    assert (refused.status_code, error_code(refused)) == (426, "phone_app_outdated")
    assert refused.json()["error"]["details"] == {"app_build": 3, "minimum": 4}


def test_the_pushover_shim_maps_emergency_priority_onto_a_receipt(
    http: httpx.Client, caller: dict[str, str]
) -> None:
    token = caller["Authorization"].removeprefix("Bearer ")
    form = {"token": token, "user": "u" * 30, "message": "m", "retry": "60", "expire": "600"}
    emergency = http.post("/v1/messages.json", data=form | {"priority": "2"})
    assert emergency.status_code == 200 and emergency.json()["receipt"].startswith("rcp_")
    high = http.post("/v1/messages.json", data=form | {"priority": "1"})  # retry/expire ignored, as Pushover
    assert high.status_code == 200 and high.json()["status"] == 1 and "receipt" not in high.json()
