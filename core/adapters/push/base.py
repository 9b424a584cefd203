"""The push Protocol: one way to wake or hand a message to one device.

The senders sit beside this file: FCM (Android, ``fcm.py``), web push (web apps, ``webpush.py``)
and ``MemoryPushSender`` (in-process, for tests, ``memory.py``). Each says which devices it
serves, by what they registered; the router (``router.py``) hands a device's push to the first
configured sender that serves it. A sender only transports a ready ``PushMessage`` and reports
how it went. A device no sender serves gets its pushes over its own ``/v1/sync`` stream instead,
which is not a sender: delivery appends them to the device's queue.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Protocol

# The senders' names: each is also what ``GET /v1/devices/me`` calls the route (``push``).
FCM = "fcm"
WEB_PUSH = "web_push"

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


@dataclass(frozen=True, slots=True)
class WebPushSubscription:
    endpoint: str
    p256dh: str
    auth: str


@dataclass(frozen=True, slots=True)
class PushTarget:
    """Where one device can be reached: built from its device row and web-push subscription by
    ``core.services.delivery.push_target``."""

    device_id: str
    fcm_token: str | None = None
    fcm_token_kind: str = "token"  # "token" (registration token) or "fid" (Firebase Installation ID)
    web_push: WebPushSubscription | None = None

    @property
    def data_limit(self) -> int:
        """The most encoded data a push to this device may carry."""
        return PUSH_DATA_LIMIT if self.fcm_token or self.web_push is None else WEB_PUSH_DATA_LIMIT

    def registered_with(self, service: str) -> bool:
        """Whether the device registered with the push service named ``service`` (``FCM`` or
        ``WEB_PUSH``); ``False`` for a name it has no registration field for."""
        if service == FCM:
            return bool(self.fcm_token)
        if service == WEB_PUSH:
            return self.web_push is not None
        return False


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
        """Size of the encoded data. It must fit the limit of the service it goes through
        (``PushTarget.data_limit``): delivery puts content inline only when it fits, and a sender
        answers ``FAILED`` to a message over its limit."""
        return len(json.dumps(self.data(), separators=(",", ":")).encode())


class PushSender(Protocol):
    """Transports one message to one device and says how it went. Never raises for delivery failures.

    ``name`` is unique among a router's senders. ``serves`` says whether the device registered
    for this sender; ``send`` to a device it does not serve is ``NO_ROUTE``, and nothing is sent.
    ``aclose`` may be called more than once; once closed, a sender answers ``FAILED`` to the
    devices it serves.
    """

    @property
    def name(self) -> str: ...

    def serves(self, target: PushTarget) -> bool: ...

    async def send(self, target: PushTarget, message: PushMessage) -> PushOutcome: ...

    async def aclose(self) -> None: ...
