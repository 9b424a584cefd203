"""The queue's contract (``core.queue.Queue``), against a model, for every implementation: in
memory, SQLite and PostgreSQL through the face alone (``test_every_queue_keeps_the_contract``), and
each database's queue as its device reads it through the server (``read_queue``): seeded random
writes to some of an account's devices (unpinned and pinned, short and long lives, packed or a row
a device on SQLite), groups in which one write fails and is undone alone, clock jumps with and
without a sweep, a device's removal. Only what a device reads is compared, never the table's rows:
the storage layout may change under this test, the queues may not."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from starlette.testclient import TestClient

from core.adapters.push.base import PushMessage
from core.clock import ManualClock
from core.domain.canonical import canonical_json
from core.errors import RelayError
from core.principal import Principal
from core.queue import LIVE_GRACE_S, QUEUE_CAP, QUEUE_LIFETIME_S, MemoryQueue, enqueue_all, queue
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.services.maintenance import sweep_expired
from core.services.relay import read_queue
from tests.core.test_queue_held import in_one_group
from tests.helpers import FakeDevice, pair_computer, register_phone

PAGE = 7  # small, so that reading a queue takes many pages
Read = list[tuple[int, str]]  # what a device reads of its queue: (seq, blob) of each entry, in order


def put(
    tx: Tx,
    _principal: Principal,
    *,
    blobs: dict[str, bytes],
    ttl_s: int = 3600,
    tag: str | None = None,
    account_id: str | None = None,
) -> list[int]:
    return enqueue_all(tx, blobs, sender="server", type="push", ttl_s=ttl_s, tag=tag, account_id=account_id)


def put_then_fail(tx: Tx, principal: Principal, *, blobs: dict[str, bytes], account_id: str | None) -> None:
    put(tx, principal, blobs=blobs, account_id=account_id)
    raise RelayError("not_found")


@dataclass
class Entry:
    seq: int
    blob: str
    pinned: bool
    expires_at: int
    tag: str | None = None


@dataclass
class Model:
    """What each device's queue holds: entries expire, are swept, and a write keeps the newest
    ``QUEUE_CAP`` unpinned ones of each queue it takes over the cap (expired or not: until the
    sweep they count)."""

    queues: dict[str, list[Entry]] = field(default_factory=dict)
    last_seq: dict[str, int] = field(default_factory=dict)
    trimmed: int = 0  # entries the cap pushed out, over the whole run

    def write(
        self,
        seqs: dict[str, int],
        blobs: dict[str, bytes],
        *,
        now: int,
        ttl_s: int,
        pinned: bool,
        tag: str | None = None,
    ) -> None:
        expires_at = now + (min(ttl_s, QUEUE_LIFETIME_S) if ttl_s > 0 else LIVE_GRACE_S)
        for device, seq in seqs.items():
            assert seq > self.last_seq.get(device, 0), "each device's seqs strictly increase"
            self.last_seq[device] = seq
            queue = self.queues.setdefault(device, [])
            queue.append(Entry(seq, blobs[device].decode(), pinned, expires_at, tag))
            unpinned = [entry for entry in queue if not entry.pinned]
            for entry in unpinned[: max(0, len(unpinned) - QUEUE_CAP)]:
                queue.remove(entry)
                self.trimmed += 1

    def sweep(self, now: int) -> int:
        swept = 0
        for device, entries in self.queues.items():
            self.queues[device] = [entry for entry in entries if entry.expires_at > now]
            swept += len(entries) - len(self.queues[device])
        return swept

    def readable(self, device: str, now: int, *, after: int = 0) -> Read:
        queue = self.queues.get(device, [])
        return [(entry.seq, entry.blob) for entry in queue if entry.seq > after and entry.expires_at > now]


def principal_of(device: FakeDevice) -> Principal:
    return Principal.device(account_id=device.account_id, device_id=device.device_id, surface_kind="cli")


def read(core: Core, device: FakeDevice, *, after: int = 0, limit: int = 1000) -> Read:
    """The device's queue after ``after``, as it reads it: page after page of ``limit`` entries,
    each page going on from the last seq of the one before."""
    entries: Read = []
    while True:
        page = core.run_sync(read_queue, principal_of(device), after=after, limit=limit).items
        assert len(page) <= limit
        entries += [(item.seq, item.blob) for item in page]
        if len(page) < limit:
            return entries
        after = page[-1].seq


def now_of(clock: ManualClock) -> int:
    return int(clock.now())


def check(core: Core, model: Model, devices: list[FakeDevice], clock: ManualClock) -> None:
    """Every device reads, in one read, what the model holds for it, unexpired."""
    now = now_of(clock)
    for device in devices:
        assert read(core, device) == model.readable(device.device_id, now), device.device_id


def check_paged(
    core: Core, model: Model, devices: list[FakeDevice], clock: ManualClock, rng: random.Random
) -> None:
    """``check``, read in pages of ``PAGE``, and from a seq in the middle: of an entry the device
    holds, or one before it (gone, or never the device's)."""
    now = now_of(clock)
    for device in devices:
        expected = model.readable(device.device_id, now)
        assert read(core, device, limit=PAGE) == expected, device.device_id
        after = rng.choice([seq for seq, _ in expected] or [0]) - rng.randint(0, 1)
        tail = model.readable(device.device_id, now, after=after)
        assert read(core, device, after=after, limit=PAGE) == tail, (device.device_id, after)


def blobs_for(devices: list[FakeDevice], label: str) -> dict[str, bytes]:
    """A blob of its own for each device, so that an entry read by the wrong device shows."""
    return {device.device_id: f"{label}:{device.device_id}".encode() for device in devices}


def write_once(
    core: Core,
    model: Model,
    clock: ManualClock,
    blobs: dict[str, bytes],
    *,
    ttl_s: int = 3600,
    tag: str | None = None,
    account_id: str | None = None,
) -> None:
    """``put`` as a write of its own, and into the model."""
    seqs = core.run_sync(put, Principal.system(), blobs=blobs, ttl_s=ttl_s, tag=tag, account_id=account_id)
    written = dict(zip(blobs, seqs, strict=True))
    model.write(written, blobs, now=now_of(clock), ttl_s=ttl_s, pinned=tag is not None)


def write_group_with_failure(
    core: Core,
    model: Model,
    clock: ManualClock,
    recipients: list[FakeDevice],
    label: str,
    account: str | None,
) -> None:
    """Three writes in one group, the middle one failing: it alone is undone."""
    blobs = [blobs_for(recipients, f"{label}.{n}") for n in ("first", "failing", "last")]
    ops = [put, put_then_fail, put]
    writes = [(op, {"blobs": b, "account_id": account}) for op, b in zip(ops, blobs, strict=True)]
    first, failing, last = in_one_group(core, Principal.system(), writes)
    assert first.error is None and isinstance(failing.error, RelayError) and last.error is None
    for write, written in ((first, blobs[0]), (last, blobs[2])):
        seqs = dict(zip(written, write.result, strict=True))
        model.write(seqs, written, now=now_of(clock), ttl_s=3600, pinned=False)


def remove(
    client: TestClient, core: Core, model: Model, clock: ManualClock, phone: FakeDevice, removed: FakeDevice
) -> None:
    """The device removed: its queue goes with it, and the phone is told by its queue (it has no
    push service), one entry after what it held."""
    assert client.delete("/v1/devices/me", headers=removed.auth).status_code == 204
    with pytest.raises(RelayError) as refused:
        core.run_sync(read_queue, principal_of(removed), after=0)
    assert refused.value.code == "invalid_token"
    del model.queues[removed.device_id]
    message = PushMessage("disconnect", {"deviceId": removed.device_id})
    told = {phone.device_id: canonical_json(message.data())}
    [(seq, blob)] = read(core, phone, after=model.last_seq[phone.device_id])
    assert blob.encode() == told[phone.device_id]
    model.write({phone.device_id: seq}, told, now=now_of(clock), ttl_s=message.ttl_s, pinned=False)


def test_each_device_reads_its_own_queue_through_writes_trims_expiry_sweeps_and_a_removal(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    phone = register_phone(client)
    computers = [pair_computer(client, phone, name=f"laptop {n}") for n in range(3)]
    devices = [phone, *computers]
    system, rng, model = Principal.system(), random.Random(20_240_611), Model()
    check(core, model, devices, clock)  # pairing queues nothing
    for step in range(3 * QUEUE_CAP):
        recipients = rng.sample(devices, rng.randint(1, len(devices)))
        account = phone.account_id if rng.random() < 0.7 else None  # SQLite: one row, or a row each
        roll = rng.random()
        if roll < 0.72:
            pinned = rng.random() < 0.06
            ttl_s = rng.choice(
                [0, 30, 3600, 3600, 3600, 3600, 200_000]
            )  # 0: the live grace; 200,000: a day at most
            tag = f"pin {step}" if pinned else None
            write_once(
                core, model, clock, blobs_for(recipients, str(step)), ttl_s=ttl_s, tag=tag, account_id=account
            )
        elif roll < 0.85:
            write_group_with_failure(core, model, clock, recipients, str(step), account)
        elif roll < 0.97 and step != QUEUE_CAP // 4:
            clock.advance(rng.randint(1, 40))
            core.run_sync(sweep_expired, system)
            model.sweep(now_of(clock))
        else:  # time passes, no sweep yet: what expired is still stored (and counted), never read
            clock.advance(3600 if step == QUEUE_CAP // 4 else rng.randint(1, 40))
        if step == 2 * QUEUE_CAP:
            removed = computers.pop()
            devices.remove(removed)
            remove(client, core, model, clock, phone, removed)
        if step % 3 == 0:
            check(core, model, devices, clock)
        if step % 30 == 0 or step == 2 * QUEUE_CAP:
            check_paged(core, model, devices, clock, rng)
    check(core, model, devices, clock)
    check_paged(core, model, devices, clock, rng)
    assert model.trimmed > QUEUE_CAP, model.trimmed  # the cap was reached, and passed many times
    assert max(sum(not entry.pinned for entry in queue) for queue in model.queues.values()) == QUEUE_CAP


def test_a_queue_past_its_cap_keeps_its_newest_unpinned_entries_of_either_kind_and_its_pinned_ones(
    client: TestClient, core: Core, clock: ManualClock
) -> None:
    """One device written alone and together with the others in turn, past the cap twice over: its
    oldest entries, which the cap pushes out, alternate between the two kinds of write (on SQLite:
    its own row, and its entry in a send's shared row). Its pinned entries stay, the others' queues
    keep theirs."""
    phone = register_phone(client)
    computers = [pair_computer(client, phone, name=f"laptop {n}") for n in range(3)]
    alone, devices = computers[0], [phone, *computers]
    rng, model = random.Random(7), Model()
    pins = (1, 4, 150, 333)  # written alone and with the others, before and past the cap
    writes = 2 * QUEUE_CAP + 11
    for n in range(writes):
        recipients = [alone] if n % 2 else devices
        tag = f"pin {n}" if n in pins else None
        write_once(core, model, clock, blobs_for(recipients, str(n)), tag=tag, account_id=phone.account_id)
        if n >= QUEUE_CAP and n % 5 == 0:
            check(core, model, [alone], clock)
        if n % 100 == 0:
            check_paged(core, model, devices, clock, rng)
    check(core, model, devices, clock)
    check_paged(core, model, devices, clock, rng)
    kept = [blob for _, blob in read(core, alone)]
    pinned = [f"{n}:{alone.device_id}" for n in pins]
    unpinned = [f"{n}:{alone.device_id}" for n in range(writes) if n not in pins]
    assert kept == sorted(pinned + unpinned[-QUEUE_CAP:], key=lambda blob: int(blob.split(":")[0]))


FACE_DEVICES = [f"dev_{n}" for n in range(4)]


@pytest.mark.parametrize(
    ("database_url", "kind"),
    [("sqlite", "memory"), ("sqlite", "database"), ("postgres", "database")],
    indirect=["database_url"],
)
def test_every_queue_keeps_the_contract(core: Core, clock: ManualClock, kind: str) -> None:
    """Through ``Queue`` alone: appends (pinned or not, every life), takes of pinned entries,
    expiry, a device forgotten; what each device reads, in pages, against the model, and each
    append's ``prev``: at least the newest entry the device held, at most the last seq it was given
    (SQLite answers the last seq it was given, even once that entry has gone)."""
    memory = MemoryQueue()

    def on_queue(operation: str, *args: Any, **kw: Any) -> Any:
        """``Queue.<operation>(tx, *args, **kw)`` in a transaction of its own."""

        def op(tx: Tx, _principal: Principal) -> Any:
            return getattr(memory if kind == "memory" else queue(tx), operation)(tx, *args, **kw)

        return core.run_sync(op, Principal.system())

    rng, model, devices = random.Random(49), Model(), list(FACE_DEVICES)
    for step in range(3 * QUEUE_CAP):
        now, roll = now_of(clock), rng.random()
        if roll < 0.86:
            recipients = rng.sample(devices, rng.randint(1, len(devices)))
            blobs = blobs_for_ids(recipients, str(step))
            ttl_s = rng.choice([0, 30, 3600, 3600, 200_000])
            pin = f"pin {step % 5}" if rng.random() < 0.05 else None
            held = {device: model.readable(device, 0) for device in recipients}
            appended = on_queue("append", blobs, sender="server", type="push", ttl_s=ttl_s, pin=pin)
            for device, (_seq, prev) in appended.items():
                newest_held = held[device][-1][0] if held[device] else 0
                assert newest_held <= prev <= model.last_seq.get(device, 0), (device, prev)
            seqs = {device: seq for device, (seq, _prev) in appended.items()}
            model.write(seqs, blobs, now=now, ttl_s=ttl_s, pinned=pin is not None, tag=pin)
        elif roll < 0.9:
            device, tag = rng.choice(devices), f"pin {rng.randint(0, 4)}"
            taken = on_queue("take_pinned", device, tag, "push")
            expected = [entry for entry in model.queues.get(device, []) if entry.tag == tag]
            assert sorted(taken) == sorted(entry.expires_at for entry in expected)
            model.queues[device] = [entry for entry in model.queues.get(device, []) if entry.tag != tag]
        elif roll < 0.94:
            clock.advance(rng.randint(1, 40))
            expired = on_queue("expire", now_of(clock))
            assert expired == model.sweep(now_of(clock))
        elif step > QUEUE_CAP and len(devices) == len(FACE_DEVICES):
            forgotten = devices.pop()
            on_queue("forget_device", forgotten)
            del model.queues[forgotten]
        for device in devices:
            pinned = sum(entry.tag is not None for entry in model.queues.get(device, []))
            assert on_queue("pinned", device) == pinned
            if step % 7 == 0:
                after = rng.choice([0, 0, model.last_seq.get(device, 0) - rng.randint(0, 30)])
                expected_read = model.readable(device, now_of(clock), after=after)
                read_back = page_through(on_queue, device, after, now_of(clock))
                assert read_back == expected_read, device
    assert model.trimmed > 0
    assert on_queue("read", FACE_DEVICES[-1], after=0, limit=10, now=now_of(clock)) == []


def page_through(on_queue: Callable[..., Any], device: str, after: int, now: int) -> Read:
    """What the device reads after ``after``, a page of ``PAGE`` entries at a time."""
    entries: Read = []
    while True:
        page = on_queue("read", device, after=after, limit=PAGE, now=now)
        entries += [(entry.seq, entry.blob.decode()) for entry in page]
        if len(page) < PAGE:
            return entries
        after = page[-1].seq


def blobs_for_ids(devices: list[str], label: str) -> dict[str, bytes]:
    return {device: f"{label}:{device}".encode() for device in devices}
