"""Envelope v1: `0x01 ‖ 24-byte nonce ‖ NaCl box ciphertext` (X25519 + XSalsa20-Poly1305).

The box is computed with libsodium's precomputed-key ("afternm") calls, which is what
`nacl.public.Box` does internally, so the bytes are identical to `Box.encrypt`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import nacl.bindings
import nacl.exceptions
import nacl.utils

from core.domain.keys import KEY_LENGTH, InvalidPublicKey

WIRE_VERSION = 0x01
NONCE_LENGTH = 24
TAG_LENGTH = 16
MIN_LENGTH = 1 + NONCE_LENGTH + TAG_LENGTH  # 41: an empty plaintext
_VERSION_PREFIX = bytes([WIRE_VERSION])


class EnvelopeError(ValueError):
    """An envelope could not be opened; the message is dropped."""


class EnvelopeTooShort(EnvelopeError):  # noqa: N818 - names are the contract (vectors cite them)
    """The blob is shorter than 41 bytes (checked before anything else)."""


class UnsupportedWireVersion(EnvelopeError):  # noqa: N818
    """The first byte is not 0x01; there is no negotiation or fallback."""

    def __init__(self) -> None:
        super().__init__("Unsupported wire version")


class EnvelopeOpenFailed(EnvelopeError):  # noqa: N818
    """Authentication failed: wrong keys, or the bytes were altered."""


class PairBox:
    """The precomputed shared key of one (my secret, their public) pair, sealing and opening envelopes."""

    __slots__ = ("_shared_key",)

    def __init__(self, my_secret: bytes, their_public: bytes) -> None:
        if not isinstance(my_secret, bytes) or len(my_secret) != KEY_LENGTH:
            raise ValueError("secret key must be 32 bytes")
        if not isinstance(their_public, bytes) or len(their_public) != KEY_LENGTH:
            raise InvalidPublicKey("public key must be 32 bytes")
        try:
            self._shared_key: bytes = nacl.bindings.crypto_box_beforenm(their_public, my_secret)
        except nacl.exceptions.CryptoError as exc:
            # libsodium refuses low-order points, whose shared secret would be all zeros.
            raise InvalidPublicKey("public key is a low-order point") from exc

    def seal(self, plaintext: bytes, nonce: bytes | None = None) -> bytes:
        """Encrypt plaintext into a v1 envelope, with a fresh random nonce unless one is given."""
        if not isinstance(plaintext, bytes):
            raise TypeError("plaintext must be bytes")
        if nonce is None:
            nonce = nacl.utils.random(NONCE_LENGTH)
        elif not isinstance(nonce, bytes) or len(nonce) != NONCE_LENGTH:
            raise ValueError("nonce must be 24 bytes")
        return _sealed(plaintext, nonce, self._shared_key)

    def open(self, blob: bytes) -> bytes:
        """Decrypt a v1 envelope; any failure raises an EnvelopeError subclass and nothing else."""
        if isinstance(blob, bytearray | memoryview):
            blob = bytes(blob)
        if not isinstance(blob, bytes):
            raise EnvelopeError("envelope must be bytes")
        if len(blob) < MIN_LENGTH:
            raise EnvelopeTooShort(f"envelope is {len(blob)} bytes, the minimum is {MIN_LENGTH}")
        if blob[0] != WIRE_VERSION:
            raise UnsupportedWireVersion()
        nonce = blob[1 : 1 + NONCE_LENGTH]
        try:
            return nacl.bindings.crypto_box_open_easy_afternm(
                blob[1 + NONCE_LENGTH :], nonce, self._shared_key
            )
        except nacl.exceptions.CryptoError as exc:
            raise EnvelopeOpenFailed("envelope failed authentication") from exc


def seal_each(boxes: Sequence[PairBox], plaintext: bytes) -> list[bytes]:
    """``PairBox.seal`` of one plaintext with each of ``boxes``, in their order (a send's one
    plaintext to each of an account's devices): the plaintext checked once, and every envelope
    with a nonce of its own, all drawn in one read of the random source rather than one read each."""
    if not isinstance(plaintext, bytes):
        raise TypeError("plaintext must be bytes")
    nonces = nacl.utils.random(NONCE_LENGTH * len(boxes))
    starts = range(0, len(nonces), NONCE_LENGTH)
    return [
        _sealed(plaintext, nonces[start : start + NONCE_LENGTH], box._shared_key)
        for start, box in zip(starts, boxes, strict=True)
    ]


def _sealed(plaintext: bytes, nonce: bytes, shared_key: bytes) -> bytes:
    """The v1 envelope of ``plaintext`` under a checked nonce and a box's shared key."""
    return _VERSION_PREFIX + nonce + nacl.bindings.crypto_box_easy_afternm(plaintext, nonce, shared_key)


def seal(
    plaintext: bytes, sender_secret: bytes, recipient_public: bytes, nonce: bytes | None = None
) -> bytes:
    """Seal plaintext for one recipient (computes the shared key; use BoxCache when sending often)."""
    return PairBox(sender_secret, recipient_public).seal(plaintext, nonce)


def open_envelope(blob: bytes, recipient_secret: bytes, sender_public: bytes) -> bytes:
    """Open an envelope from one sender; raises an EnvelopeError subclass when it cannot be opened."""
    return PairBox(recipient_secret, sender_public).open(blob)


class BoxCache:
    """A thread-safe, bounded LRU of PairBox keyed by (my secret, their public).

    Saves the X25519 scalar multiplication when many messages go to the same device.
    """

    def __init__(self, max_entries: int = 4096) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self._max_entries = max_entries
        self._boxes: OrderedDict[tuple[bytes, bytes], PairBox] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, my_secret: bytes, their_public: bytes) -> PairBox:
        """Return the PairBox for this key pair, building and remembering it on a miss."""
        key = (my_secret, their_public)
        with self._lock:
            box = self._held(key)
        if box is not None:
            return box
        # Built outside the lock so one slow miss does not stall every other thread.
        box = PairBox(my_secret, their_public)
        with self._lock:
            existing = self._boxes.get(key)
            if existing is not None:
                self._boxes.move_to_end(key)
                return existing
            self._boxes[key] = box
            if len(self._boxes) > self._max_entries:
                self._boxes.popitem(last=False)
            return box

    def get_each(self, my_secret: bytes, their_publics: Sequence[bytes]) -> list[PairBox]:
        """``get`` of each of ``their_publics``, in their order, taking the lock once for all the
        boxes held (a send's devices: all of them, but for a device new to this process)."""
        with self._lock:
            held = [self._held((my_secret, their_public)) for their_public in their_publics]
        return [
            box if box is not None else self.get(my_secret, their_public)
            for box, their_public in zip(held, their_publics, strict=True)
        ]

    def _held(self, key: tuple[bytes, bytes]) -> PairBox | None:
        """The box of ``key`` if held, made the most recently used (under the lock)."""
        box = self._boxes.get(key)
        if box is not None:
            self._boxes.move_to_end(key)
        return box

    def __len__(self) -> int:
        with self._lock:
            return len(self._boxes)
