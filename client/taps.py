"""Tapping a notification's buttons on the virtual phone (``relaybox phone run`` on a terminal).

A notification's buttons are listed under it, numbered from 1 (``client.notifications``). A typed
``tap N`` taps button N of the newest notification that has buttons, ``tap ID N`` that of the
notification whose id or ``sequence_id`` is ID (its sender's part, ``tok_…:``, may be left out). An
``http`` button's request is made then, and only then, as a phone app makes it: its method (POST,
PUT or GET) and text body, no credentials or cookies, redirects followed, within ``TAP_TIMEOUT_S``,
on a thread of its own so typing goes on; the outcome prints as ``TAPPED [N] label: HTTP 200`` (or
why it could not be sent). A ``view`` button prints its URL to open (``OPEN [N] label: https://…``).
A cleared notification's buttons are gone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import httpx

from client.opener import Received
from client.output import Output
from client.text import one_line

TAP_TIMEOUT_S = 10.0
MAX_KEPT = 100  # notifications whose buttons can be tapped, the oldest forgotten first
USER_AGENT = "relaybox-phone"


@dataclass(frozen=True, slots=True)
class Button:
    number: int
    label: str
    url: str
    kind: str  # "view" or "http"
    method: str = "POST"
    body: str | None = None

    def record(self, key: str) -> dict[str, Any]:
        return {"notification": key, "button": self.number, "label": self.label, "url": self.url}


def buttons_of(payload: dict[str, Any]) -> list[Button]:
    """A notification's buttons that can be tapped: each with a label and an http(s) URL."""
    actions = payload.get("actions")
    found: list[Button] = []
    for number, action in enumerate(actions if isinstance(actions, list) else [], start=1):
        if not isinstance(action, dict):
            continue
        label, url = action.get("label"), action.get("url")
        if (
            not isinstance(label, str)
            or not isinstance(url, str)
            or not url.lower().startswith(("https://", "http://"))
        ):
            continue
        kind, method = action_kind(action)
        body = action.get("body") if isinstance(action.get("body"), str) and method != "GET" else None
        found.append(Button(number, label, url, kind, method, body))
    return found


def action_kind(action: dict[str, Any]) -> tuple[str, str]:
    """A button's kind ("http" or "view") and, for an http button, its method (POST unless it
    names PUT or GET)."""
    if action.get("action") != "http":
        return "view", "POST"
    method = action.get("method")
    return "http", method if method in ("POST", "PUT", "GET") else "POST"


class NotificationButtons:
    """The buttons of the notifications this run showed (at most ``MAX_KEPT``), and their taps.
    ``transport``: for tests (an httpx transport)."""

    def __init__(self, output: Output, *, transport: httpx.BaseTransport | None = None) -> None:
        self.output = output
        self._transport = transport
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, list[Button]] = OrderedDict()  # by sequence (Received.sequence)

    def on_notification(self, item: Received) -> None:
        key = item.sequence()
        buttons = buttons_of(item.payload)
        with self._lock:
            self._kept.pop(key, None)  # a replacement's buttons replace its sequence's
            if key and buttons:
                self._kept[key] = buttons
                while len(self._kept) > MAX_KEPT:
                    self._kept.popitem(last=False)

    def on_clear(self, item: Received) -> None:
        with self._lock:
            self._kept.pop(item.sequence(), None)

    def take_line(self, text: str) -> bool:
        """A typed line, if it is a tap (``tap N`` or ``tap ID N``); any other is left alone."""
        words = text.split()
        if not words or words[0].lower() != "tap":
            return False
        if len(words) not in (2, 3) or not words[-1].isdigit():
            self.output.note(
                "error: invalid_tap: type tap N, or tap ID N (ID: a notification's id or sequence)"
            )
            return True
        with self._lock:
            key = self._find(words[1]) if len(words) == 3 else next(reversed(self._kept), "")
            buttons = self._kept.get(key, [])
        button = next((b for b in buttons if b.number == int(words[-1])), None)
        if button is None:
            self.output.note(
                f"error: no_button: no button {words[-1]} on {one_line(key) or 'any notification'}"
            )
            return True
        self.tap(key, button)
        return True

    def _find(self, typed: str) -> str:
        """The kept notification ``typed`` names: its whole key, else the newest whose own part
        (after its sender's, ``tok_…:``) is what was typed."""
        if typed in self._kept:
            return typed
        return next((key for key in reversed(self._kept) if key.rpartition(":")[2] == typed), typed)

    def tap(self, key: str, button: Button) -> None:
        if button.kind == "view":
            line = f"OPEN [{button.number}] {one_line(button.label)}: {one_line(button.url)}"
            self.output.show(line, {"type": "open"} | button.record(key))
            return
        threading.Thread(target=self._request, args=(key, button), name="tap", daemon=True).start()

    def _request(self, key: str, button: Button) -> None:
        headers = {"User-Agent": USER_AGENT}
        if button.body is not None:
            headers["Content-Type"] = "text/plain; charset=utf-8"
        try:
            with httpx.Client(
                timeout=TAP_TIMEOUT_S, follow_redirects=True, transport=self._transport
            ) as http:
                status: int | None = http.request(
                    button.method, button.url, content=button.body, headers=headers
                ).status_code
            error = None
        except httpx.HTTPError as failure:
            status, error = (
                None,
                f"no answer in {TAP_TIMEOUT_S:g} s"
                if isinstance(failure, httpx.TimeoutException)
                else type(failure).__name__,
            )
        outcome = f"HTTP {status}" if error is None else f"not sent: {error}"
        self.output.show(
            f"TAPPED [{button.number}] {one_line(button.label)}: {outcome}",
            {"type": "tapped", "status": status, "error": error} | button.record(key),
        )
