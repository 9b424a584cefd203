"""One rule for every phone operation that tells its caller how delivery went (ring, reminders):
a ``warnings`` entry whenever delivery is uncertain, never silence.

The operation queues its message and asks for its push to be ``awaited`` (``Delivery``); after the
commit, ``settle`` sends that push itself, waiting for the push service's answer (bounded by the
push timeout), and looks up whether a device served by its stream has one open.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from core.adapters.push.base import PushOutcome
from core.runtime.core import Core
from core.services.delivery import Delivery


def push_refused(what: str, *, queued: bool) -> str:
    text = f"the push service did not accept the {what}"
    return f"{text}; it waits in the phone's queue for its next connection" if queued else text


def not_connected(what: str, kept_s: int) -> str:
    return (
        f"the phone has no push service and no open connection: the {what} waits in its queue "
        f"and reaches it only if it connects within {_duration(kept_s)}"
    )


def _duration(seconds: int) -> str:
    for unit, size in (("days", 86_400), ("hours", 3_600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


async def settle(core: Core, deliveries: Sequence[Delivery], *, what: str, kept_s: int) -> list[str]:
    """Send the awaited pushes of ``deliveries`` and return the warnings for the caller: a push the
    service did not take, a device with neither a push service nor an open stream."""
    refused: list[Delivery] = []

    async def push(delivery: Delivery) -> None:
        assert delivery.awaited_push is not None
        if await core.push.send(*delivery.awaited_push) is not PushOutcome.SENT:
            refused.append(delivery)

    async with anyio.create_task_group() as tasks:
        for delivery in deliveries:
            if delivery.awaited_push is not None:
                tasks.start_soon(push, delivery)
    offline = [d.device_id for d in deliveries if not d.pushed]
    streaming = await core.presence.streaming(offline) if offline else set()
    warnings: list[str] = []
    if refused:
        warnings.append(push_refused(what, queued=all(d.seq is not None for d in refused)))
    if any(device_id not in streaming for device_id in offline):
        warnings.append(not_connected(what, kept_s))
    return warnings
