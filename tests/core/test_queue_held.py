"""On PostgreSQL a group's queue writes take their seqs from a reservation made once the group's
devices are locked, and go to the database as one insert held back to the commit
(``core.queue._held``): each entry still names its recipient's previous seq, seqs still
follow commit order for each device, a statement in between sends the held entries first and ends
the reservation, and a write that fails after holding its entries is undone alone."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from core.bootstrap import build_core
from core.clock import ManualClock
from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.group_commit import Write
from core.runtime.group_transaction import write_group
from core.runtime.tally import Tally
from core.runtime.tx import Tx
from core.services.relay import relay_envelope
from core.services.send import SendOut, send_notification
from core.settings import Settings, explicit_settings
from core.store.change_marks import counting_cursor
from tests.core.pairs import Pair, paired
from tests.core.test_group_commit import sender
from tests.core.test_queue_batched import put_all
from tests.helpers import queue_entries

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("database_url", ["postgres"], indirect=True)]


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    """Sends' limits out of the way: the races, not the budgets, are under test."""
    high = 1_000_000
    limits = (
        "limit_token_burst",
        "limit_token_monthly",
        "limit_receiver_daily",
        "limit_ip_minute",
        "limit_ip_hour",
    )
    return explicit_settings(
        data_dir=tmp_path / "data", database_url=database_url, **dict.fromkeys(limits, high)
    )


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """Every statement a PostgreSQL connection sends from now on, in order: its SQL and its
    parameters (recorded by psycopg's own cursor, under the counting cursor that sends a held
    write before the statement it was asked to run)."""
    seen: list[tuple[str, Any]] = []
    psycopg_cursor: Any = counting_cursor().__mro__[1]
    execute = psycopg_cursor.execute

    def recording(self: Any, query: Any, params: Any = None, **options: Any) -> Any:
        seen.append((str(query), params))
        return execute(self, query, params, **options)

    monkeypatch.setattr(psycopg_cursor, "execute", recording)
    return seen


def kinds(seen: list[tuple[str, Any]]) -> list[str]:
    """What each statement is, as far as these tests tell them apart."""
    named = []
    for sql, _ in seen:
        if "FOR UPDATE" in sql:
            named.append("lock")
        elif "nextval" in sql:
            named.append("reserve")
        elif sql.startswith("INSERT INTO queued_envelopes") and "RETURNING" not in sql:
            named.append("insert held")
        elif "INSERT INTO queued_envelopes" in sql:
            named.append("queue write")
        elif "relaybox_queue_entries_over_cap" in sql:
            named.append("trim")
        elif sql == "COMMIT":
            named.append("commit")
        else:
            named.append(sql)
    return named


def in_one_group(core: Core, principal: Principal, writes: list[tuple[Any, dict[str, Any]]]) -> list[Write]:
    """The writes in one group, as the group writer writes them."""
    group = [Write(op=op, principal=principal, args=(), kw=kw) for op, kw in writes]
    write_group(core.engine, None, core._tx, Tally(), group)
    return group


def ids(pair: Pair) -> tuple[str, str]:
    """The phone's device id and the computer's."""
    assert pair.phone.device_id is not None and pair.computer.device_id is not None
    return pair.phone.device_id, pair.computer.device_id


def both(pair: Pair, n: int) -> dict[str, bytes]:
    phone, computer = ids(pair)
    return {phone: b"phone %d" % n, computer: b"computer %d" % n}


def between_two_puts(core: Core, pair: Pair, middle: Any) -> list[Write]:
    """One group of three writes for the pair's account: ``put_all`` of ``both(pair, 0)``,
    ``middle`` given ``both(pair, 1)``, ``put_all`` of ``both(pair, 2)``."""
    writes = [(put_all, both(pair, 0)), (middle, both(pair, 1)), (put_all, both(pair, 2))]
    return in_one_group(core, pair.phone, [(op, {"blobs": blobs}) for op, blobs in writes])


async def test_a_groups_writes_take_reserved_seqs_and_go_in_one_insert_with_the_commit(
    running: Core, statements: list[tuple[str, Any]]
) -> None:
    pair = await paired(running)
    phone, computer = ids(pair)
    [earlier], _ = running.run_sync(put_all, Principal.system(), blobs={phone: b"earlier"})
    del statements[:]

    group = in_one_group(running, pair.phone, [(put_all, {"blobs": both(pair, n)}) for n in range(5)])

    assert kinds(statements) == ["lock", "reserve", "insert held", "trim", "commit"]
    previous = {phone: earlier, computer: 0}
    for n, write in enumerate(group):
        assert write.error is None
        seqs, wake_ups = write.result
        for device_id, seq, (_, message) in zip(both(pair, n), seqs, wake_ups, strict=True):
            assert seq > previous[device_id]
            assert f'"seq":{seq},"prev":{previous[device_id]}' in message
            previous[device_id] = seq
    for index, device_id in enumerate((phone, computer)):
        stored = [(seq, blob) for seq, blob, _ in queue_entries(running.engine, device_id)]
        expected = [(write.result[0][index], both(pair, n)[device_id]) for n, write in enumerate(group)]
        assert stored[-5:] == expected


def count_then_put(tx: Tx, principal: Principal, *, blobs: dict[str, bytes]) -> tuple[int, Any]:
    """How many entries the first recipient's queue holds (a statement of its own), then ``put_all``."""
    device_id = next(iter(blobs))
    query = text("SELECT count(*) FROM queued_envelopes WHERE recipient_device_id = :d")
    count = int(tx.connection().execute(query, {"d": device_id}).scalar_one())
    return count, put_all(tx, principal, blobs=blobs)


async def test_a_statement_sends_the_held_entries_first_and_the_writes_after_it_go_on_their_own(
    running: Core, statements: list[tuple[str, Any]]
) -> None:
    pair = await paired(running)
    del statements[:]

    first, counting, last = between_two_puts(running, pair, count_then_put)

    counted = kinds(statements)
    assert counted[:3] == ["lock", "reserve", "insert held"] and counted[3].startswith("SELECT count")
    assert counted[4:] == ["queue write", "queue write", "trim", "commit"]
    count, (counting_seqs, counting_wake_ups) = counting.result
    assert count == 1  # the first write's entry, sent before the count
    assert f'"prev":{first.result[0][0]}' in counting_wake_ups[0][1]
    assert f'"prev":{counting_seqs[0]}' in last.result[1][0][1]
    phone, _ = ids(pair)
    assert [seq for seq, _, _ in queue_entries(running.engine, phone)] == [
        first.result[0][0],
        counting_seqs[0],
        last.result[0][0],
    ]


def put_then_fail(tx: Tx, principal: Principal, *, blobs: dict[str, bytes]) -> None:
    put_all(tx, principal, blobs=blobs)
    raise RelayError("not_found")


async def test_a_write_that_fails_after_holding_its_entries_is_undone_alone(running: Core) -> None:
    pair = await paired(running)

    first, failing, last = between_two_puts(running, pair, put_then_fail)

    assert isinstance(failing.error, RelayError) and first.error is None and last.error is None
    for index, device_id in enumerate(both(pair, 0)):
        stored = [blob for _, blob, _ in queue_entries(running.engine, device_id)]
        assert stored == [both(pair, 0)[device_id], both(pair, 2)[device_id]]
        assert last.result[0][index] > first.result[0][index]


async def test_the_reserved_seqs_come_from_the_seq_columns_own_sequence(running: Core) -> None:
    with running.engine.connect() as connection:
        name = connection.execute(text("SELECT pg_get_serial_sequence('queued_envelopes', 'seq')")).scalar()
    assert name == "public.queued_envelopes_seq_seq"


async def test_a_group_of_relays_reserves_nothing(running: Core, statements: list[tuple[str, Any]]) -> None:
    """A relay reads its pair before its queue write: it would end a reservation at once, so its
    one-device write goes as a statement of its own."""
    pair = await paired(running)
    del statements[:]

    group = in_one_group(
        running, pair.phone, [(relay_envelope, {"body": pair.envelope(b"text %d" % n)}) for n in range(3)]
    )

    assert all(write.error is None for write in group)
    assert kinds(statements).count("queue write") == 3
    assert "reserve" not in kinds(statements) and "insert held" not in kinds(statements)


async def test_sends_racing_on_two_replicas_reach_each_device_in_commit_order(
    running: Core, settings: Settings, clock: ManualClock, statements: list[tuple[str, Any]]
) -> None:
    """Both replicas' groups reserve seqs and hold their entries: a reader that polls the phone's
    queue (as a stream reads "after its last seq") never sees an entry appear below one it has
    seen already, and every send's entries are there at the end."""
    pair = await paired(running)
    token = await sender(running, pair)
    phone, _ = ids(pair)
    seen: set[int] = set()
    late: list[tuple[int, int]] = []  # (an entry that appeared, the newest seen before it)
    done = threading.Event()

    def watch() -> None:
        query = text("SELECT seq FROM queued_envelopes WHERE recipient_device_id = :d")
        newest = 0
        while not done.is_set():
            with running.engine.connect() as connection:
                now = {seq for (seq,) in connection.execute(query, {"d": phone})}
            late.extend((seq, newest) for seq in now - seen if seq < newest)
            seen.update(now)
            newest = max(now, default=newest)

    async with build_core(settings, clock=clock) as other:
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            outcomes = await asyncio.gather(
                *(
                    core.run(send_notification, token, fields={"message": f"n{n}"}, ip="10.9.9.9")
                    for n in range(80)
                    for core in (running, other)
                )
            )
        finally:
            done.set()
            watcher.join(10)
        other.engine.dispose()
    assert all(isinstance(outcome, SendOut) for outcome in outcomes)
    assert late == []
    assert kinds(statements).count("insert held") >= 2  # groups held their entries
    stored = [seq for seq, _, _ in queue_entries(running.engine, phone)]
    assert len(stored) == len(set(stored)) == 160 and seen <= set(stored)
