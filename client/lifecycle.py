"""Context-manager plumbing shared by the client's connections and background workers.

``Closing``: ``with thing:`` closes it on the way out (``RelayboxApi``, ``ObjectHttp``,
``SyncFollower``, ``Relay``). ``Running``: also starts it on the way in (``ReminderScheduler``,
``PhoneOps``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class Closing(ABC):
    """``with`` support for anything with a ``close()``."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None: ...


class Running(Closing):
    """``with`` support for a worker: ``start()`` on entry, ``close()`` on exit."""

    def __enter__(self) -> Self:
        self.start()
        return self

    @abstractmethod
    def start(self) -> None: ...
