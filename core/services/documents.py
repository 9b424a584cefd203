"""Text documents for the phone's Downloads folder: encrypted once to the phone (filename and
content together), parked as ciphertext for at most an hour, pulled once by the phone."""

from __future__ import annotations

import base64

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import delete
from sqlmodel import col

from core.adapters.push.base import PushMessage
from core.domain import payloads
from core.domain.filenames import UnsafeFilenameError, sanitize_filename
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import SCOPE_FILES_SEND, Principal
from core.runtime.tx import Tx
from core.services.capability import Feature, account_phone, gate
from core.services.delivery import push_target, request_push
from core.services.devices import own_device
from core.services.limits import Limited, charge_send_class
from core.store.tables import ParkedDocument

CONTENT_MAX_BYTES = 131_072


class DocumentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filename: str = Field(
        description="Allowed plain-text/code extension; at most 120 characters once made safe"
    )
    content: str = Field(description="UTF-8 text, 1 to 131072 bytes")


class DocumentOut(Limited):
    document_id: str
    byte_length: int
    warnings: list[str] = Field(default_factory=list, description="When the phone's support is uncertain")


class PulledDocument(BaseModel):
    document_id: str
    blob: str = Field(description="Standard base64 of an envelope v1 from 'server' holding the document")


def send_document(tx: Tx, principal: Principal, *, body: DocumentCreate, ip: str) -> DocumentOut:
    """Park the encrypted document and nudge the phone to pull it. Needs ``files:send``."""
    principal.require_scope(SCOPE_FILES_SEND)
    try:
        filename = sanitize_filename(body.filename)
    except UnsafeFilenameError as error:
        raise RelayError("invalid_filename", str(error)) from error
    byte_length = len(body.content.encode("utf-8", "surrogatepass"))
    if byte_length == 0:
        raise RelayError("invalid_content")
    if byte_length > CONTENT_MAX_BYTES:
        raise RelayError("content_too_large", details={"bytes": byte_length, "max": CONTENT_MAX_BYTES})
    phone = account_phone(tx, principal.account_id)
    warnings = gate(tx, phone, Feature.DOCUMENTS)
    rate_limit, _ = charge_send_class(tx, principal, ip)
    document_id = new_prefixed_id("doc")
    plaintext = payloads.encode(
        payloads.document(document_id=document_id, filename=filename, content=body.content)
    )
    tx.session.add(
        ParkedDocument(
            document_id=document_id,
            account_id=phone.account_id,
            phone_device_id=phone.device_id,
            blob=tx.keys.seal_to(base64.b64decode(phone.public_key), plaintext),
            byte_length=byte_length,
            expires_at=tx.now() + tx.settings.document_parking_s,
        )
    )
    nudge = PushMessage(
        "document", {"documentId": document_id}, high_priority=True, ttl_s=tx.settings.document_parking_s
    )
    request_push(tx, push_target(tx, phone), nudge)
    return DocumentOut(
        document_id=document_id, byte_length=byte_length, rate_limit=rate_limit, warnings=warnings
    )


def pull_document(tx: Tx, principal: Principal, *, document_id: str) -> PulledDocument:
    """The phone takes its document; it is deleted as it is handed over."""
    phone = own_device(tx, principal)
    principal.require_phone()
    row = tx.session.get(ParkedDocument, document_id)
    if row is None or row.phone_device_id != phone.device_id or row.expires_at <= tx.now():
        raise RelayError("not_found")
    taken = tx.session.execute(delete(ParkedDocument).where(col(ParkedDocument.document_id) == document_id))
    if getattr(taken, "rowcount", 0) != 1:
        raise RelayError("not_found")  # pulled concurrently by another request
    return PulledDocument(document_id=document_id, blob=base64.b64encode(row.blob).decode())
