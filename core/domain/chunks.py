"""File-transfer chunks: XChaCha20-Poly1305-IETF in combined mode, `xchacha20poly1305-chunked-v1`.

- key    = HKDF-SHA-256(ikm = raw X25519 shared secret, salt = UTF-8 transferId,
                        info = b"xchacha20poly1305-chunked-v1", length = 32)
- nonce  = 16-byte per-transfer random prefix ‖ u64be global chunk index
- AD     = b"xchacha20poly1305-chunked-v1" ‖ u16be len ‖ transferId UTF-8 ‖ u16be len ‖ fileId UTF-8
           ‖ u64be chunkIndex ‖ u8 isFinal (0x00 or 0x01)
- output = ciphertext ‖ 16-byte tag (same length as the plaintext plus 16)

The chunk index is global to the transfer (it keeps counting across files), so one key and
prefix never see the same nonce twice as long as the sender never reuses an index.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence

import nacl.bindings
import nacl.exceptions
import nacl.utils

CHUNK_FORMAT = "xchacha20poly1305-chunked-v1"
KEY_LENGTH = 32
NONCE_PREFIX_LENGTH = 16
NONCE_LENGTH = 24
TAG_LENGTH = 16
MAX_INDEX = 2**64 - 1
MAX_ID_BYTES = 0xFFFF
_FORMAT_BYTES = CHUNK_FORMAT.encode("ascii")
_X25519_KEY_LENGTH = 32


class ChunkError(ValueError):
    """A chunk could not be sealed or opened (bad input, tampering, wrong index or finality)."""


def hkdf_sha256(ikm: bytes, *, salt: bytes, info: bytes, length: int) -> bytes:
    """HKDF with SHA-256 (RFC 5869): extract, then expand to `length` bytes."""
    if not 0 < length <= 255 * hashlib.sha256().digest_size:
        raise ValueError("HKDF-SHA-256 output length must be 1..8160")
    # An empty salt needs no special case: HMAC zero-pads its key, as RFC 5869 asks for.
    prk = hmac.new(salt, ikm, hashlib.sha256).digest()
    output = b""
    block = b""
    counter = 1
    while len(output) < length:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        output += block
        counter += 1
    return output[:length]


def derive_chunk_key(my_secret: bytes, their_public: bytes, transfer_id: str) -> bytes:
    """Derive the 32-byte chunk key of one transfer; both devices get the same key."""
    for key in (my_secret, their_public):
        if not isinstance(key, bytes) or len(key) != _X25519_KEY_LENGTH:
            raise ChunkError("X25519 keys must be 32 bytes")
    salt = _encode_id(transfer_id, "transfer id")
    try:
        shared = nacl.bindings.crypto_scalarmult(my_secret, their_public)
    except nacl.exceptions.CryptoError as exc:
        raise ChunkError("public key is a low-order point") from exc
    return hkdf_sha256(shared, salt=salt, info=_FORMAT_BYTES, length=KEY_LENGTH)


def new_nonce_prefix() -> bytes:
    """Return a fresh random 16-byte nonce prefix for one transfer."""
    return nacl.utils.random(NONCE_PREFIX_LENGTH)


def chunk_nonce(nonce_prefix: bytes, index: int) -> bytes:
    """Return the 24-byte nonce of chunk `index`: prefix ‖ u64be index."""
    if not isinstance(nonce_prefix, bytes) or len(nonce_prefix) != NONCE_PREFIX_LENGTH:
        raise ChunkError("nonce prefix must be 16 bytes")
    _check_index(index)
    return nonce_prefix + struct.pack(">Q", index)


def associated_data(transfer_id: str, file_id: str, index: int, *, is_final: bool) -> bytes:
    """Return the associated data binding a chunk to its transfer, file, index and finality."""
    transfer = _encode_id(transfer_id, "transfer id")
    file = _encode_id(file_id, "file id")
    _check_index(index)
    return b"".join(
        (
            _FORMAT_BYTES,
            struct.pack(">H", len(transfer)),
            transfer,
            struct.pack(">H", len(file)),
            file,
            struct.pack(">QB", index, 1 if is_final else 0),
        )
    )


class ChunkCipher:
    """Seals and opens the chunks of one file within one transfer."""

    __slots__ = ("_file_id", "_key", "_nonce_prefix", "_transfer_id")

    def __init__(self, key: bytes, nonce_prefix: bytes, transfer_id: str, file_id: str) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_LENGTH:
            raise ChunkError("chunk key must be 32 bytes")
        if not isinstance(nonce_prefix, bytes) or len(nonce_prefix) != NONCE_PREFIX_LENGTH:
            raise ChunkError("nonce prefix must be 16 bytes")
        _encode_id(transfer_id, "transfer id")
        _encode_id(file_id, "file id")
        self._key = key
        self._nonce_prefix = nonce_prefix
        self._transfer_id = transfer_id
        self._file_id = file_id

    def seal(self, index: int, plaintext: bytes, *, is_final: bool) -> bytes:
        """Encrypt one chunk; the result is the ciphertext followed by the 16-byte tag."""
        if not isinstance(plaintext, bytes):
            raise ChunkError("chunk plaintext must be bytes")
        nonce, ad = self._nonce_and_ad(index, is_final)
        return nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(plaintext, ad, nonce, self._key)

    def open(self, index: int, ciphertext: bytes, *, is_final: bool) -> bytes:
        """Decrypt one chunk, raising ChunkError unless it was sealed with this index and finality."""
        if not isinstance(ciphertext, bytes) or len(ciphertext) < TAG_LENGTH:
            raise ChunkError("chunk ciphertext must be bytes of at least 16")
        nonce, ad = self._nonce_and_ad(index, is_final)
        try:
            return nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(ciphertext, ad, nonce, self._key)
        except nacl.exceptions.CryptoError as exc:
            raise ChunkError("chunk failed authentication") from exc

    def seal_file(self, data: bytes, *, first_index: int, chunk_size: int) -> list[bytes]:
        """Split data into chunks of `chunk_size` bytes and seal them; the last one is final.

        An empty file is one empty final chunk. Chunk `i` uses index `first_index + i`.
        """
        if not isinstance(data, bytes):
            raise ChunkError("file data must be bytes")
        if chunk_size < 1:
            raise ChunkError("chunk size must be positive")
        pieces = [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)] or [b""]
        _check_index(first_index + len(pieces) - 1)
        last = len(pieces) - 1
        return [self.seal(first_index + i, piece, is_final=i == last) for i, piece in enumerate(pieces)]

    def open_file(self, chunks: Sequence[bytes], *, first_index: int) -> bytes:
        """Open a whole file: chunk `i` has index `first_index + i` and only the last is final.

        A missing tail, an extra chunk, or chunks out of order raise ChunkError.
        """
        if not chunks:
            raise ChunkError("a file has at least one chunk")
        last = len(chunks) - 1
        return b"".join(
            self.open(first_index + i, chunk, is_final=i == last) for i, chunk in enumerate(chunks)
        )

    def _nonce_and_ad(self, index: int, is_final: bool) -> tuple[bytes, bytes]:
        if not isinstance(is_final, bool):
            raise ChunkError("is_final must be a bool")
        ad = associated_data(self._transfer_id, self._file_id, index, is_final=is_final)
        return chunk_nonce(self._nonce_prefix, index), ad


def _check_index(index: int) -> None:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index <= MAX_INDEX:
        raise ChunkError("chunk index must be an integer in 0..2**64-1")


def _encode_id(value: str, name: str) -> bytes:
    if not isinstance(value, str):
        raise ChunkError(f"{name} must be a string")
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ChunkError(f"{name} is not valid Unicode") from exc
    if not 0 < len(raw) <= MAX_ID_BYTES:
        raise ChunkError(f"{name} must be 1..65535 UTF-8 bytes")
    return raw
