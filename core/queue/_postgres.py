"""PostgreSQL's queue: a row a device's entry, a send's rows written in one statement
(``QUEUE_ALL``), or, in a group, held back and inserted with the group's others
(``core.queue._held``). Every queue a transaction wrote is trimmed to its cap once, before it
commits (a group of sends to one account: once, not once a send), so no other transaction ever
sees a queue over its cap."""

from __future__ import annotations

from collections.abc import Mapping

from sqlmodel import Session

from core.queue._contract import QUEUE_LIFETIME_S, Appended, expires_at
from core.queue._held import take_held_seqs
from core.queue._pg_sql import LOCK_DEVICES as LOCK_DEVICES  # a test counts its runs
from core.queue._pg_sql import QUEUE_ALL, TRIM_OVER_CAP
from core.queue._stored import StoredQueue
from core.runtime.tx import LOCKED_DEVICES, Tx
from core.store.database import before_commit

# In a session's ``info``: the recipient of each unpinned entry the transaction wrote, whose
# queues it trims before it commits (``_trim_before_commit``).
_WRITTEN_UNPINNED = "relaybox_written_unpinned"


class PostgresQueue(StoredQueue):
    def append(
        self,
        tx: Tx,
        blobs: Mapping[str, bytes],
        *,
        sender: str,
        type: str,
        ttl_s: int,
        max_lifetime_s: int = QUEUE_LIFETIME_S,
        pin: str | None = None,
        may_hold: bool = True,
        account_id: str | None = None,
    ) -> Appended:
        recipients = list(blobs)
        _lock_recipients(tx, recipients)
        now = tx.now()
        shared = {
            "sender": sender,
            "type": type,
            "created_at": now,
            "expires_at": expires_at(now, ttl_s, max_lifetime_s),
            "tag": pin,
        }
        held = take_held_seqs(tx, blobs, shared) if may_hold and pin is None else None
        if held is not None:
            appended = held
        else:  # one round trip for every device
            written = QUEUE_ALL.rows(
                tx.connection(), recipients=recipients, blobs=list(blobs.values()), **shared
            )
            appended = {recipient: (seq, prev or 0) for recipient, seq, prev in written}
        if pin is None:  # a pinned entry takes no room under the cap
            _trim_before_commit(tx.session, recipients)
        return appended


def _trim_before_commit(session: Session, recipients: list[str]) -> None:
    """Each of these queues got one unpinned entry more; the transaction trims every queue it
    wrote to its cap once, before it commits (``TRIM_OVER_CAP``). Until then a queue may hold more
    than the cap: no other transaction sees it. A write undone in its savepoint (a group written
    again, ``core.runtime.group_transaction``) keeps its entries counted: the trim then looks for
    more entries past the cap than there are, and walks on over those trimmed since the last
    vacuum, once, in a transaction that is rare already."""
    written: list[str] | None = session.info.get(_WRITTEN_UNPINNED)
    if written is None:
        written = session.info[_WRITTEN_UNPINNED] = []
        before_commit(session, lambda: TRIM_OVER_CAP.rows(session.connection(), written=written))
    written += recipients


def _lock_recipients(tx: Tx, device_ids: list[str]) -> None:
    """Serialise appends per recipient (row locks) so that, for each device, seq order is commit
    order and a stream reading "seq > last" can never step over a late commit. One statement for
    all of a send's devices, in one order (by id) so two sends cannot deadlock. None in a group
    that locked them all up front (``LOCKED_DEVICES``: the devices of its accounts)."""
    held = tx.opened_session.info.get(LOCKED_DEVICES) if tx.opened_session is not None else None
    if held is not None and held.issuperset(device_ids):
        return
    LOCK_DEVICES.rows(tx.connection(), ids=sorted(device_ids))
