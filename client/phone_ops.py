"""What the virtual phone does while ``relaybox phone run`` follows its stream: reminders
(``client.reminders``), questions (``client.questions``), urgent alerts that repeat until
acknowledged (``client.urgent``), documents (``client.documents``) and the ring, here.
``PhoneOps`` builds one handler per operation over one phone connection and installs them into a
``Dispatcher``; each prints its own results through the shared ``Output`` and returns ``""``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import httpx

from client.attachments import PhoneAttachments
from client.dispatch import Describe, Dispatcher, one_line
from client.documents import PhoneDocuments
from client.downloads import default_downloads_dir
from client.lifecycle import Running
from client.opener import Received
from client.output import Output
from client.phone_api import PhoneApi
from client.questions import PhoneQuestions, server_box
from client.reminders import PhoneReminders
from client.state import DeviceState
from client.taps import NotificationButtons
from client.urgent import KeptAlerts, PhoneUrgent


class PhoneOps(Running):
    """The phone's handlers for ``relaybox phone run``. A context manager: entering re-arms the
    reminders kept in the state file (firing those already due) and starts the reminder and
    urgent-alert threads and, when ``interactive``, the reader of typed lines on ``stdin_fd``
    (answers, ``ack`` for an urgent alert, ``tap N`` for a notification's button: ``client.taps``).

    ``answer``: answer every question with that choice; ``answer_text``: and with that typed reply
    where one is allowed (alone where there are no choices). ``downloads``: where documents and
    attachments go (default: the phone's folder in the user's downloads, ``client.downloads``).
    ``install`` adds the handlers to a ``Dispatcher``.
    """

    def __init__(
        self,
        path: Path,
        state: DeviceState,
        output: Output,
        *,
        answer: int | None = None,
        answer_text: str | None = None,
        interactive: bool = False,
        downloads: Path | None = None,
        clock: Callable[[], float] = time.time,
        transport: httpx.BaseTransport | None = None,
        stdin_fd: int = 0,
    ) -> None:
        self.path = path
        self.state = state
        self.output = output
        self.downloads = downloads if downloads is not None else default_downloads_dir("phone")
        self._api = PhoneApi(state.server, state.device_token, transport=transport)
        self.reminders = PhoneReminders(path, state.device_id, output, clock=clock)
        hint = 'type "ack" and Enter' if interactive else "relaybox phone ack RECEIPT"
        kept = KeptAlerts(path, state.device_id)
        self.urgent = PhoneUrgent(self._api, output, clock=clock, hint=hint, kept=kept)
        self.buttons = NotificationButtons(output, transport=transport)
        self.questions = PhoneQuestions(
            self._api,
            output,
            server_box(state),
            answer=answer,
            answer_text=answer_text,
            interactive=interactive,
            clock=clock,
            stdin_fd=stdin_fd,
            other_lines=lambda line: self.urgent.take_line(line) or self.buttons.take_line(line),
        )
        self.documents = PhoneDocuments(self._api, state, output, self.downloads)
        self.attachments = PhoneAttachments(self._api, output, self.downloads)

    def start(self) -> None:
        self.reminders.start()
        self.urgent.start()
        self.questions.start()

    def close(self) -> None:
        self.reminders.close()
        self.urgent.close()
        self._api.close()

    def install(self, dispatcher: Dispatcher) -> Dispatcher:
        shown = self.attachments.saving(dispatcher.payloads["notification"])
        cleared = dispatcher.payloads["notification_clear"]
        dispatcher.pushes.update(
            {
                "reminder": self.reminders.on_reminder,
                "reminder_cancel": self.reminders.on_reminder_cancel,
                "ring": self.on_ring,
                "document": self.documents.on_document,
                "urgent_stop": self.urgent.on_stop,
                "interaction_closed": self.questions.on_closed,
            }
        )
        dispatcher.payloads.update(
            {
                "interaction_request": self.questions.on_question,
                "notification": partial(self.on_notification, shown),
                "notification_clear": partial(self.on_clear, cleared),
                "reminder": self.reminders.on_reminder,
                "reminder_cancel": self.reminders.on_reminder_cancel,
                "urgent_stop": self.urgent.on_stop,
                "interaction_closed": self.questions.on_closed,
            }
        )
        return dispatcher

    def on_notification(self, shown: Describe, item: Received) -> str:
        """A notification: ``shown`` (described, its attachment saved), and an urgent one
        repeated until acknowledged, its buttons kept to be tapped."""
        self.urgent.on_notification(item)
        self.buttons.on_notification(item)
        return shown(item)

    def on_clear(self, cleared: Describe, item: Received) -> str:
        self.buttons.on_clear(item)
        return cleared(item)

    def on_ring(self, item: Received) -> str:
        """Print ``RING for <n> s`` and sound the terminal bell."""
        raw = item.payload.get("durationS")
        text = str(raw) if raw is not None else "?"
        duration = int(text) if text.isascii() and text.isdigit() else None
        self.output.show(f"RING for {one_line(text)} s", {"type": "ring", "duration_s": duration})
        self.output.bell()
        return ""
