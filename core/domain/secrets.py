"""Secrets and identifiers: sender tokens, device credentials, pairing codes, ids.

All randomness comes from ``secrets`` (the OS CSPRNG). Secrets are stored only as digests.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
import uuid

SENDER_TOKEN_LIVE_PREFIX = "rfk_live_"
RESERVED_PREFIXES = ("rfk_live_", "rfk_test_", "rfd_live_")
# What secret scanners look for; nothing but a sender token may match it.
SCANNER_PATTERN = re.compile(r"rf[kd]_(live|test)_[A-Za-z0-9]{32}")
SENDER_TOKEN_PATTERN = re.compile(r"^rfk_(live|test)_[A-Za-z0-9]{32}$")
# The shape of a Pushover application token, for client libraries that check it before sending
# (chump): an opt-in sender token format, meant for the Pushover shim; scanners cannot spot it.
PUSHOVER_TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9]{30}$")
DEVICE_CREDENTIAL_PREFIX = "rbd_"
DEVICE_CREDENTIAL_PATTERN = re.compile(r"^rbd_[A-Za-z0-9_-]{43}$")
TOKEN_ALPHABET = string.ascii_letters + string.digits
PAIRING_CODE_PATTERN = re.compile(r"^[0-9]{6}$")


def new_sender_token(*, pushover_shape: bool = False) -> str:
    """``rfk_live_`` + 32 characters of [A-Za-z0-9] (about 190 bits of entropy); in the Pushover
    shape, 30 such characters and no prefix (about 178 bits)."""
    if pushover_shape:
        return "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(30))
    return SENDER_TOKEN_LIVE_PREFIX + "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(32))


def is_sender_token(text: str) -> bool:
    """Shaped like a sender token of either format."""
    return (
        SENDER_TOKEN_PATTERN.fullmatch(text) is not None or PUSHOVER_TOKEN_PATTERN.fullmatch(text) is not None
    )


def new_device_credential() -> str:
    """``rbd_`` + 256 random bits in base64url; never shaped like a sender token."""
    return DEVICE_CREDENTIAL_PREFIX + secrets.token_urlsafe(32)


def is_device_credential(text: str) -> bool:
    return DEVICE_CREDENTIAL_PATTERN.fullmatch(text) is not None


def digest(secret: str) -> str:
    """SHA-256 hex of a high-entropy secret: what the database keeps instead of the secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


def digests_match(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def new_pairing_code() -> str:
    """Six digits, uniformly random, zero-padded."""
    return f"{secrets.randbelow(1_000_000):06d}"


def pairing_code_digest(code: str, key: bytes) -> str:
    """HMAC-SHA256 under a server key: a six-digit code's plain hash could be reversed in a blink."""
    return hmac.new(key, b"pairing-code\x00" + code.encode(), hashlib.sha256).hexdigest()


def new_uuid() -> str:
    return str(uuid.uuid4())


def new_prefixed_id(prefix: str, nbytes: int = 16) -> str:
    """``<prefix>_`` + lowercase hex, e.g. ``msg_<32 hex>``."""
    return f"{prefix}_{secrets.token_hex(nbytes)}"
