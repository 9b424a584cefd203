"""SQLite: each device's number of unpinned queue entries (``queue_counts``), kept by the statements
that write the queue, so that a write learns from one row whether it takes a queue over its cap.

Migration 0016 kept the counts with triggers on every insert and delete of an entry; migration
0020 dropped those two, which were a quarter of what each device added to a send (a full queue's
write inserts one entry and deletes one, and each trigger ran as a sub-program of its own, moving
the count up and down again). What moves a count now, and where:

- a queue write (``core.services.queue``): ``counts_after_write`` from what ``BEFORE`` read, set
  by ``SET_COUNTS`` only where a count changes (a full queue's stays at the cap);
- the expiry sweep (``core.services.maintenance``): ``RECOUNT_EXPIRING`` before its delete;
- a device's removal: its count's row goes with the device (trigger ``queue_counts_device_removed``);
- an entry's pin or recipient changed: trigger ``queue_counts_update`` (no code does either);
- a pinned entry's delete (a reminder's cancel) moves no count.

``tests/core/store/test_queue_counts.py`` fails when code anywhere else writes the queue.
PostgreSQL leaves the table empty: it trims each queue a transaction wrote once, before it commits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Integer, bindparam, func, select, true, update
from sqlalchemy.dialects.sqlite import insert

from core.services.queue_statements import QUEUE_CAP, json_rows
from core.store.prepared import PreparedStatement
from core.store.tables import QueueCount, QueuedEnvelope

_QUEUE = QueuedEnvelope.__table__  # type: ignore[attr-defined]
_COUNTS = QueueCount.__table__  # type: ignore[attr-defined]

# The counts to set, a JSON object of device id to count: a device without a row gets one.
_JSON_COUNTS = json_rows("counts", "key", "value")
_SET = insert(_COUNTS).from_select(
    ["device_id", "unpinned"], select(_JSON_COUNTS.c.key, _JSON_COUNTS.c.value).where(true())
)  # the WHERE keeps SQLite from reading the upsert's ON as the SELECT's join
SET_COUNTS = PreparedStatement(
    _SET.on_conflict_do_update(index_elements=["device_id"], set_={"unpinned": _SET.excluded.unpinned})
)

# Before the sweep deletes the entries expired at ``now``: each count of a device that has some
# becomes the number of its unpinned entries that stay (read in the recipient index, then each
# entry's expiry in the table: at most a queue's cap of them a device).
_STAYING = (
    select(func.count())
    .where(
        _QUEUE.c.recipient_device_id == _COUNTS.c.device_id,
        _QUEUE.c.tag.is_(None),
        _QUEUE.c.expires_at > bindparam("now", type_=Integer),
    )
    .scalar_subquery()
)
_EXPIRING = select(_QUEUE.c.recipient_device_id).where(
    _QUEUE.c.expires_at <= bindparam("now", type_=Integer), _QUEUE.c.tag.is_(None)
)
RECOUNT_EXPIRING = PreparedStatement(
    update(_COUNTS).where(_COUNTS.c.device_id.in_(_EXPIRING)).values(unpinned=_STAYING)
)


def counts_after_write(recipients: Iterable[tuple[str, Any]], *, pinned: bool) -> dict[str, int]:
    """The counts a queue write changes, by device, from each recipient's count before it (``None``:
    no row yet). An unpinned entry adds one; the trim then keeps the newest unpinned entries up to
    the cap (a queue over it, from a lowered cap, drops to it; a pinned write trims such a queue
    too). A full queue's count stays, and is left out."""
    added = 0 if pinned else 1
    changed: dict[str, int] = {}
    for recipient, before in recipients:
        after = min((before or 0) + added, QUEUE_CAP)
        if after != (before or 0):
            changed[recipient] = after
    return changed


def set_counts(connection: Connection, counts: dict[str, int]) -> None:
    if counts:
        SET_COUNTS.rows(connection, counts=json.dumps(counts))


def recount_expiring(connection: Connection, now: int) -> None:
    """SQLite: before the expiry sweep's delete (``RECOUNT_EXPIRING``)."""
    if connection.dialect.name == "sqlite":
        RECOUNT_EXPIRING.rows(connection, now=now)
