"""SQLite: each device's number of unpinned queue entries (``queue_counts``), kept by the statements
that write the queue, so that a write learns from one row whether it takes a queue over its cap;
beside it the device's ``floor`` (its packed entries below it are trimmed,
``core.queue._packed``) and ``newest`` seq (the ``prev`` of its next wake-up).

Migration 0016 kept the counts with triggers on every insert and delete of an entry; migration
0020 dropped those two, which were a quarter of what each device added to a send (a full queue's
write inserts one entry and deletes one, and each trigger ran as a sub-program of its own, moving
the count up and down again). What moves a count now, and where:

- a queue write (``core.queue._sqlite``): ``count_after_write`` from what ``BEFORE`` read,
  set by ``SET_COUNTS`` with each recipient's floor and newest seq;
- the expiry sweep (``SqliteQueue.expire``): ``RECOUNT_EXPIRING`` before its delete;
- a device's removal: its count's row goes with the device (trigger ``queue_counts_device_removed``),
  and it is taken out of its account's packed rows (``SqliteQueue.forget_device``: no other count moves);
- an entry's pin or recipient changed: trigger ``queue_counts_update`` (no code does either);
- a pinned entry's delete (a reminder's cancel) moves no count.

``tests/core/store/test_queue_counts.py`` fails when code anywhere else writes the queue.
PostgreSQL leaves the table empty: it trims each queue a transaction wrote once, before it commits.
"""

from __future__ import annotations

import json

from sqlalchemy import Connection, Integer, bindparam, func, select, true, union, update
from sqlalchemy.dialects.sqlite import insert

from core.queue._contract import QUEUE_CAP
from core.queue._packed import LISTED, account_of, lists
from core.store.prepared import PreparedStatement, json_rows
from core.store.tables import QueueCount, QueuedEnvelope

_QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_COUNTS = QueueCount.__table__  # type: ignore[attr-defined]

# The counts to set, a JSON object of device id to [count, floor, newest]: a device without a row
# gets one.
_JSON_COUNTS = json_rows("counts", "key", "value")
_SET = insert(_COUNTS).from_select(
    ["device_id", "unpinned", "floor", "newest"],
    select(
        _JSON_COUNTS.c.key,
        func.json_extract(_JSON_COUNTS.c.value, "$[0]"),
        func.json_extract(_JSON_COUNTS.c.value, "$[1]"),
        func.json_extract(_JSON_COUNTS.c.value, "$[2]"),
    ).where(true()),
)  # the WHERE keeps SQLite from reading the upsert's ON as the SELECT's join
SET_COUNTS = PreparedStatement(
    _SET.on_conflict_do_update(
        index_elements=["device_id"],
        set_={
            "unpinned": _SET.excluded.unpinned,
            "floor": _SET.excluded.floor,
            "newest": _SET.excluded.newest,
        },
    )
)

# Before the sweep deletes the entries expired at ``now``: each count of a device that has some
# (an own row, or a packed row that lists it) becomes the number of its unpinned entries that stay:
# own rows read in the recipient index, then each one's expiry in the table (at most a queue's cap
# of them a device), and packed rows of its account at or above its floor that list it.
_NOW = bindparam("now", type_=Integer)
_DEVICE = _COUNTS.c.device_id
_STAYING_OWN = (
    select(func.count())
    .where(_QUEUE.c.recipient_device_id == _DEVICE, _QUEUE.c.tag.is_(None), _QUEUE.c.expires_at > _NOW)
    .scalar_subquery()
)
_STAYING_PACKED = (
    select(func.count())
    .where(
        _QUEUE.c.recipient_device_id == account_of(_DEVICE),
        _QUEUE.c.seq >= _COUNTS.c.floor,
        lists(_QUEUE.c.recipients, _DEVICE),
        _QUEUE.c.expires_at > _NOW,
    )
    .scalar_subquery()
)
_EXPIRING_OWN = select(_QUEUE.c.recipient_device_id).where(
    _QUEUE.c.expires_at <= _NOW, _QUEUE.c.tag.is_(None)
)
_EXPIRING_LISTED = (
    select(LISTED.c.key)
    .select_from(_QUEUE, LISTED)
    .where(_QUEUE.c.expires_at <= _NOW, _QUEUE.c.recipients.is_not(None))
)
RECOUNT_EXPIRING = PreparedStatement(
    update(_COUNTS)
    .where(_DEVICE.in_(union(_EXPIRING_OWN, _EXPIRING_LISTED)))
    .values(unpinned=_STAYING_OWN + _STAYING_PACKED)
)


def count_after_write(before: int | None, *, pinned: bool) -> int:
    """A queue's count after a write, from its count before (``None``: no row yet). An unpinned
    entry adds one; the trim then keeps the newest unpinned entries up to the cap (a queue over it,
    from a lowered cap, drops to it; a pinned write trims such a queue too)."""
    return min((before or 0) + (0 if pinned else 1), QUEUE_CAP)


def set_counts(connection: Connection, counts: dict[str, tuple[int, int, int]]) -> None:
    """Each device's (count, floor, newest seq) after a write."""
    SET_COUNTS.rows(connection, counts=json.dumps(counts))


def recount_expiring(connection: Connection, now: int) -> None:
    """SQLite: before the expiry sweep's delete (``RECOUNT_EXPIRING``)."""
    if connection.dialect.name == "sqlite":
        RECOUNT_EXPIRING.rows(connection, now=now)
