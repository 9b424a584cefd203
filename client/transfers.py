"""Sending a file to a paired device and receiving one, end to end encrypted
(``xchacha20poly1305-chunked-v1``, ``core.domain.chunks``); relaybox only brokers storage.

The sender opens a transfer, seals the file chunk by chunk under a key only the two devices can
derive (X25519 + HKDF over the transfer id) and uploads each chunk through its presigned URL; once
every chunk is stored it sends the ``offer`` (a ``file_ctrl`` envelope carrying the name, sizes
and nonce prefix). The receiver answers ``accept``, downloads and opens every chunk (the
associated data binds index and finality, so a tampered, reordered, truncated or extra chunk
fails), writes the file atomically into its downloads folder, ends the transfer (the server
deletes the objects) and answers ``complete``; a failure or a refusal answers ``decline``. Either
device may end a transfer early (``cancel`` from the sender, ``decline`` from the receiver).

This module holds the wire shapes and the sending side; ``client.file_receiver`` the receiving one.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeGuard

import httpx

from client.dispatch import one_line
from client.progress import Progress
from client.relay import Relay, resolve_peer
from client.state import ClientError, DeviceState
from client.transfer_api import URLS_PER_REQUEST, ObjectHttp, TransferApi
from core.domain.chunks import (
    CHUNK_FORMAT,
    NONCE_PREFIX_LENGTH,
    TAG_LENGTH,
    ChunkCipher,
    derive_chunk_key,
    new_nonce_prefix,
)
from core.domain.filenames import UnsafeFilenameError, plain_name

CHUNK_BYTES = 1024 * 1024  # plaintext bytes per chunk
MAX_OFFERED_CHUNK_BYTES = 64 * 1024 * 1024  # a receiver holds one chunk in memory at a time
FILE_CTRL = "file_ctrl"
TRANSFER_ID = re.compile(r"^xfr_[0-9a-f]{32}$")
_FILE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ProgressFactory = Callable[[str, int], Progress]


class TransferError(ClientError):
    """A transfer that could not be completed; it was ended on the server."""


@dataclass(frozen=True, slots=True)
class Offer:
    transfer_id: str
    file_id: str
    name: str
    size: int
    chunk_size: int
    chunk_count: int
    nonce_prefix: bytes

    def payload(self) -> dict[str, Any]:
        """The ``offer`` payload, fields in their documented order."""
        return {
            "type": FILE_CTRL,
            "action": "offer",
            "transfer_id": self.transfer_id,
            "file_id": self.file_id,
            "name": self.name,
            "size": self.size,
            "chunk_size": self.chunk_size,
            "chunk_count": self.chunk_count,
            "format": CHUNK_FORMAT,
            "nonce_prefix": base64.b64encode(self.nonce_prefix).decode(),
        }


def chunk_count_of(size: int, chunk_size: int) -> int:
    """Chunks of a ``size``-byte file: at least one (an empty file is one empty final chunk)."""
    return max(1, -(-size // chunk_size))


def control(action: str, transfer_id: str, reason: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"type": FILE_CTRL, "action": action, "transfer_id": transfer_id}
    if reason is not None:
        payload["reason"] = reason
    return payload


# Sending.


@dataclass(frozen=True, slots=True)
class Sent:
    transfer_id: str
    peer_name: str
    size: int


def send_file(
    path: Path,
    state: DeviceState,
    file: Path,
    *,
    to: str | None = None,
    progress: ProgressFactory | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Sent:
    """Encrypt and upload ``file`` for the paired device ``to``, then offer it. On any failure, or
    Ctrl-C, the transfer is ended on the server (its chunks deleted) before the error propagates."""
    peer_id, peer = resolve_peer(state, to)
    name = _plain_name(file.name)
    with file.open("rb") as source, TransferApi(state.server, state.device_token, transport=transport) as api:
        size = os.fstat(source.fileno()).st_size
        count = chunk_count_of(size, CHUNK_BYTES)
        transfer = api.create_transfer(
            to=peer_id, size=size + count * TAG_LENGTH, chunk_size=CHUNK_BYTES + TAG_LENGTH
        )
        offer = Offer(
            transfer.transfer_id, secrets.token_hex(8), name, size, CHUNK_BYTES, count, new_nonce_prefix()
        )
        try:
            key = derive_chunk_key(state.secret_key_bytes, peer.public_key_bytes, transfer.transfer_id)
            cipher = ChunkCipher(key, offer.nonce_prefix, offer.transfer_id, offer.file_id)
            bar = progress(f"sending {name}", size) if progress else None
            _upload(api, transfer.transfer_id, cipher, source, offer, bar, transport)
            if bar:
                bar.finish()
            with Relay(path, state, transport=transport) as relay:
                relay.send(offer.payload(), to=peer_id)
        except BaseException:
            with contextlib.suppress(ClientError):
                api.end_transfer(transfer.transfer_id)
            raise
    return Sent(transfer.transfer_id, peer.name or peer_id, size)


def _upload(
    api: TransferApi,
    transfer_id: str,
    cipher: ChunkCipher,
    source: BinaryIO,
    offer: Offer,
    bar: Progress | None,
    transport: httpx.BaseTransport | None,
) -> None:
    with ObjectHttp(transport=transport) as objects:
        for start in range(0, offer.chunk_count, URLS_PER_REQUEST):
            indexes = list(range(start, min(start + URLS_PER_REQUEST, offer.chunk_count)))
            for url in api.chunk_urls(transfer_id, "upload", indexes):
                last = url.index == offer.chunk_count - 1
                plain = source.read(offer.chunk_size)
                expected = offer.size - url.index * offer.chunk_size if last else offer.chunk_size
                if len(plain) != expected:
                    raise ClientError("file_changed", "the file changed size while it was being sent")
                objects.put(url, cipher.seal(url.index, plain, is_final=last))
                if bar:
                    bar.advance(len(plain))
        if source.read(1):
            raise ClientError("file_changed", "the file grew while it was being sent")


def cancel_transfer(
    path: Path, state: DeviceState, transfer_id: str, *, transport: httpx.BaseTransport | None = None
) -> str:
    """End a transfer from either side and tell the other device: ``cancel`` from the sender,
    ``decline`` from the receiver. Returns the action sent."""
    with TransferApi(state.server, state.device_token, transport=transport) as api:
        transfer = api.get_transfer(transfer_id)
        api.end_transfer(transfer_id)
    sending = transfer.sender == state.device_id
    action = "cancel" if sending else "decline"
    other = transfer.recipient if sending else transfer.sender
    with Relay(path, state, transport=transport) as relay:
        relay.send(control(action, transfer_id), to=other)
    return action


def parse_offer(payload: Mapping[str, Any]) -> Offer:
    """An ``offer`` payload, checked field by field (``invalid_offer`` otherwise)."""

    def bad(why: str) -> TransferError:
        return TransferError("invalid_offer", why)

    transfer_id, file_id = payload.get("transfer_id"), payload.get("file_id")
    if not isinstance(transfer_id, str) or not TRANSFER_ID.fullmatch(transfer_id):
        raise bad("transfer_id is not a transfer id")
    if not isinstance(file_id, str) or not _FILE_ID.fullmatch(file_id):
        raise bad("file_id is not an id")
    if payload.get("format") != CHUNK_FORMAT:
        raise bad(f"format is not {CHUNK_FORMAT}")
    size, chunk_size, count = payload.get("size"), payload.get("chunk_size"), payload.get("chunk_count")
    if not (_whole(size) and _whole(chunk_size) and _whole(count)):
        raise bad("size, chunk_size and chunk_count must be whole numbers")
    if not 0 < chunk_size <= MAX_OFFERED_CHUNK_BYTES or count != chunk_count_of(size, chunk_size):
        raise bad("the chunk layout does not add up")
    try:
        prefix = base64.b64decode(str(payload.get("nonce_prefix")), validate=True)
    except (binascii.Error, ValueError) as error:
        raise bad("nonce_prefix is not base64") from error
    if len(prefix) != NONCE_PREFIX_LENGTH:
        raise bad("nonce_prefix is not 16 bytes")
    raw_name = payload.get("name")
    if not isinstance(raw_name, str):
        raise bad("name is missing")
    return Offer(transfer_id, file_id, _plain_name(raw_name), size, chunk_size, count, prefix)


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _plain_name(raw: str) -> str:
    try:
        return plain_name(raw)
    except UnsafeFilenameError as error:
        raise TransferError("unsafe_filename", f"refused {one_line(raw)!r}: {error}") from error
