"""The virtual phone's urgent alerts: ``phone run``'s handlers, in process, against a real server
over HTTP. A typed ``ack`` line acknowledges the repeating alert (the receipt then names this
phone); an alert stops by itself at its expiry (on an injected clock); a replayed notification
never starts a second alert, and a stop for a receipt the phone never saw prints nothing."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from client import phone
from client.dispatch import default_dispatcher
from client.opener import Received
from client.output import Output
from client.phone_api import PhoneApi
from client.phone_ops import PhoneOps
from client.state_file import write_state
from client.urgent import KeptAlerts, PhoneUrgent, parse_alert
from core.clock import SystemClock
from core.domain.envelope import open_envelope
from core.domain.urgent import EXPIRE_MAX_S
from core.runtime.core import Core
from tests.helpers import queued_rows

WAIT_S = 10.0


@pytest.fixture
def clock() -> SystemClock:
    """The server on the real clock: the phone times its repeats against the server's expire_at."""
    return SystemClock()


@pytest.fixture
def server(core: Core, live_server: str) -> str:
    core.settings = core.settings.model_copy(update={"urgent_min_repeat_s": 1})
    return live_server


def records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def eventually(check: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + WAIT_S
    while not (found := check()):
        assert time.monotonic() < deadline, "not within the time allowed"
        time.sleep(0.05)
    return found


def notification_of(core: Core, device_id: str, secret_key: bytes) -> Received:
    """The phone's queued notification, opened with its key, as ``phone run`` receives it."""
    [row] = queued_rows(core.engine, device_id, "notification")
    payload = json.loads(open_envelope(row.blob, secret_key, core.keys.public_key))
    return Received(int(row.seq or 0), "envelope", "server", "server", "notification", payload)


def test_a_typed_ack_acknowledges_the_repeating_alert(core: Core, server: str, tmp_path: Path) -> None:
    path = tmp_path / "phone.json"
    state = phone.register(path, server=server, name="Pixel")
    token = phone.create_token(path, label="pager").token
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server, headers=headers, timeout=10) as http:
        fields = {"message": "disk full", "priority": "urgent", "repeat": 1, "expire": 120}
        receipt = http.post("/v1/send", json=fields).json()["receipt"]
        out = io.StringIO()
        typed, keyboard = os.pipe()
        ops = PhoneOps(
            path,
            state,
            Output(as_json=True, stdout=out, stderr=io.StringIO()),
            interactive=True,
            stdin_fd=typed,
        )
        try:
            with ops:
                show = ops.install(default_dispatcher()).payloads["notification"]  # as phone run does
                show(notification_of(core, state.device_id, state.secret_key_bytes))
                eventually(lambda: [r for r in records(out) if r.get("repeat") == 1])
                os.write(keyboard, b"ack\n")
                eventually(lambda: [r for r in records(out) if r["type"] == "urgent_stopped"])
                repeated = len([r for r in records(out) if r["type"] == "urgent"])
                time.sleep(1.5)
                assert len([r for r in records(out) if r["type"] == "urgent"]) == repeated
        finally:
            os.close(keyboard)
            os.close(typed)
        acknowledged = http.get(f"/v1/receipts/{receipt}").json()
    assert [r["type"] for r in records(out)][-2:] == ["acknowledged", "urgent_stopped"]
    assert acknowledged["status"] == "acknowledged"
    assert acknowledged["acknowledged_by"] == {"device_id": state.device_id, "name": "Pixel"}


class Manual:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def alert_payload(**changes: Any) -> dict[str, Any]:
    return {
        "type": "notification",
        "id": "msg_1",
        "message": "disk full",
        "priority": "urgent",
        "receipt": "rcp_1",
        "repeat": 2,
        "expire_at": 1_800_000_005,
    } | changes


def received(payload: dict[str, Any], kind: str = "notification") -> Received:
    return Received(1, "envelope", "server", "server", kind, payload)


@pytest.fixture
def alerts() -> Iterator[tuple[PhoneUrgent, Manual, io.StringIO]]:
    manual, out = Manual(), io.StringIO()
    api = PhoneApi("http://127.0.0.1:9", "rbd_unused")  # never called: nothing here acknowledges
    urgent = PhoneUrgent(api, Output(as_json=True, stdout=out, stderr=io.StringIO()), clock=manual)
    with api:
        urgent.start()
        try:
            yield urgent, manual, out
        finally:
            urgent.close()


def test_an_alert_repeats_on_its_clock_and_stops_at_its_expiry(
    alerts: tuple[PhoneUrgent, Manual, io.StringIO],
) -> None:
    urgent, manual, out = alerts
    urgent.on_notification(received(alert_payload()))
    urgent.on_notification(received(alert_payload()))  # replayed: one alert
    for now, expected in ((1_800_000_002, 1), (1_800_000_004, 2)):
        manual.now = now
        urgent.scheduler.poke()
        eventually(lambda expected=expected: records(out)[-1].get("repeat") == expected)  # type: ignore[misc]
    manual.now = 1_800_000_005
    urgent.scheduler.poke()
    eventually(lambda: records(out)[-1]["type"] == "urgent_stopped")
    assert [(r["type"], r.get("repeat"), r.get("reason")) for r in records(out)] == [
        ("urgent", 0, None),
        ("urgent", 1, None),
        ("urgent", 2, None),
        ("urgent_stopped", None, "expired"),
    ]
    assert urgent.repeating() == []
    urgent.on_notification(received(alert_payload()))  # replayed after it stopped: not again
    stop = {"type": "urgent_stop", "receipt": "rcp_unknown", "reason": "cancelled"}
    assert urgent.on_stop(received(stop, "urgent_stop")) == ""
    assert len(records(out)) == 4


def test_what_is_not_an_alert_is_left_alone(alerts: tuple[PhoneUrgent, Manual, io.StringIO]) -> None:
    urgent, _manual, out = alerts
    assert parse_alert({"type": "notification", "message": "plain"}) is None
    urgent.on_notification(received(alert_payload(expire_at=1_799_999_999, receipt="rcp_2")))  # expired
    assert urgent.repeating() == [] and records(out) == []
    assert urgent.take_line("1 not today") is False  # an answer to a question, not for the alerts
    bad = urgent.on_stop(received({"type": "urgent_stop", "reason": "cancelled"}, "urgent_stop"))
    assert bad.startswith("urgent_stop that cannot be read: receipt")


def test_only_the_server_sets_off_an_alarm_and_never_past_what_it_allows(
    alerts: tuple[PhoneUrgent, Manual, io.StringIO],
) -> None:
    """A paired computer that seals receipt, a repeat of a second and an end in ten years into a
    notification of its own sets off nothing; the server's own alert ends within EXPIRE_MAX_S."""
    urgent, manual, out = alerts
    forged = alert_payload(receipt="rcp_forged", repeat=1, expire_at=int(manual.now) + 10 * 365 * 86_400)
    urgent.on_notification(Received(1, "envelope", "laptop-id", "laptop", "notification", forged))
    assert urgent.repeating() == [] and records(out) == []
    urgent.on_notification(received(forged | {"receipt": "rcp_far"}))
    [shown] = records(out)
    assert shown["expire_at"] == int(manual.now) + EXPIRE_MAX_S


def test_a_restarted_phone_alerts_again_for_what_was_repeating_and_forgets_what_stopped(
    tmp_path: Path,
) -> None:
    path = tmp_path / "phone.json"
    write_state(path, "dev_phone", {"device_id": "dev_phone"})
    manual = Manual()

    def run_phone() -> tuple[PhoneUrgent, io.StringIO]:
        out = io.StringIO()
        api = PhoneApi("http://127.0.0.1:9", "rbd_unused")  # never called: nothing here acknowledges
        kept = KeptAlerts(path, "dev_phone")
        return PhoneUrgent(
            api, Output(as_json=True, stdout=out, stderr=io.StringIO()), clock=manual, kept=kept
        ), out

    first, _ = run_phone()
    first.start()
    first.on_notification(received(alert_payload()))
    first.on_notification(received(alert_payload(receipt="rcp_2", expire_at=1_800_000_003)))
    first.on_notification(received(alert_payload(receipt="rcp_3", title="Backup")))
    first.on_stop(
        received({"type": "urgent_stop", "receipt": "rcp_3", "reason": "acknowledged"}, "urgent_stop")
    )
    first.close()
    assert "disk full" in path.read_text() and path.stat().st_mode & 0o077 == 0

    manual.now = 1_800_000_004  # rcp_2 expired while the phone was off
    second, out = run_phone()
    second.start()
    try:
        assert second.repeating() == ["rcp_1"]
        [restored] = records(out)
        assert (restored["receipt"], restored["repeat"], restored["restored"]) == ("rcp_1", 0, True)
        manual.now = 1_800_000_005
        second.scheduler.poke()
        eventually(lambda: records(out)[-1]["type"] == "urgent_stopped")  # at its expiry, as before
    finally:
        second.close()
    assert KeptAlerts(path, "dev_phone").load() == []
    assert json.loads(path.read_text())["device_id"] == "dev_phone"  # the rest of the state is kept
