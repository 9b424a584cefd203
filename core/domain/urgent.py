"""Urgent until acknowledged (pure; no I/O): the ``repeat`` and ``expire`` fields of a send.

With ``priority: "urgent"`` and ``repeat`` (seconds), the phone alerts again every ``repeat``
seconds until a device acknowledges the notification, the sender cancels it, or ``expire``
seconds (default 3600) have passed; the send answers a receipt the sender can poll. Both fields
are refused on any other priority. Values may come from JSON (typed) or from forms and query
strings (all text), as ``core.domain.notification`` reads the other fields.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.domain.notification import InvalidFieldError

REPEAT_MIN_S = 30  # the default shortest repeat; an operator may lower it (``urgent_min_repeat_s``)
REPEAT_MAX_S = 3600
EXPIRE_MIN_S = 60
EXPIRE_MAX_S = 10_800
EXPIRE_DEFAULT_S = 3600
RECEIPT_ID = re.compile(r"^rcp_[0-9a-f]{32}$")
_WHOLE = re.compile(r"^\s*[0-9]{1,9}(\.0*)?\s*$")


@dataclass(frozen=True, slots=True)
class Repeat:
    """What a send asked for: alert again every ``every_s`` seconds, for at most ``expire_s``."""

    every_s: int
    expire_s: int


@dataclass(frozen=True, slots=True)
class UrgentReceipt:
    """The receipt of an urgent send that repeats, as its notification payload carries it."""

    receipt_id: str
    repeat_s: int
    expires_at: int


def parse_repeat(
    fields: Mapping[str, Any], priority: str, *, min_repeat_s: int = REPEAT_MIN_S
) -> Repeat | None:
    """``repeat`` and ``expire`` of a send whose priority is ``priority``; ``None`` without
    ``repeat`` (an urgent send then alerts once, as any other). Raises ``InvalidFieldError``."""
    if not may_repeat(fields):
        return None
    repeat, expire = _given(fields.get("repeat")), _given(fields.get("expire"))
    if priority != "urgent":
        raise InvalidFieldError(
            "repeat_requires_urgent", 'repeat and expire are taken only with priority "urgent".'
        )
    if repeat is None:
        raise InvalidFieldError(
            "invalid_expire", "expire is taken only with repeat (how often to alert again)."
        )
    every = _seconds(repeat, min_repeat_s, REPEAT_MAX_S, "invalid_repeat", "repeat")
    lasts = (
        EXPIRE_DEFAULT_S
        if expire is None
        else _seconds(expire, EXPIRE_MIN_S, EXPIRE_MAX_S, "invalid_expire", "expire")
    )
    return Repeat(every, lasts)


def may_repeat(fields: Mapping[str, Any]) -> bool:
    """The send gives ``repeat`` or ``expire``: ``parse_repeat`` answers a ``Repeat`` or refuses."""
    return _given(fields.get("repeat")) is not None or _given(fields.get("expire")) is not None


def _given(value: Any) -> Any:
    return None if value is None or value == "" else value


def _seconds(value: Any, low: int, high: int, code: str, name: str) -> int:
    """A whole number of seconds from ``low`` to ``high``: an integer, a float with no fraction
    (JSON's ``60.0``), or its text."""
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and _WHOLE.fullmatch(value):
        number = int(float(value))
    if number is None or not low <= number <= high:
        raise InvalidFieldError(
            code, f"{name} must be a whole number of seconds, {low}-{high}.", {"min": low, "max": high}
        )
    return number
