"""A group is written without savepoints; only a write that fails after changing rows sends its
transaction back to be written again in savepoints, where the writes before it run a second time
with their rate limits answered from their first run, never charged twice."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlmodel import Session
from starlette.testclient import TestClient

from core.adapters.limits.base import LimitCheck
from core.adapters.limits.memory import MemoryRateLimiter
from core.adapters.limits.recorded import RecordingLimiter, ReplayingLimiter
from core.errors import RelayError
from core.principal import Principal
from core.queue import enqueue
from core.runtime import group_transaction
from core.runtime.core import Core
from core.runtime.group_transaction import GroupRuleBrokenError
from core.runtime.marks import group_commit
from core.runtime.tx import Tx
from core.services.relay import EnvelopeAccepted, read_queue, relay_envelope
from core.services.send import SendOut, send_notification
from core.store.database import session_scope
from core.store.savepoint import in_failed_transaction, in_savepoint
from core.store.tables import Device
from tests.core.pairs import paired
from tests.core.test_group_commit import (
    SEND_BURST,
    Call,
    count_write_transactions,
    queue_then_fail,
    run_all,
    send_limited,
    sender,
)
from tests.core.test_queue_held import in_one_group
from tests.helpers import register_phone

pytestmark = pytest.mark.anyio
__all__ = ["send_limited"]  # the fixture, used here by name


@pytest.fixture
def savepoints(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the writes run in a savepoint from now on."""
    taken: list[int] = []

    def counted(session: Any, write: Callable[[], Any]) -> Any:
        taken.append(1)
        return in_savepoint(session, write)

    monkeypatch.setattr(group_transaction, "in_savepoint", counted)
    return taken


async def test_a_group_of_good_writes_takes_no_savepoint(running: Core, savepoints: list[int]) -> None:
    pair = await paired(running)
    transactions = count_write_transactions(running)
    outcomes = await run_all(
        running, pair.phone, [(relay_envelope, {"body": pair.envelope(b"n %d" % n)}) for n in range(20)]
    )

    assert all(isinstance(outcome, EnvelopeAccepted) for outcome in outcomes)
    assert transactions[0] <= 3  # grouped
    assert savepoints == []
    assert running.group_rewrites.count == 0


@group_commit
def counted_then_refused(tx: Tx, principal: Principal, *, runs: list[str], name: str, refuse: bool) -> None:
    """Counts its run (outside the transaction), then refuses before writing, or queues a row."""
    runs.append(name)
    if refuse:
        raise RelayError("not_found")
    assert principal.device_id is not None
    enqueue(tx, principal.device_id, sender="test", type="ping", blob=name.encode(), ttl_s=60)


async def test_a_write_refused_before_changing_anything_fails_alone_and_nothing_runs_twice(
    running: Core, savepoints: list[int]
) -> None:
    pair = await paired(running)
    runs: list[str] = []
    calls: list[Call] = [
        (counted_then_refused, {"runs": runs, "name": f"w{n}", "refuse": n in (3, 6, 7)}) for n in range(12)
    ]

    outcomes = await run_all(running, pair.computer, calls)

    assert [isinstance(o, RelayError) for o in outcomes] == [n in (3, 6, 7) for n in range(12)]
    assert sorted(runs) == sorted(f"w{n}" for n in range(12))  # each ran once
    assert savepoints == []  # no transaction was written again
    assert running.group_rewrites.count == 0
    queued = await running.run(read_queue, pair.computer, after=0)
    written = sorted(item.blob for item in queued.items if item.sender == "test")
    assert len(written) == 9


async def test_a_write_that_fails_after_changing_rows_leaves_the_others_charged_once(
    send_limited: Core, savepoints: list[int]
) -> None:
    """The sends before the failed write run twice, their limits answered from their first run: each
    of the 12 is charged once, and each is queued once."""
    core = send_limited
    pair = await paired(core)
    assert pair.computer.device_id is not None
    token = await sender(core, pair)
    calls: list[Call] = [
        (send_notification, {"fields": {"message": f"build {n} done"}, "ip": "10.9.9.9"}) for n in range(12)
    ]
    calls.insert(8, (queue_then_fail, {"recipient": pair.computer.device_id}))

    outcomes = await run_all(core, token, calls)

    assert isinstance(outcomes.pop(8), RelayError)
    assert all(isinstance(o, SendOut) for o in outcomes), outcomes
    assert savepoints != []  # its transaction was written again
    assert core.group_rewrites.count == 1
    burst = LimitCheck("token_burst", str(token.token_id), SEND_BURST)
    assert core.limiter.peek([burst], core.clock.now()).binding.remaining == SEND_BURST - 12
    queued = await core.run(read_queue, pair.computer, after=0)
    notifications = sorted(item.blob for item in queued.items if item.type == "notification")
    assert len(notifications) == 12 and len(set(notifications)) == 12
    assert [item for item in queued.items if item.sender == "test"] == []  # the failed one's rows undone


def test_a_replay_answers_the_recorded_calls_and_sends_the_rest_to_the_limiter() -> None:
    limiter = MemoryRateLimiter()
    checks = [LimitCheck("token_burst", "tok", 5)]
    recording = RecordingLimiter(limiter)
    first = recording.acquire(checks, 1000.0)
    assert recording.peek(checks, 1000.0).binding.remaining == 4

    replay = ReplayingLimiter(limiter, recorded=recording.calls)
    assert replay.acquire(checks, 1001.0) == first  # answered from the record: not charged again
    assert limiter.peek(checks, 1001.0).binding.remaining == 4
    assert replay.acquire(checks, 1001.0).binding.remaining == 3  # off the record (a peek was next)
    assert replay.peek(checks, 1001.0).binding.remaining == 3  # and every call after it


def test_a_failed_statement_leaves_a_postgresql_transaction_failed_and_sqlite_not(core: Core) -> None:
    """What a group also checks before letting a write that changed nothing fail alone."""
    with session_scope(core.engine) as session:
        assert not in_failed_transaction(session)
        with pytest.raises(DBAPIError):
            session.connection().execute(text("SELECT * FROM no_such_table"))
        assert in_failed_transaction(session) == (core.engine.dialect.name == "postgresql")
        session.rollback()


def change_a_device_by_the_orm(tx: Tx, _principal: Principal, *, device_id: str) -> None:
    device = tx.session.get(Device, device_id)
    assert device is not None
    device.name = "renamed in a group"
    tx.session.flush()


def test_a_group_write_that_changes_a_device_fails_and_changes_nothing(
    client: TestClient, core: Core
) -> None:
    """The group writer's rule, checked: a group read its devices once, locking them, so none of
    its writes may change one."""
    phone = register_phone(client)
    writes = [(change_a_device_by_the_orm, {"device_id": phone.device_id})] * 2  # a group of one runs alone
    for write in in_one_group(core, Principal.system(), writes):
        assert isinstance(write.error, GroupRuleBrokenError), write.error
    with Session(core.engine) as session:
        device = session.get(Device, phone.device_id)
        assert device is not None and device.name != "renamed in a group"
