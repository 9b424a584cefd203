"""Chooses the push transport for a device: FCM, web push, or nothing here (the stream path is
taken in the transaction, by appending to the device's queue)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from core.adapters.push.base import PushMessage, PushOutcome, PushSender, PushTarget

log = logging.getLogger("relaybox.push")

UnregisteredHook = Callable[[str], Awaitable[None]]


class PushRouter:
    def __init__(self, *, fcm: PushSender | None = None, webpush: PushSender | None = None) -> None:
        self.fcm = fcm
        self.webpush = webpush
        self.web_push_key: str | None = None  # the VAPID public key browsers subscribe with, when on
        self.on_unregistered: UnregisteredHook | None = None
        self.outcomes: dict[str, int] = {outcome.value: 0 for outcome in PushOutcome}

    def can_reach(self, target: PushTarget) -> bool:
        """Whether a real push service (not the stream) serves this device."""
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
        if target.fcm_token and self.fcm is not None:
            return self.fcm
        if target.web_push is not None and self.webpush is not None:
            return self.webpush
        return None

    async def aclose(self) -> None:
        for sender in (self.fcm, self.webpush):
            if sender is not None:
                await sender.aclose()
