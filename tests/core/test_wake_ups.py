"""A browser phone's reminders fire while the browser is closed: the server keeps a wake-up sealed to
the phone and pushes it at the reminder's time (core/services/wake_ups.py), once; a cancel removes
it; nothing is pushed when the reminder is set (a browser is not woken just to be told)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlmodel import Session, select
from starlette.testclient import TestClient

from app.assembly import create_app
from core.bootstrap import build_core
from core.clock import ManualClock
from core.domain.envelope import open_envelope
from core.runtime.core import Core
from core.services import wake_ups
from core.settings import Settings
from core.store.tables import ScheduledWakeUp
from tests.core.test_push_delivery import eventually
from tests.fakes.webpush_server import FakeWebPushService, push_reach_settings
from tests.helpers import FakeDevice, create_token, register_phone

LEAD_S = 120


@pytest.fixture
def web_core(settings: Settings, clock: ManualClock, tmp_path: Path) -> Iterator[Core]:
    update = {"push_timeout_s": 2.0, **push_reach_settings()}  # the fake push service is on loopback
    built = build_core(settings.model_copy(update=update), clock=clock)
    yield built
    built.engine.dispose()


def web_phone(http: TestClient, core: Core, push_service: FakeWebPushService) -> FakeDevice:
    phone = register_phone(http, device_type="web", app_build=1)
    assert core.push.web_push_key is not None
    subscription = push_service.subscribe(application_server_key=core.push.web_push_key).subscription
    web_push = {"endpoint": subscription.endpoint, "p256dh": subscription.p256dh, "auth": subscription.auth}
    assert (
        http.patch("/v1/devices/me", json={"web_push": web_push}, headers=phone.auth).json()["push"]
        == "web_push"
    )
    return phone


def sender_auth(http: TestClient, phone: FakeDevice) -> dict[str, str]:
    return {"Authorization": f"Bearer {create_token(http, phone)['token']}"}


def remind(http: TestClient, auth: dict[str, str], at: int) -> dict[str, object]:
    answer = http.post("/v1/reminders", json={"message": "Stretch", "at": at}, headers=auth)
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def deliver_due(http: TestClient, core: Core) -> int:
    """What the server's one-second loop does, once, on the app's event loop."""
    assert http.portal is not None
    return http.portal.call(wake_ups.deliver_due, core)


def test_a_web_phones_reminder_is_pushed_at_its_time_and_only_then(
    web_core: Core, clock: ManualClock, push_service: FakeWebPushService
) -> None:
    with TestClient(create_app(core=web_core)) as http:
        phone = web_phone(http, web_core, push_service)
        at = int(clock.now()) + LEAD_S
        set_up = remind(http, sender_auth(http, phone), at)
        assert not set_up.get("warnings"), set_up
        assert push_service.received == [] and deliver_due(http, web_core) == 0
        clock.advance(LEAD_S)
        deliver_due(http, web_core)  # or the app's own one-second loop got there first
        pushed = eventually(lambda: push_service.received)[0].json()
        assert deliver_due(http, web_core) == 0 and len(push_service.received) == 1  # once
    assert pushed["type"] == "reminder" and "Stretch" not in json.dumps(pushed)
    sealed = base64.b64decode(pushed["payload"])
    opened = json.loads(open_envelope(sealed, phone.secret_key, web_core.keys.public_key))
    expected = {"type": "reminder", "reminder_id": set_up["reminder_id"], "fire_at": at, "message": "Stretch"}
    assert opened == expected


def test_a_cancelled_reminder_is_never_pushed(
    web_core: Core, clock: ManualClock, push_service: FakeWebPushService
) -> None:
    with TestClient(create_app(core=web_core)) as http:
        phone = web_phone(http, web_core, push_service)
        auth = sender_auth(http, phone)
        at = int(clock.now()) + LEAD_S
        reminder_id = remind(http, auth, at)["reminder_id"]
        assert http.delete(f"/v1/reminders/{reminder_id}", headers=auth).status_code == 202
        clock.advance(LEAD_S)
        assert deliver_due(http, web_core) == 0
    assert push_service.received == []


def test_an_app_phone_keeps_no_wake_up(web_core: Core, clock: ManualClock) -> None:
    with TestClient(create_app(core=web_core)) as http:
        phone = register_phone(http, app_build=1)
        auth = sender_auth(http, phone)
        remind(http, auth, int(clock.now()) + LEAD_S)
    with Session(web_core.engine) as session:
        assert session.exec(select(ScheduledWakeUp)).all() == []
