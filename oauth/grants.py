"""The grants and endpoints of the authorization server, for public clients only (``none`` auth).

- Authorization code with PKCE: S256 required at the authorize step (Authlib alone would accept
  a missing challenge, or ``plain``, until the token request). A code is redeemed once, also under
  concurrent redemption: the conditional UPDATE in ``delete_authorization_code`` lets one request
  win and rolls the others back; any reuse revokes what the code produced.
- Refresh token, rotated on every use; a replayed refresh token revokes its whole grant.
- RFC 7009 revocation.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from authlib.oauth2.rfc6749 import (
    AuthorizationCodeGrant,
    InvalidGrantError,
    InvalidRequestError,
    RefreshTokenGrant,
)
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7636 import CodeChallenge
from sqlalchemy import update
from sqlmodel import col

from core.domain.secrets import digest
from core.runtime.tx import Tx
from oauth import tokens
from oauth.bridge import after, current
from oauth.resource_indicators import check_token_resource
from oauth.scopes import canonical
from oauth.tables import OAuthAuthorizationCode, OAuthToken

CODE_PREFIX = "rbc_"


@dataclass(frozen=True)
class Approval:
    """What the person approved on the consent page: the account (from the phone that confirmed the
    code) and the scopes left ticked. Authlib's "grant user"."""

    account_id: str
    scopes: frozenset[str]
    session_id: str


@dataclass(frozen=True)
class AccountRef:
    account_id: str


class S256CodeChallenge(CodeChallenge):  # type: ignore[misc]
    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant: Any, redirect_uri: Any) -> None:
        data = grant.request.payload.data
        if not data.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: send code_challenge and code_challenge_method=S256.")
        if data.get("code_challenge_method") != "S256":
            raise InvalidRequestError("code_challenge_method must be S256.")
        super().validate_code_challenge(grant, redirect_uri)


class CodeGrant(AuthorizationCodeGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]

    def generate_authorization_code(self) -> str:
        return CODE_PREFIX + secrets.token_urlsafe(32)

    def save_authorization_code(self, code: str, request: Any) -> None:
        approval: Approval = request.user
        tx = current().tx
        now = tx.now()
        data = request.payload.data
        tx.session.add(
            OAuthAuthorizationCode(
                code_hash=digest(code),
                client_id=request.client.client_id,
                account_id=approval.account_id,
                consent_session_id=approval.session_id,
                redirect_uri=request.payload.redirect_uri,
                scope=canonical(approval.scopes),
                resource=request.resource,
                code_challenge=data["code_challenge"],
                code_challenge_method=data["code_challenge_method"],
                created_at=now,
                expires_at=now + tx.settings.oauth_code_ttl_s,
            )
        )

    def query_authorization_code(self, code: str, client: Any) -> OAuthAuthorizationCode | None:
        tx = current().tx
        row = tx.session.get(OAuthAuthorizationCode, digest(code)) if len(code) <= 128 else None
        if row is None or row.client_id != client.client_id:
            return None
        if row.redeemed_at is not None:
            after(_revoke_code_family(row.code_hash))
            return None
        return row if row.expires_at > tx.now() else None

    def delete_authorization_code(self, authorization_code: OAuthAuthorizationCode) -> None:
        tx = current().tx
        redeemed = tx.session.execute(
            update(OAuthAuthorizationCode)
            .where(
                col(OAuthAuthorizationCode.code_hash) == authorization_code.code_hash,
                col(OAuthAuthorizationCode.redeemed_at).is_(None),
            )
            .values(redeemed_at=tx.now(), grant_id=self.request.grant_id)
        )
        if getattr(redeemed, "rowcount", 0) != 1:
            after(_revoke_code_family(authorization_code.code_hash))
            raise InvalidGrantError("The authorization code was already used.")

    def authenticate_user(self, authorization_code: OAuthAuthorizationCode) -> AccountRef:
        return AccountRef(authorization_code.account_id)


class RotatingRefreshGrant(RefreshTokenGrant):  # type: ignore[misc]
    TOKEN_ENDPOINT_AUTH_METHODS = ["none"]
    INCLUDE_NEW_REFRESH_TOKEN = True

    def validate_token_request(self) -> None:
        super().validate_token_request()
        check_token_resource(self.request, self.request.refresh_token.resource)

    def authenticate_refresh_token(self, refresh_token: str) -> OAuthToken | None:
        return tokens.find_refresh_token(current(), refresh_token)

    def authenticate_user(self, refresh_token: OAuthToken) -> AccountRef:
        return AccountRef(refresh_token.account_id)

    def revoke_old_credential(self, refresh_token: OAuthToken) -> None:
        tokens.spend_refresh_token(current(), refresh_token)


class Revocation(RevocationEndpoint):  # type: ignore[misc]
    CLIENT_AUTH_METHODS = ["none"]

    def query_token(self, token_string: str, token_type_hint: str | None) -> tokens.FoundToken | None:
        return tokens.find_token(current(), token_string, token_type_hint)

    def revoke_token(self, token: tokens.FoundToken, request: Any) -> None:
        tokens.revoke_token(current(), token)


def _revoke_code_family(code_hash: str) -> Any:
    """After a code's reuse: revoke the grant its first redemption produced, if any."""

    def action(tx: Tx) -> None:
        row = tx.session.get(OAuthAuthorizationCode, code_hash)
        if row is not None and row.grant_id is not None:
            tokens.revoke_family(tx, row.grant_id)

    return action
