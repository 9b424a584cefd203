"""PostgreSQL: a group's queue entries written without a round trip a send.

A send's one statement of its own was its queue write, whose answer (each entry's seq, and the
recipient's newest seq before it) its wake-ups and pushes carry. In a group, whose devices are
locked up front (``core.runtime.group_commit``), those need no answer from the database: the first
queue write of the group reserves, in one statement, seqs for every locked device (as many as the
group has writes for its account) and reads each one's newest seq; from then on each write takes
its entries' seqs from the reservation and knows each recipient's previous one, and its entries
are held back (``core.store.held_back``) and inserted in one statement with every other write's,
just before the transaction's next statement, or in its commit's pipeline.

Why this keeps the queue's order: a seq comes from the one sequence after the device's lock was
taken, and no other transaction can write to the device until this one commits, so for each
device the order of seqs is still the order of commits. A reservation serves only while no other
statement has run since it was last used (its connection's change mark): another statement may
have written the queue (a pinned entry, numbered by the sequence later than the reservation) or
changed what a recipient's newest entry is; the held entries go just before it, and every queue
write after it goes as a statement of its own (``core.queue._postgres``). Seqs reserved and not
used are never handed out: a gap, which a seq may always have.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import BigInteger, Connection, func, insert, literal_column, select
from sqlalchemy.sql.elements import ColumnElement

from core.queue._pg_sql import hidden_array, newest_first, queue_of
from core.queue._stored import QUEUE as _QUEUE
from core.runtime.tx import GROUP_WRITES_TO, Tx
from core.store.change_marks import change_mark
from core.store.held_back import hold_back
from core.store.postgres_arrays import BIGINT_ARRAY, BYTEA_ARRAY, VARCHAR_ARRAY
from core.store.prepared import PreparedStatement

_RESERVATION = "relaybox_queue_reservation"  # in a group's session ``info``


@dataclass(eq=False)
class _Reservation:
    """Seqs reserved for a group's locked devices, and the entries held back with them."""

    connection: Connection
    seqs: dict[str, deque[int]]  # by device: those reserved for it, not yet taken, in order
    newest: dict[str, int]  # by device: its newest seq (0: none), the last taken once one is
    mark: int  # the connection's change mark when the reservation was last used
    held: dict[str, list[Any]] = field(default_factory=lambda: {name: [] for name in _HELD_COLUMNS})

    def send(self) -> None:
        """The held entries, in one statement (``core.store.held_back`` calls it)."""
        _INSERT_HELD.rows(self.connection, **self.held)


def take_held_seqs(
    tx: Tx, blobs: Mapping[str, bytes], shared: Mapping[str, Any]
) -> dict[str, tuple[int, int]] | None:
    """In a PostgreSQL group (``GROUP_WRITES_TO``): each recipient's entry, with what ``shared``
    says of all (sender, type, created_at, expires_at; none pinned), held back to be inserted with
    seqs from the group's reservation; by recipient, its seq and the newest before it. None when
    the write must go as a statement of its own: outside a group, to a device the group did not
    lock, with no seq left for a recipient, or with the reservation spent (see the module)."""
    session = tx.opened_session
    if session is None:
        return None
    writes_to: dict[str, int] | None = session.info.get(GROUP_WRITES_TO)
    if writes_to is None:
        return None
    connection = tx.connection()
    reservation: _Reservation | None = session.info.get(_RESERVATION)
    if reservation is None:
        if not all(recipient in writes_to for recipient in blobs):
            return None
        reservation = session.info[_RESERVATION] = _reserve(connection, writes_to)
    elif reservation.mark != change_mark(connection):
        return None
    reserved = reservation.seqs
    if not all(reserved.get(recipient) for recipient in blobs):
        return None
    taken: dict[str, tuple[int, int]] = {}
    held, newest = reservation.held, reservation.newest
    for recipient, blob in blobs.items():
        seq = reserved[recipient].popleft()
        taken[recipient] = (seq, newest[recipient])
        newest[recipient] = seq
        held["seqs"].append(seq)
        held["recipients"].append(recipient)
        held["blobs"].append(blob)
        for name in _SHARED:
            held[name].append(shared[name])
    hold_back(session, reservation.send)  # counted, so a write that fails after it is undone
    reservation.mark = change_mark(connection)
    return taken


def _reserve(connection: Connection, writes_to: dict[str, int]) -> _Reservation:
    devices = sorted(writes_to)
    rows = _RESERVE.rows(connection, devices=devices, entries=[writes_to[device] for device in devices])
    return _Reservation(
        connection,
        seqs={device: deque(sorted(seqs or ())) for device, _newest, seqs in rows},
        newest={device: newest or 0 for device, newest, _seqs in rows},
        mark=change_mark(connection),
    )


# The sequence of the seq column (a serial's: ``tests/core/test_queue_held.py`` checks the name).
_SEQUENCE: ColumnElement[Any] = literal_column("'queued_envelopes_seq_seq'::regclass")


# For each locked device (``devices``) its newest seq and ``entries`` seqs from the sequence, taken
# after the lock (read committed: this statement's snapshot sees every entry committed before it).
_LOCKED = (
    func.unnest(hidden_array("devices", VARCHAR_ARRAY), hidden_array("entries", BIGINT_ARRAY))
    .table_valued("device_id", "entries")
    .render_derived()
)
_RESERVE = PreparedStatement(
    select(
        _LOCKED.c.device_id,
        select(_QUEUE.c.seq)
        .where(queue_of(_QUEUE, _LOCKED.c.device_id))
        .order_by(*newest_first(_QUEUE))
        .limit(1)
        .scalar_subquery(),
        select(func.array_agg(func.nextval(_SEQUENCE, type_=BigInteger)))
        .select_from(func.generate_series(1, _LOCKED.c.entries))
        .scalar_subquery(),
    )
)

# The held entries: one array a column, one element an entry.
_SHARED = ("sender", "type", "created_at", "expires_at")
_HELD_COLUMNS: dict[str, tuple[str, Any]] = {
    "seqs": ("seq", BIGINT_ARRAY),
    "recipients": ("recipient_device_id", VARCHAR_ARRAY),
    "blobs": ("blob", BYTEA_ARRAY),
    "sender": ("sender", VARCHAR_ARRAY),
    "type": ("type", VARCHAR_ARRAY),
    "created_at": ("created_at", BIGINT_ARRAY),
    "expires_at": ("expires_at", BIGINT_ARRAY),
}
_ENTRIES = (
    func.unnest(*(hidden_array(name, array_type) for name, (_column, array_type) in _HELD_COLUMNS.items()))
    .table_valued(*_HELD_COLUMNS)
    .render_derived()
)
_INSERT_HELD = PreparedStatement(
    insert(_QUEUE).from_select(
        [column for column, _type in _HELD_COLUMNS.values()],
        select(*(_ENTRIES.c[name] for name in _HELD_COLUMNS)),
    )
)
