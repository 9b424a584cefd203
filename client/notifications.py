"""How a device shows notifications as text: ``NotificationBoard`` describes each one (its title with
the emoji of its tags, its message, and a line each for its other tags, link, icon and buttons) and
remembers, for this run, the latest notification of each sequence (``Received.sequence``: its
``sequence_id``, else its ``id``, qualified by its sender), so that a replacement says
``(replaces <seq>)`` and a ``notification_clear`` takes the sequence away; a line names a sequence
as its sender did (``deploy-42``, not ``tok_…:deploy-42``). The client keeps no notifications
between runs."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from client.emoji_tags import split_tags
from client.opener import Received
from client.taps import action_kind
from client.text import one_line

MAX_REMEMBERED = 1000  # sequences remembered in one run, the oldest forgotten first


class NotificationBoard:
    """The notifications this run showed, the latest per sequence (at most ``MAX_REMEMBERED``)."""

    def __init__(self) -> None:
        self.shown: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def on_notification(self, item: Received) -> str:
        note = _payload(item)
        key = item.sequence()
        named = _named(key)
        if key in self.shown:
            how = f" (replaces {one_line(named)})"
        elif named != str(note.get("id") or ""):  # the sender named a sequence
            how = f" (sequence {one_line(named)})"
        else:
            how = ""
        if key:
            self.shown.pop(key, None)
            self.shown[key] = note
            while len(self.shown) > MAX_REMEMBERED:
                self.shown.popitem(last=False)
        return "\n".join([f"{_origin(item)}notification{how}: {headline(note)}", *details(note)])

    def on_clear(self, item: Received) -> str:
        key = item.sequence() if _payload(item).get("sequence_id") else ""
        self.shown.pop(key, None)
        return f"{_origin(item)}notification cleared: {one_line(_named(key) or '?')}"


def headline(note: dict[str, Any]) -> str:
    """``⚠️ Title — message (markdown)``: the tags' emoji before the title (or the message)."""
    tags = note.get("tags")
    emoji, _ = split_tags(tags if isinstance(tags, list) else [])
    title, message = note.get("title"), one_line(note.get("message", ""))
    text = f"{one_line(title)} — {message}" if title else message
    marked = " (markdown)" if note.get("markdown") is True else ""
    return " ".join([*emoji, text]) + marked


def details(note: dict[str, Any]) -> list[str]:
    """One indented line per other tag list, link, icon and button (numbered from 1)."""
    lines: list[str] = []
    tags = note.get("tags")
    _, others = split_tags(tags if isinstance(tags, list) else [])
    if others:
        lines.append(f"  tags: {one_line(', '.join(others))}")
    if note.get("url"):
        title = f"{one_line(note['url_title'])} → " if note.get("url_title") else ""
        lines.append(f"  link: {title}{one_line(note['url'])}")
    if note.get("icon"):
        lines.append(f"  icon: {one_line(note['icon'])}")
    actions = note.get("actions")
    for number, action in enumerate(actions if isinstance(actions, list) else [], start=1):
        if isinstance(action, dict):
            lines.append(
                f"  [{number}] {one_line(action.get('label', '?'))} → {one_line(action.get('url', '?'))}"
                f" ({_kind(action)})"
            )
    return lines


def _kind(action: dict[str, Any]) -> str:
    kind, method = action_kind(action)
    return f"http {method}" if kind == "http" else kind


def _named(key: str) -> str:
    """A sequence as its sender named it, without the part that says who the sender is."""
    return key.rpartition(":")[2]


def _payload(item: Received) -> dict[str, Any]:
    return item.payload if item.event != "push" else (item.inline or {})


def _origin(item: Received) -> str:
    return "push " if item.event == "push" else ""
