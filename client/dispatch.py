"""Dispatch: what a received payload or push means, as one line of text."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from client.notifications import NotificationBoard
from client.opener import Received
from client.text import one_line

__all__ = ["Describe", "Dispatcher", "default_dispatcher", "describe_fields", "one_line"]

Describe = Callable[[Received], str]


@dataclass
class Dispatcher:
    """Describers by envelope payload type and by push type; the fallback prints the fields.

    Commands extend the tables (``payloads["reminder"] = …``); a describer may also act (reply,
    ring) before returning its line. The CLI defers Ctrl-C while one runs (an event is handled
    whole or not at all), so a describer must not wait long. A describer that printed everything
    itself (``client.phone_ops``) returns ``""``: nothing more is shown for the event, in either
    output mode.
    """

    payloads: dict[str, Describe] = field(default_factory=dict)
    pushes: dict[str, Describe] = field(default_factory=dict)

    def describe(self, item: Received) -> str:
        table = self.pushes if item.event == "push" else self.payloads
        describer = table.get(item.type, describe_fields)
        line = describer(item)
        if not line:
            return ""
        return f"[live] {line}" if item.live else f"[seq {item.seq}] {line}"


def describe_fields(item: Received) -> str:
    shown = item.payload if item.event != "push" or item.inline is None else item.inline
    fields = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in shown.items() if k != "type")
    origin = "push " if item.event == "push" else ""
    return one_line(f"{origin}{item.type} from {item.sender_name}: {fields or '(no fields)'}")


def describe_clipboard(item: Received) -> str:
    return f"clipboard from {one_line(item.sender_name)}: {one_line(item.payload.get('text', ''))}"


def describe_token_update(item: Received) -> str:
    tokens = item.payload.get("tokens")
    if not isinstance(tokens, list) or not tokens:
        return "tokens now: none"
    names = []
    for token in tokens:
        entry = cast(dict[str, Any], token) if isinstance(token, dict) else {}
        scope = entry.get("scope")
        names.append(f"{entry.get('label', '?')} ({scope})" if scope else str(entry.get("label", "?")))
    return one_line(f"tokens now: {', '.join(names)}")


def describe_question_closed(item: Received) -> str:
    """What a computer shows of ``interaction_closed``: the phone's question was answered (the
    phone prints its own line: ``client.questions``)."""
    content = item.inline if item.event == "push" and item.inline is not None else item.payload
    by = content.get("answered_by")
    name = by.get("name") if isinstance(by, dict) else None
    where = f" on {name}" if isinstance(name, str) and name else ""
    return one_line(f"question {content.get('id', '?')} answered{where}")


def default_dispatcher() -> Dispatcher:
    """The describers every device uses; notifications through one ``NotificationBoard``, which
    remembers what this run showed so that a replacement or a clear says what it replaces."""
    board = NotificationBoard()
    return Dispatcher(
        payloads={
            "clipboard": describe_clipboard,
            "notification": board.on_notification,
            "notification_clear": board.on_clear,
            "token_update": describe_token_update,
            "interaction_closed": describe_question_closed,
        },
        pushes={
            "notification": board.on_notification,
            "notification_clear": board.on_clear,
            "interaction_closed": describe_question_closed,
        },
    )
