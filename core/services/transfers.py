"""File transfers between paired devices: the server brokers object storage for encrypted chunks.

The sender declares a transfer's chunk layout (total ciphertext ``size`` and ``chunk_size``; every
chunk but the last is ``chunk_size`` bytes) and gets presigned upload URLs; the recipient gets
presigned download URLs of the same objects. Names, keys and content travel only inside the
devices' ``file_ctrl`` envelopes, which the server relays without reading. Either device ends a
transfer (cancel, decline, complete) and its objects are deleted; unended ones expire.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictInt
from sqlalchemy import delete, func
from sqlmodel import col, select

from core.adapters.storage.base import object_key
from core.domain.chunks import TAG_LENGTH
from core.domain.secrets import new_prefixed_id
from core.errors import RelayError
from core.principal import Principal
from core.runtime.events import TransfersEnded
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services.devices import own_device
from core.services.relay import paired_recipient
from core.store.tables import Account, FileTransfer

MAX_URLS_PER_REQUEST = 100


class TransferCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    to: str = Field(min_length=1, max_length=36, description="The recipient: a paired device's id")
    size: StrictInt = Field(ge=TAG_LENGTH, description="Ciphertext bytes of all chunks together")
    chunk_size: StrictInt = Field(
        gt=TAG_LENGTH, le=2**31 - 1, description="Ciphertext bytes of every chunk but the last"
    )


class TransferOut(BaseModel):
    transfer_id: str
    sender: str = Field(description="The sending device's id")
    recipient: str = Field(description="The receiving device's id")
    size: int
    chunk_size: int
    chunk_count: int
    expires_at: int = Field(description="When the transfer and its objects are deleted unless ended before")


class ChunkUrlsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    indexes: list[StrictInt] = Field(
        min_length=1, max_length=MAX_URLS_PER_REQUEST, description="Chunk indexes, 0-based"
    )


class ChunkUrl(BaseModel):
    index: int
    method: str = Field(description="PUT to upload, GET to download")
    url: str
    size: int = Field(description="The exact number of bytes the URL takes or gives")
    expires_at: int


class ChunkUrls(BaseModel):
    transfer_id: str
    urls: list[ChunkUrl]


def create_transfer(tx: Tx, principal: Principal, *, body: TransferCreate) -> TransferOut:
    """Open a transfer to a paired device, reserving its size against the account's quota."""
    sender = own_device(tx, principal)
    settings = tx.settings
    if body.size > settings.file_max_bytes:
        raise RelayError("transfer_too_large", details={"size": body.size, "max": settings.file_max_bytes})
    chunk_count = -(-body.size // body.chunk_size)
    last = body.size - (chunk_count - 1) * body.chunk_size
    if body.chunk_size > settings.file_chunk_max_bytes or chunk_count > settings.file_max_chunks:
        raise RelayError(
            "invalid_chunk_layout",
            details={"max_chunk_size": settings.file_chunk_max_bytes, "max_chunks": settings.file_max_chunks},
        )
    if last < TAG_LENGTH:
        raise RelayError("invalid_chunk_layout", "The last chunk would be shorter than a 16-byte tag.")
    recipient = paired_recipient(tx, sender, body.to)
    now = tx.now()
    # Lock the account row (PostgreSQL) so concurrent transfers cannot both pass the quota.
    tx.session.exec(select(Account).where(col(Account.account_id) == sender.account_id).with_for_update())
    used = tx.session.exec(
        select(func.coalesce(func.sum(FileTransfer.size), 0)).where(
            col(FileTransfer.account_id) == sender.account_id, col(FileTransfer.expires_at) > now
        )
    ).one()
    if int(used) + body.size > settings.file_quota_bytes:
        raise RelayError(
            "storage_quota_exceeded", details={"used": int(used), "quota": settings.file_quota_bytes}
        )
    row = FileTransfer(
        transfer_id=new_prefixed_id("xfr"),
        account_id=sender.account_id,
        sender_device_id=sender.device_id,
        recipient_device_id=recipient.device_id,
        size=body.size,
        chunk_size=body.chunk_size,
        chunk_count=chunk_count,
        created_at=now,
        expires_at=now + settings.file_transfer_ttl_s,
    )
    tx.session.add(row)
    return _out(row)


@read_only
def upload_urls(tx: Tx, principal: Principal, *, transfer_id: str, body: ChunkUrlsRequest) -> ChunkUrls:
    """Presigned PUT URLs for chunks of a transfer; only its sender gets them."""
    row = _party_transfer(tx, principal, transfer_id, sender=True)
    return _urls(tx, row, body.indexes, "PUT")


@read_only
def download_urls(tx: Tx, principal: Principal, *, transfer_id: str, body: ChunkUrlsRequest) -> ChunkUrls:
    """Presigned GET URLs for chunks of a transfer; only its recipient gets them."""
    row = _party_transfer(tx, principal, transfer_id, sender=False)
    return _urls(tx, row, body.indexes, "GET")


@read_only
def get_transfer(tx: Tx, principal: Principal, *, transfer_id: str) -> TransferOut:
    """A transfer as either of its two devices sees it."""
    return _out(_party_transfer(tx, principal, transfer_id, sender=None))


def end_transfer(tx: Tx, principal: Principal, *, transfer_id: str) -> None:
    """Cancel, decline or complete: either device deletes the transfer and, after commit, its objects."""
    _party_transfer(tx, principal, transfer_id, sender=None)
    tx.session.execute(delete(FileTransfer).where(col(FileTransfer.transfer_id) == transfer_id))
    tx.emit(TransfersEnded((transfer_id,)))


@read_only
def check_object(tx: Tx, principal: Principal, *, transfer_id: str, index: int) -> None:
    """For the embedded store's routes: 404 unless the object belongs to an open transfer, so an
    upload cannot recreate an object of a transfer that was ended or has expired."""
    row = tx.session.get(FileTransfer, transfer_id)
    if row is None or row.expires_at <= tx.now() or not 0 <= index < row.chunk_count:
        raise RelayError("not_found")


def expire_transfers(tx: Tx) -> int:
    """Delete expired transfers (part of the expiry sweep); their objects follow after commit."""
    expired = tx.session.exec(
        select(FileTransfer.transfer_id).where(col(FileTransfer.expires_at) <= tx.now()).limit(1000)
    ).all()
    if not expired:
        return 0
    tx.session.execute(delete(FileTransfer).where(col(FileTransfer.transfer_id).in_(expired)))
    tx.emit(TransfersEnded(tuple(expired)))
    return len(expired)


def _party_transfer(tx: Tx, principal: Principal, transfer_id: str, *, sender: bool | None) -> FileTransfer:
    """The transfer, if the calling device is its sender (``True``), recipient (``False``) or
    either (``None``); anything else is 404, so existence is never confirmed to others."""
    device_id = principal.require_device()
    row = tx.session.get(FileTransfer, transfer_id) if len(transfer_id) <= 40 else None
    if row is None or row.expires_at <= tx.now():
        raise RelayError("not_found")
    allowed: tuple[str, ...]
    if sender is None:
        allowed = (row.sender_device_id, row.recipient_device_id)
    else:
        allowed = (row.sender_device_id,) if sender else (row.recipient_device_id,)
    if device_id not in allowed:
        raise RelayError("not_found")
    return row


def _urls(tx: Tx, row: FileTransfer, indexes: list[int], method: str) -> ChunkUrls:
    bad = [index for index in indexes if not 0 <= index < row.chunk_count]
    if bad:
        raise RelayError("invalid_chunk_index", details={"chunk_count": row.chunk_count, "invalid": bad[:10]})
    expires_at = min(tx.now() + tx.settings.file_url_ttl_s, row.expires_at)
    sign = tx.objects.upload_url if method == "PUT" else tx.objects.download_url
    urls = []
    for index in dict.fromkeys(indexes):
        size = chunk_length(row, index)
        key = object_key(row.transfer_id, index)
        urls.append(
            ChunkUrl(
                index=index,
                method=method,
                url=sign(key, size=size, now=tx.now(), expires_at=expires_at),
                size=size,
                expires_at=expires_at,
            )
        )
    return ChunkUrls(transfer_id=row.transfer_id, urls=urls)


def chunk_length(row: FileTransfer, index: int) -> int:
    """Ciphertext bytes of chunk ``index``: ``chunk_size``, except the remainder in the last."""
    if index == row.chunk_count - 1:
        return row.size - (row.chunk_count - 1) * row.chunk_size
    return row.chunk_size


def _out(row: FileTransfer) -> TransferOut:
    return TransferOut(
        transfer_id=row.transfer_id,
        sender=row.sender_device_id,
        recipient=row.recipient_device_id,
        size=row.size,
        chunk_size=row.chunk_size,
        chunk_count=row.chunk_count,
        expires_at=row.expires_at,
    )
