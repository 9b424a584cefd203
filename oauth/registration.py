"""Clients: RFC 7591 dynamic registration of public clients, the field rules shared with client ID
metadata documents (``oauth.client_metadata``), and looking a client up for Authlib.

Only public clients: ``token_endpoint_auth_method`` is ``none`` (the default here, not Authlib's
``client_secret_basic``) and no secret is ever issued. A client that asks for a confidential method
(Claude.ai's connector asks for ``client_secret_post``) is registered as the public client it will
be treated as, and the response says so: RFC 7591 section 3.2.1 lets the server replace requested
metadata values, and the client then authenticates with PKCE alone, as every MCP client can.
Redirect URIs follow ``oauth.redirect_uris``. Omitted ``grant_types`` mean both the code and the
refresh grant, so refresh tokens never depend on ``offline_access``. A client that never completes
a grant expires after ``oauth_client_ttl_s``.
"""

from __future__ import annotations

import json
from typing import Any

from authlib.oauth2.rfc7591 import (
    ClientMetadataClaims,
    ClientRegistrationEndpoint,
    InvalidClientMetadataError,
    InvalidRedirectURIError,
)

from core.domain.secrets import new_prefixed_id
from core.runtime.tx import Tx
from oauth.bridge import JsonBody, current
from oauth.redirect_uris import redirect_host, redirect_uri_problem
from oauth.scopes import TOLERATED
from oauth.tables import OAuthClient

MAX_REDIRECT_URIS = 8
MAX_NAME = 128
MAX_URL = 2048
MAX_LIST = 10
DEFAULT_GRANT_TYPES = ["authorization_code", "refresh_token"]
URL_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")
TEXT_FIELDS = ("software_id", "software_version")


def prepare_metadata(document: dict[str, Any], *, registering: bool) -> tuple[dict[str, Any], str]:
    """Check the fields Authlib does not (sizes, redirect URIs, public-client rules), fill the
    defaults and take out ``application_type`` (OpenID's, which Authlib's claims drop).
    ``registering`` (RFC 7591): any asked-for auth method becomes ``none``, and the response says so;
    a client ID metadata document gets no response to learn that from, so its method must fit.
    Raises ``InvalidRedirectURIError`` or ``InvalidClientMetadataError``."""
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not 1 <= len(uris) <= MAX_REDIRECT_URIS:
        raise InvalidRedirectURIError(f"redirect_uris must be a list of 1 to {MAX_REDIRECT_URIS} URIs.")
    for uri in uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            raise InvalidRedirectURIError(_ascii(problem))
    prepared = dict(document)
    name = prepared.get("client_name")
    if name is not None and (
        not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not name.isprintable()
    ):
        raise InvalidClientMetadataError(
            f"client_name must be printable text of at most {MAX_NAME} characters."
        )
    for key in URL_FIELDS:
        if key in prepared and (not isinstance(prepared[key], str) or len(prepared[key]) > MAX_URL):
            raise InvalidClientMetadataError(f"{key} must be a URL of at most {MAX_URL} characters.")
    for key in TEXT_FIELDS:
        if key in prepared and (not isinstance(prepared[key], str) or len(prepared[key]) > MAX_NAME):
            raise InvalidClientMetadataError(f"{key} must be text of at most {MAX_NAME} characters.")
    for key in ("grant_types", "response_types", "contacts"):
        value = prepared.get(key)
        if value is not None and (
            not isinstance(value, list)
            or len(value) > MAX_LIST
            or not all(isinstance(v, str) and len(v) <= 256 for v in value)
        ):
            raise InvalidClientMetadataError(f"{key} must be a list of at most {MAX_LIST} strings.")
    scope = prepared.get("scope")
    if scope is not None:
        if not isinstance(scope, str) or len(scope) > 512:
            raise InvalidClientMetadataError("scope must be a space-separated string.")
        prepared["scope"] = " ".join(v for v in scope.split() if v not in TOLERATED)
    application_type = prepared.pop("application_type", None)
    if application_type not in (None, "native", "web"):
        raise InvalidClientMetadataError("application_type must be native or web.")
    method = prepared.get("token_endpoint_auth_method")
    if method is not None and not isinstance(method, str):
        raise InvalidClientMetadataError("token_endpoint_auth_method must be a string.")
    if registering or method is None:
        prepared["token_endpoint_auth_method"] = "none"  # whatever was asked: see the module docstring
    prepared.setdefault("grant_types", list(DEFAULT_GRANT_TYPES))
    prepared.setdefault("response_types", ["code"])
    return prepared, application_type or "native"


def validate_metadata(
    document: dict[str, Any], server_metadata: dict[str, Any], *, registering: bool
) -> dict[str, Any]:
    """``prepare_metadata``, then Authlib's RFC 7591 claims against the server's metadata."""
    prepared, application_type = prepare_metadata(document, registering=registering)
    options = ClientMetadataClaims.get_claims_options(server_metadata)
    claims = ClientMetadataClaims(prepared, {}, options, server_metadata)
    try:
        claims.validate()
    except Exception as exc:  # joserfc's claim errors
        raise InvalidClientMetadataError(_ascii(getattr(exc, "description", "") or str(exc))) from exc
    metadata: dict[str, Any] = claims.get_registered_claims()
    metadata["application_type"] = application_type
    if not metadata.get("scope"):
        metadata.pop("scope", None)
    return metadata


def store_client(
    tx: Tx, *, client_id: str, source: str, metadata: dict[str, Any], refresh_after: int | None = None
) -> OAuthClient:
    """Insert or refresh a client. A client that already completed a grant keeps not expiring."""
    now = tx.now()
    uris: list[str] = metadata["redirect_uris"]
    name = metadata.get("client_name") or f"unnamed app ({redirect_host(uris[0])})"
    row = tx.session.get(OAuthClient, client_id)
    if row is None:
        row = OAuthClient(
            client_id=client_id,
            source=source,
            client_name=name[:MAX_NAME],
            redirect_uris="[]",
            grant_types="",
            metadata_json="{}",
            created_at=now,
            expires_at=now + tx.settings.oauth_client_ttl_s,
        )
    row.client_name = name[:MAX_NAME]
    row.redirect_uris = json.dumps(uris)
    row.grant_types = " ".join(metadata.get("grant_types") or DEFAULT_GRANT_TYPES)
    row.metadata_json = json.dumps(metadata)
    row.refresh_after = refresh_after
    if row.expires_at is not None:  # in use again before completing a grant: give it a fresh day
        row.expires_at = now + tx.settings.oauth_client_ttl_s
    tx.session.add(row)
    tx.session.flush()
    return row


def find_client(tx: Tx, client_id: str) -> OAuthClient | None:
    """A stored, unexpired client (a client ID metadata document was fetched before, at authorize)."""
    if not client_id or len(client_id) > 512:
        return None
    row = tx.session.get(OAuthClient, client_id)
    if row is None or (row.expires_at is not None and row.expires_at <= tx.now()):
        return None
    return row


class DynamicRegistration(ClientRegistrationEndpoint):  # type: ignore[misc]
    """Anonymous registration (per-IP limited by the route); the response carries no secret."""

    def __init__(self, server_metadata: dict[str, Any]) -> None:
        super().__init__()
        self.server_metadata = server_metadata

    def authenticate_token(self, request: Any) -> bool:
        return True

    def get_server_metadata(self) -> dict[str, Any]:
        return self.server_metadata

    def extract_client_metadata(self, request: Any) -> dict[str, Any]:
        metadata = validate_metadata(request.payload.data, self.server_metadata, registering=True)
        request.payload = JsonBody(metadata)
        return metadata

    def generate_client_info(self, request: Any) -> dict[str, Any]:
        return {"client_id": new_prefixed_id("cli"), "client_id_issued_at": current().tx.now()}

    def save_client(
        self, client_info: dict[str, Any], client_metadata: dict[str, Any], request: Any
    ) -> OAuthClient:
        return store_client(
            current().tx, client_id=client_info["client_id"], source="dcr", metadata=client_metadata
        )


def _ascii(text: str) -> str:
    """An error description within RFC 6749's character set."""
    return "".join(ch if 0x20 <= ord(ch) <= 0x7E and ch not in '"\\' else "?" for ch in text)
