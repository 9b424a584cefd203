"""A closed browser phone repeats an urgent notification because the server pushes it again: a
repeating wake-up per browser phone, sealed to it, sent every ``repeat`` seconds (steps missed
while no waker ran are skipped, not sent in a burst) until ``expire``, and deleted at once by the
acknowledgement or the cancel, whose ``urgent_stop`` is pushed instead."""

from __future__ import annotations

import base64
import json

from sqlmodel import Session, select
from starlette.testclient import TestClient

from app.assembly import create_app
from core.clock import ManualClock
from core.domain.envelope import open_envelope
from core.runtime.core import Core
from core.store.tables import ScheduledWakeUp
from tests.core.test_push_delivery import eventually
from tests.core.test_wake_ups import deliver_due, sender_auth, web_core, web_phone
from tests.fakes.webpush_server import FakeWebPushService
from tests.helpers import FakeDevice, register_phone

__all__ = ["web_core"]  # the fixture, used by name

URGENT = {"message": "prod is down", "priority": "urgent"}


def opened(core: Core, phone: FakeDevice, pushed: dict[str, str]) -> dict[str, object]:
    sealed = base64.b64decode(pushed["payload"])
    return dict(json.loads(open_envelope(sealed, phone.secret_key, core.keys.public_key)))


def wake_ups(core: Core) -> list[ScheduledWakeUp]:
    with Session(core.engine) as session:
        return list(session.exec(select(ScheduledWakeUp)).all())


def test_an_urgent_notification_is_pushed_again_every_repeat_until_it_expires(
    web_core: Core, clock: ManualClock, push_service: FakeWebPushService
) -> None:
    with TestClient(create_app(core=web_core)) as http:
        phone = web_phone(http, web_core, push_service)
        sent = http.post(
            "/v1/send", json=URGENT | {"repeat": 30, "expire": 100}, headers=sender_auth(http, phone)
        )
        assert sent.status_code == 200, sent.text
        first = eventually(lambda: push_service.received)[0].json()  # the send's own push
        clock.advance(29)
        assert deliver_due(http, web_core) == 0
        clock.advance(1)
        deliver_due(http, web_core)  # or the app's own loop got there first
        again = eventually(lambda: push_service.received[1:])[0].json()
        assert deliver_due(http, web_core) == 0 and len(push_service.received) == 2  # once a step
        clock.advance(65)  # +95: the step at +60 was missed; one push now, none for it
        deliver_due(http, web_core)
        eventually(lambda: push_service.received[2:])
        assert deliver_due(http, web_core) == 0 and len(push_service.received) == 3
        assert wake_ups(web_core) == []  # the next step, +120, is past the expiry
        clock.advance(60)
        assert deliver_due(http, web_core) == 0
    assert first["type"] == again["type"] == "notification" and "prod" not in json.dumps(again)
    assert opened(web_core, phone, again) == opened(web_core, phone, first)
    assert opened(web_core, phone, again)["receipt"] == sent.json()["receipt"]


def test_the_acknowledgement_ends_the_pushes_and_pushes_the_stop(
    web_core: Core, clock: ManualClock, push_service: FakeWebPushService
) -> None:
    with TestClient(create_app(core=web_core)) as http:
        phone = web_phone(http, web_core, push_service)
        auth = sender_auth(http, phone)
        acked = http.post("/v1/send", json=URGENT | {"repeat": 30}, headers=auth).json()["receipt"]
        cancelled = http.post("/v1/send", json=URGENT | {"repeat": 30}, headers=auth).json()["receipt"]
        eventually(lambda: push_service.received[1:])
        assert {wake.tag for wake in wake_ups(web_core)} == {acked, cancelled}
        assert http.post(f"/v1/receipts/{acked}/acknowledge", headers=phone.auth).status_code == 200
        assert http.post(f"/v1/receipts/{cancelled}/cancel", headers=auth).status_code == 200
        assert wake_ups(web_core) == []
        stops = eventually(lambda: push_service.received[2:4] if len(push_service.received) >= 4 else None)
        clock.advance(300)
        assert deliver_due(http, web_core) == 0
    reasons = {opened(web_core, phone, stop.json())["reason"] for stop in stops}
    assert [stop.json()["type"] for stop in stops] == ["urgent_stop"] * 2 and reasons == {
        "acknowledged",
        "cancelled",
    }


def test_an_app_phone_keeps_no_wake_up(web_core: Core) -> None:
    """A phone app repeats by itself; only a browser phone is pushed again."""
    with TestClient(create_app(core=web_core)) as http:
        phone = register_phone(http, app_build=1)
        sent = http.post("/v1/send", json=URGENT | {"repeat": 30}, headers=sender_auth(http, phone))
        assert sent.status_code == 200 and sent.json()["receipt"]
    assert wake_ups(web_core) == []
