"""X25519 key pairs and their base64 text form (the `public_key` field of a device)."""

from __future__ import annotations

import base64
import binascii

from nacl.public import PrivateKey
from pydantic.config import JsonDict

KEY_LENGTH = 32
# 32 bytes are 44 base64 characters; anything far longer is refused before decoding.
_MAX_TEXT_LENGTH = 128
# The documented shape of a public key, as ``decode_public_key`` accepts it: canonical standard
# base64 of 32 bytes (the last character before "=" carries 4 bits and 2 zero bits).
PUBLIC_KEY_SCHEMA: JsonDict = {
    "pattern": "^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$",
    "minLength": 44,
    "maxLength": 44,
}


class InvalidPublicKey(ValueError):  # noqa: N818 - the name is the contract
    """The text is not standard base64 of exactly 32 bytes, or the key cannot be used."""


def generate_keypair() -> tuple[bytes, bytes]:
    """Return a fresh X25519 key pair as raw bytes: (secret, public)."""
    private = PrivateKey.generate()
    return bytes(private), bytes(private.public_key)


def public_key_of(secret: bytes) -> bytes:
    """Return the X25519 public key belonging to a 32-byte secret key."""
    if not isinstance(secret, bytes) or len(secret) != KEY_LENGTH:
        raise ValueError("secret key must be 32 bytes")
    return bytes(PrivateKey(secret).public_key)


def b64encode(raw: bytes) -> str:
    """Encode bytes as standard base64 text (with padding)."""
    return base64.b64encode(raw).decode("ascii")


def decode_public_key(text: str) -> bytes:
    """Decode a base64 public key strictly, raising InvalidPublicKey unless it is exactly 32 bytes."""
    if not isinstance(text, str):
        raise InvalidPublicKey("public key must be a string")
    if len(text) > _MAX_TEXT_LENGTH:
        raise InvalidPublicKey("public key text is too long")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidPublicKey("public key is not standard base64") from exc
    if len(raw) != KEY_LENGTH:
        raise InvalidPublicKey("public key must be 32 bytes")
    # Unused trailing bits would let two texts name one key; only the canonical spelling is accepted.
    if b64encode(raw) != text:
        raise InvalidPublicKey("public key is not canonical base64")
    return raw
