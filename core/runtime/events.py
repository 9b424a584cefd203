"""Events an operation emits inside its transaction; the Core acts on them after commit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from core.adapters.push.base import PushMessage, PushTarget


class WakeUpMessages(Protocol):
    """What makes a queue entry's wake-up message (``core.queue.WakeUps``, one for
    the entries of one sender and type)."""

    def message(self, seq: int, prev: int, blob: bytes) -> str: ...


@dataclass(frozen=True, slots=True)
class EnvelopesQueued:
    """Blobs were appended to devices' queues (one write's, a blob to each device): wake each
    device's open streams with its message (``core.queue``). ``entries``: (device id,
    seq, prev seq, blob) of each; one event for all of a send's devices. The messages are made
    after commit, by ``wake_ups``, and only for the devices someone may be listening for."""

    messages: WakeUpMessages
    entries: tuple[tuple[str, int, int, bytes], ...]

    def wake_ups(self, may_hear: Callable[[str], bool] = lambda _topic: True) -> tuple[tuple[str, str], ...]:
        """(the device's topic, its message) of each entry whose topic ``may_hear`` (the fan-out's
        ``may_deliver``): a device with no stream open here costs no message with the in-process
        fan-out, which delivers nowhere else."""
        message = self.messages.message
        return tuple(
            (topic, message(seq, prev, blob))
            for device_id, seq, prev, blob in self.entries
            if may_hear(topic := device_topic(device_id))
        )


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
