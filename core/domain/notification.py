"""The fields of a notification send, validated by their byte-based limits (pure; no I/O).

Values may come from JSON (typed) or from forms and query strings (all text), so each field
accepts the text spelling too. Errors carry a stable code; trims and clamps become warnings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic.config import JsonDict

from core.domain.actions import ACTION_LABEL_MAX_BYTES, MAX_ACTIONS, Action, parse_actions
from core.domain.field_checks import (
    URL_MAX_BYTES,
    URL_SCHEMA,
    InvalidFieldError,
    check_text,
    check_url,
    is_unicode,
)

__all__ = [
    "ACTION_LABEL_MAX_BYTES",
    "MAX_ACTIONS",
    "URL_MAX_BYTES",
    "URL_SCHEMA",
    "Action",
    "InvalidFieldError",
    "Notification",
    "parse_notification",
]

PRIORITIES = ("min", "low", "default", "high", "urgent")
MESSAGE_MAX_BYTES = 1500
TITLE_MAX_BYTES = 100
URL_TITLE_MAX_BYTES = 100
MAX_TAGS = 5
TAG_MAX_CHARS = 32
TTL_MAX_S = 259_200
DEVICE_SELECTOR_MAX = 20
SEQUENCE_ID_MAX_CHARS = 64
# A sequence id: URL-safe characters (RFC 3986's unreserved set), so it fits a path segment as it is.
SEQUENCE_ID_PATTERN = "^[A-Za-z0-9._~-]{1,64}$"
_SEQUENCE_ID = re.compile(SEQUENCE_ID_PATTERN.strip("^$"))
# Every field of a send: read here, by ``core.domain.urgent`` (repeat, expire) or by
# ``core.domain.delivery_time`` (delay, at). Any other is named in the answer's warnings.
SEND_FIELDS = frozenset(
    [
        "message",
        "title",
        "priority",
        "tags",
        "url",
        "url_title",
        "actions",
        "icon",
        "sequence_id",
        "device",
        "markdown",
        "ttl",
        "timestamp",
        "repeat",
        "expire",
        "delay",
        "at",
    ]
)
UNKNOWN_NAMED_MAX = 10
TIMESTAMP_MAX = 99_999_999_999
# The documented shape of ``icon``: ``url``'s, https only.
ICON_SCHEMA: JsonDict = {**URL_SCHEMA, "pattern": str(URL_SCHEMA["pattern"]).replace("https?", "https", 1)}


@dataclass(frozen=True)
class Notification:
    message: str
    title: str | None = None
    priority: str = "default"
    tags: tuple[str, ...] = ()
    url: str | None = None
    url_title: str | None = None
    actions: tuple[Action, ...] = ()
    markdown: bool = False
    ttl: int = TTL_MAX_S
    devices: tuple[str, ...] = ("all",)
    warnings: tuple[str, ...] = field(default=(), compare=False)
    sequence_id: str | None = None  # a later send with the same one replaces this on the phone
    icon: str | None = None  # an https URL the phone may show (the web app only links it)
    timestamp: int | None = None  # the time the notification says it was sent (Pushover's timestamp)


def parse_notification(fields: Mapping[str, Any]) -> Notification:
    """Validate the send fields; raises ``InvalidFieldError`` with the first problem found."""
    warnings: list[str] = []
    message = check_text(
        fields.get("message"), "invalid_message", "message", MESSAGE_MAX_BYTES, "message_too_long"
    )
    if message is None:
        raise InvalidFieldError("invalid_message", "message is required and must be 1-1500 bytes of text.")
    title = check_text(fields.get("title"), "invalid_title", "title", TITLE_MAX_BYTES, "invalid_title")
    priority = parse_priority(fields.get("priority"))
    tags = _tags(fields.get("tags"), warnings)
    url = check_url(fields.get("url"), "invalid_url", "url")
    url_title = check_text(
        fields.get("url_title"), "invalid_url_title", "url_title", URL_TITLE_MAX_BYTES, "invalid_url_title"
    )
    actions = parse_actions(fields.get("actions"))
    markdown = _boolean(fields.get("markdown"))
    ttl = _ttl(fields.get("ttl"), warnings)
    devices = parse_device_selector(fields.get("device"))
    sequence_id = parse_sequence_id(fields.get("sequence_id"))
    icon = check_url(fields.get("icon"), "invalid_icon", "icon", ("https",))
    timestamp = _timestamp(fields.get("timestamp"))
    warnings.extend(unknown_field_warnings(fields))
    return Notification(
        message,
        title,
        priority,
        tags,
        url,
        url_title,
        actions,
        markdown,
        ttl,
        devices,
        tuple(warnings),
        sequence_id,
        icon,
        timestamp,
    )


def unknown_field_warnings(fields: Mapping[str, Any]) -> list[str]:
    """A warning naming the fields a send does not know (they are ignored, never silently)."""
    unknown = [str(name)[:64] for name in fields if name not in SEND_FIELDS]
    if not unknown:
        return []
    named = ", ".join(unknown[:UNKNOWN_NAMED_MAX])
    more = f" and {len(unknown) - UNKNOWN_NAMED_MAX} more" if len(unknown) > UNKNOWN_NAMED_MAX else ""
    return [f"ignored fields a send does not know: {named}{more}"]


def _timestamp(value: Any) -> int | None:
    """Unix seconds, a whole number (as text from a form), from 1 to ``TIMESTAMP_MAX``."""
    if value is None or value == "":
        return None
    number = value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(value, str) and value.strip().isdecimal() and value.strip().isascii():
        number = int(value.strip()[:12])
    if number is None or not 0 < number <= TIMESTAMP_MAX:
        raise InvalidFieldError("invalid_timestamp", "timestamp must be a Unix time in whole seconds.")
    return number


def parse_sequence_id(value: Any) -> str | None:
    """``None`` when absent; else 1-64 characters of ``A-Z a-z 0-9 . _ ~ -``."""
    if value is None or value == "":
        return None
    return required_sequence_id(value)


def required_sequence_id(value: Any) -> str:
    if not isinstance(value, str) or not _SEQUENCE_ID.fullmatch(value):
        raise InvalidFieldError(
            "invalid_sequence_id", "sequence_id is 1-64 characters of A-Z a-z 0-9 . _ ~ -."
        )
    return value


def parse_priority(value: Any) -> str:
    if value is None or value == "":
        return "default"
    if not isinstance(value, str) or value.lower() not in PRIORITIES:
        raise InvalidFieldError(
            "invalid_priority", "priority must be one of min, low, default, high, urgent."
        )
    return value.lower()


# The documented shape of ``device``: a comma list of at most DEVICE_SELECTOR_MAX entries of 64 chars.
DEVICE_SELECTOR_SCHEMA: JsonDict = {
    "pattern": f"^[^,]{{0,64}}(,[^,]{{0,64}}){{0,{DEVICE_SELECTOR_MAX - 1}}}$"
}


def parse_device_selector(value: Any) -> tuple[str, ...]:
    """``all`` (default), ``phone``/``mobile``, ``desktop``, device names or ids; comma lists allowed."""
    if value is None or value == "":
        return ("all",)
    parts = value if isinstance(value, list) else str(value).split(",") if isinstance(value, str) else None
    if parts is None or not all(isinstance(part, str) for part in parts):
        raise InvalidFieldError("invalid_device", "device must be text: a name, an id, or a comma list.")
    selectors = tuple(dict.fromkeys(part.strip() for part in parts if part.strip()))
    if len(selectors) > DEVICE_SELECTOR_MAX or any(len(s) > 64 for s in selectors):
        raise InvalidFieldError(
            "invalid_device", f"device names at most {DEVICE_SELECTOR_MAX} entries of 64 chars."
        )
    return selectors or ("all",)


def _tags(value: Any, warnings: list[str]) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    raw = value.split(",") if isinstance(value, str) else value
    if not isinstance(raw, list) or not all(isinstance(tag, str) and is_unicode(tag) for tag in raw):
        raise InvalidFieldError("invalid_tags", "tags must be a list of text or a comma list.")
    tags = [tag.strip() for tag in raw if tag.strip()]
    if len(tags) > MAX_TAGS:
        warnings.append(f"tags: kept the first {MAX_TAGS} of {len(tags)}")
        tags = tags[:MAX_TAGS]
    if any(len(tag) > TAG_MAX_CHARS for tag in tags):
        warnings.append(f"tags: shortened to {TAG_MAX_CHARS} characters")
        tags = [tag[:TAG_MAX_CHARS] for tag in tags]
    return tuple(tags)


def _boolean(value: Any) -> bool:
    if value is None or value == "":
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        return value.lower() in ("1", "true", "yes", "on")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidFieldError("invalid_markdown", "markdown must be true or false.")


def _ttl(value: Any, warnings: list[str]) -> int:
    """Seconds, floored and clamped to 0-259200 (72 h); a clamp is a warning, not an error."""
    if value is None or value == "":
        return TTL_MAX_S
    number: float
    if isinstance(value, bool):
        raise InvalidFieldError("invalid_ttl", "ttl must be a number of seconds.")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError as exc:
            raise InvalidFieldError("invalid_ttl", "ttl must be a number of seconds.") from exc
    else:
        raise InvalidFieldError("invalid_ttl", "ttl must be a number of seconds.")
    if not math.isfinite(number):
        raise InvalidFieldError("invalid_ttl", "ttl must be a finite number of seconds.")
    ttl = math.floor(number)
    if ttl < 0 or ttl > TTL_MAX_S:
        warnings.append(f"ttl: clamped to 0-{TTL_MAX_S} seconds")
    return max(0, min(ttl, TTL_MAX_S))
