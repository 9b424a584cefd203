"""Checks shared by the fields of a send (pure; no I/O): text by its UTF-8 size, http(s) URLs, and
the error they raise with a stable code."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from pydantic.config import JsonDict

URL_MAX_BYTES = 512
# The documented shape of a URL field: a subset of what ``check_url`` accepts (which takes any http(s)
# URL with a host and no white space, up to 512 bytes), in ASCII so that characters count as bytes.
URL_SCHEMA: JsonDict = {
    "pattern": "^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?([/?#][!-~]*)?$",
    "maxLength": URL_MAX_BYTES,
}
WEB_SCHEMES = ("http", "https")
# C0 and C1 controls, DEL, and the bidirectional controls that would make a shown URL read otherwise.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


class InvalidFieldError(ValueError):
    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details


def utf8_size(value: str) -> int:
    """Bytes in UTF-8, a lone surrogate counted as the 3 bytes it would take."""
    return len(value.encode("utf-8", "surrogatepass"))


def is_unicode(value: str) -> bool:
    """False for text with a lone surrogate (JSON can carry one, UTF-8 cannot)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_text(value: Any, code: str, name: str, max_bytes: int, too_long_code: str) -> str | None:
    """``None`` when absent; else non-empty Unicode text of at most ``max_bytes``."""
    if value is None:
        return None
    if not isinstance(value, str) or value == "":
        raise InvalidFieldError(code, f"{name} must be non-empty text.")
    size = utf8_size(value)
    if size > max_bytes:
        raise InvalidFieldError(
            too_long_code, f"{name} is longer than {max_bytes} bytes.", {"bytes": size, "max": max_bytes}
        )
    if not is_unicode(value):
        raise InvalidFieldError(code, f"{name} is not valid Unicode text.")
    return value


def check_url(value: Any, code: str, name: str, schemes: tuple[str, ...] = WEB_SCHEMES) -> str | None:
    """``None`` when absent or empty; else a URL of one of ``schemes`` with a host, no white space
    and no control character, at most ``URL_MAX_BYTES``."""
    if value is None or value == "":
        return None
    wanted = " or ".join(schemes)
    if not isinstance(value, str):
        raise InvalidFieldError(code, f"{name} must be an {wanted} URL.")
    size = utf8_size(value)
    if size > URL_MAX_BYTES:
        raise InvalidFieldError(
            code, f"{name} is longer than {URL_MAX_BYTES} bytes.", {"bytes": size, "max": URL_MAX_BYTES}
        )
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise InvalidFieldError(code, f"{name} must be an {wanted} URL.") from exc
    if parts.scheme.lower() not in schemes or not parts.netloc or any(c.isspace() for c in value):
        raise InvalidFieldError(code, f"{name} must be an {wanted} URL.")
    if CONTROL.search(value):
        raise InvalidFieldError(code, f"{name} must not contain control characters.")
    if not is_unicode(value):
        raise InvalidFieldError(code, f"{name} is not valid Unicode text.")
    return value
