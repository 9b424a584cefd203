"""In-process push sender, for tests: keeps what it delivered per device and answers what it is told.

It stands in for one push service (``name``: ``FCM`` by default) and serves the devices registered
with that service, as the real sender of that name does, so a Core built with
``PushRouter([MemoryPushSender()])`` routes exactly as one with FCM configured, with no far end.
To stand in for a service that takes a registration of its own, give its model and data limit
(web push: ``MemoryPushSender(WEB_PUSH, WebPushSubscription, WEB_PUSH_DATA_LIMIT)``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from core.adapters.push.base import FCM, PUSH_DATA_LIMIT, PushMessage, PushOutcome, PushTarget


@dataclass(frozen=True, slots=True)
class MemoryPush:
    """One send this sender was asked for, and what it answered."""

    target: PushTarget
    message: PushMessage
    outcome: PushOutcome


class MemoryPushSender:
    """Answers ``SENT`` unless told otherwise for a device (``answer``); a message over the data
    limit of the service it stands in for is ``FAILED``, and so is every send once closed, as with
    the real senders.
    """

    def __init__(
        self,
        name: str = FCM,
        registration: type[BaseModel] | None = None,
        data_limit: int = PUSH_DATA_LIMIT,
    ) -> None:
        self.name = name
        self.registration = registration
        self.data_limit = data_limit
        self.pushes: list[MemoryPush] = []  # every send asked of it, served or not, in order
        self._answers: dict[str, PushOutcome] = {}
        self.closed = False

    def serves(self, target: PushTarget) -> bool:
        """Devices registered with the push service this sender stands in for."""
        return target.registered_with(self.name)

    def answer(self, device_id: str, outcome: PushOutcome) -> None:
        """Answer ``outcome`` to every later push for ``device_id`` (``SENT`` restores delivery)."""
        self._answers[device_id] = outcome

    def received(self, device_id: str) -> list[PushMessage]:
        """The messages delivered (answered ``SENT``) to ``device_id``, in order."""
        return [
            push.message
            for push in self.pushes
            if push.target.device_id == device_id and push.outcome is PushOutcome.SENT
        ]

    async def send(self, target: PushTarget, message: PushMessage) -> PushOutcome:
        if not self.serves(target):
            outcome = PushOutcome.NO_ROUTE
        elif self.closed or message.encoded_size() > self.data_limit:
            outcome = PushOutcome.FAILED
        else:
            outcome = self._answers.get(target.device_id, PushOutcome.SENT)
        self.pushes.append(MemoryPush(target, message, outcome))
        return outcome

    async def aclose(self) -> None:
        """Refuse later sends; what was delivered stays readable. Safe to call twice."""
        self.closed = True
