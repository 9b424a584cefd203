"""Group commit on PostgreSQL: a group of several locks every device of the accounts its writes
act for before any of them runs, all in one statement, so two groups (two replicas) cannot each
hold a device the other's next write waits for. On both backends: a group's transaction takes no
further write once it has been open ``GROUP_BUDGET_S``; the rest go in the next one."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from core.principal import Principal
from core.queue import _postgres as queue_module
from core.runtime import group_transaction as group_transaction_module
from core.runtime.core import Core
from core.runtime.marks import group_commit
from core.runtime.tx import Tx
from core.services import account_devices as account_devices_module
from core.services.delivery import enqueue
from core.services.relay import read_queue
from core.services.send import SendOut, send_notification
from tests.core.pairs import paired
from tests.core.test_group_commit import count_write_transactions, run_all, sender

pytestmark = pytest.mark.anyio


@group_commit
def locked_elsewhere(tx: Tx, principal: Principal, *, engine: Engine, device_id: str) -> bool:
    """Whether another connection finds ``device_id`` locked while this write runs (it locks
    nothing itself)."""
    with engine.connect() as other:
        try:
            other.execute(
                text("SELECT device_id FROM devices WHERE device_id = :d FOR UPDATE NOWAIT"), {"d": device_id}
            )
        except OperationalError:  # lock not available
            return True
    return False


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # SQLite writers are serial
async def test_a_group_holds_its_accounts_device_locks_before_its_writes_run(running: Core) -> None:
    pair = await paired(running)
    other_device = pair.computer.device_id  # no write of the group locks it itself
    assert other_device is not None
    found: list[bool] = []

    async def one() -> None:
        found.append(
            await running.run(locked_elsewhere, pair.phone, engine=running.engine, device_id=other_device)
        )

    async with anyio.create_task_group() as group:
        for _ in range(6):
            group.start_soon(one)

    assert found.count(True) >= 5, found  # all but perhaps the first, written alone


@group_commit
def slow_write(tx: Tx, principal: Principal, *, recipient: str) -> int:
    time.sleep(0.03)
    return enqueue(tx, recipient, sender="test", type="ping", blob=b"slow", ttl_s=60)


async def test_a_group_that_runs_long_goes_on_in_the_next_transaction(
    running: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On both backends: each transaction stays short; every write is written once."""
    monkeypatch.setattr(group_transaction_module, "GROUP_BUDGET_S", 0.1)
    pair = await paired(running)
    recipient = pair.computer.device_id
    assert recipient is not None
    transactions = count_write_transactions(running)
    seqs: list[int] = []

    async def one() -> None:
        seqs.append(await running.run(slow_write, pair.phone, recipient=recipient))

    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(one)

    assert len(set(seqs)) == 10
    assert 3 <= transactions[0] <= 9  # a few writes each (about 4), not all in one
    queued = await running.run(read_queue, pair.computer, after=0)
    assert sorted(item.seq for item in queued.items if item.sender == "test") == sorted(seqs)


@group_commit
def quick_write(tx: Tx, principal: Principal, *, recipient: str, number: int) -> int:
    return enqueue(tx, recipient, sender="test", type="ping", blob=b"%d" % number, ttl_s=60)


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # SQLite writers are serial
async def test_a_write_in_a_group_does_not_lock_again_the_devices_its_group_locked(
    running: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = await paired(running)
    recipient = pair.computer.device_id
    assert recipient is not None
    locks: list[list[str]] = []  # each lock_recipients statement that ran: its device ids
    lock_statement = queue_module.LOCK_DEVICES

    class Counted:
        def rows(self, connection: Any, **params: Any) -> list[tuple[Any, ...]]:
            locks.append(params["ids"])
            return lock_statement.rows(connection, **params)

    monkeypatch.setattr(queue_module, "LOCK_DEVICES", Counted())
    transactions = count_write_transactions(running)

    async def one(number: int) -> None:
        await running.run(quick_write, pair.phone, recipient=recipient, number=number)

    async with anyio.create_task_group() as group:
        for number in range(12):
            group.start_soon(one, number)

    assert transactions[0] < 12  # writes shared transactions
    # Only a write alone in its transaction (no group lock) locks its recipient itself.
    assert len(locks) <= transactions[0] - 1, (locks, transactions)
    queued = await running.run(read_queue, pair.computer, after=0)
    assert len({item.seq for item in queued.items if item.sender == "test"}) == 12  # every write written


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)  # SQLite groups lock nothing
async def test_sends_in_a_group_use_the_devices_their_group_read_while_locking_them(
    running: Core, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = await paired(running)
    token = await sender(running, pair)
    reads: list[str] = []  # each send's own read of its account's devices: the account
    devices_statement = account_devices_module._ACCOUNT_DEVICES

    class Counted:
        def rows(self, connection: Any, **params: Any) -> list[tuple[Any, ...]]:
            reads.append(params["account"])
            return devices_statement.rows(connection, **params)

    monkeypatch.setattr(account_devices_module, "_ACCOUNT_DEVICES", Counted())
    transactions = count_write_transactions(running)
    sends = [(send_notification, {"fields": {"message": f"job {n}"}, "ip": "10.9.9.9"}) for n in range(12)]

    outcomes = await run_all(running, token, sends)

    assert all(isinstance(outcome, SendOut) for outcome in outcomes), outcomes
    # Every send, read by its group or (alone) by itself, lists the devices in the order they were
    # paired (the phone first, also within one second).
    expected = [pair.phone.device_id, pair.computer.device_id]
    assert all([d.device_id for d in outcome.delivered_to] == expected for outcome in outcomes)
    assert transactions[0] < 12  # sends shared transactions
    # Only a send alone in its transaction (no group read) reads its account's devices itself.
    assert len(reads) <= transactions[0] - 1, (reads, transactions)
    queued = await running.run(read_queue, pair.computer, after=0)
    assert len([item for item in queued.items if item.type == "notification"]) == 12
