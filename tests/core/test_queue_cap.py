"""``delivery.enqueue`` on each backend (PostgreSQL queues in one statement, SQLite in three): each
entry names the recipient's previous seq, the newest 200 unpinned entries are kept, and a pinned
entry is kept beside them whenever it arrives."""

from __future__ import annotations

from starlette.testclient import TestClient

from core.principal import Principal
from core.queue import QUEUE_CAP, enqueue
from core.runtime.core import Core
from core.runtime.events import EnvelopesQueued, device_topic
from core.runtime.tx import Tx
from tests.helpers import queue_entries, register_phone


def put(tx: Tx, _principal: Principal, *, device_id: str, tag: str | None) -> tuple[int, str]:
    seq = enqueue(tx, device_id, sender="server", type="push", blob=b"{}", ttl_s=3600, tag=tag)
    event = tx.events[-1]
    assert isinstance(event, EnvelopesQueued)
    [(topic, message)] = event.wake_ups()
    assert topic == device_topic(device_id)
    return seq, message


def stored(core: Core, device_id: str) -> list[tuple[int, str | None]]:
    return [(seq, tag) for seq, _, tag in queue_entries(core.engine, device_id)]


def test_the_newest_200_unpinned_are_kept_and_pinned_ones_beside_them(client: TestClient, core: Core) -> None:
    device_id = register_phone(client).device_id
    system = Principal.system()
    seqs = []
    previous = 0
    for n in range(QUEUE_CAP + 3):
        seq, wake = core.run_sync(put, system, device_id=device_id, tag="pin-early" if n == 1 else None)
        assert f'"prev":{previous}' in wake  # each wake-up names the entry before it
        seqs.append(seq)
        previous = seq
    late_pin, _ = core.run_sync(put, system, device_id=device_id, tag="pin-late")  # onto a full queue
    last, _ = core.run_sync(put, system, device_id=device_id, tag=None)
    kept = stored(core, device_id)
    unpinned = [seq for seq, tag in kept if tag is None]
    older = [s for s in seqs if s != seqs[1]][-(QUEUE_CAP - 1) :]
    assert unpinned == [*older, last]
    assert [tag for _, tag in kept if tag is not None] == ["pin-early", "pin-late"]
    assert len(unpinned) == QUEUE_CAP and late_pin in [seq for seq, _ in kept]
