"""Expiry sweeps: what has outlived its lifetime is deleted. Safe to run on several replicas at once
(each statement is a plain conditional DELETE)."""

from __future__ import annotations

from pydantic import BaseModel
from sqlalchemy import Exists, delete, exists, or_
from sqlmodel import col

from core.errors import RelayError
from core.principal import Principal, PrincipalKind
from core.queue import queue
from core.runtime.tx import Tx
from core.services.receipts import RETENTION_S as RECEIPT_RETENTION_S
from core.services.transfers import expire_transfers
from core.store.tables import (
    ConnectorGrant,
    ConsentSession,
    Interaction,
    InteractionCallback,
    Invite,
    PairingCode,
    PairResult,
    ParkedAttachment,
    ParkedDocument,
    Receipt,
    RegistrationChallenge,
    SenderToken,
)

EXPIRED_CODE_GRACE_S = 3600
INTERACTION_GRACE_S = 86_400  # an expired question is kept this long (a late poll hears "expired")
# A question whose callback is still being tried is kept past that, but never longer than this.
CALLBACK_GRACE_S = 7 * 86_400


class SweepOut(BaseModel):
    removed: dict[str, int]


def sweep_expired(tx: Tx, principal: Principal) -> SweepOut:
    """Remove expired pairing codes and results, consent sessions, queued envelopes, registration
    challenges, parked documents and attachments, questions (with their callbacks, once these are
    done), file transfers (with their objects), urgent receipts a day past their expiry, unused
    invites once they expire, and
    revocation audit rows (sender tokens, connector grants with their tokens) older than the
    retention (30 days by default)."""
    if principal.kind is not PrincipalKind.SYSTEM:
        raise RelayError("forbidden")
    now = tx.now()
    statements = {
        # Expired codes linger an hour so a computer still polling hears "pairing_expired".
        "pairing_codes": delete(PairingCode).where(col(PairingCode.expires_at) <= now - EXPIRED_CODE_GRACE_S),
        "pair_results": delete(PairResult).where(col(PairResult.expires_at) <= now),
        "consent_sessions": delete(ConsentSession).where(
            col(ConsentSession.expires_at) <= now - EXPIRED_CODE_GRACE_S
        ),
        "registration_challenges": delete(RegistrationChallenge).where(
            col(RegistrationChallenge.expires_at) <= now
        ),
        "parked_documents": delete(ParkedDocument).where(col(ParkedDocument.expires_at) <= now),
        "parked_attachments": delete(ParkedAttachment).where(col(ParkedAttachment.expires_at) <= now),
        # Kept a day past expiry so a caller polling late still hears "expired", not "not found";
        # longer while its callback is still being tried (each attempt reads it). Callbacks go with
        # their questions (ON DELETE CASCADE).
        "interactions": delete(Interaction).where(
            col(Interaction.expires_at) <= now - INTERACTION_GRACE_S,
            or_(~_callback_pending(), col(Interaction.expires_at) <= now - CALLBACK_GRACE_S),
        ),
        "receipts": delete(Receipt).where(col(Receipt.expires_at) <= now - RECEIPT_RETENTION_S),
        "invites": delete(Invite).where(col(Invite.expires_at) <= now),
        "revoked_tokens": delete(SenderToken).where(
            col(SenderToken.revoked_at) <= now - tx.settings.revoked_token_retention_s
        ),
        # Their tokens go with them (ON DELETE CASCADE).
        "revoked_connector_grants": delete(ConnectorGrant).where(
            col(ConnectorGrant.revoked_at) <= now - tx.settings.revoked_token_retention_s
        ),
    }
    removed = {"queued_envelopes": queue(tx).expire(tx, now)}
    removed |= {
        name: int(getattr(tx.session.execute(stmt), "rowcount", 0)) for name, stmt in statements.items()
    }
    removed["file_transfers"] = expire_transfers(tx)  # their objects are deleted after commit
    return SweepOut(removed=removed)


def _callback_pending() -> Exists:
    return exists().where(
        col(InteractionCallback.interaction_id) == col(Interaction.interaction_id),
        col(InteractionCallback.due_at).is_not(None),
    )
