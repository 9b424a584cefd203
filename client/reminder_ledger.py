"""What the phone remembers of reminders it must not arm again: those it fired and those it was told
to cancel, each until its set can no longer arrive.

Sets and cancels reach the phone from its queue, in order, but a reconnecting phone may see them in
any arrangement: a cancel whose set it never had (the set was deleted from the queue by the cancel,
or is replayed later), a set it already fired. The server keeps a set queued until a day after its
fire time (``LATE_FIRE_S``) and a cancel as long as its set, so an id stays here that long after
its fire time; a cancel for an id never seen stays for the longest a set can live.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, Literal, cast

from client.state_file import read_field, update_fields

LEDGER: Final = "reminders_settled"  # the state file's field: {reminder_id: {"state", "until"}}
LATE_FIRE_S = 86_400  # the server keeps a set queued this long after its fire time
MAX_AHEAD_S = 365 * 86_400  # the latest a reminder may be set for
MAX_ENTRIES = 2_000  # beyond this the entries that end soonest are forgotten first

Settled = Literal["fired", "cancelled"]


class ReminderLedger:
    """Settled reminder ids, kept in the state file at ``path``; thread-safe (the reminder thread
    records fires, the stream's thread sets and cancels)."""

    def __init__(self, path: Path, device_id: str, *, clock: Callable[[], float]) -> None:
        self.path = path
        self.device_id = device_id
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[Settled, int]] = _read(path, device_id)

    def settled(self, reminder_id: str) -> Settled | None:
        """Whether ``reminder_id`` fired or was cancelled here (and is still remembered)."""
        with self._lock:
            entry = self._entries.get(reminder_id)
            return entry[0] if entry is not None and entry[1] > self._clock() else None

    def record(self, reminder_id: str, state: Settled, *, fire_at: int | None) -> None:
        """Remember ``reminder_id`` as ``state`` until its set can no longer arrive: a day after
        ``fire_at``, or (fire time unknown: a cancel before its set) the longest a set can live."""
        now = int(self._clock())
        until = (fire_at if fire_at is not None else now + MAX_AHEAD_S) + LATE_FIRE_S
        with self._lock:
            self._entries[reminder_id] = (state, until)
            self._prune(now)
            field = {rid: {"state": s, "until": u} for rid, (s, u) in self._entries.items()}
            update_fields(self.path, self.device_id, {LEDGER: field or None})

    def _prune(self, now: int) -> None:
        live = {rid: entry for rid, entry in self._entries.items() if entry[1] > now}
        if len(live) > MAX_ENTRIES:
            keep = sorted(live.items(), key=lambda item: item[1][1])[-MAX_ENTRIES:]
            live = dict(keep)
        self._entries = live


def _read(path: Path, device_id: str) -> dict[str, tuple[Settled, int]]:
    raw = read_field(path, device_id, LEDGER)
    entries: dict[str, tuple[Settled, int]] = {}
    if not isinstance(raw, dict):
        return entries
    for reminder_id, entry in cast(dict[str, object], raw).items():
        if not isinstance(entry, Mapping):
            continue
        state, until = entry.get("state"), entry.get("until")
        if state in ("fired", "cancelled") and isinstance(until, int) and not isinstance(until, bool):
            entries[reminder_id] = (cast(Settled, state), until)
    return entries
