"""Token verification for /mcp: the authorization server's ``verify_access_token`` seen through the
SDK's ``TokenVerifier`` interface, so the SDK's bearer backend and ``get_access_token()`` work."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict, Field

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


MEMO_SIZE = 1024


class GrantAccessToken(AccessToken):
    """The SDK's ``AccessToken`` with the connector grant's principal as verified, so that a tool
    reads it rather than rebuilding it from the claims on every call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    principal: Principal = Field(exclude=True)


class GrantTokenVerifier:
    """``verify_token`` for the SDK: ``None`` (anonymous) for anything invalid, expired or revoked.

    Every call asks ``verify`` (which answers revocations at once); when it answers the very object
    it answered last time for this token (the verified-credential cache), the SDK's ``AccessToken``
    made then is reused rather than validated again."""

    def __init__(self, verify: VerifyAccessToken, issuer: str) -> None:
        self._verify = verify
        self._issuer = issuer
        self._made: dict[str, tuple[Verified, AccessToken]] = {}

    async def verify_token(self, token: str) -> AccessToken | None:
        verified = await self._verify(token)
        if verified is None:
            self._made.pop(token, None)
            return None
        made = self._made.get(token)
        if made is not None and made[0] is verified:
            return made[1]
        access_token = self._access_token(token, verified)
        if len(self._made) >= MEMO_SIZE:
            self._made.clear()
        self._made[token] = (verified, access_token)
        return access_token

    def _access_token(self, token: str, verified: Verified) -> GrantAccessToken:
        grant = verified.principal
        return GrantAccessToken(
            token=token,
            client_id=verified.client_id,
            scopes=sorted(grant.scopes),
            expires_at=verified.expires_at,
            resource=verified.resource,
            subject=grant.account_id,
            claims={"iss": self._issuer, "account_id": grant.account_id, "grant_id": grant.grant_id},
            principal=grant,
        )
