"""Opaque tokens: minted, stored as SHA-256 digests, rotated, revoked, and verified for the connector.

Every access/refresh pair belongs to one connector grant (created when a code is redeemed). A
refresh spends the old refresh token and adds a new pair to the same grant; a spent refresh token
presented again, or a reused code, revokes the whole grant (``revoke_family``), in a transaction
of its own. ``verify_access_token`` is what the connector calls: it answers the grant's principal,
or ``None`` for an unknown, expired or revoked token, or one whose grant was revoked.
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from authlib.oauth2.rfc6749 import InvalidGrantError
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from sqlalchemy import update
from sqlmodel import col, select

from core.credentials import Verification, access_token_tag, grant_tag, use_due
from core.domain.secrets import digest, digests_match, new_prefixed_id
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.events import CredentialsRevoked
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.connector_grants import (
    ConnectorGrantCreate,
    create_connector_grant,
    end_connector_grant,
    grant_in_force,
    note_grant_use,
)
from core.settings import Settings
from oauth.bridge import AuthlibContext, after
from oauth.tables import OAuthAuthorizationCode, OAuthClient, OAuthToken

ACCESS_PREFIX = "rba_"
REFRESH_PREFIX = "rbr_"
MAX_TOKEN_LENGTH = 128

V = TypeVar("V")


@dataclass(frozen=True)
class VerifiedToken:
    """What a valid access token stands for: the connector grant's principal and the token's audience."""

    principal: Principal
    resource: str
    expires_at: int
    client_id: str
    token_id: str = ""
    grant_used_at: int | None = field(default=None, compare=False)  # as noted (or being noted)
    _made: dict[object, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def made(self, maker: object, make: Callable[[], V]) -> V:
        """What ``maker`` (the connector's gate) makes of this verification, ``make()`` run once: it
        is kept with the verification, so it lives as long as the verified-credential cache keeps
        that; a token verified again (its entry ended by a revocation or by time) gets its own."""
        try:
            made: V = self._made[maker]
        except KeyError:
            made = self._made[maker] = make()
        return made


def token_generator(settings: Settings) -> Any:
    return BearerTokenGenerator(
        access_token_generator=lambda **_: ACCESS_PREFIX + secrets.token_urlsafe(32),
        refresh_token_generator=lambda **_: REFRESH_PREFIX + secrets.token_urlsafe(48),
        expires_generator=lambda _client, _grant_type: settings.oauth_access_token_ttl_s,
    )


def save_token(context: AuthlibContext, token: dict[str, Any], request: Any) -> None:
    """Store a freshly issued pair. A redeemed code first becomes a connector grant (and its client
    stops expiring); a refresh adds the pair to the grant of the spent refresh token."""
    tx = context.tx
    now = tx.now()
    client: OAuthClient = request.client
    if request.payload.grant_type == "authorization_code":
        code: OAuthAuthorizationCode = request.authorization_code
        grant = create_connector_grant(
            tx,
            Principal.system(),
            body=ConnectorGrantCreate(
                account_id=code.account_id,
                client_id=client.client_id,
                client_name=client.client_name,
                scopes=token["scope"].split(),
                resource=code.resource,
            ),
        )
        grant_id, account_id, resource = grant.id, code.account_id, code.resource
        request.grant_id = grant_id
        if client.expires_at is not None:
            client.expires_at = None
            tx.session.add(client)
    else:
        spent: OAuthToken = request.refresh_token
        grant_id, account_id, resource = spent.grant_id, spent.account_id, spent.resource
    refresh = token.get("refresh_token")
    tx.session.add(
        OAuthToken(
            token_id=new_prefixed_id("otk"),
            grant_id=grant_id,
            client_id=client.client_id,
            account_id=account_id,
            access_hash=digest(token["access_token"]),
            refresh_hash=digest(refresh) if refresh else None,
            scope=token["scope"],
            resource=resource,
            issued_at=now,
            access_expires_at=now + int(token["expires_in"]),
            refresh_expires_at=now + tx.settings.oauth_refresh_token_ttl_s if refresh else None,
        )
    )
    tx.session.flush()


def find_refresh_token(context: AuthlibContext, refresh_token: str) -> OAuthToken | None:
    """The live row of ``refresh_token``. A spent one is a replay: its grant is revoked."""
    tx = context.tx
    row = _by_hash(tx, col(OAuthToken.refresh_hash), refresh_token, REFRESH_PREFIX)
    if row is None or row.revoked_at is not None:
        return None
    if row.refresh_used_at is not None:
        after(_revoke_grant(row.grant_id))
        return None
    if (row.refresh_expires_at or 0) <= tx.now() or grant_in_force(tx, row.grant_id) is None:
        return None
    return row


def spend_refresh_token(context: AuthlibContext, row: OAuthToken) -> None:
    """Spend the rotated refresh token; only one of several concurrent refreshes can."""
    tx = context.tx
    spent = tx.session.execute(
        update(OAuthToken)
        .where(
            col(OAuthToken.token_id) == row.token_id,
            col(OAuthToken.refresh_used_at).is_(None),
            col(OAuthToken.revoked_at).is_(None),
        )
        .values(refresh_used_at=tx.now())
    )
    if getattr(spent, "rowcount", 0) != 1:
        after(_revoke_grant(row.grant_id))
        raise InvalidGrantError("The refresh token was already used.")


@dataclass(frozen=True)
class FoundToken:
    """A token found for revocation, and which of its two it is."""

    row: OAuthToken
    kind: str

    def check_client(self, client: OAuthClient) -> bool:
        return self.row.check_client(client)


def find_token(context: AuthlibContext, token: str, hint: str | None) -> FoundToken | None:
    kinds = (
        ["refresh_token", "access_token"] if hint == "refresh_token" else ["access_token", "refresh_token"]
    )
    for kind in kinds:
        column = col(OAuthToken.access_hash) if kind == "access_token" else col(OAuthToken.refresh_hash)
        prefix = ACCESS_PREFIX if kind == "access_token" else REFRESH_PREFIX
        row = _by_hash(context.tx, column, token, prefix)
        if row is not None:
            return FoundToken(row, kind)
    return None


def revoke_token(context: AuthlibContext, found: FoundToken) -> None:
    """RFC 7009: a refresh token takes its whole grant with it; an access token, its own pair."""
    if found.kind == "refresh_token":
        revoke_family(context.tx, found.row.grant_id)
        return
    found.row.revoked_at = context.tx.now()
    context.tx.session.add(found.row)
    context.tx.emit(CredentialsRevoked((access_token_tag(found.row.token_id),)))


def revoke_family(tx: Tx, grant_id: str) -> None:
    """End a grant and every token in it."""
    end_connector_grant(tx, Principal.system(), grant_id=grant_id)
    tx.session.execute(
        update(OAuthToken)
        .where(col(OAuthToken.grant_id) == grant_id, col(OAuthToken.revoked_at).is_(None))
        .values(revoked_at=tx.now())
    )


@read_only
def check_access_token(tx: Tx, principal: Principal, *, token: str) -> VerifiedToken | None:
    """The grant behind an access token; ``None`` unless the token and its grant are both in
    force. Reads only (never waits for SQLite's writer); the grant's last use is noted later."""
    row = _by_hash(tx, col(OAuthToken.access_hash), token, ACCESS_PREFIX)
    now = tx.now()
    if row is None or row.revoked_at is not None or row.access_expires_at <= now:
        return None
    grant = grant_in_force(tx, row.grant_id)
    if grant is None:
        return None
    scopes = frozenset(row.scope.split()) & frozenset(grant.scopes.split())
    return VerifiedToken(
        principal=Principal.connector_grant(
            account_id=row.account_id, client_id=row.client_id, grant_id=row.grant_id, scopes=scopes
        ),
        resource=row.resource,
        expires_at=row.access_expires_at,
        client_id=row.client_id,
        token_id=row.token_id,
        grant_used_at=now if use_due(grant.last_used_at, now) else grant.last_used_at,
    )


async def verify_access_token(core: Core, token: str) -> VerifiedToken | None:
    """Verify a bearer token presented to the connector, through the verified-credential cache
    (``CredentialCache.cached``): from it when it is there (no database read, no thread), else in
    one short read-only transaction."""
    if not token.startswith(ACCESS_PREFIX) or len(token) > MAX_TOKEN_LENGTH:
        return None

    async def verify() -> Verification[VerifiedToken] | None:
        verified = await core.run(check_access_token, Principal.system(), token=token)
        if verified is None:
            return None
        grant_id = verified.principal.grant_id or ""
        return Verification(
            verified,
            tags=(grant_tag(grant_id), access_token_tag(verified.token_id)),
            expires_at=verified.expires_at,
            note_use=functools.partial(note_grant_use, grant_id),
            used_at=verified.grant_used_at,
        )

    return await core.credentials.cached(VerifiedToken, token, verify, defer=core.defer)


def _by_hash(tx: Tx, column: Any, token: str, prefix: str) -> OAuthToken | None:
    if not token.startswith(prefix) or len(token) > MAX_TOKEN_LENGTH:
        return None
    wanted = digest(token)
    row = tx.session.exec(select(OAuthToken).where(column == wanted)).first()
    if row is None:
        return None
    stored = row.access_hash if prefix == ACCESS_PREFIX else row.refresh_hash
    return row if stored is not None and digests_match(stored, wanted) else None


def _revoke_grant(grant_id: str) -> Any:
    def action(tx: Tx) -> None:
        revoke_family(tx, grant_id)

    return action
