"""What the two databases' queues do alike: a row a device's entry in ``queued_envelopes``, read,
taken and expired by the same statements. Each database appends in its own way
(``core.queue._sqlite``, ``core.queue._postgres``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Insert, Integer, String, bindparam, delete, func, insert, select
from sqlalchemy.sql.elements import ColumnElement

from core.queue._contract import StoredEntry
from core.runtime.tx import Tx
from core.store.prepared import PreparedStatement
from core.store.tables import QueuedEnvelope

QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_DEVICE = bindparam("device", type_=String)
_READ = PreparedStatement(
    select(QUEUE.c.seq, QUEUE.c.sender, QUEUE.c.type, QUEUE.c.blob)
    .where(
        QUEUE.c.recipient_device_id == _DEVICE,
        QUEUE.c.seq > bindparam("after", type_=Integer),
        QUEUE.c.expires_at > bindparam("now", type_=Integer),
    )
    .order_by(QUEUE.c.seq)
    .limit(bindparam("limit", type_=Integer))
)
# The rest through the session, which flushes the ORM's pending writes first.
_TAKE_PINNED = (
    delete(QUEUE)
    .where(
        QUEUE.c.recipient_device_id == _DEVICE,
        QUEUE.c.tag == bindparam("tag", type_=String),
        QUEUE.c.type == bindparam("type", type_=String),
    )
    .returning(QUEUE.c.expires_at)
)
_PINNED = select(func.count()).where(QUEUE.c.recipient_device_id == _DEVICE, QUEUE.c.tag.is_not(None))
_FORGET = delete(QUEUE).where(QUEUE.c.recipient_device_id == _DEVICE)
_EXPIRE = delete(QUEUE).where(QUEUE.c.expires_at <= bindparam("now", type_=Integer))


class StoredQueue:
    """The operations both databases share; ``append`` is each one's own."""

    def read(self, tx: Tx, device: str, *, after: int, limit: int, now: int) -> list[StoredEntry]:
        rows = _READ.rows(tx.connection(), device=device, after=after, now=now, limit=limit)
        return [StoredEntry(seq, sender, type, bytes(blob)) for seq, sender, type, blob in rows]

    def take_pinned(self, tx: Tx, device: str, tag: str, type: str) -> list[int]:
        return list(tx.session.execute(_TAKE_PINNED, {"device": device, "tag": tag, "type": type}).scalars())

    def pinned(self, tx: Tx, device: str) -> int:
        return int(tx.session.execute(_PINNED, {"device": device}).scalar_one())

    def forget_device(self, tx: Tx, device: str) -> None:
        tx.session.execute(_FORGET, {"device": device})

    def expire(self, tx: Tx, now: int) -> int:
        return int(getattr(tx.session.execute(_EXPIRE, {"now": now}), "rowcount", 0))


def entries_from(columns: dict[str, ColumnElement[Any]]) -> Insert:
    """Insert one entry a row of what ``columns`` (by the queue's column each fills) select, with
    what the entries share bound once."""
    return insert(QUEUE).from_select(
        [*columns, "sender", "type", "created_at", "expires_at", "tag"],
        select(
            *columns.values(),
            bindparam("sender", type_=String),
            bindparam("type", type_=String),
            bindparam("created_at", type_=Integer),
            bindparam("expires_at", type_=Integer),
            bindparam("tag", type_=String),
        ),
    )
