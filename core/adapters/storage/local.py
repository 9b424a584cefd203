"""The embedded object store: a local folder, reached through relaybox's own presigned routes.

A URL is ``{base_url}/v1/objects/<transfer_id>/<index>?size=N&expires=T&signature=S`` where ``S`` is
an HMAC-SHA-256 (under a key derived from the server key) of the method, object key, size and
expiry, so a URL cannot be moved to another object, method or size, or kept past its expiry.
Uploads stream into a hidden temporary file beside the target, are cut off at the bound size,
and become visible only by an atomic rename once exactly ``size`` bytes arrived.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import re
import secrets
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlencode

import anyio

from core.adapters.storage.base import TRANSFER_ID, object_key

OBJECTS_PATH = "/v1/objects"
_SIGNATURE = re.compile(r"^[A-Za-z0-9_-]{43}$")
_NUMBER = re.compile(r"^[0-9]{1,19}$")


class ObjectTooLargeError(Exception):
    """More bytes arrived than the URL allows; nothing was kept."""


class ObjectIncompleteError(Exception):
    """Fewer bytes arrived than the URL's size; nothing was kept."""


class LocalObjectStore:
    """Objects as files under ``root``: ``<root>/<transfer_id>/<index>``."""

    def __init__(self, root: Path, signing_key: bytes, base_url: str) -> None:
        self.root = root
        self._key = signing_key
        self._base_url = base_url.rstrip("/")

    # Presigning.

    def upload_url(self, key: str, *, size: int, now: int, expires_at: int) -> str:
        return self._url("PUT", key, size, expires_at)

    def download_url(self, key: str, *, size: int, now: int, expires_at: int) -> str:
        return self._url("GET", key, size, expires_at)

    def _url(self, method: str, key: str, size: int, expires_at: int) -> str:
        query = urlencode(
            {"size": size, "expires": expires_at, "signature": self.sign(method, key, size, expires_at)}
        )
        return f"{self._base_url}{OBJECTS_PATH}/{key}?{query}"

    def sign(self, method: str, key: str, size: int, expires_at: int) -> str:
        message = f"relaybox-object-v1\n{method}\n{key}\n{size}\n{expires_at}".encode()
        digest = hmac.new(self._key, message, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def verify(
        self, method: str, key: str, size: str | None, expires: str | None, signature: str | None, *, now: int
    ) -> int:
        """The size the URL is bound to, when its signature is this server's for ``method`` and
        ``key`` and it has not expired; otherwise ``PermissionError`` (forged, altered, expired)."""
        if (
            size is None
            or expires is None
            or signature is None
            or not _NUMBER.fullmatch(size)
            or not _NUMBER.fullmatch(expires)
            or not _SIGNATURE.fullmatch(signature)
        ):
            raise PermissionError("malformed presigned query")
        expected = self.sign(method, key, int(size), int(expires))
        if not hmac.compare_digest(expected, signature):  # constant time
            raise PermissionError("signature mismatch")
        if int(expires) <= now:
            raise PermissionError("expired")
        return int(size)

    # Objects.

    def path_of(self, key: str) -> Path:
        """The file of ``key``; ``ValueError`` unless ``key`` is ``<transfer_id>/<index>``."""
        transfer_id, _, index = key.partition("/")
        if not _NUMBER.fullmatch(index) or object_key(transfer_id, int(index)) != key:
            raise ValueError("not an object key")
        return self.root / transfer_id / index

    async def write(self, key: str, size: int, body: AsyncIterator[bytes]) -> None:
        """Store exactly ``size`` bytes from ``body`` as ``key``, atomically; an existing object is
        replaced (a retried upload). Raises ``ObjectTooLargeError`` as soon as the body passes ``size``
        (the rest is never read) and ``ObjectIncompleteError`` when it ends short."""
        target = self.path_of(key)
        await anyio.to_thread.run_sync(lambda: target.parent.mkdir(mode=0o700, parents=True, exist_ok=True))
        temporary = target.parent / f".{target.name}.{secrets.token_hex(8)}.part"
        handle = await anyio.open_file(temporary, "xb")
        try:
            received = 0
            async with handle:
                async for piece in body:
                    received += len(piece)
                    if received > size:
                        raise ObjectTooLargeError
                    await handle.write(piece)
                if received != size:
                    raise ObjectIncompleteError
                await handle.flush()
                await anyio.to_thread.run_sync(os.fsync, handle.wrapped.fileno())
            await anyio.to_thread.run_sync(os.replace, temporary, target)
        finally:
            with contextlib.suppress(FileNotFoundError):
                await anyio.to_thread.run_sync(os.unlink, temporary)

    def delete_transfer(self, transfer_id: str) -> None:
        if not TRANSFER_ID.fullmatch(transfer_id):
            raise ValueError("not a transfer id")
        shutil.rmtree(self.root / transfer_id, ignore_errors=True)
