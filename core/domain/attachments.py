"""Attachment encryption, ``secretbox-v1``: a file that travels beside a notification is sealed
once, with a fresh random 32-byte key, as NaCl ``secretbox`` (XSalsa20-Poly1305). The blob is the
24-byte nonce followed by the box (16-byte tag, then the ciphertext), exactly what
``nacl.secret.SecretBox(key).encrypt(data)`` and tweetnacl's ``secretbox`` produce.

The key goes to each target device inside its own notification envelope (sealed to that device's
key), so the server parks a single ciphertext that nobody but those devices can open once the call
that made it has ended."""

from __future__ import annotations

import nacl.exceptions
import nacl.secret
import nacl.utils

KEY_LENGTH = nacl.secret.SecretBox.KEY_SIZE  # 32
NONCE_LENGTH = nacl.secret.SecretBox.NONCE_SIZE  # 24
OVERHEAD = NONCE_LENGTH + nacl.secret.SecretBox.MACBYTES  # 40
FORMAT = "secretbox-v1"


class AttachmentError(ValueError):
    """A key that is not 32 bytes, or a blob that does not open under it (short, altered, other key)."""


def seal_attachment(data: bytes) -> tuple[bytes, bytes]:
    """``(key, blob)`` for ``data``: a fresh key, and the nonce followed by the box."""
    key = nacl.utils.random(KEY_LENGTH)
    return key, bytes(nacl.secret.SecretBox(key).encrypt(data))


def open_attachment(key: bytes, blob: bytes) -> bytes:
    if len(key) != KEY_LENGTH:
        raise AttachmentError("an attachment key is 32 bytes")
    if len(blob) < OVERHEAD:
        raise AttachmentError("the attachment is shorter than its nonce and tag")
    try:
        return bytes(nacl.secret.SecretBox(key).decrypt(blob))
    except nacl.exceptions.CryptoError as error:
        raise AttachmentError("the attachment does not open with its key") from error
