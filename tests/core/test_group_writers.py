"""Several group writers per process on PostgreSQL: writes for different accounts are written side
by side (one account's blocked write holds up no other account's), while one account's writes all
go through one writer, in the order they were submitted."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from sqlalchemy import text

from core.principal import Principal
from core.runtime.core import Core
from core.runtime.group_commit import Write
from core.runtime.group_writers import WRITERS_POSTGRES, GroupWriters
from core.services.relay import read_queue
from tests.core.pairs import Pair, paired
from tests.core.test_group_commit_postgres import quick_write

pytestmark = pytest.mark.anyio


def principal(account_id: str) -> Principal:
    return Principal.sender_token(
        account_id=account_id, token_id="t", label="l", scope=None, priority_cap="high"
    )


async def test_an_accounts_writes_go_through_one_writer_in_the_order_submitted() -> None:
    written: list[tuple[str, int]] = []

    def write_group(writes: list[Write]) -> None:
        for write in writes:
            written.append((write.principal.account_id, write.args[0]))
            write.succeeded(None, [])

    writers = GroupWriters(write_group, writers=4, max_group=8)
    accounts = [f"account-{n}" for n in range(8)]
    assert all(writers.for_account(a) is writers.for_account(a) for a in accounts)  # fixed for the process
    assert len({id(writers.for_account(a)) for a in accounts}) > 1  # spread over several

    async with anyio.create_task_group() as group:
        group.start_soon(writers.write_forever)
        await anyio.sleep(0.01)
        assert writers.running
        async with anyio.create_task_group() as submitting:
            for number in range(40):
                account = accounts[number % len(accounts)]
                write = Write(lambda: None, principal(account), (number,), {})
                submitting.start_soon(writers.for_account(account).submit, write)
                await anyio.lowlevel.checkpoint()  # submitted in this order
        group.cancel_scope.cancel()

    assert not writers.running
    for account in accounts:
        numbers = [number for written_for, number in written if written_for == account]
        assert numbers == sorted(numbers) and len(numbers) == 5


async def two_accounts_on_different_writers(core: Core) -> tuple[Pair, Pair]:
    first = await paired(core)
    for _ in range(12):  # each new account lands on another writer with odds (n-1)/n
        second = await paired(core)
        if core.group_writers.for_account(first.phone.account_id) is not core.group_writers.for_account(
            second.phone.account_id
        ):
            return first, second
    raise AssertionError("every account hashed to one writer")


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # SQLite writers are serial
async def test_an_account_whose_write_waits_on_a_lock_holds_up_no_other_account(running: Core) -> None:
    assert WRITERS_POSTGRES > 1
    blocked, free = await two_accounts_on_different_writers(running)
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
            await anyio.sleep(0.1)  # its writer is now waiting on the lock
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
