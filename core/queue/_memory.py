"""The queue in memory: the contract (``core.queue._contract``) in the fewest lines, for tests and
as the reference the databases' queues are held to (``tests/contracts/test_queue.py``). It keeps
no transaction: ``tx`` is only read for the time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from core.queue._contract import QUEUE_CAP, QUEUE_LIFETIME_S, Appended, StoredEntry, expires_at
from core.runtime.tx import Tx


@dataclass
class _Entry:
    stored: StoredEntry
    tag: str | None
    expires_at: int


@dataclass
class MemoryQueue:
    queues: dict[str, list[_Entry]] = field(default_factory=dict)
    last_seq: int = 0

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
        expiry = expires_at(tx.now(), ttl_s, max_lifetime_s)
        appended: Appended = {}
        for device, blob in blobs.items():
            queue = self.queues.setdefault(device, [])
            self.last_seq += 1
            appended[device] = (self.last_seq, queue[-1].stored.seq if queue else 0)
            queue.append(_Entry(StoredEntry(self.last_seq, sender, type, blob), pin, expiry))
            unpinned = [entry for entry in queue if entry.tag is None]
            for entry in unpinned[: max(0, len(unpinned) - QUEUE_CAP)]:
                queue.remove(entry)
        return appended

    def read(self, tx: Tx, device: str, *, after: int, limit: int, now: int) -> list[StoredEntry]:
        queue = self.queues.get(device, [])
        return [entry.stored for entry in queue if entry.stored.seq > after and entry.expires_at > now][
            :limit
        ]

    def take_pinned(self, tx: Tx, device: str, tag: str, type: str) -> list[int]:
        queue = self.queues.get(device, [])
        taken = [entry for entry in queue if entry.tag == tag and entry.stored.type == type]
        self.queues[device] = [entry for entry in queue if entry not in taken]
        return [entry.expires_at for entry in taken]

    def pinned(self, tx: Tx, device: str) -> int:
        return sum(entry.tag is not None for entry in self.queues.get(device, []))

    def forget_device(self, tx: Tx, device: str) -> None:
        self.queues.pop(device, None)

    def expire(self, tx: Tx, now: int) -> int:
        expired = 0
        for device, queue in self.queues.items():
            self.queues[device] = [entry for entry in queue if entry.expires_at > now]
            expired += len(queue) - len(self.queues[device])
        return expired
