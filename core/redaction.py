"""Scrubbing secrets out of text that is about to be logged: sender tokens (in capability URLs
or anywhere), device credentials, and the connector's OAuth codes and tokens."""

from __future__ import annotations

import re

SECRET = re.compile(
    r"rf[kd]_(?:live|test)_[A-Za-z0-9]{32}|rbd_[A-Za-z0-9_-]{43}|rb[acr]_[A-Za-z0-9_-]{43,64}"
)
SEND_PATH = re.compile(r"(/v1/send/)[^/?#\s\"]+")
REDACTED = "[redacted]"


def redact(text: str) -> str:
    """``text`` with every token-shaped secret and every ``/v1/send/<token>`` path segment replaced."""
    return SECRET.sub(REDACTED, SEND_PATH.sub(r"\1" + REDACTED, text))
