"""Scheduled delivery (core/services/scheduled.py): a send with ``delay`` or ``at`` is answered 202
with its time, kept sealed per device (never its text), queued at its time and not before, once;
cancelled by its sender's DELETE of its sequence, replaced by its sender's next of that sequence,
bounded per account; devices removed and senders revoked meanwhile get nothing. Time is the test
clock's; ``deliver`` runs what the app's waker runs."""

from __future__ import annotations

import base64
import json

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from core.clock import ManualClock
from core.domain.attachments import open_attachment
from core.runtime.core import Core
from core.services import scheduled
from core.store.tables import ScheduledEnvelope, ScheduledNotification
from tests.helpers import FakeDevice, create_token, error_code, pair_computer, queued_payloads, register_phone

Account = tuple[FakeDevice, FakeDevice, dict[str, str]]


@pytest.fixture
def account(client: TestClient) -> Account:
    phone = register_phone(client, name="Pixel")
    computer = pair_computer(client, phone, name="laptop")
    return phone, computer, bearer(client, phone)


def bearer(client: TestClient, phone: FakeDevice) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(client, phone)['token']}"}


def deliver(client: TestClient, core: Core) -> int:
    """What the app's waker does when something is due, once, on the app's event loop."""
    assert client.portal is not None
    return client.portal.call(scheduled.deliver_due, core)


def schedule(client: TestClient, auth: dict[str, str], **fields: object) -> dict[str, object]:
    answer = client.post("/v1/send", json={"message": "Backup overdue", **fields}, headers=auth)
    assert answer.status_code == 202, answer.text
    return dict(answer.json())


def kept(core: Core) -> list[ScheduledNotification]:
    with Session(core.engine) as session:
        return list(session.exec(select(ScheduledNotification)).all())


def test_a_scheduled_send_reaches_every_device_at_its_time_and_not_before(
    client: TestClient, core: Core, clock: ManualClock, account: Account
) -> None:
    phone, computer, auth = account
    now = int(clock.now())
    sent = schedule(client, auth, delay="10m", title="Nightly")
    assert sent["scheduled"] is True and sent["deliver_at"] == now + 600
    assert sent["sequence_id"] == sent["id"]  # no sequence_id given: the id, which cancels it
    assert [d["device_id"] for d in sent["delivered_to"]] == [phone.device_id, computer.device_id]  # type: ignore[attr-defined]
    with Session(core.engine) as session:  # kept sealed: its text is nowhere in the database
        blobs = [row.blob for row in session.exec(select(ScheduledEnvelope)).all()]
    assert len(blobs) == 2 and all(b"Backup" not in blob and b"Nightly" not in blob for blob in blobs)
    clock.advance(599)
    assert deliver(client, core) == 0 and queued_payloads(core, phone) == []
    clock.advance(1)
    deliver(client, core)  # or the app's own waker got there first
    for device in (phone, computer):
        [payload] = queued_payloads(core, device)
        assert payload["id"] == sent["id"] and payload["message"] == "Backup overdue"
        assert payload["title"] == "Nightly" and payload["sent_at"] == now + 600
    assert kept(core) == [] and deliver(client, core) == 0  # once
    assert len(queued_payloads(core, phone)) == 1


def test_a_due_send_found_late_is_delivered_late_rather_than_lost(
    client: TestClient, core: Core, clock: ManualClock, account: Account
) -> None:
    phone, _, auth = account
    sent = schedule(client, auth, at=int(clock.now()) + 60)
    clock.advance(3 * 86_400)  # as if no waker ran for three days
    deliver(client, core)
    assert [p["id"] for p in queued_payloads(core, phone)] == [sent["id"]]


def test_its_sender_cancels_it_by_its_sequence_and_nobody_else_can(
    client: TestClient, core: Core, clock: ManualClock, account: Account
) -> None:
    phone, _, auth = account
    other = bearer(client, phone)  # another token of the same account
    mine = schedule(client, auth, delay=600, sequence_id="backup")
    theirs = schedule(client, other, delay=600, sequence_id="backup")
    assert client.delete("/v1/notifications/backup", headers=other).json()["cancelled"] == [
        {"id": theirs["id"], "deliver_at": theirs["deliver_at"]}
    ]
    unnamed = schedule(client, auth, delay=900)
    cancelled = client.delete(f"/v1/notifications/{unnamed['sequence_id']}", headers=auth)
    assert cancelled.status_code == 200 and [c["id"] for c in cancelled.json()["cancelled"]] == [
        unnamed["id"]
    ]
    again = client.delete(f"/v1/notifications/{unnamed['sequence_id']}", headers=auth)
    assert "cancelled" not in again.json()  # gone already: a clear as before, nothing to take back
    clock.advance(900)
    deliver(client, core)
    assert [p["id"] for p in queued_payloads(core, phone)] == [mine["id"]]


def test_a_later_send_of_the_same_sequence_replaces_the_waiting_one(
    client: TestClient, core: Core, clock: ManualClock, account: Account
) -> None:
    phone, _, auth = account
    schedule(client, auth, delay=600, sequence_id="heartbeat", message="no check-in")
    latest = schedule(client, auth, delay=1200, sequence_id="heartbeat", message="no check-in, really")
    clock.advance(600)
    assert deliver(client, core) == 0 and queued_payloads(core, phone) == []
    clock.advance(600)
    deliver(client, core)
    [payload] = queued_payloads(core, phone)
    assert payload["id"] == latest["id"] and payload["message"] == "no check-in, really"


def test_an_account_keeps_a_bounded_number_waiting(client: TestClient, core: Core, account: Account) -> None:
    _, _, auth = account
    core.settings = core.settings.model_copy(update={"scheduled_max_pending": 2})
    schedule(client, auth, delay=600, sequence_id="a")
    schedule(client, auth, delay=600, sequence_id="b")
    refused = client.post("/v1/send", json={"message": "m", "delay": 600}, headers=auth)
    assert refused.status_code == 409 and error_code(refused) == "too_many_scheduled"
    assert refused.json()["error"]["details"] == {"max": 2}
    schedule(client, auth, delay=700, sequence_id="a")  # replaces one: still two
    assert len(kept(core)) == 2


def test_a_device_removed_meanwhile_is_skipped_and_a_revoked_sender_sends_nothing(
    client: TestClient, core: Core, clock: ManualClock, account: Account
) -> None:
    phone, computer, auth = account
    token = create_token(client, phone)
    revoked = {"Authorization": f"Bearer {token['token']}"}
    kept_one = schedule(client, auth, delay=600)
    schedule(client, revoked, delay=600, message="from a token revoked since")
    assert client.delete("/v1/devices/me", headers=computer.auth).status_code in (200, 204)
    assert client.delete(f"/v1/tokens/{token['id']}", headers=phone.auth).status_code in (200, 204)
    clock.advance(600)
    deliver(client, core)
    assert [p["id"] for p in queued_payloads(core, phone)] == [kept_one["id"]]
    assert kept(core) == []


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"delay": "5s"}, "invalid_delay"),
        ({"delay": "3d1s"}, "invalid_delay"),
        ({"at": 1}, "invalid_delay"),
        ({"delay": 600, "priority": "urgent", "repeat": 60}, "delay_unsupported"),
    ],
    ids=["too soon", "too far", "in the past", "urgent with repeat"],
)
def test_a_send_that_cannot_be_scheduled_is_refused_and_nothing_kept(
    client: TestClient, core: Core, account: Account, fields: dict[str, object], code: str
) -> None:
    phone, _, auth = account
    refused = client.post("/v1/send", json={"message": "m", **fields}, headers=auth)
    assert refused.status_code == 400 and error_code(refused) == code, refused.text
    assert kept(core) == [] and queued_payloads(core, phone) == []


def test_the_shortest_delay_is_a_setting_lowered_only_for_tests(
    client: TestClient, core: Core, account: Account
) -> None:
    _, _, auth = account
    assert (
        error_code(client.post("/v1/send", json={"message": "m", "delay": 2}, headers=auth))
        == "invalid_delay"
    )
    core.settings = core.settings.model_copy(update={"delay_min_s": 1})
    assert schedule(client, auth, delay=2)["scheduled"] is True


def test_the_path_token_alias_and_ntfy_headers_on_send_schedule_too(
    client: TestClient, core: Core, clock: ManualClock, account: Account
) -> None:
    phone, _, auth = account
    token = auth["Authorization"].removeprefix("Bearer ")
    by_path = client.post(f"/v1/send/{token}", json={"message": "m", "delay": "1h"})
    by_header = client.post("/v1/send", json={"message": "m"}, headers={**auth, "X-Delay": "1h"})
    for answer in (by_path, by_header):
        assert answer.status_code == 202 and answer.json()["deliver_at"] == int(clock.now()) + 3600
    assert queued_payloads(core, phone) == []
    stored = json.dumps([row.model_dump() for row in kept(core)])
    assert len(kept(core)) == 2 and '"m"' not in stored


def test_a_cancel_holds_even_when_the_phone_is_too_old_to_be_told_to_clear(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client, name="Pixel", app_build=1)
    auth = bearer(client, phone)
    core.settings = core.settings.model_copy(update={"min_build_notification_clear": 2})
    schedule(client, auth, delay=600, sequence_id="nightly")
    answer = client.delete("/v1/notifications/nightly", headers=auth)
    assert answer.status_code == 200, answer.text
    assert len(answer.json()["cancelled"]) == 1 and answer.json()["delivered_to"] == []
    assert any("not cleared" in warning for warning in answer.json()["warnings"])
    refused = client.delete("/v1/notifications/nightly", headers=auth)  # nothing left to cancel
    assert refused.status_code == 426 and error_code(refused) == "phone_app_outdated"
    clock.advance(600)
    deliver(client, core)
    assert queued_payloads(core, phone) == []


def test_a_scheduled_files_attachment_is_kept_for_the_notifications_life_after_its_time(
    client: TestClient, core: Core, clock: ManualClock, account: Account
) -> None:
    phone, _, auth = account
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
    published = client.put(
        "/backups", content=png, headers={**auth, "Filename": "graph.png", "Delay": "2d", "Cache": "yes"}
    )
    assert published.status_code == 200 and published.json()["relaybox"]["scheduled"] is True, published.text
    clock.advance(2 * 86_400)
    deliver(client, core)
    [note] = queued_payloads(core, phone)
    clock.advance(86_400)  # a day after its time: three days after it was asked, still to be had
    pulled = client.get(f"/v1/attachments/{note['attachment']['id']}", headers=phone.auth)
    assert (
        pulled.status_code == 200
        and open_attachment(base64.b64decode(note["attachment"]["key"]), pulled.content) == png
    )
