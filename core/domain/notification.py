"""The fields of a notification send, validated by their byte-based limits (pure; no I/O).

Values may come from JSON (typed) or from forms and query strings (all text), so each field
accepts the text spelling too. Errors carry a stable code; trims and clamps become warnings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from pydantic.config import JsonDict

PRIORITIES = ("min", "low", "default", "high", "urgent")
MESSAGE_MAX_BYTES = 1500
TITLE_MAX_BYTES = 100
URL_MAX_BYTES = 512
# The documented shape of ``url``: a subset of what ``_url`` accepts (which takes any http(s) URL with
# a host and no white space, up to 512 bytes), in ASCII so that characters count as bytes.
URL_SCHEMA: JsonDict = {
    "pattern": "^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?([/?#][!-~]*)?$",
    "maxLength": URL_MAX_BYTES,
}
URL_TITLE_MAX_BYTES = 100
ACTION_LABEL_MAX_BYTES = 32
MAX_ACTIONS = 3
MAX_TAGS = 5
TAG_MAX_CHARS = 32
TTL_MAX_S = 259_200
DEVICE_SELECTOR_MAX = 20


class InvalidFieldError(ValueError):
    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details


@dataclass(frozen=True, slots=True)
class Action:
    label: str
    url: str


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


def parse_notification(fields: Mapping[str, Any]) -> Notification:
    """Validate the send fields; raises ``InvalidFieldError`` with the first problem found."""
    warnings: list[str] = []
    message = _text(
        fields.get("message"), "invalid_message", "message", MESSAGE_MAX_BYTES, "message_too_long"
    )
    if message is None:
        raise InvalidFieldError("invalid_message", "message is required and must be 1-1500 bytes of text.")
    title = _text(fields.get("title"), "invalid_title", "title", TITLE_MAX_BYTES, "invalid_title")
    priority = parse_priority(fields.get("priority"))
    tags = _tags(fields.get("tags"), warnings)
    url = _url(fields.get("url"), "invalid_url", "url")
    url_title = _text(
        fields.get("url_title"), "invalid_url_title", "url_title", URL_TITLE_MAX_BYTES, "invalid_url_title"
    )
    actions = _actions(fields.get("actions"))
    markdown = _boolean(fields.get("markdown"))
    ttl = _ttl(fields.get("ttl"), warnings)
    devices = parse_device_selector(fields.get("device"))
    return Notification(
        message, title, priority, tags, url, url_title, actions, markdown, ttl, devices, tuple(warnings)
    )


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


def _text(value: Any, code: str, name: str, max_bytes: int, too_long_code: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value == "":
        raise InvalidFieldError(code, f"{name} must be non-empty text.")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InvalidFieldError(
            too_long_code, f"{name} is longer than {max_bytes} bytes.", {"bytes": size, "max": max_bytes}
        )
    if not _is_unicode(value):
        raise InvalidFieldError(code, f"{name} is not valid Unicode text.")
    return value


def _is_unicode(value: str) -> bool:
    """False for text with a lone surrogate (JSON can carry one, UTF-8 cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _url(value: Any, code: str, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidFieldError(code, f"{name} must be an http or https URL.")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > URL_MAX_BYTES:
        raise InvalidFieldError(
            code, f"{name} is longer than {URL_MAX_BYTES} bytes.", {"bytes": size, "max": URL_MAX_BYTES}
        )
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise InvalidFieldError(code, f"{name} must be an http or https URL.") from exc
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc or any(c.isspace() for c in value):
        raise InvalidFieldError(code, f"{name} must be an http or https URL.")
    if not _is_unicode(value):
        raise InvalidFieldError(code, f"{name} is not valid Unicode text.")
    return value


def _tags(value: Any, warnings: list[str]) -> tuple[str, ...]:
    if value is None or value == "":
        return ()
    raw = value.split(",") if isinstance(value, str) else value
    if not isinstance(raw, list) or not all(isinstance(tag, str) and _is_unicode(tag) for tag in raw):
        raise InvalidFieldError("invalid_tags", "tags must be a list of text or a comma list.")
    tags = [tag.strip() for tag in raw if tag.strip()]
    if len(tags) > MAX_TAGS:
        warnings.append(f"tags: kept the first {MAX_TAGS} of {len(tags)}")
        tags = tags[:MAX_TAGS]
    if any(len(tag) > TAG_MAX_CHARS for tag in tags):
        warnings.append(f"tags: shortened to {TAG_MAX_CHARS} characters")
        tags = [tag[:TAG_MAX_CHARS] for tag in tags]
    return tuple(tags)


def _actions(value: Any) -> tuple[Action, ...]:
    if value is None or value == "":
        return ()
    if not isinstance(value, list) or len(value) > MAX_ACTIONS:
        raise InvalidFieldError(
            "invalid_action", f"actions must be a list of at most {MAX_ACTIONS} {{label, url}}."
        )
    actions = []
    for item in value:
        if not isinstance(item, dict) or set(item) - {"label", "url"}:
            raise InvalidFieldError("invalid_action", "each action is {label, url}.")
        label = item.get("label")
        if (
            not isinstance(label, str)
            or not label
            or not _is_unicode(label)
            or len(label.encode()) > ACTION_LABEL_MAX_BYTES
        ):
            raise InvalidFieldError("invalid_action", f"an action label is 1-{ACTION_LABEL_MAX_BYTES} bytes.")
        try:
            url = _url(item.get("url"), "invalid_action", "action url")
        except InvalidFieldError as exc:
            raise InvalidFieldError("invalid_action", exc.message, exc.details) from exc
        if url is None:
            raise InvalidFieldError("invalid_action", "an action needs a url.")
        actions.append(Action(label, url))
    return tuple(actions)


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
