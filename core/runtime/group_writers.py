"""Several group writers in one process, each for a share of the accounts (PostgreSQL).

One ``GroupCommitter`` writes its groups one after another, and on PostgreSQL a group waits on its
round trips (BEGIN, the device locks, each write's savepoint, statements and rate-limit charge,
COMMIT): one writer kept a replica near 500 sends/s at about half a core, waiting rather than
computing (``docs/scaling.md``). Each writer here takes the writes of the accounts whose id hashes
to it, so writes for different accounts are written side by side, each writer on its own worker
thread and pooled connection, while all the writes of one account still go through one writer, in
the order they were submitted, as before.

Two writers never lock the same rows: a group locks the devices of its own accounts (sorted, as
``lock_recipients`` does), and no two writers share an account. Across processes, replicas'
writers took turns on an account's locks already; several in one process add nothing new there.

SQLite has one writer: its writes are serial under the file's write lock whatever writes them.
"""

from __future__ import annotations

import anyio

from core.runtime.group_commit import GroupCommitter, WriteGroup

# On PostgreSQL: writers per process. Each holds one pooled connection and one worker thread while
# it writes (the pool has 30, the thread limiter 40); more than the cores' worth of waiting writers
# would only queue on the CPU.
WRITERS_POSTGRES = 4


class GroupWriters:
    """``writers`` committers over ``write_group``; ``for_account`` names the one for an account."""

    def __init__(self, write_group: WriteGroup, *, writers: int, max_group: int) -> None:
        if writers < 1:
            raise ValueError("a process needs at least one group writer")
        self._committers = tuple(GroupCommitter(write_group, max_group=max_group) for _ in range(writers))

    @property
    def running(self) -> bool:
        """Every writer is taking writes (they start and stop together, in ``write_forever``)."""
        return all(committer.running for committer in self._committers)

    def for_account(self, account_id: str) -> GroupCommitter:
        """The writer of ``account_id``'s writes: always the same one in this process (the string's
        hash, fixed for the process's life), so an account's writes keep their order."""
        return self._committers[hash(account_id) % len(self._committers)]

    async def write_forever(self) -> None:
        """Run every writer (in the Core's task group); each fails its own queued writes when stopped."""
        async with anyio.create_task_group() as writers:
            for committer in self._committers:
                writers.start_soon(committer.write_forever)
