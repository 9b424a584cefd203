"""Answer callbacks on the wire: how each POST is signed (Standard Webhooks,
https://www.standardwebhooks.com, symmetric ``v1``) and how a receiver's ``Retry-After`` is read.

Pure: no I/O. What a ``callback_url`` may be and which addresses it may reach are the rules of
every outbound request (``core.domain.outbound``).
"""

from __future__ import annotations

import base64
import email.utils
import hashlib
import hmac
import math
from datetime import UTC

SECRET_PREFIX = "whsec_"
SIGNATURE_VERSION = "v1"
# What a receiver should accept: a webhook-timestamp older (or newer) than this is a replay.
TOLERANCE_S = 300


def new_secret_text(key: bytes) -> str:
    """The signing secret as a receiver is given it: ``whsec_`` and the key in standard base64."""
    return SECRET_PREFIX + base64.b64encode(key).decode("ascii")


def signature(key: bytes, *, webhook_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: ``v1,`` and the base64 HMAC-SHA256 of
    ``{webhook-id}.{webhook-timestamp}.{body}``."""
    signed = b"%s.%d.%s" % (webhook_id.encode("ascii"), timestamp, body)
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return f"{SIGNATURE_VERSION},{base64.b64encode(digest).decode('ascii')}"


def retry_after_seconds(value: str | None, now: float) -> int | None:
    """A response's ``Retry-After`` (RFC 9110: delay-seconds or an HTTP date, read against ``now``)
    in whole seconds from now, at least 0; None when absent or neither form."""
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():  # not "²" or "١٢": str.isdigit says yes, int() refuses
        return int(text[:12])  # a delay beyond 12 digits is capped by the caller all the same
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 850 / asctime forms carry no zone: they are GMT
        when = when.replace(tzinfo=UTC)
    return max(0, math.ceil(when.timestamp() - now))
