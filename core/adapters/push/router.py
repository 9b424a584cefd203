"""Chooses the push sender for a device: the first configured one that serves it, or none here
(the stream path is taken in the transaction, by appending to the device's queue)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from core.adapters.push.base import WEB_PUSH, PushMessage, PushOutcome, PushSender, PushTarget

log = logging.getLogger("relaybox.push")

UnregisteredHook = Callable[[str], Awaitable[None]]


class PushRouter:
    """The configured senders, in order of preference: a device registered with more than one
    push service is pushed through the earliest in the list (bootstrap puts FCM before web push).

    ``web_push_key`` is the VAPID public key browsers subscribe with, when web push is on.
    """

    def __init__(self, senders: Sequence[PushSender] = (), *, web_push_key: str | None = None) -> None:
        names = [sender.name for sender in senders]
        if len(set(names)) != len(names):
            raise ValueError(f"push senders need distinct names, got {names}")
        self.senders = tuple(senders)
        self.web_push_key = web_push_key
        self.on_unregistered: UnregisteredHook | None = None
        self.outcomes: dict[str, int] = {outcome.value: 0 for outcome in PushOutcome}

    def sender(self, name: str) -> PushSender | None:
        """The configured sender called ``name``, if any."""
        return next((sender for sender in self.senders if sender.name == name), None)

    @property
    def web_push_enabled(self) -> bool:
        """Whether web-push subscriptions are used (read from the database) on this server."""
        return self.sender(WEB_PUSH) is not None

    def can_reach(self, target: PushTarget) -> bool:
        """Whether a configured sender serves this device (else it is reached over its stream)."""
        return self._sender_for(target) is not None

    async def send(self, target: PushTarget, message: PushMessage) -> PushOutcome:
        sender = self._sender_for(target)
        outcome = PushOutcome.NO_ROUTE if sender is None else await sender.send(target, message)
        self.outcomes[outcome.value] += 1
        if outcome is not PushOutcome.SENT:
            log.info("push not delivered", extra={"push_type": message.type, "outcome": outcome.value})
        if outcome is PushOutcome.UNREGISTERED and self.on_unregistered is not None:
            await self.on_unregistered(target.device_id)
        return outcome

    def _sender_for(self, target: PushTarget) -> PushSender | None:
        return next((sender for sender in self.senders if sender.serves(target)), None)

    async def aclose(self) -> None:
        for sender in self.senders:
            await sender.aclose()
