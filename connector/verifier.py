"""Token verification for /mcp: what the authorization server's ``verify_access_token`` answers,
and the SDK's ``AccessToken`` made of it, so that ``get_access_token()`` works in the tools.

The connector keeps no verification of its own: ``verify_access_token`` goes through the core's
verified-credential cache on every call (which answers revocations at once), and what is made of a
verification is kept with it (``Verified.made``), so it is made once while the cache keeps it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from mcp.server.auth.provider import AccessToken
from pydantic import ConfigDict, Field

from core.principal import Principal

V = TypeVar("V")


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

    def made(self, maker: object, make: Callable[[], V]) -> V:
        """``make()``, called once per verification and ``maker``."""
        ...


VerifyAccessToken = Callable[[str], Awaitable[Verified | None]]


class GrantAccessToken(AccessToken):
    """The SDK's ``AccessToken`` with the connector grant's principal as verified, so that a tool
    reads it rather than rebuilding it from the claims on every call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    principal: Principal = Field(exclude=True)


def grant_access_token(token: str, verified: Verified, issuer: str) -> GrantAccessToken:
    """The SDK's ``AccessToken`` for a verified bearer token."""
    grant = verified.principal
    return GrantAccessToken(
        token=token,
        client_id=verified.client_id,
        scopes=sorted(grant.scopes),
        expires_at=verified.expires_at,
        resource=verified.resource,
        subject=grant.account_id,
        claims={"iss": issuer, "account_id": grant.account_id, "grant_id": grant.grant_id},
        principal=grant,
    )
