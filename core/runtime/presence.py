"""Presence: which devices have a ``/v1/sync`` stream open — counted on this process for
``/metrics``, asked of the fan-out for every replica."""

from __future__ import annotations

from collections.abc import Collection

from core.adapters.fanout.base import Fanout
from core.runtime.events import device_topic


class Presence:
    def __init__(self, fanout: Fanout) -> None:
        self.fanout = fanout
        self._open: dict[str, int] = {}  # device id → streams open on this process

    def opened(self, device_id: str) -> None:
        self._open[device_id] = self._open.get(device_id, 0) + 1

    def closed(self, device_id: str) -> None:
        remaining = self._open.get(device_id, 0) - 1
        if remaining > 0:
            self._open[device_id] = remaining
        else:
            self._open.pop(device_id, None)

    @property
    def open_streams(self) -> int:
        """Streams open on this process."""
        return sum(self._open.values())

    async def streaming(self, device_ids: Collection[str]) -> set[str]:
        """Which of ``device_ids`` have a stream open on any replica: an open stream is subscribed
        to its device's fan-out topic, and nothing else is."""
        topics = {device_topic(device_id): device_id for device_id in device_ids}
        return {topics[topic] for topic in await self.fanout.listened(topics)}
