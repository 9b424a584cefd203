"""The application's background loops: the expiry sweep and the scheduled wake-ups."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import anyio

from core.errors import RelayError
from core.principal import Principal
from core.runtime.core import Core
from core.runtime.tx import Tx
from core.services import wake_ups
from core.services.maintenance import sweep_expired
from oauth.maintenance import sweep_oauth

log = logging.getLogger("relaybox")
SWEEP_INTERVAL_S = 60
WAKE_INTERVAL_S = 1  # how late a scheduled wake-up (a web phone's reminder) may leave


async def sweep_forever(core: Core) -> None:
    async def sweep(operation: Callable[[Tx, Principal], object]) -> None:
        await core.run(operation, Principal.system())

    for_each = (sweep_expired, sweep_oauth)
    await _every(SWEEP_INTERVAL_S, "expiry sweep", *(partial(sweep, operation) for operation in for_each))


async def wake_forever(core: Core) -> None:
    await _every(WAKE_INTERVAL_S, "scheduled wake-ups", partial(wake_ups.deliver_due, core))


async def _every(interval_s: float, what: str, *steps: Callable[[], Awaitable[object]]) -> None:
    """Run each step, then sleep, for ever; a failure is logged (a dependency that is down was
    logged already, once, as a warning) and the next round tries again."""
    while True:
        for step in steps:
            try:
                await step()
            except RelayError as error:
                if error.code != "unavailable":
                    log.exception("%s failed; retrying next interval", what)
            except Exception:
                log.exception("%s failed; retrying next interval", what)
        await anyio.sleep(interval_s)
