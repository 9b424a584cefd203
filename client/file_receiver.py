"""Receiving a file offered by a paired device (``relaybox tail``, ``relaybox phone run``): accept,
download and open every chunk, save the file atomically, end the transfer, answer ``complete``;
or, on a refusal or any failure, save nothing, end the transfer and answer ``decline``. The wire
shapes and the sending side are in ``client.transfers``."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

import httpx

from client.api import ApiError
from client.dispatch import one_line
from client.documents import place_file
from client.opener import Received
from client.output import Output
from client.relay import Relay
from client.state import ClientError, DeviceState
from client.transfer_api import URLS_PER_REQUEST, ObjectHttp, TransferApi
from client.transfers import TRANSFER_ID, Offer, ProgressFactory, TransferError, control, parse_offer
from core.domain.chunks import TAG_LENGTH, ChunkCipher, ChunkError, derive_chunk_key


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
        if not isinstance(transfer_id, str) or not TRANSFER_ID.fullmatch(transfer_id):
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
