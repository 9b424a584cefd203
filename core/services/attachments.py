"""Attachments beside a notification (the Pushover shim's image, up to Pushover's 5 MB): sealed once
with a fresh key (``core.domain.attachments``) before the send's transaction, parked as that one
ciphertext for as long as the notification lives, and pulled by any device of the account that
received the notification, whose envelope alone carries the key, name and type. The server holds
the plaintext only in memory for the call."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, insert, select

from core.domain.attachments import FORMAT, seal_attachment
from core.domain.filenames import UnsafeFilenameError, plain_name
from core.errors import RelayError
from core.principal import Principal
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.store.prepared import PreparedStatement
from core.store.tables import ParkedAttachment

MAX_BYTES = 5 * 1024 * 1024  # Pushover's limit for an attachment
MIME_TYPE_MAX_CHARS = 100
DEFAULT_NAME = "attachment"


@dataclass(frozen=True)
class SealedAttachment:
    """An attachment sealed in memory, not yet parked: its key never reaches the store."""

    name: str
    mime_type: str
    size: int  # plaintext bytes
    key: bytes
    blob: bytes


def seal(data: bytes, *, name: str | None, mime_type: str | None) -> SealedAttachment:
    """Check and seal an attachment (CPU work: call it off the event loop for a large one)."""
    if not data:
        raise RelayError("invalid_attachment", "The attachment is empty.")
    if len(data) > MAX_BYTES:
        raise RelayError("attachment_too_large", details={"bytes": len(data), "max": MAX_BYTES})
    try:
        safe_name = plain_name(name) if name else DEFAULT_NAME
    except UnsafeFilenameError:
        safe_name = DEFAULT_NAME
    kind = (mime_type or "application/octet-stream").strip().lower()
    if len(kind) > MIME_TYPE_MAX_CHARS or "/" not in kind or any(ch.isspace() for ch in kind):
        raise RelayError("invalid_attachment", "attachment_type must be a MIME type such as image/jpeg.")
    key, blob = seal_attachment(data)
    return SealedAttachment(safe_name, kind, len(data), key, blob)


def reference(sealed: SealedAttachment, attachment_id: str) -> dict[str, Any]:
    """What goes into each device's notification: id, format, key, name, MIME type and size."""
    return {
        "id": attachment_id,
        "format": FORMAT,
        "key": base64.b64encode(sealed.key).decode(),
        "name": sealed.name,
        "type": sealed.mime_type,
        "size": sealed.size,
    }


def check_room(tx: Tx, account_id: str, sealed: SealedAttachment) -> None:
    """409 ``storage_quota_exceeded`` when parking ``sealed`` would pass the account's quota of
    parked attachment bytes (checked before the send charges any limit)."""
    used = _USED.scalar(tx.connection(), account=account_id, now=tx.now()) or 0
    quota = tx.settings.attachment_quota_bytes
    if used + len(sealed.blob) > quota:
        raise RelayError("storage_quota_exceeded", details={"used": int(used), "quota": quota})


def park(tx: Tx, account_id: str, sealed: SealedAttachment, *, attachment_id: str, expires_at: int) -> None:
    """Park the ciphertext (after ``check_room``)."""
    _INSERT.rows(
        tx.connection(),
        id=attachment_id,
        account=account_id,
        blob=sealed.blob,
        length=len(sealed.blob),
        expires_at=expires_at,
    )


@read_only
def pull_attachment(tx: Tx, principal: Principal, *, attachment_id: str) -> bytes:
    """The ciphertext, for any device of the account (only one that got the notification has the
    key); 404 for anything else. It stays until it expires: every target device may pull it."""
    principal.require_device()
    row = tx.session.get(ParkedAttachment, attachment_id)
    if row is None or row.account_id != principal.account_id or row.expires_at <= tx.now():
        raise RelayError("not_found")
    return row.blob


# Prepared: a send may park an attachment, and sends are group-committed (prepared writes only).
_TABLE = ParkedAttachment.__table__  # type: ignore[attr-defined]
_USED = PreparedStatement(
    select(func.sum(_TABLE.c.byte_length)).where(
        _TABLE.c.account_id == bindparam("account"), _TABLE.c.expires_at > bindparam("now")
    )
)
_INSERT = PreparedStatement(
    insert(_TABLE).values(
        attachment_id=bindparam("id"),
        account_id=bindparam("account"),
        blob=bindparam("blob"),
        byte_length=bindparam("length"),
        expires_at=bindparam("expires_at"),
    )
)
