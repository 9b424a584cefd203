"""Group commit: relays and sends submitted together share one transaction, each caller
still gets exactly its own result or error, a bad one never fails or duplicates the others, every
write is written once and a send's rate limits are charged once (a write run again after another
failed: tests/core/test_group_rewrite.py), and writes still queued when the Core stops fail instead
of hanging."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, event, text
from sqlalchemy.exc import IntegrityError, OperationalError

from core.adapters.limits.base import LimitCheck
from core.bootstrap import build_core
from core.clock import ManualClock
from core.errors import RelayError
from core.principal import Principal
from core.queue import enqueue
from core.runtime.core import Core
from core.runtime.group_commit import CoreStoppedError, GroupCommitter, Write
from core.runtime.marks import group_commit
from core.runtime.tx import Tx
from core.services.auth import Accept, authenticate
from core.services.relay import EnvelopeAccepted, EnvelopeCreate, read_queue, relay_envelope
from core.services.send import SendOut, send_notification
from core.services.tokens import TokenCreate, create_sender_token
from core.settings import Settings
from core.store.tables import QueuedEnvelope
from tests.core.pairs import Pair, paired

pytestmark = pytest.mark.anyio


def count_write_transactions(core: Core) -> list[int]:
    """A one-item list counting write transactions begun on the engine from now on."""
    count = [0]

    @event.listens_for(core.engine, "begin")
    def begun(connection: Any) -> None:
        if not connection.get_execution_options().get("relaybox_read_only"):
            count[0] += 1

    return count


Call = tuple[Any, dict[str, Any]]  # an operation and its keyword arguments


async def run_all(core: Core, principal: Principal, calls: list[Call]) -> list[Any]:
    """Submit every call at once; each one's result, or the error it raised."""
    outcomes: list[Any] = [None] * len(calls)

    async def one(index: int) -> None:
        op, kwargs = calls[index]
        try:
            outcomes[index] = await core.run(op, principal, **kwargs)
        except Exception as error:
            outcomes[index] = error

    async with anyio.create_task_group() as group:
        for index in range(len(calls)):
            group.start_soon(one, index)
    return outcomes


def relays(bodies: list[EnvelopeCreate]) -> list[Call]:
    return [(relay_envelope, {"body": body}) for body in bodies]


async def test_relays_submitted_together_share_transactions_and_each_gets_its_seq(running: Core) -> None:
    pair = await paired(running)
    transactions = count_write_transactions(running)
    outcomes = await run_all(running, pair.phone, relays([pair.envelope(b"text %d" % i) for i in range(30)]))

    assert all(isinstance(outcome, EnvelopeAccepted) for outcome in outcomes)
    seqs = [outcome.seq for outcome in outcomes]
    assert len(set(seqs)) == 30
    queued = await running.run(read_queue, pair.computer, after=0)
    assert [item.seq for item in queued.items] == sorted(seqs)  # each once, in seq order
    assert transactions[0] <= 3  # 30 writes: the first alone, the rest together (MAX_GROUP_POSTGRES)


async def test_a_bad_relay_in_a_group_fails_alone_and_the_others_are_written_once(running: Core) -> None:
    pair = await paired(running)
    bodies = [pair.envelope(b"good %d" % i) for i in range(10)]
    bodies[4] = EnvelopeCreate(to="dev_nobody", type="clipboard", blob=bodies[4].blob)
    bodies[7] = EnvelopeCreate(to=bodies[7].to, type="clipboard", blob="bm90IGFuIGVudmVsb3Bl")

    outcomes = await run_all(running, pair.phone, relays(bodies))

    assert isinstance(outcomes[4], RelayError) and outcomes[4].code == "not_found"
    assert isinstance(outcomes[7], RelayError) and outcomes[7].code == "invalid_blob"
    accepted = [o for i, o in enumerate(outcomes) if i not in (4, 7)]
    assert all(isinstance(o, EnvelopeAccepted) for o in accepted)
    queued = await running.run(read_queue, pair.computer, after=0)
    assert sorted(item.seq for item in queued.items) == sorted(o.seq for o in accepted)


# -- sends: charged once, a failure rolled back alone, nothing run twice -----------------------


@pytest.fixture
async def send_limited(settings: Settings, clock: ManualClock) -> AsyncIterator[Core]:
    """A running Core whose sender tokens may send 20 times a minute."""
    core = build_core(settings.model_copy(update={"limit_token_burst": SEND_BURST}), clock=clock)
    async with core:
        yield core
    core.engine.dispose()


SEND_BURST = 20


async def sender(core: Core, pair: Pair) -> Principal:
    created = await core.run(create_sender_token, pair.phone, body=TokenCreate(label="group"))
    return await core.run(
        authenticate, Principal.anonymous("10.9.9.9"), token=created.token, accept=Accept.SENDER_TOKEN
    )


async def test_sends_in_a_group_are_charged_once_each_when_some_are_refused(send_limited: Core) -> None:
    core = send_limited
    pair = await paired(core)
    token = await sender(core, pair)
    transactions = count_write_transactions(core)
    sends = [
        (send_notification, {"fields": {"message": f"build {n} done"}, "ip": "10.9.9.9"}) for n in range(30)
    ]

    outcomes = await run_all(core, token, sends)

    sent = [o for o in outcomes if isinstance(o, SendOut)]
    refused = [o for o in outcomes if isinstance(o, RelayError) and o.code == "rate_limit_exceeded"]
    assert (len(sent), len(refused)) == (SEND_BURST, 30 - SEND_BURST)
    burst = LimitCheck("token_burst", str(token.token_id), SEND_BURST)
    assert core.limiter.peek([burst], core.clock.now()).binding.remaining == 0
    queued = await core.run(read_queue, pair.computer, after=0)
    notifications = [item for item in queued.items if item.type == "notification"]
    assert len(notifications) == SEND_BURST  # each accepted send queued once, no refused one
    assert transactions[0] <= 3  # the first alone, the rest together


@group_commit
def queue_then_fail(tx: Tx, principal: Principal, *, recipient: str) -> None:
    """Writes queue rows through the ORM and the prepared insert, adds one more, then refuses."""
    row = QueuedEnvelope(
        recipient_device_id=recipient, sender="test", type="ping", blob=b"x", created_at=1, expires_at=2
    )
    tx.session.add(row)
    tx.session.flush()
    enqueue(tx, recipient, sender="test", type="ping", blob=b"y", ttl_s=60)
    tx.session.add(row.model_copy(update={"seq": None, "blob": b"not flushed yet"}))
    raise RelayError("not_found")


async def test_a_write_that_raises_in_a_group_is_rolled_back_alone(running: Core) -> None:
    pair = await paired(running)
    assert pair.computer.device_id is not None
    calls: list[Call] = [(relay_envelope, {"body": pair.envelope(b"good %d" % n)}) for n in range(12)]
    for n in (3, 4, 8, 11):
        calls.insert(n, (queue_then_fail, {"recipient": pair.computer.device_id}))

    results = await run_all(running, pair.phone, calls)

    accepted = [r for r in results if isinstance(r, EnvelopeAccepted)]
    failed = [r for r in results if isinstance(r, RelayError)]
    assert (len(accepted), len(failed)) == (12, 4)
    queued = await running.run(read_queue, pair.computer, after=0)
    assert sorted(item.seq for item in queued.items if item.sender != "server") == sorted(
        a.seq for a in accepted
    )


@group_commit
def queue_then_break_a_constraint(tx: Tx, principal: Principal, *, recipient: str) -> None:
    """Queues a row, then runs a statement the database refuses (a device without its columns)."""
    enqueue(tx, recipient, sender="test", type="ping", blob=b"x", ttl_s=60)
    tx.connection().execute(text("INSERT INTO devices (device_id) VALUES ('dev_without_columns')"))


async def test_a_statement_the_database_refuses_in_a_group_fails_alone(running: Core) -> None:
    """On PostgreSQL the refused statement leaves the transaction failed until it is rolled back
    to the write's savepoint: the group goes on from there."""
    pair = await paired(running)
    assert pair.computer.device_id is not None
    calls: list[Call] = [(relay_envelope, {"body": pair.envelope(b"good %d" % n)}) for n in range(10)]
    for n in (2, 7):
        calls.insert(n, (queue_then_break_a_constraint, {"recipient": pair.computer.device_id}))

    results = await run_all(running, pair.phone, calls)

    assert [type(r) for r in results].count(IntegrityError) == 2
    accepted = [r for r in results if isinstance(r, EnvelopeAccepted)]
    assert len(accepted) == 10
    queued = await running.run(read_queue, pair.computer, after=0)
    assert sorted(item.seq for item in queued.items) == sorted(a.seq for a in accepted)


@group_commit
def write_one_seq_twice(tx: Tx, principal: Principal, *, device_id: str) -> None:
    """A write whose ORM flush fails (the primary key is taken): a queue entry written twice with
    one seq (a device would do as well, but no write of a group may change a device)."""
    for _ in range(2):
        tx.session.add(
            QueuedEnvelope(
                seq=2**40,
                recipient_device_id=device_id,
                sender="t",
                type="ping",
                blob=b"x",
                created_at=1,
                expires_at=2,
            )
        )
        tx.session.flush()


async def test_a_failed_orm_flush_fails_its_whole_group_and_nothing_of_it_is_written(running: Core) -> None:
    pair = await paired(running)
    assert pair.phone.device_id is not None and pair.computer.device_id is not None
    calls: list[Call] = [(relay_envelope, {"body": pair.envelope(b"relay %d" % n)}) for n in range(12)]
    calls.insert(6, (write_one_seq_twice, {"device_id": pair.phone.device_id}))

    results = await run_all(running, pair.phone, calls)

    assert isinstance(results[6], IntegrityError)
    queued = await running.run(read_queue, pair.computer, after=0)
    written = {item.seq for item in queued.items if item.sender == pair.phone.device_id}
    accepted = {r.seq for r in results if isinstance(r, EnvelopeAccepted)}
    assert written == accepted  # what was answered written was written, nothing else
    if running.engine.dialect.name == "sqlite":  # the relays grouped with the flush failed with it
        failed_with_it = [r for r in results if r is results[6]]
        assert len(failed_with_it) + len(accepted) == len(calls)


@group_commit
def counted_write(tx: Tx, principal: Principal, *, runs: list[int], recipient: str) -> None:
    """Counts its runs outside the transaction (as charging a rate limit does), then queues a row."""
    runs.append(1)
    enqueue(tx, recipient, sender="test", type="ping", blob=b"z", ttl_s=60)


# PostgreSQL: a queue entry that makes its transaction's COMMIT fail, as a disk error would (SQLSTATE
# class 58: OperationalError), raised by the database itself at the commit (a deferred trigger).
_FAILING_COMMIT = [
    """CREATE FUNCTION relaybox_test_failing_commit() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'disk I/O error' USING ERRCODE = '58030'; END $$""",
    """CREATE CONSTRAINT TRIGGER relaybox_test_failing_commit AFTER INSERT ON queued_envelopes
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION relaybox_test_failing_commit()""",
]
_COMMIT_FAILS_NO_MORE = [
    "DROP TRIGGER relaybox_test_failing_commit ON queued_envelopes",
    "DROP FUNCTION relaybox_test_failing_commit()",
]


@contextmanager
def failing_commits(engine: Engine) -> Iterator[None]:
    """Every commit fails: on PostgreSQL in the database (``_FAILING_COMMIT``), on SQLite as the
    engine commits (there, SQLAlchemy's commit is the driver's)."""

    def refuse(_connection: Any) -> None:
        raise OperationalError("COMMIT", {}, Exception("disk I/O error"))

    postgres = engine.dialect.name == "postgresql"
    with engine.begin() as connection:
        for statement in _FAILING_COMMIT if postgres else ():
            connection.exec_driver_sql(statement)
    if not postgres:
        event.listen(engine, "commit", refuse)
    try:
        yield
    finally:
        if not postgres:
            event.remove(engine, "commit", refuse)
        with engine.begin() as connection:
            for statement in _COMMIT_FAILS_NO_MORE if postgres else ():
                connection.exec_driver_sql(statement)


async def test_when_a_groups_commit_fails_each_write_fails_and_none_runs_again(running: Core) -> None:
    pair = await paired(running)
    assert pair.computer.device_id is not None
    runs: list[int] = []
    with failing_commits(running.engine):
        outcomes = await run_all(
            running, pair.phone, [(counted_write, {"runs": runs, "recipient": pair.computer.device_id})] * 10
        )
    assert all(isinstance(o, RelayError) and o.code == "unavailable" for o in outcomes), outcomes
    assert len(runs) == 10  # once each, grouped or alone
    queued = await running.run(read_queue, pair.computer, after=0)
    assert [item for item in queued.items if item.sender == "test"] == []


# -- the committer on its own: how writes form groups ------------------------------------------


def write(name: str) -> Write:
    return Write(op=lambda: None, principal=Principal.system(), args=(name,), kw={})


class HeldGroups:
    """A group writer that records each group and holds the first one until released."""

    def __init__(self, *, fail_first: bool = False) -> None:
        self.groups: list[list[str]] = []
        self.first_started = threading.Event()
        self.release = threading.Event()
        self.fail_first = fail_first

    def __call__(self, writes: list[Write]) -> None:
        self.groups.append([w.args[0] for w in writes])
        if len(self.groups) == 1:
            self.first_started.set()
            self.release.wait(10)
            if self.fail_first:
                raise RuntimeError("the database went away")
        for w in writes:
            w.succeeded(f"wrote {w.args[0]}", [])


async def wait_for(condition: threading.Event) -> None:
    assert await anyio.to_thread.run_sync(condition.wait, 10)


async def test_writes_queued_while_a_group_is_written_go_together_into_the_next() -> None:
    writer = HeldGroups()
    committer = GroupCommitter(writer)
    results: dict[str, Any] = {}

    async def submit(name: str) -> None:
        results[name] = (await committer.submit(write(name)))[0]

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(committer.write_forever)
            async with anyio.create_task_group() as submits:
                submits.start_soon(submit, "a")
                await wait_for(writer.first_started)
                for name in ("b", "c", "d"):
                    submits.start_soon(submit, name)
                await anyio.wait_all_tasks_blocked()  # b, c and d are queued
                writer.release.set()
            group.cancel_scope.cancel()

    assert writer.groups == [["a"], ["b", "c", "d"]]
    assert results == {name: f"wrote {name}" for name in "abcd"}


async def test_a_group_writer_that_raises_fails_that_group_only() -> None:
    writer = HeldGroups(fail_first=True)
    writer.release.set()
    committer = GroupCommitter(writer)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(committer.write_forever)
            with pytest.raises(RuntimeError, match="went away"):
                await committer.submit(write("a"))
            assert (await committer.submit(write("b")))[0] == "wrote b"
            group.cancel_scope.cancel()


async def test_writes_still_queued_when_the_writer_stops_fail_instead_of_hanging() -> None:
    writer = HeldGroups()
    committer = GroupCommitter(writer)
    outcomes: dict[str, Any] = {}

    async def submit(name: str) -> None:
        try:
            outcomes[name] = (await committer.submit(write(name)))[0]
        except CoreStoppedError as error:
            outcomes[name] = error

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            async with anyio.create_task_group() as writing:
                writing.start_soon(committer.write_forever)
                group.start_soon(submit, "a")
                await wait_for(writer.first_started)
                group.start_soon(submit, "b")
                await anyio.wait_all_tasks_blocked()  # b is queued
                writing.cancel_scope.cancel()  # the Core stops while "a" is in the database
                writer.release.set()

    assert outcomes["a"] == "wrote a"  # it was being written: the write finished and was reported
    assert isinstance(outcomes["b"], CoreStoppedError)
    assert not committer.running
