"""Armed reminders and the background thread that fires each at its time, without polling."""

from __future__ import annotations

import functools
import heapq
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from client.lifecycle import Running

MAX_WAIT_S = 30.0  # the reminder thread re-reads the clock at least this often (wall-clock jumps)


@dataclass(frozen=True, slots=True)
class Reminder:
    reminder_id: str
    fire_at: int  # epoch seconds
    message: str


class ReminderQueue:
    """Armed reminders by id and a heap by fire time; arming an id again replaces it. Entries of
    replaced or cancelled reminders stay in the heap and are skipped when they surface. Not
    thread-safe (``ReminderScheduler`` holds the lock)."""

    def __init__(self) -> None:
        self._armed: dict[str, Reminder] = {}
        self._heap: list[tuple[int, int, str]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._armed)

    def arm(self, reminder: Reminder) -> None:
        self._armed[reminder.reminder_id] = reminder
        heapq.heappush(self._heap, (reminder.fire_at, next(self._order), reminder.reminder_id))

    def cancel(self, reminder_id: str) -> Reminder | None:
        return self._armed.pop(reminder_id, None)

    def armed(self) -> list[Reminder]:
        """Every armed reminder, soonest first."""
        return sorted(self._armed.values(), key=lambda reminder: reminder.fire_at)

    def next_due(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[Reminder]:
        """Disarm and return the reminders due at ``now``, in fire-time then arming order."""
        due: list[Reminder] = []
        while (fire_at := self.next_due()) is not None and fire_at <= now:
            _, _, reminder_id = heapq.heappop(self._heap)
            due.append(self._armed.pop(reminder_id))
        return due

    def _drop_stale(self) -> None:
        while self._heap:
            fire_at, _, reminder_id = self._heap[0]
            current = self._armed.get(reminder_id)
            if current is not None and current.fire_at == fire_at:
                return
            heapq.heappop(self._heap)


class ReminderScheduler(Running):
    """Fires armed reminders at their time from one background thread, without polling.

    The thread sleeps on a condition variable until the next fire time (at most ``max_wait``, so a
    changed wall clock is noticed); arming, cancelling, ``poke`` and ``close`` wake it. ``clock``
    gives epoch seconds (tests inject one and ``poke`` after moving it). ``fire`` runs on the
    thread, outside the lock; ``on_change`` gets the armed reminders after every change (arm,
    cancel, fire) — it is called under a lock of its own, with the latest list, so saves are never
    reordered. A reminder is saved as disarmed only after it fired (a crash in between fires it
    again rather than never). Errors raised by ``fire`` or ``on_change`` on the thread go to
    ``on_error``.
    """

    def __init__(
        self,
        fire: Callable[[Reminder], None],
        *,
        clock: Callable[[], float] = time.time,
        on_change: Callable[[list[Reminder]], None] = lambda _armed: None,
        on_error: Callable[[Exception], None] = lambda _error: None,
        max_wait: float = MAX_WAIT_S,
    ) -> None:
        self._fire = fire
        self._clock = clock
        self._on_change = on_change
        self._on_error = on_error
        self._max_wait = max_wait
        self._queue = ReminderQueue()
        self._condition = threading.Condition()
        self._save_lock = threading.Lock()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="relaybox-reminders", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        with self._condition:
            self._stopped = True
            self._condition.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def restore(self, reminders: Sequence[Reminder]) -> None:
        """Arm reminders read back from the state file (no save: they are there already)."""
        with self._condition:
            for reminder in reminders:
                self._queue.arm(reminder)
            self._condition.notify_all()

    def arm(self, reminder: Reminder) -> None:
        with self._condition:
            self._queue.arm(reminder)
            self._condition.notify_all()
        self._changed()

    def cancel(self, reminder_id: str) -> Reminder | None:
        """Disarm ``reminder_id``; ``None`` (and nothing saved) when it is not armed."""
        with self._condition:
            removed = self._queue.cancel(reminder_id)
            self._condition.notify_all()
        if removed is not None:
            self._changed()
        return removed

    def armed(self) -> list[Reminder]:
        with self._condition:
            return self._queue.armed()

    def poke(self) -> None:
        """Wake the thread to look at the clock again."""
        with self._condition:
            self._condition.notify_all()

    def _run(self) -> None:
        while True:
            with self._condition:
                if self._stopped:
                    return
                due = self._queue.pop_due(self._clock())
                if not due:
                    next_due = self._queue.next_due()
                    wait = self._max_wait if next_due is None else next_due - self._clock()
                    self._condition.wait(min(max(wait, 0.0), self._max_wait))
                    continue
            for reminder in due:
                self._guarded(functools.partial(self._fire, reminder))
            self._guarded(self._changed)

    def _guarded(self, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as error:  # keep the thread alive: one failure must not stop later reminders
            self._on_error(error)

    def _changed(self) -> None:
        with self._save_lock:
            with self._condition:
                armed = self._queue.armed()
            self._on_change(armed)
