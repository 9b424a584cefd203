"""Each device's queue, behind one face: the ``Queue`` contract (``core.queue._contract``), its
implementations (SQLite, PostgreSQL, in memory) and ``enqueue_all``, the one entry point services
call to queue sealed blobs. Everything else in this package is private to it (counts, held
writes, the trim before commit); ``tests/test_import_rules.py`` keeps it so. docs/queue.md
describes the contract and each database's way of keeping it."""

from __future__ import annotations

from collections.abc import Mapping

from core.queue._contract import LIVE_GRACE_S as LIVE_GRACE_S
from core.queue._contract import NOTIFICATION_LIFETIME_S as NOTIFICATION_LIFETIME_S
from core.queue._contract import QUEUE_CAP as QUEUE_CAP
from core.queue._contract import QUEUE_LIFETIME_S as QUEUE_LIFETIME_S
from core.queue._contract import Appended as Appended
from core.queue._contract import Queue as Queue
from core.queue._contract import StoredEntry as StoredEntry
from core.queue._memory import MemoryQueue as MemoryQueue
from core.queue._postgres import PostgresQueue as PostgresQueue
from core.queue._sqlite import SqliteQueue as SqliteQueue
from core.queue._wake import CARRIED_MAX_CHARS as CARRIED_MAX_CHARS
from core.queue._wake import Carried as Carried
from core.queue._wake import WakeUps as WakeUps
from core.queue._wake import blob_text as blob_text
from core.queue._wake import carried as carried
from core.runtime.events import EnvelopesQueued
from core.runtime.tx import Tx

_BY_DIALECT: dict[str, Queue] = {"sqlite": SqliteQueue(), "postgresql": PostgresQueue()}


def queue(tx: Tx) -> Queue:
    """The queue of the transaction's database."""
    return _BY_DIALECT[tx.connection().dialect.name]


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
    ``max_lifetime_s``; ``tag`` pins the entries) and wake the recipients' streams after commit.
    The seqs, in the order of ``blobs``. ``may_hold``: see ``Queue.append`` (sends: yes; a relay,
    which runs a statement of its own before each append: no). ``account_id``: the recipients'
    account (they are all of one), when the caller has it: SQLite stores them in one row."""
    if not blobs:  # e.g. an urgent stop whose recipients were all removed
        return []
    appended = queue(tx).append(
        tx,
        blobs,
        sender=sender,
        type=type,
        ttl_s=ttl_s,
        max_lifetime_s=max_lifetime_s,
        pin=tag,
        may_hold=may_hold,
        account_id=account_id,
    )
    queued = tuple((recipient, *appended[recipient], blob) for recipient, blob in blobs.items())
    tx.emit(EnvelopesQueued(WakeUps(sender, type), queued))  # one event, one handler after commit
    return [appended[recipient][0] for recipient in blobs]


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
