"""Several group writers in one process, the spare ones for when a group is held up (PostgreSQL).

One ``GroupCommitter`` writes its groups one after another. On PostgreSQL a group can wait long on
something outside it: the device row locks of an account that another replica is writing, a slow
dependency. With one writer, every other account's writes would wait behind it. So a process has
several writers, used in turn only as each is held up: a write goes to the first writer that is not
held up (whose group has been in the database less than ``HELD_UP_AFTER_S``); the others stay idle
otherwise. Spreading writes over every writer all the time would split them into smaller groups,
each paying its own transaction: with 16 accounts over four writers by a hash of the account,
groups of about 3.5 writes against 14 with one writer, and 0.4 to 0.8 ms more of the replica's
CPU a send for no more sends/s (``docs/scaling.md``).

While an account has a write queued or being written, its next writes go to the same writer, behind
it: an account's writes are written in the order they were submitted, and two writers never lock
the same rows (a group locks only the devices of its own accounts, sorted as ``lock_recipients``
does). Once they are all written (committed), its next write may go to any writer. Across
processes, replicas' writers took turns on an account's locks already; several in one process add
nothing new there.

SQLite has one writer: its writes are serial under the file's write lock whatever writes them.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from core.runtime.events import Event
from core.runtime.group_commit import GroupCommitter, Write, WriteGroup

# On PostgreSQL: writers per process. Each holds one pooled connection and one worker thread while
# it writes (the pool has 30, the thread limiter 40).
WRITERS_POSTGRES = 4
# A group in the database this long is held up: under a steady load of sends a group of 32 takes a
# few tens of milliseconds, and no group takes further writes after ``GROUP_BUDGET_S`` (0.25 s).
HELD_UP_AFTER_S = 0.1


class GroupWriters:
    """``writers`` committers over ``write_group``; ``submit`` routes each write to one of them."""

    def __init__(
        self,
        write_group: WriteGroup,
        *,
        writers: int,
        max_group: int,
        held_up_after_s: float = HELD_UP_AFTER_S,
    ) -> None:
        if writers < 1:
            raise ValueError("a process needs at least one group writer")
        self._committers = tuple(GroupCommitter(write_group, max_group=max_group) for _ in range(writers))
        self._held_up_after_s = held_up_after_s
        # By account: the writer its unwritten writes went to, and how many there are.
        self._unwritten: dict[str, tuple[GroupCommitter, int]] = {}

    @property
    def running(self) -> bool:
        """Every writer is taking writes (they start and stop together, in ``write_forever``)."""
        return all(committer.running for committer in self._committers)

    async def submit(self, write: Write) -> tuple[Any, list[Event]]:
        """Queue ``write`` with its writer and wait until it is written (``GroupCommitter.submit``)."""
        account = write.principal.account_id
        committer, unwritten = self._unwritten.get(account) or (self._free_writer(), 0)
        self._unwritten[account] = committer, unwritten + 1
        try:
            return await committer.submit(write)
        finally:  # written or refused: submit waits for the outcome, whatever happens to the caller
            committer, unwritten = self._unwritten[account]
            if unwritten == 1:
                del self._unwritten[account]
            else:
                self._unwritten[account] = committer, unwritten - 1

    def _free_writer(self) -> GroupCommitter:
        """The first writer not held up by its group in the database; the last when all are."""
        now = time.monotonic()
        for committer in self._committers[:-1]:
            since = committer.writing_since
            if since is None or now - since < self._held_up_after_s:
                return committer
        return self._committers[-1]

    async def write_forever(self) -> None:
        """Run every writer (in the Core's task group); each fails its own queued writes when stopped."""
        async with anyio.create_task_group() as writers:
            for committer in self._committers:
                writers.start_soon(committer.write_forever)
