"""Client ID Metadata Documents: a ``client_id`` that is an https URL names the client's own
metadata document, fetched at the authorize step and cached.

The fetch is one of the server's outbound requests (``core.adapters.outbound``), guarded against
server-side request forgery: https only, every address the host resolves to must be public
(private ones too only with ``cimd_allow_private``, for tests), the connection goes to the
address that was checked (so a second DNS answer cannot move it), redirects are not followed,
``cimd_timeout_s`` in all and ``cimd_max_bytes`` of body. The document must name the URL as its
``client_id`` and carry ``client_name`` and ``redirect_uris``; it is cached for its
``Cache-Control: max-age`` (clamped), else ``cimd_cache_ttl_s``.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from authlib.oauth2.rfc6749 import OAuth2Error

from core.adapters.outbound.client import OutboundClient, OutboundError
from core.adapters.outbound.reach import Reach, client_metadata_reach
from core.adapters.outbound.resolver import SystemResolver
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.settings import Settings
from oauth.registration import store_client, validate_metadata
from oauth.tables import MAX_CLIENT_ID, OAuthClient

USER_AGENT = "relaybox-oauth/1"
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
    reach = client_metadata_reach(settings)
    problem = _url_problem(client_id) or reach.url_problem(client_id, "the client_id URL")
    if problem is not None:
        raise ClientMetadataError(problem)
    if await core.run(_is_fresh, Principal.system(), client_id=client_id):
        return
    document, max_age = await _fetch(client_id, settings, reach)
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


def _url_problem(url: str) -> str | None:
    """What a client_id URL needs besides being a URL the server may fetch: a path, no dot
    segments, and a length the clients table holds."""
    if len(url) > MAX_CLIENT_ID:
        return "the client_id URL is too long"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "the client_id is not a URL"
    if parts.scheme != "https":
        return "a client_id URL must use https"
    if parts.path in ("", "/"):
        return "a client_id URL needs a path"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "a client_id URL must not contain dot segments"
    return None


async def _fetch(url: str, settings: Settings, reach: Reach) -> tuple[object, int | None]:
    outbound = OutboundClient(
        SystemResolver(), reach, timeout_s=settings.cimd_timeout_s, user_agent=USER_AGENT
    )
    try:
        answer = await outbound.request(
            "GET", url, headers={"Accept": "application/json"}, read_limit=settings.cimd_max_bytes
        )
    except OutboundError as error:
        raise ClientMetadataError(_refusal(error, urlsplit(url).hostname or "", settings)) from None
    if 300 <= answer.status < 400:
        raise ClientMetadataError("the client metadata document redirected, and redirects are not followed")
    if answer.status != 200:
        raise ClientMetadataError(f"fetching the client metadata document gave HTTP {answer.status}")
    return _parse(answer.body), _max_age(answer.headers.get("cache-control", ""))


def _refusal(error: OutboundError, host: str, settings: Settings) -> str:
    """What the page says when the document could not be fetched."""
    if error.code == "timeout":
        return "the client metadata document did not arrive in time"
    if error.code == "dns_failed":
        return f"the client_id host {host!r} does not resolve"
    if error.code == "address_not_allowed":
        return "the client_id host resolves to a private address"
    if error.code == "body_too_large":
        return f"the client metadata document is larger than {settings.cimd_max_bytes} bytes"
    if error.code == "url_not_allowed":
        return error.detail
    return f"the client metadata document could not be fetched ({error.code})"


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
