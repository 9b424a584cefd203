"""Group commit on PostgreSQL: a group of several locks every device of the accounts its writes act
for before any of them runs, all in one statement, so two groups (two replicas) cannot each hold
a device the other's next write waits for."""

from __future__ import annotations

import anyio
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from core.principal import Principal
from core.runtime.core import Core
from core.runtime.marks import group_commit
from core.runtime.tx import Tx
from tests.core.pairs import paired

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


async def test_a_group_holds_its_accounts_device_locks_before_its_writes_run(running: Core) -> None:
    if running.engine.dialect.name != "postgresql":
        pytest.skip("row locks: PostgreSQL only (SQLite writers are serial)")
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
