"""Several group writers per process on PostgreSQL: one writes while none is held up (so writes go
in the largest groups), a spare takes other accounts' writes while a group is held up (one
account's blocked write holds up no other account's), and one account's writes all go through one
writer, in the order they were submitted."""

from __future__ import annotations

import threading
import time

import anyio
import anyio.lowlevel
import pytest
from sqlalchemy import text

from core.principal import Principal
from core.runtime.core import Core
from core.runtime.group_commit import Write
from core.runtime.group_writers import HELD_UP_AFTER_S, WRITERS_POSTGRES, GroupWriters
from core.services.relay import read_queue
from tests.core.pairs import Pair, paired
from tests.core.test_group_commit_postgres import quick_write

pytestmark = pytest.mark.anyio


def principal(account_id: str) -> Principal:
    return Principal.sender_token(
        account_id=account_id, token_id="t", label="l", scope=None, priority_cap="high"
    )


class RecordedGroups:
    """A ``write_group`` that records what it wrote, how many groups were in the database at once,
    and holds every group with a write of ``held`` until ``release``."""

    def __init__(self, held: str = "") -> None:
        self.held, self.release = held, threading.Event()
        self.written: list[tuple[str, int]] = []
        self.in_database = self.most_in_database = 0
        self._lock = threading.Lock()

    def __call__(self, writes: list[Write]) -> None:
        with self._lock:
            self.in_database += 1
            self.most_in_database = max(self.most_in_database, self.in_database)
        if any(write.principal.account_id == self.held for write in writes):
            assert self.release.wait(5)
        time.sleep(0.002)  # a round trip: later writes queue meanwhile
        with self._lock:
            self.in_database -= 1
            for write in writes:
                self.written.append((write.principal.account_id, write.args[0]))
                write.succeeded(None, [])

    def numbers(self, account: str) -> list[int]:
        return [number for written_for, number in self.written if written_for == account]


async def submit_all(writers: GroupWriters, writes: list[tuple[str, int]]) -> None:
    async with anyio.create_task_group() as submitting:
        for account, number in writes:
            submitting.start_soon(writers.submit, Write(lambda: None, principal(account), (number,), {}))
            await anyio.lowlevel.checkpoint()  # submitted in this order


async def test_while_no_group_is_held_up_one_writer_writes_every_account_in_order() -> None:
    groups = RecordedGroups()
    writers = GroupWriters(
        groups, writers=4, max_group=8, held_up_after_s=1.0
    )  # none is, even on a busy machine
    accounts = [f"account-{n}" for n in range(8)]
    async with anyio.create_task_group() as group:
        group.start_soon(writers.write_forever)
        await anyio.sleep(0.01)
        assert writers.running
        await submit_all(writers, [(accounts[number % 8], number) for number in range(40)])
        group.cancel_scope.cancel()

    assert not writers.running
    assert groups.most_in_database == 1  # not spread over the writers: groups as large as one writer makes
    for account in accounts:
        numbers = groups.numbers(account)
        assert numbers == sorted(numbers) and len(numbers) == 5


async def test_a_held_up_group_holds_its_accounts_writes_in_order_and_no_other_account() -> None:
    groups = RecordedGroups(held="held")
    writers = GroupWriters(groups, writers=2, max_group=8, held_up_after_s=0.05)
    async with anyio.create_task_group() as group:
        group.start_soon(writers.write_forever)
        await anyio.sleep(0.01)
        async with anyio.create_task_group() as held:
            held.start_soon(submit_all, writers, [("held", 0)])
            await anyio.sleep(0.3)  # its group is now held up
            held.start_soon(submit_all, writers, [("held", 1)])
            with anyio.fail_after(2):
                await submit_all(writers, [("free", 2), ("other", 3), ("free", 4)])
            assert groups.numbers("free") == [2, 4] and groups.numbers("other") == [3]
            assert groups.numbers("held") == []
            groups.release.set()
        group.cancel_scope.cancel()

    assert groups.numbers("held") == [0, 1]  # the second waited behind the first, on its writer


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # SQLite writers are serial
async def test_an_account_whose_write_waits_on_a_lock_holds_up_no_other_account(running: Core) -> None:
    assert WRITERS_POSTGRES > 1
    blocked, free = await paired(running), await paired(running)
    blocked_device, free_device = blocked.computer.device_id, free.computer.device_id
    assert blocked_device is not None and free_device is not None
    outcomes: dict[str, int] = {}
    free_written = anyio.Event()

    async def write(pair: Pair, device: str, name: str) -> None:
        outcomes[name] = await running.run(quick_write, pair.phone, recipient=device, number=1)

    with running.engine.connect() as elsewhere:  # holds the blocked account's devices, as a long write would
        lock = text("SELECT device_id FROM devices WHERE account_id = :a FOR UPDATE")
        elsewhere.execute(lock, {"a": blocked.phone.account_id})
        async with anyio.create_task_group() as group:
            group.start_soon(write, blocked, blocked_device, "blocked")
            await anyio.sleep(HELD_UP_AFTER_S + 0.2)  # its writer is now held up, waiting on the lock
            assert "blocked" not in outcomes

            async def free_write() -> None:
                await write(free, free_device, "free")
                free_written.set()

            group.start_soon(free_write)
            with anyio.fail_after(2):  # one writer for both would wait for the lock to be released
                await free_written.wait()
            assert "blocked" not in outcomes
            elsewhere.rollback()  # the lock goes: the blocked write goes on

    assert set(outcomes) == {"blocked", "free"}
    for pair, name in ((blocked, "blocked"), (free, "free")):
        queued = await running.run(read_queue, pair.computer, after=0)
        assert [item.seq for item in queued.items if item.sender == "test"] == [outcomes[name]]
