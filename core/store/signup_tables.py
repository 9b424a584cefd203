"""Who may register a phone (``core.services.signup``): the claim the first phone ever registered
makes on the server, and the invites that admit a further phone where registration is by invite.
Part of ``core.store.tables``, which re-exports them."""

from __future__ import annotations

from sqlmodel import Field, SQLModel

SERVER_CLAIM = "server"  # the one claim row's id


class ServerClaim(SQLModel, table=True):
    """The server's first phone: one row, written by the registration that made it (its primary
    key makes a second first phone fail), and never removed, so that a server whose phones are all
    gone is not open to whoever registers next."""

    __tablename__ = "server_claims"

    claim_id: str = Field(primary_key=True, max_length=16)
    device_id: str = Field(max_length=36)
    claimed_at: int


class Invite(SQLModel, table=True):
    """A single-use invite for one more phone: its digest only (SHA-256 of the invite), who made it
    (an account, or none for the operator's ``relaybox invite``) and when it stops working."""

    __tablename__ = "invites"

    invite_hash: str = Field(primary_key=True, max_length=64)
    account_id: str | None = Field(default=None, index=True, max_length=36)
    created_at: int
    expires_at: int = Field(index=True)
