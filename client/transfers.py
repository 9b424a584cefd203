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

from client.api import ApiError
from client.phone_ops import Output, place_file
from client.progress import Progress
from client.state import ClientError, DeviceState
from client.stream import Received, Relay, one_line, resolve_peer
from client.transfer_api import URLS_PER_REQUEST, ObjectHttp, TransferApi
from core.domain.chunks import (
    CHUNK_FORMAT,
    NONCE_PREFIX_LENGTH,
    TAG_LENGTH,
    ChunkCipher,
    ChunkError,
    derive_chunk_key,
    new_nonce_prefix,
)
from core.domain.filenames import UnsafeFilenameError, plain_name

CHUNK_BYTES = 1024 * 1024  # plaintext bytes per chunk
MAX_OFFERED_CHUNK_BYTES = 64 * 1024 * 1024  # a receiver holds one chunk in memory at a time
FILE_CTRL = "file_ctrl"
_TRANSFER_ID = re.compile(r"^xfr_[0-9a-f]{32}$")
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


# Receiving.


class FileReceiver:
    """Handles ``file_ctrl`` payloads for ``relaybox tail`` and ``relaybox phone run``: an offer is
    downloaded into ``downloads`` (or declined with ``decline_all``); the other actions are shown.
    Every outcome is printed through ``output`` (a text line, or a JSON record with ``--json``)."""

    def __init__(
        self,
        path: Path,
        state: DeviceState,
        output: Output,
        downloads: Path,
        *,
        decline_all: bool = False,
        progress: ProgressFactory | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.path = path
        self.state = state
        self.output = output
        self.downloads = downloads
        self.decline_all = decline_all
        self._progress = progress
        self._transport = transport

    def on_file_ctrl(self, item: Received) -> str:
        action = item.payload.get("action")
        transfer_id = item.payload.get("transfer_id")
        if not isinstance(transfer_id, str) or not _TRANSFER_ID.fullmatch(transfer_id):
            return one_line(f"file_ctrl from {item.sender_name} without a usable transfer_id")
        if action == "offer":
            self._on_offer(item, transfer_id)
            return ""
        if action not in ("accept", "decline", "cancel", "complete"):
            return one_line(
                f"file_ctrl {action!r} from {item.sender_name} for {transfer_id} (unknown action)"
            )
        reason = item.payload.get("reason")
        because = f" ({one_line(reason)})" if isinstance(reason, str) else ""
        self.output.show(
            f"FILE {action.upper()} [{transfer_id}] by {one_line(item.sender_name)}{because}",
            {"type": f"file_{action}", "transfer_id": transfer_id, "from": item.sender, "reason": reason},
        )
        return ""

    def _on_offer(self, item: Received, transfer_id: str) -> None:
        try:
            offer = parse_offer(item.payload)
        except TransferError as error:
            self._refuse(item.sender, transfer_id, error.code, error.message)
            return
        if self.decline_all:
            self._refuse(item.sender, transfer_id, "declined", "this device declines files", failed=False)
            return
        try:
            saved = self.receive(item.sender, offer)
        except (ClientError, ChunkError, OSError) as error:
            code = getattr(error, "code", "os_error" if isinstance(error, OSError) else "chunk_rejected")
            message = getattr(error, "message", str(error))
            self._refuse(item.sender, transfer_id, code, message)
            return
        self.output.show(
            f"FILE SAVED [{transfer_id}] from {one_line(item.sender_name)}: {one_line(saved)} "
            f"({offer.size} bytes)",
            {
                "type": "file_saved",
                "transfer_id": transfer_id,
                "from": item.sender,
                "path": str(saved),
                "size": offer.size,
            },
        )

    def receive(self, sender: str, offer: Offer) -> Path:
        """Download, open and save the offered file; ends the transfer and answers ``complete``."""
        peer = self.state.peers.get(sender)
        if peer is None:
            raise TransferError("unknown_peer", f"{sender} is not a paired device")
        with Relay(self.path, self.state, transport=self._transport) as relay:
            relay.send(control("accept", offer.transfer_id), to=sender)
            key = derive_chunk_key(self.state.secret_key_bytes, peer.public_key_bytes, offer.transfer_id)
            cipher = ChunkCipher(key, offer.nonce_prefix, offer.transfer_id, offer.file_id)
            with TransferApi(self.state.server, self.state.device_token, transport=self._transport) as api:
                saved = self._download(api, cipher, offer)
                with contextlib.suppress(ApiError):  # already ended by the sender: nothing left to delete
                    api.end_transfer(offer.transfer_id)
            relay.send(control("complete", offer.transfer_id), to=sender)
        return saved

    def _download(self, api: TransferApi, cipher: ChunkCipher, offer: Offer) -> Path:
        self.downloads.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.downloads / f".{offer.name}.{secrets.token_hex(6)}.part"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        bar = self._progress(f"receiving {offer.name}", offer.size) if self._progress else None
        try:
            with (
                os.fdopen(os.open(temporary, flags, 0o600), "wb") as sink,
                ObjectHttp(transport=self._transport) as objects,
            ):
                written = 0
                for start in range(0, offer.chunk_count, URLS_PER_REQUEST):
                    indexes = list(range(start, min(start + URLS_PER_REQUEST, offer.chunk_count)))
                    for url in api.chunk_urls(offer.transfer_id, "download", indexes):
                        last = url.index == offer.chunk_count - 1
                        if url.size > offer.chunk_size + TAG_LENGTH:
                            raise TransferError(
                                "chunk_too_large", f"chunk {url.index} is larger than offered"
                            )
                        plain = cipher.open(url.index, objects.get(url), is_final=last)
                        sink.write(plain)
                        written += len(plain)
                        if bar:
                            bar.advance(len(plain))
                if written != offer.size:
                    raise TransferError(
                        "size_mismatch", f"received {written} bytes, {offer.size} were offered"
                    )
                sink.flush()
                os.fsync(sink.fileno())
            if bar:
                bar.finish()
            return place_file(temporary, self.downloads, offer.name)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)

    def _refuse(self, sender: str, transfer_id: str, code: str, message: str, *, failed: bool = True) -> None:
        """End the transfer and answer ``decline``; best-effort (the sender may be gone)."""
        with (
            contextlib.suppress(ClientError),
            TransferApi(self.state.server, self.state.device_token, transport=self._transport) as api,
        ):
            api.end_transfer(transfer_id)
        with (
            contextlib.suppress(ClientError),
            Relay(self.path, self.state, transport=self._transport) as relay,
        ):
            relay.send(control("decline", transfer_id, code), to=sender)
        label = "FAILED" if failed else "DECLINED"
        self.output.show(
            f"FILE {label} [{transfer_id}]: {code}: {one_line(message)}",
            {
                "type": "file_failed" if failed else "file_declined",
                "transfer_id": transfer_id,
                "code": code,
                "message": message,
            },
        )


def parse_offer(payload: Mapping[str, Any]) -> Offer:
    """An ``offer`` payload, checked field by field (``invalid_offer`` otherwise)."""

    def bad(why: str) -> TransferError:
        return TransferError("invalid_offer", why)

    transfer_id, file_id = payload.get("transfer_id"), payload.get("file_id")
    if not isinstance(transfer_id, str) or not _TRANSFER_ID.fullmatch(transfer_id):
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
