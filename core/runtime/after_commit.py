"""What the Core does with an operation's events once its transaction has committed: one handler per
event type, in ``AfterCommit.handlers``. Fan-out and forgetting credentials happen before the
request is answered; push and deferred bookkeeping run in the background, off the request path.

A handler returns the fan-out messages its event sends; those of all the events are published
together, in order, after the handlers ran (one Redis round trip for a send's wake-ups to all of
its devices, however many)."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, get_args

import anyio

from core.adapters.fanout.base import Fanout
from core.adapters.push.router import PushRouter
from core.adapters.storage.base import ObjectStore
from core.credentials import CREDENTIALS_TOPIC, CredentialCache, device_tag, revocation_message
from core.principal import Principal
from core.runtime.events import (
    CredentialsRevoked,
    Deferred,
    DeviceRevoked,
    EnvelopesQueued,
    Event,
    Published,
    PushRequested,
    TransfersEnded,
    device_topic,
)

log = logging.getLogger("relaybox.core")
FanoutMessages = tuple[tuple[str, str], ...]  # (topic, message), to publish
Handler = Callable[[Any], Awaitable[FanoutMessages]]
NOTHING: FanoutMessages = ()


class CoreParts(Protocol):
    """What of the Core the handlers use (``core.runtime.core.Core`` has it)."""

    fanout: Fanout
    credentials: CredentialCache
    push: PushRouter
    objects: ObjectStore

    def spawn(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None: ...

    async def run(self, op: Any, principal: Principal, /, *args: Any, **kw: Any) -> Any: ...


class AfterCommit:
    def __init__(self, core: CoreParts) -> None:
        self.core = core
        self.handlers: dict[type[Event], Handler] = {
            EnvelopesQueued: self._wake_recipients,
            DeviceRevoked: self._close_device,
            CredentialsRevoked: self._forget_credentials,
            Published: self._publish,
            PushRequested: self._push_later,
            Deferred: self._defer,
            TransfersEnded: self._delete_objects,
        }
        assert set(self.handlers) == set(get_args(Event)), "every event type has a handler"

    async def __call__(self, events: list[Event]) -> None:
        messages: list[tuple[str, str]] = []
        for event in events:
            messages += await self.handlers[type(event)](event)
        if messages:
            await self.core.fanout.publish_all(messages)

    async def _wake_recipients(self, event: EnvelopesQueued) -> FanoutMessages:
        return event.wake_ups(self.core.fanout.may_deliver)

    async def _close_device(self, event: DeviceRevoked) -> FanoutMessages:
        forget = await self._forget_credentials(CredentialsRevoked((device_tag(event.device_id),)))
        return (*forget, (device_topic(event.device_id), json.dumps({"revoked": True})))

    async def _forget_credentials(self, event: CredentialsRevoked) -> FanoutMessages:
        """Forget revoked credentials here before the revoking request is answered, and tell the
        other replicas."""
        self.core.credentials.drop(event.tags)
        return ((CREDENTIALS_TOPIC, revocation_message(event.tags)),)

    async def _publish(self, event: Published) -> FanoutMessages:
        return ((event.topic, event.message),)

    async def _push_later(self, event: PushRequested) -> FanoutMessages:
        self.core.spawn(self._push, event)
        return NOTHING

    async def _push(self, event: PushRequested) -> None:
        try:
            await self.core.push.send(event.target, event.message)
        except Exception:
            log.exception("push failed unexpectedly", extra={"push_type": event.message.type})

    async def _defer(self, event: Deferred) -> FanoutMessages:
        self.core.spawn(self.run_deferred, event)
        return NOTHING

    async def run_deferred(self, event: Deferred) -> None:
        try:
            await self.core.run(event.op, Principal.system(), **event.kwargs)
        except Exception:
            log.exception("deferred bookkeeping failed", extra={"op": getattr(event.op, "__name__", "?")})

    async def _delete_objects(self, event: TransfersEnded) -> FanoutMessages:
        """Inline: once a transfer is ended, its objects are gone before the caller hears so."""
        for transfer_id in event.transfer_ids:
            try:
                await anyio.to_thread.run_sync(self.core.objects.delete_transfer, transfer_id)
            except Exception:
                log.exception("deleting a transfer's objects failed", extra={"transfer_id": transfer_id})
        return NOTHING
