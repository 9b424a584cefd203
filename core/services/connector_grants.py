"""Connector grants: the consents an account gave to AI assistants (connector clients).

The authorization server creates one per completed authorization (``create_connector_grant``,
as the system, inside its token transaction); the phone lists and revokes them. Revoking a grant
ends every token issued under it at once, because token verification checks the grant
(``grant_in_force``), which also notes the grant's last use, later and in its own transaction.
"""

from __future__ import annotations

from pydantic import BaseModel, Field
from sqlalchemy import update
from sqlmodel import col, select

from core.credentials import grant_tag, use_due
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import CONNECTOR_SCOPES, Principal, PrincipalKind
from core.runtime.events import CredentialsRevoked, Deferred
from core.runtime.tx import Tx
from core.services.devices import own_device
from core.store.tables import ConnectorGrant


class ConnectorGrantCreate(BaseModel):
    account_id: str
    client_id: str = Field(max_length=512)
    client_name: str = Field(max_length=128)
    scopes: list[str]
    resource: str = Field(max_length=512)


class ConnectorGrantOut(BaseModel):
    id: str
    client_id: str
    client_name: str
    scopes: list[str]
    created_at: int
    last_used_at: int | None = None
    revoked_at: int | None = None


class ConnectorGrantList(BaseModel):
    grants: list[ConnectorGrantOut]


def create_connector_grant(tx: Tx, principal: Principal, *, body: ConnectorGrantCreate) -> ConnectorGrantOut:
    """Record a consent (system only: the authorization server, when it issues the first tokens)."""
    _require_system(principal)
    unknown = set(body.scopes) - set(CONNECTOR_SCOPES)
    if unknown or not body.scopes:
        raise RelayError("invalid_scope", details={"allowed": list(CONNECTOR_SCOPES)})
    row = ConnectorGrant(
        grant_id=new_prefixed_id("grt"),
        account_id=body.account_id,
        client_id=body.client_id,
        client_name=body.client_name,
        scopes=" ".join(scope for scope in CONNECTOR_SCOPES if scope in body.scopes),
        resource=body.resource,
        created_at=tx.now(),
    )
    tx.session.add(row)
    tx.session.flush()
    return _out(row)


def list_connector_grants(tx: Tx, principal: Principal) -> ConnectorGrantList:
    """The account's active connector grants (client, scopes, last use), for any of its devices."""
    device = own_device(tx, principal)
    rows = tx.session.exec(
        select(ConnectorGrant)
        .where(col(ConnectorGrant.account_id) == device.account_id, col(ConnectorGrant.revoked_at).is_(None))
        .order_by(col(ConnectorGrant.created_at), col(ConnectorGrant.grant_id))
    ).all()
    return ConnectorGrantList(grants=[_out(row) for row in rows])


def revoke_connector_grant(tx: Tx, principal: Principal, *, grant_id: str) -> ConnectorGrantOut:
    """Revoke a grant (phone only): every token issued under it stops working at once. Idempotent."""
    phone = own_device(tx, principal)
    principal.require_phone()
    row = tx.session.get(ConnectorGrant, grant_id) if len(grant_id) <= 40 else None
    if row is None or row.account_id != phone.account_id:
        raise RelayError("not_found")
    if row.revoked_at is None:
        _revoke(tx, row)
    return _out(row)


def end_connector_grant(tx: Tx, principal: Principal, *, grant_id: str) -> None:
    """Revoke a grant on the server's own decision (a replayed refresh token, a reused code)."""
    _require_system(principal)
    row = tx.session.get(ConnectorGrant, grant_id)
    if row is not None and row.revoked_at is None:
        _revoke(tx, row)


def _revoke(tx: Tx, row: ConnectorGrant) -> None:
    row.revoked_at = tx.now()
    tx.session.add(row)
    tx.emit(CredentialsRevoked((grant_tag(row.grant_id),)))  # every replica forgets its tokens


def grant_in_force(tx: Tx, grant_id: str) -> ConnectorGrant | None:
    """The grant if it is still in force, else ``None``. Reads only: its last use (at minute
    granularity) is written afterwards by ``record_grant_use``."""
    row = tx.session.get(ConnectorGrant, grant_id)
    if row is None or row.revoked_at is not None:
        return None
    now = tx.now()
    if use_due(row.last_used_at, now):
        tx.emit(note_grant_use(grant_id, now))
    return row


def note_grant_use(grant_id: str, at: int) -> Deferred:
    """The bookkeeping of one use of the grant (also on a cached verification)."""
    return Deferred(record_grant_use, {"grant_id": grant_id, "at": at})


def record_grant_use(tx: Tx, principal: Principal, *, grant_id: str, at: int) -> None:
    """System bookkeeping: a grant's ``last_used_at``."""
    _require_system(principal)
    tx.session.execute(
        update(ConnectorGrant).where(col(ConnectorGrant.grant_id) == grant_id).values(last_used_at=at)
    )


def _require_system(principal: Principal) -> None:
    if principal.kind is not PrincipalKind.SYSTEM:
        raise RelayError("forbidden")


def _out(row: ConnectorGrant) -> ConnectorGrantOut:
    return ConnectorGrantOut(
        id=row.grant_id,
        client_id=row.client_id,
        client_name=row.client_name,
        scopes=row.scopes.split(),
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )
