"""SQLite's queue: a write's entries numbered, inserted (one packed row for an unpinned write
to several devices of one account, ``core.queue._packed``; otherwise a row a device), each queue kept to
its cap and each count kept exact. A statement costs no round trip here, and the writer is serial,
so the write reads what each queue holds first (``BEFORE``; for a full queue, its oldest packed
row: ``_packed.oldest_packed``) and decides in Python.

A full queue loses its oldest unpinned entry: an own row is deleted (``DROP``), a packed entry is
passed by moving the device's floor; a packed row no device still has then goes
(``DROP_UNNEEDED``). A queue further over its cap (a cap lowered since it filled) loses its excess
the slow way (``_trim_excess``): one statement of each kind for that device.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from core.queue._contract import QUEUE_LIFETIME_S, Appended, StoredEntry, expires_at
from core.queue._counts import count_after_write, recount_expiring, set_counts
from core.queue._packed import (
    ACCOUNT_OF,
    DROP_UNNEEDED,
    INSERT_PACKED,
    oldest_entries,
    oldest_packed,
    pack,
    read_entries,
    unlist_device,
)
from core.queue._sqlite_sql import BEFORE, DROP, KEPT, ROW_BINDS, ROWS_PER_INSERT, insert_rows
from core.queue._stored import StoredQueue
from core.runtime.tx import Tx

Numbered = dict[str, tuple[int, int]]  # by recipient: its entry's seq, and its newest seq before (0: none)


@dataclass
class _Trim:
    """What a write pushes out: own rows by seq, packed rows the devices' floors now pass."""

    own: list[int] = field(default_factory=list)
    passed: list[int] = field(default_factory=list)
    floors: dict[str, int] = field(default_factory=dict)  # the moved ones, by device


def write_entries(
    connection: Connection,
    blobs: Mapping[str, bytes],
    shared: dict[str, Any],
    *,
    pinned: bool,
    account_id: str | None,
) -> Numbered:
    """Write one entry to each recipient's queue (``blobs``, in order), with the ``shared``
    columns. ``account_id``: the recipients' account (they are all of one), when the caller knows
    it; an unpinned write to several devices is then one packed row. Without it, a row a device
    (and, when a queue is to be trimmed, the account is read once)."""
    recipients = list(blobs)
    before = BEFORE[pinned].rows(connection, recipients=json.dumps(recipients))
    first = before[0][5] + 1  # the entries take the seqs after the last one handed out, in order
    newest = {row[0]: row[1] for row in before}
    numbered = {recipient: (first + n, newest[recipient] or 0) for n, recipient in enumerate(recipients)}
    over = [row[0] for row in before if row[3] is not None and row[3] > KEPT[pinned]]  # queues to trim
    account = _account(connection, account_id, over[0]) if over else ""
    full = {  # the queues the write takes one over the cap: each drops its oldest entry
        recipient: floor or 0 for recipient, _n, _o, count, floor, _l in before if count == KEPT[pinned] + 1
    }
    packed_oldest = oldest_packed(connection, account, full) if full and account else {}
    if not pinned and len(recipients) > 1 and account_id is not None:
        packed, blob = pack(
            (recipient, numbered[recipient][0], sealed) for recipient, sealed in blobs.items()
        )
        last = first + len(recipients) - 1  # the row's seq: the last of its entries'
        INSERT_PACKED.rows(connection, seq=last, account=account_id, recipients=packed, blob=blob, **shared)
    else:
        _insert_rows(connection, blobs, numbered, shared)
    trim = _Trim()
    for recipient, _newest, oldest_own, count, floor, _last in before:
        if count is None or count <= KEPT[pinned]:
            continue
        oldest_in_packed = packed_oldest.get(recipient)
        if count > KEPT[pinned] + 1:
            _trim_excess(connection, trim, recipient, account, floor, count - KEPT[pinned])
        elif oldest_own is not None and (oldest_in_packed is None or oldest_own < oldest_in_packed):
            trim.own.append(oldest_own)
        elif oldest_in_packed is not None:
            trim.floors[recipient] = oldest_in_packed + 1
            trim.passed.append(oldest_in_packed)
    counts = {
        recipient: (
            count_after_write(count, pinned=pinned),
            trim.floors.get(recipient, floor or 0),
            numbered[recipient][0],
        )
        for recipient, _newest, _own, count, floor, _last in before
    }
    set_counts(connection, counts)
    if trim.own:
        DROP.rows(connection, seqs=json.dumps(trim.own))
    if trim.passed:  # after the floors are set: the rows' devices are asked for them
        DROP_UNNEEDED.rows(connection, seqs=json.dumps(trim.passed))
    return numbered


def _insert_rows(
    connection: Connection, blobs: Mapping[str, bytes], numbered: Numbered, shared: dict[str, Any]
) -> None:
    """A row a recipient, ``ROWS_PER_INSERT`` to a statement."""
    entries = list(blobs.items())
    for start in range(0, len(entries), ROWS_PER_INSERT):
        chunk = entries[start : start + ROWS_PER_INSERT]
        rows: dict[str, object] = dict(shared)
        for (seq_bind, recipient_bind, blob_bind), (recipient, blob) in zip(ROW_BINDS, chunk, strict=False):
            rows[seq_bind] = numbered[recipient][0]  # chunk is no longer than ROW_BINDS
            rows[recipient_bind] = recipient
            rows[blob_bind] = bytearray(blob)  # see insert_rows
        insert_rows(len(chunk)).rows(connection, **rows)


def _account(connection: Connection, account_id: str | None, recipient: str) -> str:
    """The recipients' account (they are all of one): as the caller gave it, or read once from one
    of them ("": the device is gone, and its packed entries with it)."""
    if account_id is not None:
        return account_id
    return ACCOUNT_OF.scalar(connection, device_id=recipient) or ""


def _trim_excess(
    connection: Connection, trim: _Trim, recipient: str, account: str, floor: int | None, excess: int
) -> None:
    """A queue ``excess`` over what the write keeps: its oldest ``excess`` unpinned entries go,
    own rows and packed ones in seq order."""
    own, packed = oldest_entries(connection, recipient, account, floor or 0, excess)
    going = sorted(own + packed)[:excess]
    trim.own += [seq for seq in going if seq in own]
    passed = [seq for seq in going if seq in packed]
    if passed:
        trim.floors[recipient] = passed[-1] + 1
        trim.passed += passed


class SqliteQueue(StoredQueue):
    """A row a device's entry, but a send to several devices of one account is one packed row
    (``core.queue._packed``: a device added ~20 µs in-process without it, ``bench/ab-queue.md``)."""

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
        now = tx.now()
        shared = {
            "sender": sender,
            "type": type,
            "created_at": now,
            "expires_at": expires_at(now, ttl_s, max_lifetime_s),
            "tag": pin,
        }
        return write_entries(tx.connection(), blobs, shared, pinned=pin is not None, account_id=account_id)

    def read(self, tx: Tx, device: str, *, after: int, limit: int, now: int) -> list[StoredEntry]:
        return read_entries(tx.connection(), device, after=after, now=now, limit=limit)

    def forget_device(self, tx: Tx, device: str) -> None:
        account = ACCOUNT_OF.scalar(tx.connection(), device_id=device)
        super().forget_device(tx, device)
        if account is not None:
            unlist_device(tx.connection(), device, account)

    def expire(self, tx: Tx, now: int) -> int:
        recount_expiring(tx.connection(), now)
        return super().expire(tx, now)
