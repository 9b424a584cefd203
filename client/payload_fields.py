"""Reading the fields of what the phone receives (reminder pushes, questions, documents): a
missing field or one of the wrong type is a ``PayloadError``, shown as one line instead of acted on."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from client.opener import Received

ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


class PayloadError(ValueError):
    """A server payload that lacks a field or has one of the wrong type."""


def content_of(item: Received, kind: str) -> dict[str, Any]:
    """A push's inline payload (or an envelope's payload), checked to be of type ``kind``."""
    content = item.inline if item.event == "push" else item.payload
    if content is None:
        raise PayloadError("it carries no payload")
    if content.get("type") != kind:
        raise PayloadError(f"it carries a {content.get('type')!r} payload")
    return content


def id_field(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not ID.fullmatch(value):
        raise PayloadError(f"{key} is missing or not an id")
    return value


def text_field(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise PayloadError(f"{key} is missing or not text")
    return value


def integer_field(payload: Mapping[str, Any], key: str) -> int:
    value = payload.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise PayloadError(f"{key} is missing or not a whole number")
    return value


def when(epoch: int) -> str:
    """``epoch`` as a UTC date and time to the second, or ``epoch N`` when out of range."""
    try:
        return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"epoch {epoch}"
