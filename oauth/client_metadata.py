"""Client ID Metadata Documents: a ``client_id`` that is an https URL names the client's own
metadata document, fetched at the authorize step and cached.

The fetch is guarded against server-side request forgery: https only (http on a loopback host
only with ``cimd_allow_loopback``, for tests), every address the host resolves to must be public
(loopback too with that setting), the connection goes to the address that was checked (so a
second DNS answer cannot redirect it), at most ``MAX_REDIRECTS`` redirects, each checked the same
way, ``cimd_timeout_s`` in all and ``cimd_max_bytes`` of body. The document must name the URL as
its ``client_id`` and carry ``client_name`` and ``redirect_uris``; it is cached for its
``Cache-Control: max-age`` (clamped), else ``cimd_cache_ttl_s``.
"""

from __future__ import annotations

import json
import re
import socket
from typing import Any
from urllib.parse import urljoin, urlsplit

import anyio
import httpx
from authlib.oauth2.rfc6749 import OAuth2Error

from core.domain.webhooks import address_allowed, parse_address
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.settings import Settings
from oauth.metadata import is_loopback
from oauth.registration import store_client, validate_metadata
from oauth.tables import MAX_CLIENT_ID, OAuthClient

MAX_REDIRECTS = 3
MAX_AGE = re.compile(r"(?:^|,)\s*max-age\s*=\s*(\d+)")
MIN_CACHE_S = 60
MAX_CACHE_S = 86_400


class ClientMetadataError(Exception):
    """The client ID metadata document cannot be used; the message says why (shown on the page)."""


def is_metadata_document_url(client_id: str) -> bool:
    """Whether ``client_id`` is meant as a metadata document URL (rather than a registered id)."""
    return client_id.startswith(("https://", "http://"))


async def resolve_client(core: Core, client_id: str, server_metadata: dict[str, Any]) -> None:
    """Make sure the client named by a metadata document URL is stored and fresh."""
    settings = core.settings
    problem = _url_problem(client_id, settings)
    if problem is not None:
        raise ClientMetadataError(problem)
    if await core.run(_is_fresh, Principal.system(), client_id=client_id):
        return
    with anyio.move_on_after(settings.cimd_timeout_s) as scope:
        document, max_age = await _fetch(client_id, settings)
    if scope.cancelled_caught:
        raise ClientMetadataError("the client metadata document did not arrive in time")
    metadata = _checked(document, client_id, server_metadata)
    ttl = min(max(max_age, MIN_CACHE_S), MAX_CACHE_S) if max_age is not None else settings.cimd_cache_ttl_s
    await core.run(_store, Principal.system(), client_id=client_id, metadata=metadata, ttl=ttl)


def _is_fresh(tx: Tx, _principal: Principal, *, client_id: str) -> bool:
    row = tx.session.get(OAuthClient, client_id)
    now = tx.now()
    if row is None or row.source != "cimd" or (row.expires_at is not None and row.expires_at <= now):
        return False
    return (row.refresh_after or 0) > now


def _store(tx: Tx, _principal: Principal, *, client_id: str, metadata: dict[str, Any], ttl: int) -> None:
    store_client(tx, client_id=client_id, source="cimd", metadata=metadata, refresh_after=tx.now() + ttl)


def _checked(document: object, client_id: str, server_metadata: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(document, dict):
        raise ClientMetadataError("the client metadata document is not a JSON object")
    if document.get("client_id") != client_id:
        raise ClientMetadataError("the document's client_id is not the URL it was fetched from")
    if not isinstance(document.get("client_name"), str) or "redirect_uris" not in document:
        raise ClientMetadataError("the document must carry client_name and redirect_uris")
    if any(key in document for key in ("client_secret", "client_secret_expires_at")):
        raise ClientMetadataError("a client metadata document must not carry a client secret")
    fields = {key: value for key, value in document.items() if key != "client_id"}
    try:
        return validate_metadata(fields, server_metadata, registering=False)
    except OAuth2Error as exc:
        raise ClientMetadataError(f"the client metadata is not acceptable: {exc.description}") from exc


def _url_problem(url: str, settings: Settings) -> str | None:
    if len(url) > MAX_CLIENT_ID:
        return "the client_id URL is too long"
    try:
        parts = urlsplit(url)
        _ = parts.port
    except ValueError:
        return "the client_id is not a URL"
    if parts.scheme == "http" and not (settings.cimd_allow_loopback and _loopback_host(parts.hostname)):
        return "a client_id URL must use https"
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return "a client_id URL must be an https URL with a host"
    if parts.path in ("", "/") or parts.fragment or "@" in parts.netloc:
        return "a client_id URL needs a path and no fragment or userinfo"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "a client_id URL must not contain dot segments"
    return None


async def _fetch(url: str, settings: Settings) -> tuple[object, int | None]:
    async with httpx.AsyncClient(
        trust_env=False, follow_redirects=False, timeout=settings.cimd_timeout_s
    ) as http:
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            if parts.scheme not in ("https", "http") or (
                parts.scheme == "http"
                and not (settings.cimd_allow_loopback and _loopback_host(parts.hostname))
            ):
                raise ClientMetadataError("the client metadata document redirected away from https")
            address = await _public_address(parts.hostname or "", settings)
            port = parts.port or (443 if parts.scheme == "https" else 80)
            target = f"{parts.scheme}://{_bracketed(address)}:{port}{parts.path or '/'}"
            target += f"?{parts.query}" if parts.query else ""
            extensions = {"sni_hostname": parts.hostname} if parts.scheme == "https" else {}
            request = http.build_request(
                "GET",
                target,
                headers={"Host": parts.netloc, "Accept": "application/json"},
                extensions=extensions,
            )
            response = await http.send(request, stream=True)
            try:
                if response.status_code in (301, 302, 303, 307, 308) and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    continue
                if response.status_code != 200:
                    raise ClientMetadataError(
                        f"fetching the client metadata document gave HTTP {response.status_code}"
                    )
                body = await _read_capped(response, settings.cimd_max_bytes)
                return _parse(body), _max_age(response.headers.get("cache-control", ""))
            finally:
                await response.aclose()
    raise ClientMetadataError("the client metadata document redirected too many times")


async def _public_address(host: str, settings: Settings) -> str:
    try:
        infos = await anyio.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ClientMetadataError(f"the client_id host {host!r} does not resolve") from exc
    addresses = [str(info[4][0]) for info in infos]
    for address in addresses:
        ip = parse_address(address)
        if not (
            address_allowed(ip, allow_private=False) or (settings.cimd_allow_loopback and ip.is_loopback)
        ):
            raise ClientMetadataError("the client_id host resolves to a private address")
    if not addresses:
        raise ClientMetadataError(f"the client_id host {host!r} does not resolve")
    return addresses[0]


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ClientMetadataError(f"the client metadata document is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _parse(body: bytes) -> object:
    try:
        return json.loads(body)
    except ValueError as exc:
        raise ClientMetadataError("the client metadata document is not JSON") from exc


def _max_age(cache_control: str) -> int | None:
    if "no-store" in cache_control or "no-cache" in cache_control:
        return 0
    match = MAX_AGE.search(cache_control.lower())
    return int(match.group(1)) if match else None


def _bracketed(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _loopback_host(host: str | None) -> bool:
    return host is not None and is_loopback(host)
