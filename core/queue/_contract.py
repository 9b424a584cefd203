"""What every queue answers to (``Queue``), and the limits all of them keep.

A device's queue holds opaque blobs in ``seq`` order. Seqs come from one counter for every device
and are never handed out twice; for each device they are committed in order, so a stream reading
"seq > last" never steps over a late commit. A queue keeps its newest ``QUEUE_CAP`` unpinned
entries: an append that takes it over the cap trims its oldest unpinned ones (expired or not: until
``expire`` they count). A pinned entry (one with a tag) is never trimmed, only expired or taken.
``tests/contracts/test_queue.py`` holds every implementation to this.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from core.runtime.tx import Tx

QUEUE_CAP = 200  # the newest unpinned entries a device's queue keeps
QUEUE_LIFETIME_S = 86_400  # device-to-device envelopes
NOTIFICATION_LIFETIME_S = 259_200  # server-composed notifications may wait up to their 72 h ttl
LIVE_GRACE_S = 30  # a ttl of 0 still gives open streams this long to read the entry (decisions.md)

Appended = dict[str, tuple[int, int]]  # by device: its new entry's seq, and its newest seq before (0: none)


class StoredEntry(NamedTuple):
    """An entry of a device's queue as it reads it."""

    seq: int
    sender: str
    type: str
    blob: bytes


def expires_at(now: int, ttl_s: int, max_lifetime_s: int) -> int:
    """When an entry written at ``now`` expires: its ttl up to ``max_lifetime_s``; a ttl of 0 gets
    the live grace."""
    return now + (min(ttl_s, max_lifetime_s) if ttl_s > 0 else LIVE_GRACE_S)


class Queue(Protocol):
    """The operations services use; each runs in the caller's transaction (``tx``)."""

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
        """One entry to each device's queue (``blobs``: by device, non-empty), pinned by ``pin``,
        each queue trimmed to the cap. Hints an implementation may use: ``may_hold``, the write
        runs no statement of its own between its appends (a PostgreSQL group then batches them);
        ``account_id``, the devices' one account (SQLite then stores a send as one row)."""
        ...

    def read(self, tx: Tx, device: str, *, after: int, limit: int, now: int) -> list[StoredEntry]:
        """The device's entries unexpired at ``now`` with a seq above ``after``, oldest first."""
        ...

    def take_pinned(self, tx: Tx, device: str, tag: str, type: str) -> list[int]:
        """Removes the device's entries pinned by ``tag`` of ``type``: the expiry of each."""
        ...

    def pinned(self, tx: Tx, device: str) -> int:
        """How many pinned entries the device's queue holds."""
        ...

    def forget_device(self, tx: Tx, device: str) -> None:
        """The device's queue, gone (the device is being removed)."""
        ...

    def expire(self, tx: Tx, now: int) -> int:
        """Removes every entry expired at ``now``: how many."""
        ...
