"""The file-transfer routes a device uses, and the presigned object URLs they hand out.

``TransferApi`` talks to relaybox with the device credential. ``ObjectHttp`` uses the presigned
URLs as they are (the embedded store's or a bucket's): it sends no credential, follows no
redirect, and reads a download only up to the size its URL was issued for.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

import httpx

from client.api import USER_AGENT, ApiError, RelayboxApi, error_from_response
from client.api_fields import Fields
from client.lifecycle import Closing
from client.state import ClientError

OBJECT_TIMEOUT_S = 60.0
URLS_PER_REQUEST = 100  # the server's cap on indexes per URL request


@dataclass(frozen=True, slots=True)
class Transfer:
    transfer_id: str
    sender: str
    recipient: str
    size: int
    chunk_size: int
    chunk_count: int
    expires_at: int


@dataclass(frozen=True, slots=True)
class ChunkUrl:
    index: int
    url: str
    size: int


class TransferApi(RelayboxApi):
    """``/v1/transfers``: open, look up and end a transfer; presigned URLs for its chunks."""

    def create_transfer(self, *, to: str, size: int, chunk_size: int) -> Transfer:
        body = {"to": to, "size": size, "chunk_size": chunk_size}
        return _transfer(self._call("POST", "/v1/transfers", body=body, expect=201))

    def get_transfer(self, transfer_id: str) -> Transfer:
        return _transfer(self._call("GET", f"/v1/transfers/{_segment(transfer_id)}"))

    def end_transfer(self, transfer_id: str) -> None:
        self._call("DELETE", f"/v1/transfers/{_segment(transfer_id)}", expect=204)

    def chunk_urls(self, transfer_id: str, kind: str, indexes: list[int]) -> list[ChunkUrl]:
        """``kind``: ``upload`` (the sender) or ``download`` (the recipient)."""
        raw = self._call(
            "POST", f"/v1/transfers/{_segment(transfer_id)}/{kind}-urls", body={"indexes": indexes}
        )
        items = Fields(raw).value("urls")
        if not isinstance(items, list):
            raise ApiError(200, "invalid_response", "urls must be a list")
        urls = []
        for item in items:
            fields = Fields(item, "url")
            urls.append(ChunkUrl(fields.integer("index"), fields.text("url"), fields.integer("size")))
        if [url.index for url in urls] != list(dict.fromkeys(indexes)):
            raise ApiError(200, "invalid_response", "the URLs are not for the chunks asked for")
        return urls


class ObjectHttp(Closing):
    """PUT and GET on presigned URLs. A context manager."""

    def __init__(self, *, transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(
            timeout=httpx.Timeout(OBJECT_TIMEOUT_S, connect=5.0),
            transport=transport,
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def put(self, url: ChunkUrl, data: bytes) -> None:
        if len(data) != url.size:
            raise ClientError(
                "chunk_size_mismatch", f"chunk {url.index} is {len(data)} bytes, not {url.size}"
            )
        try:
            response = self._http.put(url.url, content=data)
        except httpx.HTTPError as exc:
            raise ApiError(0, "connection_failed", f"uploading chunk {url.index} failed: {exc}") from exc
        if response.status_code != 200:
            raise error_from_response(response)

    def get(self, url: ChunkUrl) -> bytes:
        """The chunk's bytes; more or fewer than the URL's size is ``chunk_size_mismatch``."""
        pieces: list[bytes] = []
        received = 0
        try:
            with self._http.stream("GET", url.url) as response:
                if response.status_code != 200:
                    response.read()
                    raise error_from_response(response)
                for piece in response.iter_bytes():
                    received += len(piece)
                    if received > url.size:
                        break
                    pieces.append(piece)
        except httpx.HTTPError as exc:
            raise ApiError(0, "connection_failed", f"downloading chunk {url.index} failed: {exc}") from exc
        if received != url.size:
            raise ClientError("chunk_size_mismatch", f"chunk {url.index} did not have its {url.size} bytes")
        return b"".join(pieces)


def _transfer(raw: object) -> Transfer:
    data = Fields(raw, "transfer")
    return Transfer(
        transfer_id=data.text("transfer_id"),
        sender=data.text("sender"),
        recipient=data.text("recipient"),
        size=data.integer("size"),
        chunk_size=data.integer("chunk_size"),
        chunk_count=data.integer("chunk_count"),
        expires_at=data.integer("expires_at"),
    )


def _segment(transfer_id: str) -> str:
    if not transfer_id.startswith("xfr_") or not transfer_id.isascii() or not transfer_id[4:].isalnum():
        raise ClientError("invalid_transfer_id", f"{transfer_id!r} is not a transfer id")
    return quote(transfer_id, safe="")
