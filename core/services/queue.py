"""Each device's queue: appending blobs, for all of a send's devices in one write, and keeping it
to its cap. Operations call these inside their transaction; the wake-ups leave after commit.

The newest ``QUEUE_CAP`` untagged entries of a device are kept; a tagged (pinned) entry is never
trimmed, only expired (``core.services.reminders`` bounds how many a device may have). SQLite
trims a queue as each write takes it over the cap, told by the queue's count, which each write
keeps (``core.services.queue_sqlite``), and writes a send to several devices as one row
(``core.services.queue_packed``); PostgreSQL trims every queue a transaction wrote
once, before it commits (a group of sends to one account: once, not once a send), so no other
transaction ever sees a queue over its cap. There a group's unpinned entries are inserted together,
held back until the transaction's next statement or its commit (``core.services.queue_held``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import bindparam, func, select
from sqlmodel import Session

from core.runtime.events import EnvelopesQueued
from core.runtime.tx import LOCKED_DEVICES, Tx
from core.services.queue_held import take_held_seqs
from core.services.queue_sqlite import write_entries
from core.services.queue_statements import QUEUE_ALL, TRIM_OVER_CAP
from core.services.queue_statements import QUEUE_CAP as QUEUE_CAP  # callers import it from here
from core.services.queue_wake import WakeUps
from core.store.database import before_commit
from core.store.postgres_arrays import VARCHAR_ARRAY
from core.store.prepared import PreparedStatement
from core.store.tables import Device

# In a PostgreSQL session's ``info``: the recipient of each unpinned entry the transaction wrote,
# whose queues it trims before it commits (``_trim_before_commit``).
_WRITTEN_UNPINNED = "relaybox_written_unpinned"

QUEUE_LIFETIME_S = 86_400  # device-to-device envelopes
NOTIFICATION_LIFETIME_S = 259_200  # server-composed notifications may wait up to their 72 h ttl
LIVE_GRACE_S = 30  # a ttl of 0 still gives open streams this long to read the entry (decisions.md)


def enqueue_all(
    tx: Tx,
    blobs: Mapping[str, bytes],
    *,
    sender: str,
    type: str,
    ttl_s: int,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
    tag: str | None = None,
    may_hold: bool = True,
    account_id: str | None = None,
) -> list[int]:
    """Append one blob to each device's queue (``blobs``: by recipient device id; ``ttl_s`` up to
    ``max_lifetime_s``; ``tag`` pins the entries), trim each queue to its cap (PostgreSQL: before
    commit) and wake the recipients' streams. The seqs, in the order of ``blobs``. Takes the
    recipients' locks (``lock_recipients``), once for all. ``may_hold``: in a PostgreSQL group, the
    entries may be held back (``core.services.queue_held``); worth it for a write whose group runs
    no other statement between its queue writes (sends), not for one that runs a statement of its
    own before each (relays: it would send the held entries on a round trip of their own).
    ``account_id``: the recipients' account (they are all of one), when the caller has it: SQLite
    packs a send to several devices in one row keyed by it (``core.services.queue_packed``)."""
    if not blobs:  # e.g. an urgent stop whose recipients were all removed
        return []
    recipients = list(blobs)
    lock_recipients(tx, recipients)
    now = tx.now()
    connection = tx.connection()
    shared = {
        "sender": sender,
        "type": type,
        "created_at": now,
        "expires_at": now + (min(ttl_s, max_lifetime_s) if ttl_s > 0 else LIVE_GRACE_S),
        "tag": tag,
    }
    pinned = tag is not None
    if connection.dialect.name == "postgresql":
        held = take_held_seqs(tx, blobs, shared) if may_hold and not pinned else None
        if held is not None:
            seqs = held
        else:  # one round trip for every device
            written = QUEUE_ALL.rows(connection, recipients=recipients, blobs=list(blobs.values()), **shared)
            seqs = {recipient: (seq, prev or 0) for recipient, seq, prev in written}
        if not pinned:  # a pinned entry takes no room under the cap
            _trim_before_commit(tx.session, recipients)
    else:  # SQLite: no data-modifying CTEs, and a statement costs no round trip
        seqs = write_entries(connection, blobs, shared, pinned=pinned, account_id=account_id)
    queued = tuple((recipient, *seqs[recipient], blob) for recipient, blob in blobs.items())
    tx.emit(EnvelopesQueued(WakeUps(sender, type), queued))  # one event, one handler after commit
    return [seqs[recipient][0] for recipient in recipients]


def _trim_before_commit(session: Session, recipients: list[str]) -> None:
    """PostgreSQL: each of these queues got one unpinned entry more; the transaction trims every
    queue it wrote to its cap once, before it commits (``TRIM_OVER_CAP``). Until then a queue may
    hold more than the cap: no other transaction sees it. A write undone in its savepoint (a group
    written again, ``core.runtime.group_transaction``) keeps its entries counted: the trim then
    looks for more entries past the cap than there are, and walks on over those trimmed since the
    last vacuum, once, in a transaction that is rare already."""
    written: list[str] | None = session.info.get(_WRITTEN_UNPINNED)
    if written is None:
        written = session.info[_WRITTEN_UNPINNED] = []
        before_commit(session, lambda: TRIM_OVER_CAP.rows(session.connection(), written=written))
    written += recipients


def enqueue(
    tx: Tx,
    recipient_device_id: str,
    *,
    sender: str,
    type: str,
    blob: bytes,
    ttl_s: int,
    max_lifetime_s: int = QUEUE_LIFETIME_S,
    tag: str | None = None,
) -> int:
    """``enqueue_all`` for one device (a relay, a push kept for a device without a push service):
    its entry's seq, never held back."""
    [seq] = enqueue_all(
        tx,
        {recipient_device_id: blob},
        sender=sender,
        type=type,
        ttl_s=ttl_s,
        max_lifetime_s=max_lifetime_s,
        tag=tag,
        may_hold=False,
    )
    return seq


def lock_recipients(tx: Tx, device_ids: list[str]) -> None:
    """Serialise enqueues per recipient (row locks on PostgreSQL) so that, for each device, sequence
    order is commit order and a stream reading "seq > last" can never step over a late commit. One
    statement for all of a send's devices, in one order (by id) so two sends cannot deadlock. None
    in a group that locked them all up front (``LOCKED_DEVICES``: the devices of its accounts)."""
    connection = tx.connection()
    if connection.dialect.name == "sqlite":  # SQLite writers are serial already
        return
    held = tx.opened_session.info.get(LOCKED_DEVICES) if tx.opened_session is not None else None
    if held is not None and held.issuperset(device_ids):
        return
    _LOCK_DEVICES.rows(connection, ids=sorted(device_ids))


_DEVICES = Device.__table__  # type: ignore[attr-defined]
_LOCK_DEVICES = PreparedStatement(  # PostgreSQL only: one array parameter for any number of devices
    select(_DEVICES.c.device_id)
    .where(_DEVICES.c.device_id == func.any(bindparam("ids", type_=VARCHAR_ARRAY)))
    .order_by(_DEVICES.c.device_id)
    .with_for_update()
)
