"""When a send asks to be delivered later (pure; no I/O): ``delay`` or ``at`` on ``/v1/send``, and
ntfy's ``Delay``/``At``/``In`` (``core.api.ntfy`` passes them as ``delay``).

Each is read into one value, the epoch second of delivery, 10 s to 3 days ahead (ntfy's bounds).
The forms, one rule for every spelling (ntfy's, without its natural language):

- a number, or digits: seconds from now below ``UNIX_TIME_FROM``, a Unix time from it on;
- a duration: ``30m``, ``2h``, ``1d``, ``90 seconds``, ``1h30m``;
- an ISO 8601 time with its zone: ``2026-03-01T09:00:00+01:00``, ``…Z``.

The send is then kept, sealed, until that second (``core.services.scheduled``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from core.domain.field_checks import InvalidFieldError

DELAY_MIN_S = 10
DELAY_MAX_S = 3 * 86_400
UNIX_TIME_FROM = 1_000_000_000  # 2001-09-09: a number this large is a time, not seconds from now
DELIVERY_FIELDS = ("delay", "at")
_UNIT_S = {"d": 86_400, "h": 3600, "m": 60, "s": 1}
# One number and a unit, in ntfy's words ("30 min", "2 days"), or Go's compact sequence ("1h30m").
_WORDED = re.compile(r"^(\d{1,9})\s*(d|days?|h|hours?|m|mins?|minutes?|s|secs?|seconds?)$", re.IGNORECASE)
_COMPACT = re.compile(r"^(?:\d{1,9}[dhms])+$", re.IGNORECASE)
_COMPACT_PART = re.compile(r"(\d{1,9})([dhms])", re.IGNORECASE)
FORMS = (
    "seconds, a duration such as 30m, 2h or 1d, a Unix time, or an ISO 8601 time with its zone "
    "(natural-language times such as 'tomorrow, 10am' are not understood)"
)


def asks_for_later(fields: Mapping[str, Any]) -> bool:
    """Whether a send names a delivery time (read or not)."""
    return any(fields.get(name) not in (None, "") for name in DELIVERY_FIELDS)


def delivery_time(fields: Mapping[str, Any], now: float, min_s: int = DELAY_MIN_S) -> int | None:
    """The epoch second a send asks to be delivered at, or ``None`` to deliver now. Raises
    ``InvalidFieldError`` (``invalid_delay``) for a time it cannot read, or one outside ``min_s``
    (10 s but in tests) to 3 days from ``now``."""
    given = {name: fields[name] for name in DELIVERY_FIELDS if fields.get(name) not in (None, "")}
    if not given:
        return None
    if len(given) > 1:
        raise InvalidFieldError("invalid_delay", "Give delay or at, not both.")
    [(name, value)] = given.items()
    when = _read(value, now)
    if when is None:
        raise InvalidFieldError("invalid_delay", f"{name} must be {FORMS}.", {"field": name})
    ahead = when - now
    if not min_s <= math.ceil(ahead) <= DELAY_MAX_S:
        raise InvalidFieldError(
            "invalid_delay",
            f"{name} must be {min_s} s to {DELAY_MAX_S // 86_400} days from now.",
            {"field": name, "min_s": min_s, "max_s": DELAY_MAX_S},
        )
    return math.ceil(when)


def _read(value: Any, now: float) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return _number(float(value), now)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if re.fullmatch(r"\d{1,12}(\.\d+)?", text):
        return _number(float(text), now)
    if worded := _WORDED.match(text):
        return now + int(worded[1]) * _UNIT_S[worded[2][0].lower()]
    if _COMPACT.match(text):
        return now + sum(int(n) * _UNIT_S[unit.lower()] for n, unit in _COMPACT_PART.findall(text))
    return _iso(text)


def _number(number: float, now: float) -> float | None:
    if not math.isfinite(number) or number < 0:
        return None
    return number if number >= UNIX_TIME_FROM else now + number


def _iso(text: str) -> float | None:
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        return None
    if moment.tzinfo is None:  # a time without its zone could be any of 24 moments
        return None
    return moment.timestamp()
