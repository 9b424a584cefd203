"""Expiry sweep of the authorization server's tables (next to the core's ``sweep_expired``).

Clients that never completed a grant go after ``oauth_client_ttl_s``. Codes stay until they
expire, redeemed or not, so a reuse can still be detected. A token row goes once neither of its
tokens can be used; a spent refresh token is kept until then, so its replay is still caught.
"""

from __future__ import annotations

from pydantic import BaseModel
from sqlalchemy import delete, or_
from sqlmodel import col

from core.errors import RelayError
from core.principal import Principal, PrincipalKind
from core.runtime.tx import Tx
from oauth.tables import OAuthAuthorizationCode, OAuthClient, OAuthToken


class OAuthSweepOut(BaseModel):
    removed: dict[str, int]


def sweep_oauth(tx: Tx, principal: Principal) -> OAuthSweepOut:
    """Remove expired clients, codes and tokens (system only)."""
    if principal.kind is not PrincipalKind.SYSTEM:
        raise RelayError("forbidden")
    now = tx.now()
    statements = {
        "oauth_clients": delete(OAuthClient).where(col(OAuthClient.expires_at) <= now),
        "oauth_authorization_codes": delete(OAuthAuthorizationCode).where(
            col(OAuthAuthorizationCode.expires_at) <= now
        ),
        "oauth_tokens": delete(OAuthToken).where(
            col(OAuthToken.access_expires_at) <= now,
            or_(col(OAuthToken.refresh_expires_at).is_(None), col(OAuthToken.refresh_expires_at) <= now),
        ),
    }
    removed = {
        name: int(getattr(tx.session.execute(stmt), "rowcount", 0)) for name, stmt in statements.items()
    }
    return OAuthSweepOut(removed=removed)
