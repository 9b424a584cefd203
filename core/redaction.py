"""Scrubbing secrets out of text that is about to be logged: sender tokens (in capability URLs
or anywhere), device credentials, the connector's OAuth codes and tokens, and the signatures of
presigned object URLs (each one a credential for its object until it expires). The sequence a
caller clears (``/v1/notifications/<sequence_id>``) goes too: not a secret, but the caller's own
words, which may say what the notification was about, and a text access log shows the path."""

from __future__ import annotations

import re

SECRET = re.compile(
    r"rf[kd]_(?:live|test)_[A-Za-z0-9]{32}|rbd_[A-Za-z0-9_-]{43}|rb[acr]_[A-Za-z0-9_-]{43,64}"
)
# A path segment that is a token (the capability URL) or a caller's key (a cleared sequence).
CALLER_PATH = re.compile(r"(/v1/(?:send|notifications)/)[^/?#\s\"]+")
URL_SIGNATURE = re.compile(r"([?&](?:signature|X-Amz-Signature|X-Amz-Credential)=)[^&#\s\"]+", re.IGNORECASE)
REDACTED = "[redacted]"
# Matches wherever one of the three above could (a looser, case-insensitive superset of them): most
# text logged holds no secret, and one search costs less than three substitutions that find none.
MAYBE_SECRET = re.compile(
    r"rf[kd]_|rb[acdr]_|/v1/send/|/v1/notifications/|[?&](?:signature|x-amz-signature|x-amz-credential)=",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """``text`` with every token-shaped secret, every ``/v1/send/<token>`` and
    ``/v1/notifications/<sequence_id>`` path segment and every presigned URL's signature replaced."""
    if MAYBE_SECRET.search(text) is None:
        return text
    text = URL_SIGNATURE.sub(r"\1" + REDACTED, text)
    return SECRET.sub(REDACTED, CALLER_PATH.sub(r"\1" + REDACTED, text))
