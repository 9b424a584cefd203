"""Chooses the push sender for a device: the first configured one that serves it, or none here
(the stream path is taken in the transaction, by appending to the device's queue)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType

from pydantic import BaseModel

from core.adapters.push.base import PUSH_DATA_LIMIT, STREAM, PushMessage, PushOutcome, PushSender, PushTarget

log = logging.getLogger("relaybox.push")

UnregisteredHook = Callable[[str, str], Awaitable[None]]  # the device's id, the disowning sender's name


class PushRouter:
    """The configured senders, in order of preference: a device registered with more than one
    push service is pushed through the earliest in the list (bootstrap puts FCM before web push).
    Inside a transaction, operations see it as ``PushRoutes``.

    ``web_push_key`` is the VAPID public key browsers subscribe with, when web push is on.
    """

    def __init__(self, senders: Sequence[PushSender] = (), *, web_push_key: str | None = None) -> None:
        names = [sender.name for sender in senders]
        if len(set(names)) != len(names) or STREAM in names:
            raise ValueError(f"push senders need distinct names other than {STREAM!r}, got {names}")
        for sender in senders:
            _check_registration(sender)
        self.senders = tuple(senders)
        self.web_push_key = web_push_key
        self.on_unregistered: UnregisteredHook | None = None
        self.outcomes: dict[str, int] = {outcome.value: 0 for outcome in PushOutcome}
        self._registrations = MappingProxyType(
            {sender.name: sender.registration for sender in senders if sender.registration is not None}
        )

    def sender(self, name: str) -> PushSender | None:
        """The configured sender called ``name``, if any."""
        return next((sender for sender in self.senders if sender.name == name), None)

    @property
    def registrations(self) -> Mapping[str, type[BaseModel]]:
        """The registration model of each configured sender that takes one, by its name."""
        return self._registrations

    def can_reach(self, target: PushTarget) -> bool:
        """Whether a configured sender serves this device (else it is reached over its stream)."""
        return self._sender_for(target) is not None

    def route(self, target: PushTarget) -> str:
        """The name of the sender this device's pushes go through, or ``STREAM``."""
        sender = self._sender_for(target)
        return STREAM if sender is None else sender.name

    def data_limit(self, target: PushTarget) -> int:
        """The most encoded data a push to this device may carry: its sender's limit."""
        sender = self._sender_for(target)
        return PUSH_DATA_LIMIT if sender is None else sender.data_limit

    async def send(self, target: PushTarget, message: PushMessage) -> PushOutcome:
        sender = self._sender_for(target)
        outcome = PushOutcome.NO_ROUTE if sender is None else await sender.send(target, message)
        self.outcomes[outcome.value] += 1
        if outcome is not PushOutcome.SENT:
            log.info("push not delivered", extra={"push_type": message.type, "outcome": outcome.value})
        if outcome is PushOutcome.UNREGISTERED and sender is not None and self.on_unregistered is not None:
            await self.on_unregistered(target.device_id, sender.name)
        return outcome

    def _sender_for(self, target: PushTarget) -> PushSender | None:
        for sender in self.senders:  # a loop, not next() of a generator: asked once a device a send
            if sender.serves(target):
                return sender
        return None

    async def aclose(self) -> None:
        for sender in self.senders:
            await sender.aclose()


def _check_registration(sender: PushSender) -> None:
    """A registration is text fields (a push address, keys): what ``PushTarget`` carries."""
    model = sender.registration
    if model is not None and any(field.annotation is not str for field in model.model_fields.values()):
        raise TypeError(f"the registration model of push sender {sender.name!r} must have str fields only")
