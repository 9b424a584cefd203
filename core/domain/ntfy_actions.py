"""ntfy's ``Actions`` in both of its forms, read into a send's ``actions`` (pure; no I/O).

- JSON: a list of ``{action, label, url, method?, body?, clear?}``.
- Simple: actions separated by ``;``, each a ``,``-separated list of sections; a section is
  ``key=value`` or a bare value, the first three bare ones being the action, its label and (for
  ``view`` and ``http``) its url. A value may be quoted with ``"`` or ``'`` (a backslash escapes the
  quote) to hold commas and semicolons.

``view`` and ``http`` become relaybox's buttons (``core.domain.actions`` checks them further).
``clear`` (dismiss the notification once the button worked) is read and not passed on: relaybox's
phones keep the notification. Refused with ``invalid_action``: ``broadcast`` (an Android intent with
no meaning on relaybox's phones), ``headers.*`` (a button's request carries none) and ``intent`` /
``extras.*``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.domain.field_checks import InvalidFieldError

ACTIONS_MAX_CHARS = 4096
_KEY = re.compile(r"([-.\w]+)\s*=\s*")
_BOOLEANS = ("true", "yes", "1", "false", "no", "0")
_TAKEN = ("action", "label", "url", "method", "body", "clear")


def ntfy_actions(text: str) -> list[dict[str, Any]]:
    """The actions of an ``Actions`` header, query parameter or JSON field given as text."""
    text = text.strip()
    if len(text) > ACTIONS_MAX_CHARS:
        raise _invalid(f"Actions is at most {ACTIONS_MAX_CHARS} characters.")
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except ValueError as error:
            raise _invalid("Actions in JSON form is not valid JSON.") from error
        return json_actions(parsed)
    return [_button(sections) for sections in _simple(text)]


def json_actions(value: Any) -> list[dict[str, Any]]:
    """The JSON form (a list of objects), as ntfy's JSON publish carries it."""
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise _invalid("Actions in JSON form is a list of objects.")
    return [_button(dict(item)) for item in value]


def _button(given: dict[str, Any]) -> dict[str, Any]:
    """One ntfy action as a relaybox action (checked further by ``core.domain.actions``)."""
    kind = str(given.get("action", "")).strip().lower()
    if kind == "broadcast":
        raise _invalid("broadcast actions (Android intents) have no meaning on relaybox's phones.")
    if kind not in ("view", "http"):
        raise _invalid("an action is view or http.")
    refused = sorted(key for key, value in given.items() if key not in _TAKEN and value not in (None, "", {}))
    if refused:
        raise _invalid(
            f"relaybox's buttons take no {', '.join(refused)} (a button's request carries no headers)."
        )
    clear = given.get("clear")
    if clear is not None and not isinstance(clear, bool) and str(clear).lower() not in _BOOLEANS:
        raise _invalid("an action's clear is a boolean.")
    button = {
        key: given[key] for key in ("label", "url", "method", "body") if given.get(key) not in (None, "")
    }
    if kind == "http" and isinstance(button.get("method"), str):
        button["method"] = button["method"].upper()
    return {"action": kind, **button}


def _simple(text: str) -> list[dict[str, Any]]:
    """The simple form's actions, each as its sections by key."""
    actions: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    position, bare = 0, 0
    while position < len(text):
        position = _skip_spaces(text, position)
        key = ""
        if named := _KEY.match(text, position):
            key, position = named[1].lower(), named.end()
        value, position, last = _value(text, position)
        if not key:
            key = _bare_key(current, bare)
            bare += 1
        if key in current:
            raise _invalid(f"an action names {key} twice.")
        current[key] = value
        if last:
            actions.append(current)
            current, bare = {}, 0
    if current:
        actions.append(current)
    return actions


def _bare_key(current: dict[str, Any], bare: int) -> str:
    """A section without ``key=``: ntfy's first three are the action, its label and its url."""
    if bare == 0:
        return "action"
    if bare == 1:
        return "label"
    if bare == 2 and str(current.get("action", "")).lower() in ("view", "http"):
        return "url"
    raise _invalid("an action has a section with no key that ntfy does not define.")


def _value(text: str, position: int) -> tuple[str, int, bool]:
    """A section's value from ``position``; where the next section starts; whether it ended an
    action (``;`` or the end of the text)."""
    if position < len(text) and text[position] in "\"'":
        quote, start = text[position], position + 1
        end = start
        while True:
            end = text.find(quote, end)
            if end == -1:
                raise _invalid("an action has a quote that is never closed.")
            if text[end - 1] != "\\":
                break
            end += 1
        value = text[start:end].replace("\\" + quote, quote)
        after = _skip_spaces(text, end + 1)
        if after < len(text) and text[after] not in ",;":
            raise _invalid("an action has text after a quoted value.")
        return value, after + 1, after >= len(text) or text[after] == ";"
    ends = [index for index in (text.find(",", position), text.find(";", position)) if index != -1]
    end = min(ends) if ends else len(text)
    return text[position:end].strip(), end + 1, end >= len(text) or text[end] == ";"


def _skip_spaces(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _invalid(message: str) -> InvalidFieldError:
    return InvalidFieldError("invalid_action", message)
