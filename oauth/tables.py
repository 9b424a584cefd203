"""The authorization server's tables: clients, authorization codes, tokens.

Codes and tokens are stored as SHA-256 digests only. The consent sessions and the connector
grants (what the person agreed to) belong to the core (``core.store.tables``); every token
belongs to one grant and dies with it. Also the duck-typed models Authlib reads.
"""

from __future__ import annotations

import json

from sqlalchemy import Column, Text
from sqlmodel import Field, SQLModel

from oauth.redirect_uris import redirect_uri_matches
from oauth.scopes import allowed_scope

MAX_CLIENT_ID = 512


class OAuthClient(SQLModel, table=True):
    """A public client: registered dynamically (``dcr``) or described by its client ID metadata
    document (``cimd``, re-fetched after ``refresh_after``). A client that never completes a grant
    expires (``expires_at``); the first tokens it receives clear that."""

    __tablename__ = "oauth_clients"

    client_id: str = Field(primary_key=True, max_length=MAX_CLIENT_ID)
    source: str = Field(max_length=8)
    client_name: str = Field(max_length=128)
    redirect_uris: str = Field(sa_column=Column(Text, nullable=False))  # JSON list
    grant_types: str = Field(max_length=128)  # space-separated
    metadata_json: str = Field(sa_column=Column(Text, nullable=False))  # what registration echoes
    created_at: int
    expires_at: int | None = Field(default=None, index=True)
    refresh_after: int | None = None

    # Authlib's ClientMixin, duck-typed.
    def get_client_id(self) -> str:
        return self.client_id

    def redirect_uri_list(self) -> list[str]:
        uris: list[str] = json.loads(self.redirect_uris)
        return uris

    def get_default_redirect_uri(self) -> str | None:
        uris = self.redirect_uri_list()
        return uris[0] if len(uris) == 1 else None

    def get_allowed_scope(self, scope: str | None) -> str | None:
        return allowed_scope(scope)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return any(redirect_uri_matches(registered, redirect_uri) for registered in self.redirect_uri_list())

    def check_client_secret(self, client_secret: str) -> bool:
        return False  # public clients only

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method == "none"

    def check_response_type(self, response_type: str) -> bool:
        return response_type == "code" and self.check_grant_type("authorization_code")

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type in self.grant_types.split()


class OAuthAuthorizationCode(SQLModel, table=True):
    """An authorization code, bound to its client, redirect URI, PKCE challenge, approved scopes,
    resource and account. Redeemed once; the row stays until expiry so reuse can be detected and
    the tokens it produced (``grant_id``) revoked."""

    __tablename__ = "oauth_authorization_codes"

    code_hash: str = Field(primary_key=True, max_length=64)
    client_id: str = Field(index=True, max_length=MAX_CLIENT_ID)
    account_id: str = Field(max_length=36)
    consent_session_id: str = Field(max_length=40)
    redirect_uri: str | None = Field(default=None, max_length=2048)  # as sent in the request
    scope: str = Field(max_length=256)
    resource: str = Field(max_length=512)
    code_challenge: str = Field(max_length=128)
    code_challenge_method: str = Field(max_length=8)
    created_at: int
    expires_at: int = Field(index=True)
    redeemed_at: int | None = None
    grant_id: str | None = Field(default=None, max_length=40)

    # Authlib's AuthorizationCodeMixin, duck-typed.
    def get_redirect_uri(self) -> str | None:
        return self.redirect_uri

    def get_scope(self) -> str:
        return self.scope


class OAuthToken(SQLModel, table=True):
    """An access token and its refresh token (digests). A refresh rotates: the row's refresh token
    is spent (``refresh_used_at``) and a new row joins the same grant. A spent refresh token
    presented again revokes the whole grant."""

    __tablename__ = "oauth_tokens"

    token_id: str = Field(primary_key=True, max_length=40)
    grant_id: str = Field(
        foreign_key="connector_grants.grant_id", ondelete="CASCADE", index=True, max_length=40
    )
    client_id: str = Field(max_length=MAX_CLIENT_ID)
    account_id: str = Field(max_length=36)
    access_hash: str = Field(unique=True, max_length=64)
    refresh_hash: str | None = Field(default=None, unique=True, max_length=64)
    scope: str = Field(max_length=256)
    resource: str = Field(max_length=512)
    issued_at: int
    access_expires_at: int = Field(index=True)
    refresh_expires_at: int | None = Field(default=None, index=True)
    refresh_used_at: int | None = None
    revoked_at: int | None = None

    # Authlib's TokenMixin, duck-typed (refresh and revocation).
    def check_client(self, client: OAuthClient) -> bool:
        return self.client_id == client.client_id

    def get_scope(self) -> str:
        return self.scope
