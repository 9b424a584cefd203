"""Tapping a notification's buttons on the virtual phone: ``tap N`` / ``tap ID N`` typed lines make
an http button's request (method, text body, nothing of the phone's credentials) to a real far end
on loopback, show a view button's URL, follow a sequence's replacement and clear, and say why a tap
cannot be made."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

from client.dispatch import default_dispatcher
from client.opener import Received
from client.output import Output
from client.phone import register
from client.phone_ops import PhoneOps
from client.taps import NotificationButtons
from tests.fakes.far_end import far_end
from tests.fakes.webhook_receiver import wait_until


@pytest.fixture
def phone() -> tuple[NotificationButtons, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return NotificationButtons(Output(as_json=True, stdout=out, stderr=err)), out, err


def records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def notification(kind: str = "notification", **payload: Any) -> Received:
    return Received(1, "envelope", "server", "server", kind, {"type": kind, "message": "m"} | payload)


def tapped(buttons: NotificationButtons, out: io.StringIO, line: str) -> dict[str, Any]:
    before = len(records(out))
    assert buttons.take_line(line) is True
    return wait_until(lambda: records(out)[before:])[0]


def test_an_http_button_makes_its_request_when_tapped_and_only_then(
    phone: tuple[NotificationButtons, io.StringIO, io.StringIO],
) -> None:
    buttons, out, _ = phone
    headers: list[dict[str, str]] = []
    with far_end(headers) as (origin, seen):
        actions = [
            {"action": "view", "label": "Open run", "url": "https://ci.example/run/42"},
            {"action": "http", "label": "Roll back", "url": f"{origin}/rollback", "body": "to=v2.3"},
            {"action": "http", "label": "Ping", "url": f"{origin}/ping", "method": "GET", "body": "x"},
            {"action": "http", "label": "Pause", "url": f"{origin}/pause", "method": "PUT"},
        ]
        buttons.on_notification(notification(id="msg_1", actions=actions))
        assert seen == []  # nothing is sent on arrival

        assert tapped(buttons, out, "tap 2") == {
            "type": "tapped",
            "status": 204,
            "error": None,
            "notification": "msg_1",
            "button": 2,
            "label": "Roll back",
            "url": f"{origin}/rollback",
        }
        assert tapped(buttons, out, "tap msg_1 3")["status"] == 204
        assert tapped(buttons, out, "TAP 4")["status"] == 204
        opened = tapped(buttons, out, "tap 1")
        assert (opened["type"], opened["url"]) == ("open", "https://ci.example/run/42")
    assert seen == [("POST", "/rollback", "to=v2.3"), ("GET", "/ping", ""), ("PUT", "/pause", "")]
    assert headers[0]["content-type"] == "text/plain; charset=utf-8"
    assert not any({"authorization", "cookie"} & set(sent) for sent in headers)


def test_a_replacement_takes_its_sequences_buttons_and_a_clear_removes_them(
    phone: tuple[NotificationButtons, io.StringIO, io.StringIO],
) -> None:
    buttons, out, err = phone
    first = [{"action": "view", "label": "Old", "url": "https://a.example/old"}]
    buttons.on_notification(notification(id="msg_1", sequence_id="deploy", actions=first))
    buttons.on_notification(notification(id="msg_2", actions=first))
    newer = [{"action": "view", "label": "New", "url": "https://a.example/new"}]
    buttons.on_notification(notification(id="msg_3", sequence_id="deploy", actions=newer))
    assert tapped(buttons, out, "tap 1")["label"] == "New"  # the newest with buttons: the replacement
    assert tapped(buttons, out, "tap msg_2 1")["label"] == "Old"

    buttons.on_clear(notification("notification_clear", sequence_id="deploy"))
    assert buttons.take_line("tap deploy 1") is True
    assert "no_button: no button 1 on deploy" in err.getvalue()
    assert tapped(buttons, out, "tap 1")["label"] == "Old"  # msg_2 is the newest now


def test_a_tap_may_name_a_sequence_without_its_senders_part(
    phone: tuple[NotificationButtons, io.StringIO, io.StringIO],
) -> None:
    buttons, out, _ = phone
    first = [{"action": "view", "label": "First", "url": "https://a.example/1"}]
    second = [{"action": "view", "label": "Second", "url": "https://a.example/2"}]
    buttons.on_notification(notification(id="msg_1", sequence_id="tok_a:deploy-42", actions=first))
    buttons.on_notification(notification(id="msg_2", sequence_id="tok_b:deploy-42", actions=second))
    assert tapped(buttons, out, "tap deploy-42 1")["label"] == "Second"  # the newest of that name
    assert tapped(buttons, out, "tap tok_a:deploy-42 1")["label"] == "First"


def test_a_far_end_that_is_not_there_is_reported_and_other_lines_are_left_alone(
    phone: tuple[NotificationButtons, io.StringIO, io.StringIO],
) -> None:
    buttons, out, err = phone
    with far_end() as (origin, _seen):
        gone = origin  # closed when the block ends
    actions = [{"action": "http", "label": "Retry", "url": f"{gone}/retry"}]
    buttons.on_notification(notification(id="msg_1", actions=actions))
    failed = tapped(buttons, out, "tap 1")
    assert (failed["status"], failed["error"]) == (None, "ConnectError")

    assert buttons.take_line("1 not today") is False  # an answer to a question
    assert buttons.take_line("ack") is False
    assert buttons.take_line("tap") is True and "invalid_tap" in err.getvalue()
    assert buttons.take_line("tap 7") is True and "no_button: no button 7 on msg_1" in err.getvalue()
    buttons.on_notification(notification(id="msg_2", actions=[{"label": "x", "url": "javascript:alert(1)"}]))
    assert buttons.take_line("tap msg_2 1") is True and "no button 1 on msg_2" in err.getvalue()


def test_phone_run_takes_a_typed_tap_for_the_notification_it_showed(live_server: str, tmp_path: Path) -> None:
    path = tmp_path / "phone.json"
    state = register(path, server=live_server, name="Pixel")
    out = io.StringIO()
    typed, keyboard = os.pipe()
    ops = PhoneOps(
        path, state, Output(as_json=True, stdout=out, stderr=io.StringIO()), interactive=True, stdin_fd=typed
    )
    try:
        with far_end() as (origin, seen), ops:
            show = ops.install(default_dispatcher()).payloads["notification"]  # as phone run does
            actions = [{"action": "http", "label": "Restart", "url": f"{origin}/restart", "body": "now"}]
            show(notification(id="msg_1", title="Build", actions=actions))
            os.write(keyboard, b"tap 1\n")
            wait_until(lambda: [r for r in records(out) if r["type"] == "tapped"])
    finally:
        os.close(keyboard)
        os.close(typed)
    assert seen == [("POST", "/restart", "now")]
