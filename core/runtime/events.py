"""Events an operation emits inside its transaction; the Core acts on them after commit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.adapters.push.base import PushMessage, PushTarget


@dataclass(frozen=True, slots=True)
class EnvelopesQueued:
    """Blobs were appended to devices' queues (one write's, a blob to each device): wake each
    device's open streams with its message (``core.services.queue_wake``). ``wake_ups``: (the
    device's topic, the message) of each, ready to publish; one event for all of a send's devices."""

    wake_ups: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class PushRequested:
    """Send this push message to the device, off the request path, best-effort."""

    target: PushTarget
    message: PushMessage


@dataclass(frozen=True, slots=True)
class DeviceRevoked:
    """The device's credential no longer works: close its streams at once."""

    device_id: str


@dataclass(frozen=True, slots=True)
class CredentialsRevoked:
    """Credentials stopped working (tags of ``core.credentials``): every replica forgets them."""

    tags: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Published:
    """A plain fan-out message (interaction answered, consent confirmed, …)."""

    topic: str
    message: str


@dataclass(frozen=True, slots=True)
class Deferred:
    """Bookkeeping a read-only operation wants written later, in its own transaction, by the
    system principal (last-seen times, first drain): never worth holding a write lock for."""

    op: Callable[..., Any]
    kwargs: dict[str, Any]


@dataclass(frozen=True, slots=True)
class TransfersEnded:
    """These transfers' rows are gone: delete their objects from the store (blocking I/O, off the
    request path)."""

    transfer_ids: tuple[str, ...]


Event = (
    EnvelopesQueued
    | PushRequested
    | DeviceRevoked
    | CredentialsRevoked
    | Published
    | Deferred
    | TransfersEnded
)


def device_topic(device_id: str) -> str:
    return f"device:{device_id}"
