"""Token verification for /mcp: the authorization server's ``verify_access_token`` seen through the
SDK's ``TokenVerifier`` interface, so the SDK's bearer backend and ``get_access_token()`` work."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from mcp.server.auth.provider import AccessToken

from core.principal import Principal


class Verified(Protocol):
    """What the authorization server says about a valid access token."""

    @property
    def principal(self) -> Principal: ...

    @property
    def resource(self) -> str: ...

    @property
    def expires_at(self) -> int: ...

    @property
    def client_id(self) -> str: ...


VerifyAccessToken = Callable[[str], Awaitable[Verified | None]]


class GrantTokenVerifier:
    """``verify_token`` for the SDK: ``None`` (anonymous) for anything invalid, expired or revoked."""

    def __init__(self, verify: VerifyAccessToken, issuer: str) -> None:
        self._verify = verify
        self._issuer = issuer

    async def verify_token(self, token: str) -> AccessToken | None:
        verified = await self._verify(token)
        if verified is None:
            return None
        grant = verified.principal
        return AccessToken(
            token=token,
            client_id=verified.client_id,
            scopes=sorted(grant.scopes),
            expires_at=verified.expires_at,
            resource=verified.resource,
            subject=grant.account_id,
            claims={"iss": self._issuer, "account_id": grant.account_id, "grant_id": grant.grant_id},
        )
