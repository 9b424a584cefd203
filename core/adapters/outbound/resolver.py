"""Name resolution for the server's outbound requests, as a Protocol: the system's resolver in
service; a fixed table in process (tests, which must not ask the real DNS)."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from typing import Protocol

import anyio

from core.domain.outbound import parse_address


class Resolver(Protocol):
    async def addresses(self, host: str, port: int) -> list[str]:
        """Every address ``host`` resolves to (an IP address resolves to itself); ``OSError``
        when it resolves to none."""
        ...


class SystemResolver:
    """``getaddrinfo`` on a worker thread (the caller bounds the time it may take)."""

    async def addresses(self, host: str, port: int) -> list[str]:
        infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        found = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not found:
            raise OSError(f"{host!r} resolves to no address")
        return found


class StaticResolver:
    """Names answered from ``table`` alone (any other name does not resolve)."""

    def __init__(self, table: Mapping[str, Sequence[str]]) -> None:
        self._table = {name.lower(): list(found) for name, found in table.items()}

    async def addresses(self, host: str, port: int) -> list[str]:
        try:
            return [str(parse_address(host))]
        except ValueError:
            pass
        found = self._table.get(host.lower())
        if not found:
            raise OSError(f"{host!r} is not in the table")
        return list(found)
