"""The application's background loops: the expiry sweep, the scheduled wake-ups (and scheduled
sends) and the answer callbacks."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import anyio

from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.marks import read_only
from core.runtime.tx import Tx
from core.services import callback_delivery, callbacks, scheduled, wake_ups
from core.services.maintenance import sweep_expired
from oauth.maintenance import sweep_oauth

log = logging.getLogger("relaybox")
SWEEP_INTERVAL_S = 60
RETRY_S = 5.0  # after a failed round of wake-ups
WAKE_CHECK_S = 60.0  # a waker looks again at least this often (a lost fan-out message costs this)


async def sweep_forever(core: Core) -> None:
    async def sweep(operation: Callable[[Tx, Principal], object]) -> None:
        await core.run(operation, Principal.system())

    for_each = (sweep_expired, sweep_oauth)
    await _every(SWEEP_INTERVAL_S, "expiry sweep", *(partial(sweep, operation) for operation in for_each))


async def wake_forever(core: Core) -> None:
    """Send the scheduled wake-ups (web phones' reminders, urgent repeats) and deliver the scheduled
    sends as they fall due: one waker for both, woken by either's newly scheduled."""
    await _when_due(core, "scheduled wake-ups", wake_ups.WAKE_UPS_TOPIC, _deliver_scheduled, _next_scheduled)


async def _deliver_scheduled(core: Core) -> int:
    return await wake_ups.deliver_due(core) + await scheduled.deliver_due(core)


@read_only
def _next_scheduled(tx: Tx, principal: Principal) -> int | None:
    dues = (wake_ups.next_due_at(tx, principal), scheduled.next_due_at(tx, principal))
    return min((due for due in dues if due is not None), default=None)


async def callbacks_forever(core: Core) -> None:
    """Send the answer callbacks as they fall due (an answer makes one due at once)."""
    await _when_due(
        core,
        "answer callbacks",
        callbacks.CALLBACKS_TOPIC,
        callback_delivery.deliver_due,
        callback_delivery.next_due_at,
    )


async def _when_due(
    core: Core,
    what: str,
    topic: str,
    deliver_due: Callable[[Core], Awaitable[int]],
    next_due_at: Callable[[Tx, Principal], int | None],
) -> None:
    """Run ``deliver_due`` whenever something is due: sleep until the earliest is due, or until
    something is scheduled (a fan-out message on ``topic`` from any replica). Without the fan-out
    (Redis down) it looks every ``RETRY_S`` until the subscription works again."""

    async def deliver() -> float:
        """Send what is due; how long until the next is (at most ``WAKE_CHECK_S``)."""
        try:
            await deliver_due(core)
            due = await core.run(next_due_at, Principal.system())
        except Exception as error:
            _log_failure(what, error)
            return RETRY_S
        return WAKE_CHECK_S if due is None else min(WAKE_CHECK_S, max(0.0, due - core.clock.now()))

    while True:
        try:
            async with core.fanout.subscribe(topic) as scheduled:
                while True:
                    wait_s = await deliver()
                    with anyio.move_on_after(wait_s):
                        await scheduled.receive()
        except Exception as error:
            _log_failure(what, error)
            await deliver()
            await anyio.sleep(RETRY_S)


async def _every(interval_s: float, what: str, *steps: Callable[[], Awaitable[object]]) -> None:
    """Run each step, then sleep, for ever; a failure is logged (a dependency that is down was
    logged already, once, as a warning) and the next round tries again."""
    while True:
        for step in steps:
            try:
                await step()
            except Exception as error:
                _log_failure(what, error)
        await anyio.sleep(interval_s)


def _log_failure(what: str, error: Exception) -> None:
    if isinstance(error, RelayError) and error.code == "unavailable":
        return  # a dependency that is down was logged already, once, as a warning
    log.error("%s failed; retrying next interval", what, exc_info=error)
