"""The phone's urgent alerts (``relaybox phone run``): a notification the server sealed that
carries a ``receipt`` (a paired device's never alarms: only the server keeps receipts) alerts
again every ``repeat`` seconds (``URGENT (repeat N) [rcp_…]: …`` and the bell) until it is
acknowledged here (a typed ``ack`` line), acknowledged elsewhere or cancelled by its sender (an
``urgent_stop`` arrives: ``relaybox phone ack`` from another shell is elsewhere too), or its
``expire_at`` passes. The repeats are timed by the reminders' scheduler thread
(``client.reminder_schedule``). The alerts still repeating are kept in the phone's state file
(``KeptAlerts``), so a ``phone run`` that restarts alerts again for them at once, as a phone that
rebooted would."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from client.dispatch import one_line
from client.opener import SERVER, Received
from client.output import Output
from client.payload_fields import PayloadError, content_of, id_field, integer_field, text_field, when
from client.phone_api import PhoneApi
from client.reminder_schedule import Reminder, ReminderScheduler
from client.state import ClientError
from client.state_file import read_field, update_fields
from core.domain.urgent import EXPIRE_MAX_S, REPEAT_MAX_S

ALERTS_FIELD = "urgent_alerts"  # the state file's field: the alerts repeating, oldest first
STOPPED = {"acknowledged": "acknowledged", "cancelled": "cancelled by its sender", "expired": "expired"}


@dataclass(frozen=True, slots=True)
class Alert:
    receipt: str
    title: str | None
    message: str
    repeat_s: int
    expire_at: int  # epoch seconds

    def line(self) -> str:
        text = f"{one_line(self.title)} — {one_line(self.message)}" if self.title else one_line(self.message)
        return f"[{self.receipt}]: {text}"

    def record(self, repeat: int) -> dict[str, Any]:
        return {
            "type": "urgent",
            "receipt": self.receipt,
            "repeat": repeat,
            "title": self.title,
            "message": self.message,
            "repeat_s": self.repeat_s,
            "expire_at": self.expire_at,
        }


class KeptAlerts:
    """The repeating alerts, in the state file at ``path`` (the device's own, private to its owner)."""

    def __init__(self, path: Path, device_id: str) -> None:
        self.path = path
        self.device_id = device_id

    def load(self) -> list[Alert]:
        """The alerts the file keeps; one that cannot be read is left out."""
        raw = read_field(self.path, self.device_id, ALERTS_FIELD)
        kept: list[Alert] = []
        for entry in raw if isinstance(raw, list) else []:
            if not isinstance(entry, Mapping):
                continue
            try:
                alert = parse_alert({**entry, "repeat": entry.get("repeat_s")})
            except PayloadError:
                continue
            if alert is not None:
                kept.append(alert)
        return kept

    def save(self, alerts: Iterable[Alert]) -> None:
        entries = [
            {key: value for key, value in alert.record(0).items() if key not in ("type", "repeat")}
            for alert in alerts
        ]
        update_fields(self.path, self.device_id, {ALERTS_FIELD: entries or None})


def parse_alert(payload: Mapping[str, Any], *, now: float | None = None) -> Alert | None:
    """The urgent alert a server-sealed ``notification`` payload asks for, or ``None`` when it has
    no receipt. With ``now``, its end is held to what the server ever sets (``EXPIRE_MAX_S`` ahead),
    and its repeat to at most ``REPEAT_MAX_S``."""
    if payload.get("receipt") is None:
        return None
    repeat = integer_field(payload, "repeat")
    if repeat < 1:
        raise PayloadError("repeat must be at least 1 second")
    expire_at = integer_field(payload, "expire_at")
    if now is not None:
        expire_at = min(expire_at, int(now) + EXPIRE_MAX_S)
    title = payload.get("title")
    return Alert(
        id_field(payload, "receipt"),
        title if isinstance(title, str) and title else None,
        text_field(payload, "message"),
        min(repeat, REPEAT_MAX_S),
        expire_at,
    )


class PhoneUrgent:
    """Repeats the urgent alerts the phone receives and acknowledges them through ``api``.

    ``clock`` gives epoch seconds (tests inject one). ``hint``: how a person acknowledges here,
    shown with each new alert. ``kept``: where the repeating alerts are kept across restarts."""

    def __init__(
        self,
        api: PhoneApi,
        output: Output,
        *,
        clock: Callable[[], float] = time.time,
        hint: str = "relaybox phone ack RECEIPT",
        kept: KeptAlerts | None = None,
    ) -> None:
        self.output = output
        self._kept = kept
        self._api = api
        self._clock = clock
        self._hint = hint
        self._lock = threading.Lock()
        self._alerts: dict[str, tuple[Alert, int]] = {}  # repeating, by receipt: the alert, its repeats
        self._settled: set[str] = set()  # stopped here: a replayed notification never restarts one
        self.scheduler = ReminderScheduler(self._repeat, clock=clock, on_error=self._thread_failed)

    def start(self) -> None:
        """Start the repeats, alerting at once for every kept alert that has not expired."""
        now = self._clock()
        restored = [alert for alert in (self._kept.load() if self._kept else []) if alert.expire_at > now]
        with self._lock:
            for alert in restored:
                self._alerts[alert.receipt] = (alert, 0)
            self._save()
        self.scheduler.start()
        for alert in restored:
            self.output.show(f"URGENT (still repeating) {alert.line()}", alert.record(0) | {"restored": True})
            self.output.bell()
            self._arm(alert, now)

    def close(self) -> None:
        self.scheduler.close()

    def repeating(self) -> list[str]:
        """The receipts alerting now, newest last."""
        with self._lock:
            return list(self._alerts)

    def on_notification(self, item: Received) -> None:
        if item.sender != SERVER:
            return  # only the server keeps receipts: a paired device's "urgent" fields alarm nothing
        try:
            alert = parse_alert(item.payload, now=self._clock())
        except PayloadError as error:
            self.output.note(one_line(f"urgent notification that cannot be read: {error}"))
            return
        if alert is None:
            return
        with self._lock:
            if alert.receipt in self._alerts or alert.receipt in self._settled:
                return  # the same notification again (replayed)
            if alert.expire_at <= self._clock():
                self._settled.add(alert.receipt)
                expired = True
            else:
                self._alerts[alert.receipt] = (alert, 0)
                self._save()
                expired = False
        if expired:
            self.output.note(f"urgent notification {alert.receipt} expired before it arrived: not repeated")
            return
        self.output.show(f"URGENT {alert.line()}", alert.record(0))
        self.output.bell()
        self.output.note(
            f"it repeats every {alert.repeat_s} s until acknowledged (at most until "
            f"{when(alert.expire_at)}): {self._hint.replace('RECEIPT', alert.receipt)}"
        )
        self._arm(alert, self._clock())

    def on_stop(self, item: Received) -> str:
        """An ``urgent_stop``: acknowledged (on any device, this one too) or cancelled."""
        try:
            content = content_of(item, "urgent_stop")
            receipt, reason = id_field(content, "receipt"), text_field(content, "reason")
        except PayloadError as error:
            return one_line(f"urgent_stop that cannot be read: {error}")
        self._stop(receipt, reason)
        return ""

    def acknowledge(self, receipt: str) -> bool:
        """Acknowledge ``receipt`` (on the server: every device stops) and stop repeating it here."""
        try:
            done = self._api.acknowledge_receipt(receipt)
        except ClientError as error:
            self.output.show(
                f"ACKNOWLEDGE FAILED [{one_line(receipt)}]: {error.code}: {one_line(error.message)}",
                {
                    "type": "acknowledge_failed",
                    "receipt": receipt,
                    "code": error.code,
                    "message": error.message,
                },
            )
            return False
        self.output.show(
            f"ACKNOWLEDGED [{receipt}] ({done.status})",
            {"type": "acknowledged", "receipt": receipt, "status": done.status},
        )
        self._stop(receipt, done.status)
        return True

    def take_line(self, text: str) -> bool:
        """A typed line, if it is for the alerts: ``ack`` acknowledges the newest repeating alert,
        ``ack RECEIPT`` the one named. Any other line is left for the questions."""
        word, _, rest = text.strip().partition(" ")
        if word.lower() != "ack":
            return False
        named = rest.strip()
        repeating = self.repeating()
        if not named and not repeating:
            self.output.note("error: no_alert: no urgent notification is repeating")
            return True
        self.acknowledge(named or repeating[-1])
        return True

    def _arm(self, alert: Alert, after: float) -> None:
        self.scheduler.arm(Reminder(alert.receipt, min(int(after) + alert.repeat_s, alert.expire_at), ""))

    def _repeat(self, due: Reminder) -> None:
        with self._lock:
            entry = self._alerts.get(due.reminder_id)
            if entry is None:
                return
            alert, count = entry
            if due.fire_at >= alert.expire_at:
                entry = None
            else:
                self._alerts[alert.receipt] = (alert, count + 1)
        if entry is None:
            self._stop(alert.receipt, "expired")
            return
        self.output.show(f"URGENT (repeat {count + 1}) {alert.line()}", alert.record(count + 1))
        self.output.bell()
        self._arm(alert, due.fire_at)

    def _stop(self, receipt: str, reason: str) -> None:
        with self._lock:
            entry = self._alerts.pop(receipt, None)
            self._settled.add(receipt)
            if entry is not None:
                self._save()
        self.scheduler.cancel(receipt)
        if entry is not None:
            self.output.show(
                f"URGENT STOPPED [{receipt}]: {STOPPED.get(reason, one_line(reason))}",
                {"type": "urgent_stopped", "receipt": receipt, "reason": reason},
            )

    def _save(self) -> None:
        """Under the lock: keep the repeating alerts (a state file that cannot be written costs the
        restart's alerts only, with a note)."""
        if self._kept is None:
            return
        try:
            self._kept.save(alert for alert, _count in self._alerts.values())
        except (OSError, ValueError) as error:
            self.output.note(f"warning: urgent alerts not kept: {type(error).__name__}")

    def _thread_failed(self, error: Exception) -> None:
        with contextlib.suppress(Exception):  # the output itself may be what failed (a closed pipe)
            self.output.note(f"warning: urgent alert thread: {type(error).__name__}: {error}")
