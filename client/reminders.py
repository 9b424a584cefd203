"""The phone's reminders (``relaybox phone run``): ``reminder`` and ``reminder_cancel`` arrive from
the phone's queue (or inline in a push). An armed reminder is kept in the state file
(``reminders``) until it fires, so a restarted phone arms it again; one whose time passed while the
phone was off fires at once. Fired and cancelled ids are remembered (``client.reminder_ledger``), so
a set replayed after its cancel, or after it fired, is never armed again."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

from client.dispatch import one_line
from client.opener import Received
from client.output import Output
from client.payload_fields import PayloadError, content_of, id_field, integer_field, text_field, when
from client.reminder_ledger import ReminderLedger, Settled
from client.reminder_schedule import Reminder, ReminderScheduler
from client.state_file import read_field, update_fields

REMINDERS: Final = "reminders"  # the state file's field of armed reminders
LATE_NOTE_S = 60  # a reminder fired this late also gets a note saying when it was due


def parse_reminder(payload: Mapping[str, Any]) -> Reminder:
    """A ``reminder`` payload: ``reminder_id``, ``fire_at`` (epoch s), ``message``."""
    return Reminder(
        id_field(payload, "reminder_id"), integer_field(payload, "fire_at"), text_field(payload, "message")
    )


def load_reminders(path: Path, device_id: str) -> list[Reminder]:
    """The armed reminders kept in the state file; malformed entries are skipped."""
    raw = read_field(path, device_id, REMINDERS)
    if not isinstance(raw, dict):
        return []
    reminders = []
    for reminder_id, entry in cast(dict[str, object], raw).items():
        if not isinstance(entry, dict):
            continue
        try:
            reminders.append(parse_reminder({"reminder_id": reminder_id, **cast(dict[str, Any], entry)}))
        except PayloadError:
            continue
    return reminders


def save_reminders(path: Path, device_id: str, reminders: Sequence[Reminder]) -> None:
    """Keep ``reminders`` as the state file's armed reminders (none: the field is removed)."""
    field = {r.reminder_id: {"fire_at": r.fire_at, "message": r.message} for r in reminders}
    update_fields(path, device_id, {REMINDERS: field or None})


class PhoneReminders:
    """Arms, cancels and fires the reminders pushed to the phone whose state is at ``path``, printing
    each outcome through ``output``; the armed ones are kept in the state file."""

    def __init__(
        self, path: Path, device_id: str, output: Output, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = path
        self.device_id = device_id
        self.output = output
        self._clock = clock
        self.ledger = ReminderLedger(path, device_id, clock=clock)
        self.scheduler = ReminderScheduler(
            self._fire, clock=clock, on_change=self._save_reminders, on_error=self._thread_failed
        )

    def start(self) -> None:
        """Re-arm the reminders kept in the state file (those already due fire at once)."""
        kept = load_reminders(self.path, self.device_id)
        if kept:
            soonest = min(kept, key=lambda reminder: reminder.fire_at)
            self.output.note(
                f"re-armed {len(kept)} reminder{'s' * (len(kept) != 1)} (next due {when(soonest.fire_at)})"
            )
        self.scheduler.restore(kept)
        self.scheduler.start()

    def close(self) -> None:
        self.scheduler.close()

    def armed(self) -> list[Reminder]:
        return self.scheduler.armed()

    def on_reminder(self, item: Received) -> str:
        try:
            reminder = parse_reminder(content_of(item, "reminder"))
        except PayloadError as error:
            return one_line(f"reminder push that cannot be read: {error}")
        settled = self.ledger.settled(reminder.reminder_id)
        if settled is not None:  # a replayed set: never armed twice, never after its cancel
            self.output.note(f"reminder {one_line(reminder.reminder_id)} was {settled} already: not armed")
            return ""
        if reminder in self.scheduler.armed():
            return ""  # the same set again (replayed): armed already
        self.output.show(
            f"REMINDER SET [{one_line(reminder.reminder_id)}] for {when(reminder.fire_at)}: "
            f"{one_line(reminder.message)}",
            {
                "type": "reminder_set",
                "reminder_id": reminder.reminder_id,
                "fire_at": reminder.fire_at,
                "message": reminder.message,
            },
        )
        self.scheduler.arm(reminder)
        return ""

    def on_reminder_cancel(self, item: Received) -> str:
        try:
            reminder_id = id_field(content_of(item, "reminder_cancel"), "reminder_id")
        except PayloadError as error:
            return one_line(f"reminder_cancel push that cannot be read: {error}")
        cancelled = self.scheduler.cancel(reminder_id)
        if self.ledger.settled(reminder_id) is None:
            fire_at = cancelled.fire_at if cancelled is not None else None
            self._remember(reminder_id, "cancelled", fire_at)
        if cancelled is not None:
            self.output.show(
                f"REMINDER CANCELLED [{one_line(reminder_id)}]: {one_line(cancelled.message)}",
                {"type": "reminder_cancelled", "reminder_id": reminder_id, "message": cancelled.message},
            )
        return ""

    def _fire(self, reminder: Reminder) -> None:
        now = self._clock()
        # Settled before it shows: a replay of its set arriving meanwhile must not arm it again.
        self._remember(reminder.reminder_id, "fired", reminder.fire_at)
        self.output.show(
            f"REMINDER: {one_line(reminder.message)}",
            {
                "type": "reminder",
                "reminder_id": reminder.reminder_id,
                "fire_at": reminder.fire_at,
                "message": reminder.message,
                "fired_at": round(now, 3),
            },
        )
        self.output.bell()
        if now - reminder.fire_at >= LATE_NOTE_S:
            self.output.note(
                f"reminder {reminder.reminder_id} was due {when(reminder.fire_at)}, while the phone was off"
            )

    def _remember(self, reminder_id: str, state: Settled, fire_at: int | None) -> None:
        try:
            self.ledger.record(reminder_id, state, fire_at=fire_at)
        except (OSError, ValueError) as error:
            self.output.note(f"warning: cannot keep settled reminders in {self.path}: {error}")

    def _save_reminders(self, armed: list[Reminder]) -> None:
        try:
            save_reminders(self.path, self.device_id, armed)
        except (OSError, ValueError) as error:
            self.output.note(f"warning: cannot keep the armed reminders in {self.path}: {error}")

    def _thread_failed(self, error: Exception) -> None:
        with contextlib.suppress(Exception):  # the output itself may be what failed (a closed pipe)
            self.output.note(f"warning: reminder thread: {type(error).__name__}: {error}")
