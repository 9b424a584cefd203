"""The push Protocol: one way to wake or hand a message to one device.

The senders sit beside this file: FCM (Android, ``fcm.py``), web push (web apps, ``webpush.py``)
and ``MemoryPushSender`` (in-process, for tests, ``memory.py``). Each says which devices it
serves, by what they registered; the router (``router.py``) hands a device's push to the first
configured sender that serves it. A sender only transports a ready ``PushMessage`` and reports
how it went. A device no sender serves gets its pushes over its own ``/v1/sync`` stream instead,
which is not a sender: delivery appends them to the device's queue.

A sender that takes a registration of its own declares its model (``PushSender.registration``);
what a device registered with it is stored in one table for all services (``push_registrations``)
and handed back in ``PushTarget.registrations[name]``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

# The senders' names: each is also what ``GET /v1/devices/me`` calls the route (``push``).
FCM = "fcm"
WEB_PUSH = "web_push"
STREAM = "stream"  # the route of a device no configured sender serves: its own /v1/sync stream

# The spec's limit on a push message's encoded data.
PUSH_DATA_LIMIT = 4096
# RFC 8030 push services take 4096-byte bodies; aes128gcm (RFC 8291 section 4) spends 86 bytes
# on its header, 16 on the tag and 1 on the padding delimiter, leaving this much for the data.
WEB_PUSH_DATA_LIMIT = 4096 - 86 - 16 - 1


class PushOutcome(enum.Enum):
    SENT = "sent"
    UNREGISTERED = "unregistered"  # the far end says the registration is gone: clear it
    FAILED = "failed"  # transient or configuration failure; best-effort, nothing retried
    NO_ROUTE = "no_route"  # the device has no way to be reached by this sender


# Web push's registration model is here, not in webpush.py (which needs the optional pywebpush):
# POST /v1/devices also takes it as a field of its own, web_push, whether or not web push is on.
class WebPushSubscription(BaseModel):
    """A browser's web-push subscription (its ``PushSubscription``): the endpoint and its keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    endpoint: str = Field(
        min_length=8,
        max_length=2048,
        description="An https URL on a push service's host (core.domain.outbound.WEB_PUSH_HOSTS and the "
        "server's web_push_hosts); anything else is 400 push_endpoint_not_allowed",
        json_schema_extra={"pattern": "^https://[!-~]+$"},  # documented; the server checks it whole
    )
    p256dh: str = Field(min_length=1, max_length=128)
    auth: str = Field(min_length=1, max_length=64)


# Not frozen: a send makes one a device, and a frozen dataclass's __init__ costs 3x (its
# object.__setattr__ a field). Nothing changes one once made.
@dataclass(slots=True)
class PushTarget:
    """Where one device can be reached: built from its device row and push registrations by
    ``core.services.delivery.push_target`` (or, for a send, read with the account's devices).

    FCM keeps its token on the device row rather than in ``registrations``: a token is not taken
    as given but becomes the route only once the phone echoes a ``reg_challenge`` pushed to it
    (``core.services.push_registration``), a flow of its own that no registration model describes.
    Every other service's registration is in ``registrations``, by service name: the text fields
    its model validated when the device registered.
    """

    device_id: str
    fcm_token: str | None = None
    fcm_token_kind: str = "token"  # "token" (registration token) or "fid" (Firebase Installation ID)
    registrations: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def registered_with(self, service: str) -> bool:
        """Whether the device registered with the push service named ``service``."""
        return bool(self.fcm_token) if service == FCM else service in self.registrations


@dataclass(frozen=True, slots=True)
class PushMessage:
    """One message of the spec's push table: its ``type`` and cleartext fields, all strings.

    ``fields`` keeps insertion order; ``data()`` is what goes on the wire (FCM data, web-push
    JSON body, or a ``push`` event on the stream).
    """

    type: str
    fields: dict[str, str] = field(default_factory=dict)
    high_priority: bool = False
    ttl_s: int = 86_400

    def data(self) -> dict[str, str]:
        return {"type": self.type, **self.fields}

    def encoded_size(self) -> int:
        """Size of the encoded data. It must fit the limit of the sender it goes through
        (``PushSender.data_limit``): delivery puts content inline only when it fits, and a sender
        answers ``FAILED`` to a message over its limit."""
        return len(json.dumps(self.data(), separators=(",", ":")).encode())


class PushSender(Protocol):
    """Transports one message to one device and says how it went. Never raises for delivery failures.

    ``name`` is unique among a router's senders and is what ``GET /v1/devices/me`` reports as the
    device's route. ``registration`` is the pydantic model of what a device registers with this
    service, text fields only, stored as validated and handed back in
    ``PushTarget.registrations[name]``; ``None`` for a sender registered otherwise (FCM's proved
    token). ``data_limit`` is the most encoded data a message through it may carry
    (``PUSH_DATA_LIMIT``, the spec's, unless the service takes less). ``serves`` says whether the
    device registered for this sender; ``send`` to a device it does not serve is ``NO_ROUTE``, and
    nothing is sent. ``aclose`` may be called more than once; once closed, a sender answers
    ``FAILED`` to the devices it serves.
    """

    @property
    def name(self) -> str: ...

    @property
    def registration(self) -> type[BaseModel] | None: ...

    @property
    def data_limit(self) -> int: ...

    def serves(self, target: PushTarget) -> bool: ...

    async def send(self, target: PushTarget, message: PushMessage) -> PushOutcome: ...

    async def aclose(self) -> None: ...


class PushRoutes(Protocol):
    """What an operation may ask of the configured senders inside its transaction (``Tx.push``);
    never to send: pushes leave after commit (``PushRequested``)."""

    def can_reach(self, target: PushTarget) -> bool: ...

    def route(self, target: PushTarget) -> str: ...

    def data_limit(self, target: PushTarget) -> int: ...

    @property
    def registrations(self) -> Mapping[str, type[BaseModel]]: ...
